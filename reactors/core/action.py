"""Action capsules (spec §2.4, §3.3): logical and physical actions.

``a.schedule(extra, value)`` queues an event at a tag computed from the action's
``min_delay``, ``min_spacing`` and policy. Logical actions are scheduled by reactions of their
reactor on the scheduler thread: that path is inlined and allocation-light. Physical actions
may be scheduled from any thread: the call only records the physical time and posts to the
scheduler's inbox; the scheduler computes the tag when it drains the inbox, so no lock guards
the action's state.
"""

from __future__ import annotations

from collections.abc import Callable
from time import time_ns
from typing import Any

from .context import CTX
from .engine import TagEngine, TagPair, physical_tag
from .event_queue import Event, heappush
from .mode import Mode
from .tag import FOREVER

POLICIES = ("defer", "drop", "replace", "update")


def _check_delay(delay: object) -> int:
    if isinstance(delay, bool) or not isinstance(delay, int):
        raise TypeError(
            f"schedule() delay must be an int number of nanoseconds, "
            f"not {type(delay).__name__} (use MSEC(...) etc.)"
        )
    if delay < 0:
        CTX.log.warn(f"schedule() called with a negative delay ({delay} ns); using 0")
        return 0
    return int(delay)


class Action:
    """A logical action (``logical action a(min_delay, min_spacing, policy)``).

    ``value``: payload at the current tag, persisting to later tags (read-only);
    ``is_present``: True iff the action triggered at the current tag. Times are ns;
    ``min_spacing`` None means "no spacing" (unlike 0). ``mode`` is the nearest enclosing
    :class:`reactors.core.mode.Mode` or None.
    """

    __slots__ = (
        "_v",
        "_p",
        "_triggers",
        "_rq",
        "_mark",
        "_engine",
        "_min_delay",
        "_spacing",
        "_policy",
        "_queue",
        "_last",
        "mode",
        "_name",
    )

    _v: Any
    _p: bool
    _triggers: tuple[int, ...]
    _rq: list[int]
    _mark: Callable[[Any], None]
    _engine: TagEngine
    _spacing: int | None
    _queue: list[Event]
    _last: Event | None

    def __init__(
        self,
        name: str,
        min_delay: int = 0,
        min_spacing: int | None = None,
        policy: str = "defer",
        mode: Mode | None = None,
    ):
        if policy not in POLICIES:
            raise ValueError(f"action {name}: unknown policy '{policy}'")
        self._name = name
        self._v = None
        self._p = False
        self._triggers = ()
        self._rq = []
        # _mark and _engine are set when a scheduler attaches the program
        self._min_delay = min_delay
        self._spacing = min_spacing
        self._policy = policy
        self._queue = []  # this action's events still in the event queue
        self._last = None  # the latest event scheduled (for min_spacing)
        self.mode = mode

    @property
    def value(self) -> Any:
        """Payload of the latest event (None if none)."""
        return self._v

    @property
    def is_present(self) -> bool:
        """True iff the action is present at this tag."""
        return self._p

    def schedule(self, delay: int, value: Any = None) -> None:
        """Schedule an event ``min_delay + delay`` ns after the current tag (spec §3.3).

        ``delay`` must be an int (TypeError otherwise); a negative delay becomes 0 with a
        warning. A zero total delay means the next microstep. Events past the stop tag are
        dropped silently. Returns None.
        """
        if delay.__class__ is not int or delay < 0:
            delay = _check_delay(delay)
        s = self._engine
        d = self._min_delay + delay
        if d:
            t = s.time + d
            m = 0
            if t >= FOREVER:
                return
        else:
            t = s.time
            m = s.micro + 1
        if self._spacing is None and not self._queue:
            if t < s.stop_time or (t == s.stop_time and m <= s.stop_micro):
                self._queue.append(s.queue.push(t, m, self, value))
            elif s.finished:
                CTX.log.warn(f"action {self._name} scheduled after the program ended; ignored")
        else:
            self._place(t, m, value)

    def _place(self, t: int, m: int, value: Any) -> None:
        """Apply collision/min_spacing rules to the preliminary tag ``(t, m)`` and queue."""
        s = self._engine
        if t == s.time and m <= s.micro:
            m = s.micro + 1
        if self._spacing is None:
            taken = {e[1] for e in self._queue if e[0] == t}
            while m in taken:
                m += 1
        elif self._last is not None:
            tm = self._spaced(t, m, value)
            if tm is None:
                return
            t, m = tm
            if t == s.time and m <= s.micro:
                m = s.micro + 1
        if t > s.stop_time or (t == s.stop_time and m > s.stop_micro):
            if s.finished:
                CTX.log.warn(f"action {self._name} scheduled after the program ended; ignored")
            return
        e = s.queue.push(t, m, self, value)
        self._queue.append(e)
        self._last = e

    def _spaced(self, t: int, m: int, value: Any) -> TagPair | None:
        """The tag for an event with min_spacing, or None when the event is absorbed."""
        last = self._last
        sp = self._spacing
        assert last is not None and sp is not None  # _place calls this only in that case
        earliest = (last[0] + sp, 0) if sp > 0 else (last[0], last[1] + 1)
        if (t, m) >= earliest:
            return t, m
        policy = self._policy
        queued = any(e is last for e in self._queue)
        if policy == "drop":
            return None
        if policy == "replace" and queued:
            last[4] = value
            return None
        if policy == "update":
            if queued:
                self._cancel(last)
            return t, m
        return earliest

    def _cancel(self, e: Event) -> None:
        e[3] = None  # dead: the scheduler skips it
        self._queue.remove(e)

    def _fire(self, e: Event) -> None:
        """Make the action present with the event's payload and trigger its reactions."""
        self._v = e[4]
        if not self._p:
            self._p = True
            self._mark(self)
        q = self._queue
        if q[0] is e:
            del q[0]
        else:
            q.remove(e)
        for rank in self._triggers:
            heappush(self._rq, rank)

    def _resume(self, t: int, m: int, value: Any) -> None:
        """Re-queue a suspended event (mode history) at preliminary tag ``(t, m)``."""
        taken = {e[1] for e in self._queue if e[0] == t}
        while m in taken:
            m += 1
        s = self._engine
        if t < s.stop_time or (t == s.stop_time and m <= s.stop_micro):
            self._queue.append(s.queue.push(t, m, self, value))

    def _forget(self, e: Event) -> None:
        """Drop bookkeeping of an event removed from the queue (mode suspension)."""
        if e in self._queue:
            self._queue.remove(e)

    def __repr__(self) -> str:
        return f"<action {self._name} value={self._v!r} present={self._p}>"


