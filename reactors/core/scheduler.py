"""The per-tag scheduler of one worker (spec §3.1-§3.10, §3.13).

At each tag it runs the triggered reactions in rank order, applies mode transitions, picks the
next tag (waiting for physical time through its :class:`reactors.core.clock.Clock` unless
``fast``), clears presence and fires the events of the new tag. The rules of time are those of
its :class:`reactors.core.engine.TagEngine`; the loop inlines the engine's per-tag steps.

Hot-path data: ``rq`` is a heap of reaction ranks (ints; ports and actions push the ranks
they trigger; duplicates pop consecutively and are skipped); ``table[rank]`` is the
reaction's prebuilt ``(callable, args)``; ``present`` lists the ports/actions made present
in this tag. There are no locks: other threads only append to the event queue's inbox and
wake the clock.
"""

from __future__ import annotations

import gc
import threading
from typing import TYPE_CHECKING, Any

from .clock import Clock
from .context import CTX
from .engine import TagEngine, TagPair, Timing
from .event_queue import EventQueue, heappop, heappush
from .log import Log
from .reaction import Reaction

if TYPE_CHECKING:
    from .assembly import Assembly


def freeze_heap() -> None:
    """Called by a generated program once its module has loaded: move every object alive
    now (the modules and classes the program imported, most of them torch's) into the
    cyclic collector's permanent generation (``gc.freeze``), then turn the collector on
    (the module turns it off while its imports run). Those objects live to the end of the
    process anyway; a full collection walks every tracked object, and with torch loaded
    they are ~360,000 (~50 ms per full collection here, three of them during the imports
    and more during a run)."""
    gc.freeze()
    gc.enable()


