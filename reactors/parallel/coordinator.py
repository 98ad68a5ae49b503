"""The coordinator of a parallel run: the one place that decides every tag (spec §3.1-§3.10).

Worker 0 plays this role between its own tags (so a run of W workers is W busy processes or
threads, not W + 1). Per tag ``s``, once worker 0 has published its own ``DONE = s``, it
waits until every worker has, prints what their reactions printed during the tag (in rank
order: the output of one worker), reads their reports (earliest pending event, stop
request), applies the one-worker rules for the next tag (those of its
:class:`reactors.core.engine.TagEngine`: timeout, ``request_stop`` at (t, m+1), starvation,
keepalive, waiting for physical time unless ``fast``) and publishes
``GO`` for tag ``s + 1`` with its time, microstep and the stop tag. While it waits for
physical time, a worker whose threads posted a physical event or a stop request revises its
report and rings; the coordinator then recomputes the next tag, as one worker's scheduler
does when woken.

In a free-running run (:func:`reactors.parallel.plan.free_running`: no rule needs physical
time) the workers decide each next tag themselves, all alike, and worker 0 only prints each tag's
output and ends the run (:meth:`Coordinator.complete`); the start tag is still published here.

The program's own process (or main thread) only supervises
(:func:`reactors.parallel.supervisor.supervise`): it notices the end of the run, failures (a
worker sets ``FAILS`` and its ``STATUS``/``CODE``), dead workers and signals, and then sets
``STATE = ABORT``, which every worker notices at its next wait or before its next reaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import time_ns
from typing import TYPE_CHECKING, TextIO

from ..core.engine import TagEngine, TagPair, Timing
from ..core.log import Log
from ..core.port import Port
from .sync import (
    ABORT,
    CODE,
    COORD_SLEEP,
    DONE,
    FAILS,
    FINISHED,
    GO_M,
    GO_SEQ,
    GO_T,
    NEXT_M,
    NEXT_T,
    NONE_T,
    PRINTED,
    REQ_M,
    REQ_T,
    REV,
    RUNNING,
    SLEEP,
    START_T,
    STATE,
    STATUS,
    STOP_ASKED,
    STOP_M,
    STOP_T,
    W_FAILED,
    W_READY,
    Aborted,
    Control,
    all_done,
    ring_if_sleeping,
    wait,
)
from .tag_steps import TagSteps
from .transport import Bell, ChannelReader, Idle, Waker

if TYPE_CHECKING:
    from ..records.checkpoint import Resume

#: Every worker's stdout channels: the pseudo port and its readers (of even tags, of odd
#: tags), in worker order.
Outputs = Sequence[tuple[Port, tuple[ChannelReader, ChannelReader]]]


class WorkerFailed(Exception):
    """A worker reported a failure (it printed the report itself); ``status`` is the exit
    status to use, ``worker`` its index."""

    def __init__(self, worker: int, status: int):
        super().__init__(f"worker {worker} failed with status {status}")
        self.worker = worker
        self.status = status


def failure(ctl: Control) -> WorkerFailed | None:
    """``WorkerFailed`` for the lowest-numbered worker that reported a failure, or None."""
    cells = ctl.cells
    for w in range(ctl.workers):
        b = ctl.worker_base(w)
        if cells[b + STATUS] == W_FAILED:
            return WorkerFailed(w, cells[b + CODE])
    return None


def write_output(ctl: Control, outputs: Outputs, seq: int, stream: TextIO) -> None:
    """Print on ``stream`` what the workers printed during tag ``seq`` (those that sent it),
    in rank order, which is the order of one worker (a stable sort keeps each reaction's own
    order); record it in ``PRINTED``. ``outputs[w]`` is ``(stdout port, readers)``."""
    cells = ctl.cells
    if cells[PRINTED] >= seq:
        return
    chunks: list[tuple[int, str]] = []
    for port, readers in outputs:
        reader = readers[seq & 1]
        if cells[reader.state_cell] == 2 * seq + 1:  # that worker sent text of tag seq
            port._p = False
            reader.receive(seq)
            chunks += port.value
    if chunks:
        chunks.sort(key=_rank)
        stream.write("".join(text for _, text in chunks))
        stream.flush()
    cells[PRINTED] = seq


def _rank(chunk: tuple[int, str]) -> int:
    return chunk[0]


class Coordinator:
    """Decides the tags of a run of ``ctl.workers`` workers, inside worker 0 (``worker``, its
    :class:`reactors.parallel.worker_scheduler.WorkerScheduler`). ``bells[w]`` wakes worker ``w``
    (the coordinator waits on worker 0's), ``supervisor`` wakes the supervising process or thread;
    ``outputs`` as for :func:`write_output`; ``stream`` the real stdout. ``engine`` holds
    the tag state of the run. Times are ns."""

    def __init__(
        self,
        ctl: Control,
        bells: Sequence[Bell],
        supervisor: Waker,
        outputs: Outputs,
        stream: TextIO,
        *,
        fast: bool = False,
        keepalive: bool = False,
        timeout: int | None = None,
        start_multiple: int = 0,
        log: Log,
        spin_ns: int = 0,
        idle: Idle | None = None,
    ):
        self.ctl = ctl
        self.cells = ctl.cells
        self.bells = bells
        self.bell = bells[0]
        self.supervisor = supervisor
        self.outputs, self.stream = outputs, stream
        self.n = ctl.workers
        self.bases = [ctl.worker_base(w) for w in range(self.n)]
        self.done_cells = [b + DONE for b in self.bases]
        self.engine = TagEngine(Timing(bool(fast), bool(keepalive), timeout, start_multiple), log)
        self.spin_ns = spin_ns
        self.idle = idle
        self.worker: TagSteps = None  # type: ignore[assignment]  # set by start()
        self.revs = [0] * self.n
        self.seq = 0
        self.resume: Resume | None = None  # the snapshot the run resumes from (set by its worker)

    # ------------------------------------------------------------------ the run

    def start(self, worker: TagSteps) -> None:
        """Wait until every worker is ready, choose the start time and publish tag 0."""
        self.worker = worker
        cells = self.cells
        self._wait(lambda: all(cells[b + STATUS] >= W_READY for b in self.bases))
        self._check_failed()
        engine = self.engine
        engine.begin(self._sleep_through)
        if self.resume is not None:  # tag 0 is the snapshot's tag (it ran already)
            self.resume.shift(engine)
        cells[START_T] = engine.start_time
        cells[STATE] = RUNNING
        self._go(0, engine.time, engine.micro)

    def step(self) -> bool:
        """After worker 0's ``DONE`` of the current tag: complete the tag (print its output)
        and publish the next one. False at the end of the run (after the stop tag)."""
        self._wait(self._all_done)
        self._check_failed()
        write_output(self.ctl, self.outputs, self.seq, self.stream)
        if self.engine.at_stop():
            self._finish()
            return False
        nt, nm = self.engine.next_tag(self._reports, self._sleep_until)
        self._go(self.seq + 1, nt, nm)
        return True

    def complete(self, seq: int, final: bool) -> None:
        """In a free-running run (the workers agree on tags themselves), after every
        worker's ``DONE`` of tag ``seq``: print the tag's output and, after the stop tag
        (``final``), end the run."""
        self._check_failed()
        write_output(self.ctl, self.outputs, seq, self.stream)
        if final:
            own = self.worker.engine
            self.engine.time, self.engine.micro = own.time, own.micro
            self._finish()

    # ------------------------------------------------------------------ steps

    def _go(self, seq: int, t: int, m: int) -> None:
        cells, engine = self.cells, self.engine
        cells[GO_T] = t
        cells[GO_M] = m
        cells[STOP_T] = engine.stop_time
        cells[STOP_M] = engine.stop_micro
        cells[GO_SEQ] = seq
        self.seq, engine.time, engine.micro = seq, t, m
        for w in range(1, self.n):
            ring_if_sleeping(cells, self.bases[w] + SLEEP, self.bells[w])

    def _all_done(self) -> bool:
        """Every worker published ``DONE`` for the current tag, or one failed."""
        return all_done(self.cells, self.done_cells, self.seq)

    def _check_failed(self) -> None:
        if self.cells[FAILS] or self.cells[STATE] == ABORT:
            raise Aborted()

    def _reports(self) -> TagPair | None:
        """The earliest event over all workers (None if none), after applying the earliest
        stop request to the stop tag. Reads each report under its seqlock."""
        cells, revs, engine = self.cells, self.revs, self.engine
        nt, nm = NONE_T, 0
        st, sm = engine.stop_time, engine.stop_micro
        for w, b in enumerate(self.bases):
            while True:
                rev = cells[b + REV]
                et, em = cells[b + NEXT_T], cells[b + NEXT_M]
                rt, rm = cells[b + REQ_T], cells[b + REQ_M]
                if not rev & 1 and cells[b + REV] == rev:
                    break
            revs[w] = rev
            if et < nt or (et == nt and em < nm):
                nt, nm = et, em
            if rt < st or (rt == st and rm < sm):
                st, sm = rt, rm
        if cells[STOP_ASKED] and (engine.time, engine.micro + 1) < (st, sm):
            st, sm = engine.time, engine.micro + 1  # the supervisor's stop request (a signal)
        engine.stop_time, engine.stop_micro = st, sm
        return None if nt == NONE_T else (nt, nm)

    def _revised(self) -> bool:
        worker = self.worker
        if len(worker.inbox) > worker._accounted:
            worker._provisional()  # worker 0's own threads posted something
        cells = self.cells
        e = self.engine
        if cells[STOP_ASKED] and (e.stop_time, e.stop_micro) > (e.time, e.micro + 1):
            return True  # a stop asked by the supervisor, not applied yet
        return any(cells[b + REV] != r for b, r in zip(self.bases, self.revs))

    def _finish(self) -> None:
        self.engine.report_end()
        self.cells[STATE] = FINISHED
        self.supervisor.ring()

    # ------------------------------------------------------------------ waiting

    def _wait(self, cond: Callable[[], bool]) -> None:
        wait(cond, self.cells, COORD_SLEEP, self.bell, self.spin_ns, self.idle)

    def _sleep_through(self, t: int) -> None:
        """Block until physical time ``t`` (ns), whatever workers report meanwhile."""
        self._sleep_until(t, interruptible=False)

    def _sleep_until(self, t: int | None, interruptible: bool = True) -> bool:
        """Block until physical time ``t`` (ns; None: forever). False when a worker revised
        its report first (only if ``interruptible``)."""
        cells = self.cells
        while True:
            left = None if t is None else t - time_ns()
            if left is not None and left <= 0:
                return True
            self.bell.clear()
            cells[COORD_SLEEP] = 1
            if interruptible and self._revised():
                cells[COORD_SLEEP] = 0
                return False
            ready = self.bell.wait(1.0 if left is None else min(left / 1e9, 1.0))
            cells[COORD_SLEEP] = 0
            if self.idle is not None:
                self.idle(ready)
            self._check_failed()
            if interruptible and self._revised():
                return False
