"""The future-event queue: a binary heap of events keyed by tag, plus the cross-thread inbox.

An event is a 5-item list ``[time, microstep, seq, target, value]``: lists compare
lexicographically, ``seq`` (unique, increasing) breaks ties so ``target`` is never compared,
and the list is mutable so the ``replace`` policy can swap the payload and a cancelled event
can be marked dead (``target = None``) without searching the heap. ``target`` is an object
with a ``_fire(event)`` method (an action, a timer or a mode entry) and a ``mode`` attribute.

Every event enters through :meth:`EventQueue.push` (actions, timers, mode entries) and leaves
through :meth:`EventQueue.fire` or :meth:`EventQueue.remove_if`. Other threads never touch the
heap: they append to :attr:`EventQueue.inbox` (a deque, whose ``append`` is atomic) and the
scheduler drains it between tags.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from itertools import count
from typing import Any, Final

# the heap operations of the event queue and of the reaction queues (Final: compiled, each
# use reads a C static instead of looking the name up in the module's dict)
heappush: Final = heapq.heappush
heappop: Final = heapq.heappop
heapify: Final = heapq.heapify

# an event's fields (Final: compiled, the values are used)
TIME: Final = 0
MICRO: Final = 1
SEQ: Final = 2
TARGET: Final = 3
VALUE: Final = 4

#: An event ``[time, microstep, seq, target, value]`` (see the module docstring).
Event = list[Any]


class EventQueue:
    """Pending events in tag order; see the module docstring for the event layout."""

    __slots__ = ("heap", "next_seq", "inbox")

    def __init__(self) -> None:
        self.heap: list[Event] = []
        self.next_seq = count().__next__
        self.inbox: deque[tuple] = deque()

    def push(self, time: int, micro: int, target: object, value: object = None) -> Event:
        """Insert an event at tag ``(time, micro)`` (ns, microstep) and return it."""
        e = [time, micro, self.next_seq(), target, value]
        heappush(self.heap, e)
        return e

    def peek(self) -> Event | None:
        """The earliest live event, or None; dead (cancelled) events at the top are dropped."""
        heap = self.heap
        while heap and heap[0][TARGET] is None:
            heappop(heap)
        return heap[0] if heap else None

    def fire(self, time: int, micro: int) -> None:
        """Pop the events at the top of the queue whose tag is ``(time, micro)`` (ns,
        microstep) and fire the live ones (``target._fire(event)``) in queue order."""
        heap = self.heap
        while heap and heap[0][TIME] == time and heap[0][MICRO] == micro:
            e = heappop(heap)
            if e[TARGET] is not None:
                e[TARGET]._fire(e)

    def remove_if(self, pred: Callable[[Any], bool]) -> list[Event]:
        """Remove and return (in tag order) the live events whose target satisfies ``pred``."""
        keep: list[Event] = []
        out: list[Event] = []
        for e in self.heap:
            if e[TARGET] is not None:
                (out if pred(e[TARGET]) else keep).append(e)
        heapify(keep)
        self.heap[:] = keep
        out.sort()
        return out

    def live(self) -> list[Event]:
        """All live events, in tag order (for end-of-run reporting)."""
        return sorted(e for e in self.heap if e[TARGET] is not None)