class Scheduler:
    """Runs a built :class:`reactors.core.assembly.Assembly` on the calling thread.

    ``clock``: a :class:`reactors.core.clock.Clock` (or one with the same methods). ``fast``: do
    not wait for physical time. ``keepalive``: do not stop on an empty event queue.
    ``timeout``: ns after the start time for the final tag, or None. ``start_multiple``: round
    the start time up to a multiple of this many ns (0: no). After :meth:`run` raised,
    ``failed`` is the :class:`reactors.core.reaction.Reaction` that raised (None if the error came
    from elsewhere). ``engine`` holds the tag state (read by actions and timers).
    """

    def __init__(
        self,
        program: Assembly,
        clock: Clock,
        *,
        fast: bool = False,
        keepalive: bool = False,
        timeout: int | None = None,
        start_multiple: int = 0,
        log: Log | None = None,
    ):
        self.program = program
        self.clock = clock
        self.log = log or CTX.log
        self.queue = EventQueue()
        self.inbox = self.queue.inbox
        self.engine = TagEngine(
            Timing(bool(fast), bool(keepalive), timeout, start_multiple),
            self.log,
            now=clock.now,
            wake=clock.wake,
            queue=self.queue,
        )
        self.rq: list[int] = []
        self.present: list = []
        self.transitions: list = []
        self.table: list = [None if r is None else r.entry() for r in program.reactions]
        self.modes = program.modes
        self.current: Reaction | None = None  # the running reaction that has a deadline, if any
        self.stopping = False  # at the stop tag (shutdown reactions are running)
        self.failed: Reaction | None = None
        # the first exit() of a reaction at the stop tag (:meth:`_exit_at_stop`), raised once the
        # tag is complete
        self.exit: SystemExit | None = None
        self.signalled = 0  # set by the launcher on a signal: 128 + its number
        self._thread_id: int | None = None
        # reactors.records.checkpoint: the snapshots to take (a Checkpointer) and the one to resume
        # from (a Resume), or None
        self.checkpoint: Any = None
        self.resume: Any = None
        self._attach()

    def _attach(self) -> None:
        p = self.program
        mark = self.present.append
        for port in p.ports:
            port._rq = self.rq
            port._mark = mark
        for a in p.actions:
            a._rq, a._mark, a._engine = self.rq, mark, self.engine
        for t in p.timers:
            t._rq, t._engine = self.rq, self.engine
        for obj in list(p.mode_capsules) + [r for r in p.reactions if r is not None]:
            obj._sched = self

    # ------------------------------------------------------------------ the tag, for readers

    @property
    def time(self) -> int:
        """The current tag's time (ns since the epoch)."""
        return self.engine.time

    @property
    def micro(self) -> int:
        """The current tag's microstep."""
        return self.engine.micro

    @property
    def start_time(self) -> int:
        """The start time (ns since the epoch)."""
        return self.engine.start_time

    # ------------------------------------------------------------------ public interface

    def run(self) -> None:
        """Execute the program to its end (stop tag). Exceptions from reactions propagate
        (with ``failed`` set); KeyboardInterrupt propagates too."""
        CTX.sched = self
        self._thread_id = threading.get_ident()
        ok = False
        try:
            self._begin()
            self._loop()
            if self.exit is not None:
                raise self.exit
            ok = True
        finally:
            self._finish(ok)

    def _exit_at_stop(self, e: SystemExit, rank: int) -> None:
        """An ``exit()`` of reaction ``rank`` at the stop tag (a shutdown reaction that sets
        the program's exit status, as the RL loggers' do): the tag's other reactions still run,
        on this worker and on the others, and ``e`` is raised once it is complete, so a run
        ends with the same files on any worker count. The first one sets the status."""
        if self.exit is None:
            self.exit = e
            self.failed = self.program.reactions[rank]

    def request_stop(self) -> None:
        """Stop at the next microstep, (t, m+1), or earlier if already due (spec §3.9).
        Callable from any thread; no effect at or after the final tag."""
        if self.engine.finished or self._thread_id is None:
            return
        if threading.get_ident() != self._thread_id:
            tape = self.engine.tape
            if tape is None or not tape.replaying:  # a replay stops at the recorded tag
                self.engine.post((None,))
        else:
            self.engine.request_stop()

    def stop_signalled(self) -> bool:
        """Whether a signal (Ctrl-C, SIGTERM, SIGHUP) asked this run to stop: it ends at the
        next tag, so a reaction may cut long work short (``lf.stop_signalled()``); what it
        computes then is not part of the run's determinism. Always False in a run that records
        or replays (the signal is not on the recording)."""
        return self._signal() != 0 and self.engine.tape is None

    def _signal(self) -> int:
        """The exit status the signal's stop gives (128 + its number), or 0."""
        return self.signalled

    def physical_time(self) -> int:
        """Physical time (ns since the epoch) as reaction code reads it (a replay answers
        with the recorded value)."""
        return self.clock.now()

    # ------------------------------------------------------------------ start and end

    def _begin(self) -> None:
        start = self.engine.begin(self.clock.wait_until)
        if self.resume is not None:  # at the snapshot's tag, which has run already
            self.resume.enter(self)
            return
        self._enter_start_tag(start)
        if self.engine.tape is not None:
            self.engine.tape.begin(self)

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
        self.queue.fire(start, 0)
        if self.engine.at_stop():
            self._trigger_shutdown()

    def _finish(self, ok: bool) -> None:
        self.engine.close()
        if ok:
            self.engine.report_end()

    def _trigger_shutdown(self) -> None:
        self.stopping = True
        for r in self.program.shutdown:
            if r.mode is None or r.mode.ever_active:
                heappush(self.rq, r.rank)

    # ------------------------------------------------------------------ the loop

    def _loop(self) -> None:
        # reactors.core.engine's run_ready and TagEngine.advance, inlined, and the event queue's
        # heap peeked and popped in place (as EventQueue.fire does): a call per reaction or
        # per tag here would cost a measurable share of a reaction.
        engine = self.engine
        rq = self.rq
        table = self.table
        events = self.queue.heap
        present = self.present
        inbox = self.inbox
        transitions = self.transitions
        fast = engine.timing.fast
        checkpoint = self.checkpoint
        pop = heappop
        t, m = engine.time, engine.micro
        last = -1
        try:
            while True:
                while rq:
                    rank = pop(rq)
                    if rank != last:
                        last = rank
                        fn, args = table[rank]
                        try:
                            fn(*args)
                        except SystemExit as exit_:
                            if not engine.at_stop():
                                raise
                            self._exit_at_stop(exit_, rank)
                last = -1
                if transitions:
                    self.modes.apply(self)
                st = engine.stop_time
                sm = engine.stop_micro
                if t == st and m == sm:
                    return
                if checkpoint is not None:
                    checkpoint.tag_done(self)
                if inbox:
                    engine.drain()
                    st, sm = engine.stop_time, engine.stop_micro
                if events:
                    top = events[0]
                    nt = top[0]
                    nm = top[1]
                    if (
                        top[3] is None
                        or nt > st
                        or (nt == st and nm > sm)
                        or (not fast and nt > engine.phys_seen)
                    ):
                        nt, nm = self._next_tag()
                        st, sm = engine.stop_time, engine.stop_micro
                else:
                    nt, nm = self._next_tag()
                    st, sm = engine.stop_time, engine.stop_micro
                engine.time = t = nt
                engine.micro = m = nm
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

    def _next_tag(self) -> TagPair:
        """The next tag to process (never past the stop tag), after waiting for physical
        time unless fast (spec §3.9, §3.10)."""
        return self.engine.next_tag(self.engine.earliest, self._sleep)

    def _sleep(self, t: int | None) -> bool:
        """Wait for physical time ``t`` (ns; None: for a wake-up). False when woken first."""
        if t is None:
            self.clock.wait_for_wake()
            return False
        return self.clock.wait_until(t)
