"""The tag engine: the rules of logical time shared by every scheduler of a run (spec §3.1-§3.10,
§3.13).

A run advances through superdense tags ``(time, microstep)`` (times are integer ns). The rules
that decide which tag comes next live here once, and the three places that run tags compose
them: the single-worker :class:`reactors.core.scheduler.Scheduler`, each parallel
:class:`reactors.parallel.worker_scheduler.WorkerScheduler`, and the
:class:`reactors.parallel.coordinator.Coordinator` that decides the tags of a parallel run.

- :func:`start_tag` and :meth:`TagEngine.begin`: the start tag and the start log line;
- :func:`decide` (pure) and :meth:`TagEngine.next_tag` (its driver, with the waiting supplied
  by the caller): timeout, ``request_stop`` at (t, m+1), starvation, keepalive, waiting for
  physical time unless ``fast``;
- :meth:`TagEngine.advance`: clear presence and fire the events of the new tag;
- :func:`physical_tag`: where an event of a physical action lands;
- :meth:`TagEngine.report_end`: the end-of-run report.

The rank loop, the one rule that runs per reaction, is: pop the reaction queue (a heap of
ranks) in order, run each rank once (a rank queued twice pops twice in a row; the second is
skipped), including the reactions that the running ones trigger. It is written inline in the
two loops that run reactions, :meth:`reactors.core.scheduler.Scheduler._loop` and
:meth:`reactors.parallel.worker_scheduler.WorkerScheduler._run_tag` (which interleaves crossings),
because a call per reaction there costs several percent of a reaction and of a parallel round trip;
the single-worker loop inlines :meth:`TagEngine.advance` for the same reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from time import time_ns
from typing import Any

from .event_queue import EventQueue
from .log import Log
from .tag import FOREVER, NEVER_INT64

#: A tag as two ints ``(time ns, microstep)``; tuples compare lexicographically like tags.
TagPair = tuple[int, int]


@dataclass(frozen=True)
class Timing:
    """How a run treats time. ``fast``: do not wait for physical time. ``keepalive``: do not
    stop when no event is pending. ``timeout``: ns after the start time for the final tag, or
    None. ``start_multiple``: round the start time up to a multiple of this many ns (0: no).
    ``start_at``: the start time (ns since the epoch) to take instead of physical time, and
    ``stop_at``: the stop tag (elapsed ns, microstep), both set by a replay (None: not set)."""

    fast: bool = False
    keepalive: bool = False
    timeout: int | None = None
    start_multiple: int = 0
    start_at: int | None = None
    stop_at: TagPair | None = None


#: What :func:`decide` chose, ``(tag, stop, until)``. ``stop``: the stop tag (lowered on
#: starvation). ``tag``: the tag to advance to, or None to sleep until woken and decide again
#: (keepalive with nothing pending). ``until``: the physical time (ns) to reach before
#: advancing, or None. A plain tuple: the coordinator decides once per tag.
NextTag = tuple[TagPair | None, TagPair, int | None]


def start_tag(now: int, multiple: int) -> int:
    """The start time (ns): physical time ``now`` rounded up to a multiple of ``multiple``
    ns (0: not rounded)."""
    if multiple:
        return -(-now // multiple) * multiple
    return now


def log_start(log: Log, start: int) -> None:
    """Write the start line of a run that starts at ``start`` (ns since the epoch)."""
    log.log(
        f"---- Start execution on {datetime.now():%a %b %d %H:%M:%S %Y} ---- "
        f"plus {start % 1_000_000_000} nanoseconds"
    )


def decide(
    top: TagPair | None,
    now: TagPair,
    stop: TagPair,
    keepalive: bool,
    fast: bool,
    phys_seen: int,
) -> NextTag:
    """The next-tag rule (spec §3.9, §3.10, §3.13). ``top``: the earliest pending event (None:
    none); ``now``: the current tag; ``stop``: the stop tag; ``phys_seen``: a lower bound of
    physical time (ns). The next tag is never past the stop tag; with nothing pending it is
    the stop tag, lowered to (t, m+1) unless ``keepalive``. Unless ``fast`` (or when idle under
    keepalive), physical time must first reach the new tag's time."""
    if top is None and not keepalive:
        stop = min(stop, (now[0], now[1] + 1))
    if top is not None and top <= stop:
        tag = top
    elif top is None and keepalive and stop[0] >= FOREVER:
        return None, stop, None
    else:
        tag = stop
    idle = top is None and keepalive
    until = tag[0] if (not fast or idle) and tag[0] > phys_seen else None
    return tag, stop, until


def physical_tag(phys: int, delay: int, start_time: int, earliest: TagPair) -> TagPair | None:
    """Where an event of a physical action lands (spec §3.13): at physical time ``phys`` plus
    ``delay`` (ns, the action's ``min_delay`` included), microstep 0, but no earlier than the
    start time nor than ``earliest``, the first tag that can still take it. None past
    ``FOREVER`` (the event is dropped)."""
    t = max(phys + delay, start_time)
    if t >= FOREVER:
        return None
    if (t, 0) < earliest:
        return earliest
    return t, 0


def _no_wake() -> None:
    """The default ``wake``: an owner that never waits on its clock needs no wake-up."""


