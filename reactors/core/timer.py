"""Timers (spec §1.9, §3.2): fire at start + offset, then every period.

Timers are never passed to reaction code; they only trigger reactions. A timer is an event
target of the :mod:`reactors.core.event_queue` queue.
"""

from __future__ import annotations

from typing import Any

from .engine import TagEngine
from .event_queue import Event, heappush
from .mode import Mode
from .tag import FOREVER


class Timer:
    """A timer of one reactor instance.

        ``offset`` and ``period`` are ns (period 0: fire once). ``mode`` is the nearest enclosing
        :class:`reactors.core.mode.Mode` (None outside modes). ``_triggers`` holds the ranks of the
        reactions it triggers; ``_engine`` (the scheduler's :class:`reactors.core.engine.TagEngine`,
    whose event queue it schedules into) is set when a scheduler attaches the program.
    """

    __slots__ = ("offset", "period", "mode", "_triggers", "_rq", "_engine", "_name")

    _triggers: tuple[int, ...]
    _rq: list[int]
    _engine: TagEngine

    def __init__(self, name: str, offset: int, period: int, mode: Mode | None = None):
        self._name = name
        self.offset = offset
        self.period = period
        self.mode = mode
        self._triggers = ()
        self._rq = []
        # _engine is set when a scheduler attaches the program

    def _fire(self, e: Event) -> None:
        """Trigger the reactions, then queue the next periodic event unless past the stop tag."""
        for rank in self._triggers:
            heappush(self._rq, rank)
        if self.period:
            self._sched_at(e[0] + self.period, 0)

    def _sched_at(self, time: int, micro: int) -> None:
        s = self._engine
        st = s.stop_time
        if time < FOREVER and (time < st or (time == st and micro <= s.stop_micro)):
            s.queue.push(time, micro, self)

    def start(self, time: int, micro: int) -> None:
        """Queue the first event: at ``time + offset`` (microstep 0), or at ``(time, micro)``
        when the offset is 0 (used at start and when a mode restarts its timers)."""
        if self.offset:
            self._sched_at(time + self.offset, 0)
        else:
            self._sched_at(time, micro)

    def _resume(self, time: int, micro: int, _value: Any = None) -> None:
        """Re-queue a suspended event (mode history) at ``(time, micro)``."""
        self._sched_at(time, micro)

    def _forget(self, _e: Event) -> None:
        """Nothing to forget: timers keep no per-event bookkeeping."""

    def __repr__(self) -> str:
        return f"<timer {self._name}({self.offset}, {self.period})>"