class PhysicalAction(Action):
    """A physical action: its tag comes from the physical clock when ``schedule`` is called.

    ``schedule`` is thread-safe: any thread may call it. The scheduler assigns the tag
    (physical time + min_delay + delay, at least the start time and strictly after the
    current tag) when it drains its inbox, and wakes if it was waiting (spec §3.13).
    """

    __slots__ = ()

    def schedule(self, delay: int, value: Any = None) -> None:
        """Schedule an event ``min_delay + delay`` ns after the physical time of this call."""
        if delay.__class__ is not int or delay < 0:
            delay = _check_delay(delay)
        s = self._engine
        if s.finished:
            CTX.log.warn(f"physical action {self._name} scheduled after the program ended; ignored")
            return
        if s.tape is not None and s.tape.replaying:
            return  # a replay takes this action's events from the recording
        s.post((self, time_ns(), delay, value))

    def _fire(self, e: Event) -> None:
        super()._fire(e)
        tape = self._engine.tape
        if tape is not None:
            tape.fired(self, e[4])

    def _arrive(self, phys: int, delay: int, value: Any) -> None:
        """Scheduler-thread half of :meth:`schedule`: queue the event strictly after the
        current tag (spec §3.13)."""
        s = self._engine
        self._land(phys, delay, (s.time, s.micro + 1), value)

    def _landing(self, phys: int, delay: int, earliest: TagPair) -> TagPair | None:
        """The tag ``(ns, microstep)`` of an event posted at physical time ``phys`` (ns) with
        ``delay`` (ns), no earlier than ``earliest``; None if it is dropped
        (:func:`reactors.core.engine.physical_tag`)."""
        return physical_tag(phys, self._min_delay + delay, self._engine.start_time, earliest)

    def _land(self, phys: int, delay: int, earliest: TagPair, value: Any) -> None:
        """Queue an event posted at physical time ``phys`` (ns) with ``delay`` (ns) at its
        tag, no earlier than ``earliest``."""
        tag = self._landing(phys, delay, earliest)
        if tag is not None:
            self._place(tag[0], tag[1], value)