class TagEngine:
    """The logical time of one scheduler: current tag, start and stop tags, physical time
    seen, and its pending events (a :class:`reactors.core.event_queue.EventQueue`; the coordinator's
    stays empty: its pending events are the workers' reports).

    Actions and timers read the tag state here and schedule through ``queue``. ``now()``
    reads physical time (ns); ``wake()`` interrupts the owner's wait for physical time (both
    from the owner's clock). Times are ns; tags are ``(time, micro)``; the stop tag is
    ``(stop_time, stop_micro)``, ``FOREVER`` when none is set.
    """

    __slots__ = (
        "timing",
        "log",
        "now",
        "wake",
        "queue",
        "time",
        "micro",
        "start_time",
        "stop_time",
        "stop_micro",
        "phys_seen",
        "phys_start",
        "finished",
        "tape",
    )

    def __init__(
        self,
        timing: Timing,
        log: Log,
        now: Callable[[], int] = time_ns,
        wake: Callable[[], None] = _no_wake,
        queue: EventQueue | None = None,
    ):
        self.timing = timing
        self.log = log
        self.now = now
        self.wake = wake
        self.queue = EventQueue() if queue is None else queue
        self.time = self.micro = self.start_time = 0
        self.stop_time, self.stop_micro = FOREVER, 0
        self.phys_seen = NEVER_INT64  # a lower bound of the current physical time
        self.phys_start = 0
        self.finished = False
        # a reactors.records.replay.Tape while recording or replaying the run's outside inputs
        self.tape: Any = None

    # ------------------------------------------------------------------ start and end

    def begin(self, wait_until: Callable[[int], object]) -> int:
        """Choose the start tag from physical time, set the stop tag from the timeout, log the
        start line and, unless fast, ``wait_until(start)`` physical time. Returns the start
        time (ns)."""
        now = self.now()
        timing = self.timing
        start = (
            start_tag(now, timing.start_multiple) if timing.start_at is None else timing.start_at
        )
        self.start_time = self.time = start
        self.micro = 0
        self.phys_start = now
        if timing.timeout is not None:
            self.stop_time = min(start + timing.timeout, FOREVER)
        if timing.stop_at is not None:
            self.lower_stop(start + timing.stop_at[0], timing.stop_at[1])
        log_start(self.log, start)
        if not self.timing.fast and start > now:
            wait_until(start)
        self.phys_seen = self.now()
        return start

    def enter_start(self, start: int, stop_time: int, stop_micro: int) -> None:
        """Be at the start tag ``(start, 0)`` with the given stop tag (a worker of a parallel
        run learns both from the coordinator)."""
        self.start_time = self.time = start
        self.micro = 0
        self.stop_time, self.stop_micro = stop_time, stop_micro
        self.phys_start = self.now()

    def close(self) -> None:
        """The run is over: later ``schedule()`` calls are past the stop tag."""
        self.finished = True
        self.stop_time, self.stop_micro = NEVER_INT64, 0

    def report_end(self) -> None:
        """Log the end of the run: elapsed logical and physical time (ns). Action events
        left after the stop tag are discarded without a word (how many depends on when each
        worker of a parallel run learns of a stop asked at a tag, not on the program)."""
        log = self.log
        log.log(f"---- Elapsed logical time (in nsec): {self.time - self.start_time:,}")
        log.log(f"---- Elapsed physical time (in nsec): {self.now() - self.phys_start:,}")

    # ------------------------------------------------------------------ the next tag

    def at_stop(self) -> bool:
        """Whether the current tag is the stop tag."""
        return self.time == self.stop_time and self.micro == self.stop_micro

    def lower_stop(self, t: int, m: int) -> None:
        """Make ``(t, m)`` the stop tag if it is earlier than the current one."""
        if t < self.stop_time or (t == self.stop_time and m < self.stop_micro):
            self.stop_time, self.stop_micro = t, m

    def request_stop(self) -> None:
        """``request_stop()`` on the owner's thread: stop at (t, m+1) or earlier (spec §3.9)."""
        self.lower_stop(self.time, self.micro + 1)

    def next_tag(
        self,
        earliest: Callable[[], TagPair | None],
        sleep: Callable[[int | None], bool],
    ) -> TagPair:
        """The next tag by :func:`decide`. ``earliest()`` gives the earliest pending event
        (it may lower the stop tag first); ``sleep(t)`` waits until physical time ``t`` ns
        (None: until woken) and returns False when woken first, which makes the rule decide
        again with what changed. Updates the stop tag; does not advance."""
        timing = self.timing
        while True:
            top = earliest()
            tag, stop, until = decide(
                top,
                (self.time, self.micro),
                (self.stop_time, self.stop_micro),
                timing.keepalive,
                timing.fast,
                self.phys_seen,
            )
            self.stop_time, self.stop_micro = stop
            if tag is None:
                sleep(None)
                continue
            if until is not None:
                if not sleep(until):
                    continue
                self.phys_seen = self.now()
            return tag

    def earliest(self) -> TagPair | None:
        """The earliest pending event of ``queue`` after taking in what other threads
        posted, or None."""
        if self.queue.inbox:
            self.drain()
        top = self.queue.peek()
        return None if top is None else (top[0], top[1])

    # ------------------------------------------------------------------ other threads

    def post(self, item: tuple) -> None:
        """Hand an item to the owner's thread (from any thread): ``(action, phys_ns, delay,
        value)`` for a physical action, ``(None,)`` for a stop request; wakes the owner."""
        self.queue.inbox.append(item)
        self.wake()

    def drain(self) -> None:
        """Take in what other threads posted: queue physical events, apply stop requests."""
        inbox = self.queue.inbox
        while inbox:
            item = inbox.popleft()
            if item[0] is None:
                self.request_stop()
            else:
                item[0]._arrive(item[1], item[2], item[3])

    # ------------------------------------------------------------------ advancing

    def advance(self, t: int, m: int, present: list) -> None:
        """Move to tag ``(t, m)``: clear the presence of what ``present`` lists (then empty
        it) and fire the events of the new tag."""
        self.time, self.micro = t, m
        for obj in present:
            obj._p = False
        present.clear()
        self.queue.fire(t, m)
