"""The per-tag scheduler of one worker (spec §3.1-§3.10, §3.13).

At each tag it runs the triggered reactions in rank order, applies mode transitions, picks the
next tag (waiting for physical time through its :class:`reactors.clock.Clock` unless
``fast``), clears presence and fires the events of the new tag.

Hot-path data: ``rq`` is a heap of reaction ranks (ints; ports and actions push the ranks
they trigger; duplicates pop consecutively and are skipped); ``table[rank]`` is the
reaction's prebuilt ``(callable, args)``; ``present`` lists the ports/actions made present
in this tag. There are no locks: other threads only append to the event queue's inbox and
wake the clock.
"""

from __future__ import annotations

import threading
from datetime import datetime
from heapq import heappop, heappush

from .action import Action
from .context import CTX
from .eventq import EventQueue
from .tag import FOREVER, NEVER_INT64


class Scheduler:
    """Runs a built :class:`reactors.build.Program` on the calling thread.

    ``fast``: do not wait for physical time. ``keepalive``: do not stop on an empty event
    queue. ``timeout``: ns after the start time for the final tag, or None.
    ``start_multiple``: round the start time up to a multiple of this many ns (0: no).
    After :meth:`run` raised, ``failed`` is the :class:`reactors.reaction.Reaction` that
    raised (None if the error came from elsewhere).
    """

    def __init__(
        self,
        program,
        clock,
        *,
        fast=False,
        keepalive=False,
        timeout=None,
        start_multiple=0,
        log=None,
    ):
        self.program = program
        self.clock = clock
        self.fast = bool(fast)
        self.keepalive = bool(keepalive)
        self.timeout = timeout
        self.start_multiple = start_multiple
        self.log = log or CTX.log
        self.queue = EventQueue()
        self.events = self.queue.heap
        self.next_seq = self.queue.next_seq
        self.inbox = self.queue.inbox
        self.rq = []
        self.present = []
        self.transitions = []
        self.table = [None if r is None else r.entry() for r in program.reactions]
        self.modes = program.modes
        self.current = None  # the running reaction that has a deadline, if any
        self.stopping = False  # at the stop tag (shutdown reactions are running)
        self.finished = False
        self.failed = None
        self.time = self.micro = self.start_time = 0
        self.stop_time, self.stop_micro = FOREVER, 0
        self.phys_seen = NEVER_INT64  # a lower bound of the current physical time
        self.phys_start = 0
        self._thread = None
        self._attach()

    def _attach(self) -> None:
        p = self.program
        mark = self.present.append
        for port in p.ports:
            port._rq = self.rq
            port._mark = mark
        for a in p.actions:
            a._rq, a._mark, a._sched = self.rq, mark, self
        for t in p.timers:
            t._rq, t._sched = self.rq, self
        for obj in list(p.mode_capsules) + [r for r in p.reactions if r is not None]:
            obj._sched = self

    # ------------------------------------------------------------------ public interface

    def run(self) -> None:
        """Execute the program to its end (stop tag). Exceptions from reactions propagate
        (with ``failed`` set); KeyboardInterrupt propagates too."""
        CTX.sched = self
        self._thread = threading.get_ident()
        ok = False
        try:
            self._begin()
            self._loop()
            ok = True
        finally:
            self._finish(ok)

    def request_stop(self) -> None:
        """Stop at the next microstep, (t, m+1), or earlier if already due (spec §3.9).
        Callable from any thread; no effect at or after the final tag."""
        if self.finished or self._thread is None:
            return
        if threading.get_ident() != self._thread:
            self.post((None,))
        else:
            self._set_stop(self.time, self.micro + 1)

    def post(self, item: tuple) -> None:
        """Hand an item to the scheduler thread (any thread): ``(action, phys_ns, delay,
        value)`` for a physical action, ``(None,)`` for a stop request; wakes the clock."""
        self.inbox.append(item)
        self.clock.wake()

    # ------------------------------------------------------------------ start and end

    def _begin(self) -> None:
        clock = self.clock
        now = clock.now()
        start = now
        if self.start_multiple:
            start = -(-now // self.start_multiple) * self.start_multiple
        self.phys_start = now
        self.start_time = self.time = start
        self.micro = 0
        if self.timeout is not None:
            self.stop_time = min(start + self.timeout, FOREVER)
        self.log.log(
            f"---- Start execution on {datetime.now():%a %b %d %H:%M:%S %Y} ---- "
            f"plus {start % 1_000_000_000} nanoseconds"
        )
        if not self.fast and start > now:
            clock.wait_until(start)
        self.phys_seen = clock.now()
        self._enter_start_tag(start)

    def _enter_start_tag(self, start: int) -> None:
        """Trigger startup reactions, start timers and fire the events of the start tag
        (spec §3.8); with ``timeout: 0`` the start tag is also the stop tag."""
        ranks = list(self.program.startup)
        if self.modes:
            ranks += self.modes.begin(self)
        for t in self.program.timers:
            if t.mode is None or t.mode.active:
                t.start(start, 0)
        for r in ranks:
            heappush(self.rq, r)
        self._fire_events(start, 0)
        if self.stop_time == start and self.stop_micro == 0:
            self._trigger_shutdown()

    def _finish(self, ok: bool) -> None:
        self.finished = True
        self.stop_time, self.stop_micro = NEVER_INT64, 0
        if not ok:
            return
        lost = sum(1 for e in self.queue.live() if isinstance(e[3], Action))
        if lost:
            self.log.warn(f"---- {lost} future action event(s) after the stop tag were discarded.")
        self.log.log(f"---- Elapsed logical time (in nsec): {self.time - self.start_time:,}")
        self.log.log(
            f"---- Elapsed physical time (in nsec): {self.clock.now() - self.phys_start:,}"
        )

    def _trigger_shutdown(self) -> None:
        self.stopping = True
        for r in self.program.shutdown:
            if r.mode is None or r.mode.ever_active:
                heappush(self.rq, r.rank)

    # ------------------------------------------------------------------ the loop

    def _loop(self) -> None:
        rq = self.rq
        table = self.table
        events = self.events
        present = self.present
        inbox = self.inbox
        transitions = self.transitions
        fast = self.fast
        pop = heappop
        t, m = self.time, self.micro
        last = -1
        try:
            while True:
                while rq:
                    rank = pop(rq)
                    if rank != last:
                        last = rank
                        fn, args = table[rank]
                        fn(*args)
                last = -1
                if transitions:
                    self.modes.apply(self)
                st = self.stop_time
                sm = self.stop_micro
                if t == st and m == sm:
                    return
                if inbox:
                    self._drain()
                    st, sm = self.stop_time, self.stop_micro
                if events:
                    top = events[0]
                    nt = top[0]
                    nm = top[1]
                    if (
                        top[3] is None
                        or nt > st
                        or (nt == st and nm > sm)
                        or (not fast and nt > self.phys_seen)
                    ):
                        nt, nm = self._next_tag()
                        st, sm = self.stop_time, self.stop_micro
                else:
                    nt, nm = self._next_tag()
                    st, sm = self.stop_time, self.stop_micro
                self.time = t = nt
                self.micro = m = nm
                for obj in present:
                    obj._p = False
                present.clear()
                while events:
                    e = events[0]
                    if e[0] != t or e[1] != m:
                        break
                    pop(events)
                    if e[3] is not None:
                        e[3]._fire(e)
                if t == st and m == sm:
                    self._trigger_shutdown()
        except BaseException:
            if last >= 0:
                self.failed = self.program.reactions[last]
            raise

    def _fire_events(self, t: int, m: int) -> None:
        events = self.events
        while events and events[0][0] == t and events[0][1] == m:
            e = heappop(events)
            if e[3] is not None:
                e[3]._fire(e)

    def _next_tag(self):
        """The next tag to process (never past the stop tag), after waiting for physical
        time unless fast. Handles starvation, keepalive and wake-ups (spec §3.9, §3.10)."""
        clock = self.clock
        while True:
            if self.inbox:
                self._drain()
            top = self.queue.peek()
            if top is None and not self.keepalive:
                self._set_stop(self.time, self.micro + 1)
            st, sm = self.stop_time, self.stop_micro
            if top is not None and (top[0] < st or (top[0] == st and top[1] <= sm)):
                nt, nm = top[0], top[1]
            elif top is None and self.keepalive and st >= FOREVER:
                clock.wait_for_wake()
                continue
            else:
                nt, nm = st, sm
            idle = top is None and self.keepalive
            if (not self.fast or idle) and nt > self.phys_seen:
                if not clock.wait_until(nt):
                    continue
                self.phys_seen = clock.now()
            return nt, nm

    def _drain(self) -> None:
        inbox = self.inbox
        while inbox:
            item = inbox.popleft()
            if item[0] is None:
                self._set_stop(self.time, self.micro + 1)
            else:
                item[0]._arrive(item[1], item[2], item[3])

    def _set_stop(self, t: int, m: int) -> None:
        if t < self.stop_time or (t == self.stop_time and m < self.stop_micro):
            self.stop_time, self.stop_micro = t, m
