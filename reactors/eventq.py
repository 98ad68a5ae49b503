"""The future-event queue: a binary heap of events keyed by tag, plus the cross-thread inbox.

An event is a 5-item list ``[time, microstep, seq, target, value]``: lists compare
lexicographically, ``seq`` (unique, increasing) breaks ties so ``target`` is never compared,
and the list is mutable so the ``replace`` policy can swap the payload and a cancelled event
can be marked dead (``target = None``) without searching the heap. ``target`` is an object
with a ``_fire(event)`` method (an action, a timer or a mode entry) and a ``mode`` attribute.

Other threads never touch the heap: they append to :attr:`EventQueue.inbox` (a deque, whose
``append`` is atomic) and the scheduler drains it between tags.
"""

from __future__ import annotations

from collections import deque
from heapq import heapify, heappop, heappush
from itertools import count

TIME, MICRO, SEQ, TARGET, VALUE = range(5)


class EventQueue:
    """Pending events in tag order; see the module docstring for the event layout."""

    __slots__ = ("heap", "next_seq", "inbox")

    def __init__(self):
        self.heap = []
        self.next_seq = count().__next__
        self.inbox = deque()

    def push(self, time: int, micro: int, target, value=None) -> list:
        """Insert an event at tag ``(time, micro)`` (ns, microstep) and return it."""
        e = [time, micro, self.next_seq(), target, value]
        heappush(self.heap, e)
        return e

    def peek(self):
        """The earliest live event, or None; dead (cancelled) events at the top are dropped."""
        heap = self.heap
        while heap and heap[0][TARGET] is None:
            heappop(heap)
        return heap[0] if heap else None

    def remove_if(self, pred) -> list:
        """Remove and return (in tag order) the live events whose target satisfies ``pred``."""
        keep, out = [], []
        for e in self.heap:
            if e[TARGET] is not None:
                (out if pred(e[TARGET]) else keep).append(e)
        heapify(keep)
        self.heap[:] = keep
        out.sort()
        return out

    def live(self) -> list:
        """All live events, in tag order (for end-of-run reporting)."""
        return sorted(e for e in self.heap if e[TARGET] is not None)
