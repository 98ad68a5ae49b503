"""One worker's share of a program, run tag by tag under a coordinator (W > 1).

The coordinator (:mod:`reactors.parallel.coordinator`) decides every tag; a worker (a process or a
thread) runs, at each agreed tag, the triggered reactions of the reactors placed on it, in rank
order, and exchanges port values with other workers through *crossings* (root channels whose
writer lives here and readers elsewhere, or the reverse):

- before running a reaction of rank ``r`` (or before leaving the tag), it receives every
  incoming batch of crossings (:class:`reactors.parallel.topology.Batch`) that some reaction here
  with rank <= ``r`` reads (waiting for its writer if needed; their presence may trigger more
  reactions here);
- as soon as every reaction here that can write an outgoing crossing has had its turn, the
  crossing is published for this tag (present with its value, or absent), then its batch's
  cell counts it, and the reader workers that sleep are woken; a reader takes the crossings
  of a batch in order, each as soon as it is counted.

Ranks respect precedence, so a writer's last rank is below every reader's first rank and the
scheme cannot deadlock; at each tag a worker's reactions see exactly the port values they would
see on one worker. At the end of a tag the worker reports its earliest pending event and stop
request, sends what its reactions printed and publishes ``DONE``. Then, by the protocol of the
run (:func:`reactors.parallel.plan.free_running`):

- *coordinated*: it waits for the coordinator's ``GO`` of the next tag (worker 0 runs the
  coordinator, which waits for every ``DONE``, prints, and decides the tag, possibly after
  waiting for physical time or physical events);
- *free-running*: the workers agree on the next tag among themselves, without a round
  through the coordinator: from :data:`reactors.parallel.agreement.TREE_FROM` workers on
  (on one host) up a combining tree (:mod:`reactors.parallel.agreement`), whose root, worker 0,
  applies the next-tag rule (:func:`reactors.core.engine.decide`) to the combined report and
  publishes the tag; with fewer, each waits for every worker's ``DONE`` and applies the rule to
  all the reports itself. Reports and stdout channels alternate between two sets by the
  parity of the tag, since a worker may finish tag ``s + 1`` before a slower one has read the
  reports of tag ``s``. Worker 0 prints each tag's text once every worker completed it.

  A worker other than 0 that reads no crossing but at the start and stop tags skips the tags
  where none of its reactions is triggered, and the others do not wait for it there
  (:mod:`reactors.parallel.skipped_tags`).
"""

from __future__ import annotations

import threading
from time import perf_counter_ns
from typing import TYPE_CHECKING, Final, Protocol

from ..core.clock import Clock
from ..core.engine import decide
from ..core.event_queue import heappop
from ..core.log import Log
from ..core.scheduler import Scheduler
from .agreement import Flat, Tree, use_tree
from .codec import settle
from .skipped_tags import Skips
from .sync import (
    ABORT,
    BATCH_SEQ,
    COORD_SLEEP,
    GO_M,
    GO_SEQ,
    GO_T,
    NONE_T,
    REPORT,
    SLEEP,
    START_T,
    STATE,
    STATUS,
    STOP_ASKED,
    STOP_M,
    STOP_T,
    W_FINISHED,
    W_READY,
    WAIT_AT,
    WAIT_CELL,
    Aborted,
    ring_if_sleeping,
    wait,
)
from .transport import ChannelReader
from .worker_connections import Link

if TYPE_CHECKING:
    from ..core.assembly import Assembly
    from ..records.trace import TagRecorder, Timeline

_END: Final = 1 << 62  # a rank larger than any
# the timing trace's names of a worker's waits for the others
SYNC_TAG: Final = "sync: next tag"
SYNC_CROSSINGS: Final = "sync: crossings"


class TagDecider(Protocol):
    """What worker 0 runs between its tags to decide the next one (the
    :class:`reactors.parallel.coordinator.Coordinator`)."""

    def start(self, worker: WorkerScheduler) -> None:
        """Wait until every worker is ready and publish the start tag."""

    def step(self) -> bool:
        """Complete the current tag and publish the next; False after the stop tag."""

    def complete(self, seq: int, final: bool) -> None:
        """Free-running: complete tag ``seq`` (print its output; end the run if ``final``)."""


class _Clock(Clock):
    """Physical time for deadlines, and the wake-up used by physical actions' threads (a
    worker never waits for physical time itself: the coordinator does)."""

    __slots__ = ("worker",)

    def __init__(self, worker: WorkerScheduler):
        super().__init__()
        self.worker = worker

    def wake(self) -> None:
        """Called by threads that posted to the inbox: ring unconditionally, since worker 0
        may be sleeping as the coordinator (physical time) rather than as a worker."""
        self.worker.bell.ring()


class WorkerScheduler(Scheduler):
    """Runs the reactions of ``program`` (built with ``owned``) at the tags the coordinator
    publishes. Exceptions of reactions propagate from :meth:`run` with ``failed`` set; an
    abort by the coordinator raises :class:`Aborted`. ``recorder``: what records each tag
    (:class:`reactors.records.trace.TagRecorder`: the digest, the recording) or None;
    ``coordinator``: the
    :class:`reactors.parallel.coordinator.Coordinator` that worker 0 runs between its tags."""

    def __init__(
        self,
        program: Assembly,
        link: Link,
        *,
        keepalive: bool = False,
        log: Log | None = None,
        recorder: TagRecorder | None = None,
        coordinator: TagDecider | None = None,
    ):
        super().__init__(program, _Clock(self), fast=True, keepalive=keepalive, log=log)
        self.link = link
        # reads and this node's own cells; cells other workers read are written through
        # ``link.ctl.cells`` (which, between nodes, also sends them)
        self.cells = link.ctl.local_cells
        self.me = link.me
        self.base = link.ctl.worker_base(link.me)
        self.bell = link.bells[link.me]
        self.coord_bell = link.bells[0]
        self.coordinator = coordinator
        self.recorder = recorder
        self.captured = link.captured
        self.seq = -1
        self._accounted = 0
        self._want = self._cell = 0  # what the current wait waits for
        ctl = link.ctl
        self.report_cells = (self.base + REPORT[0], self.base + REPORT[1])  # by parity
        self.skip = Skips(ctl, self.me, link.bells, link.skippers, self.engine)
        # how a free-running run agrees on the next tag (None: the coordinator decides)
        self.agreement: Tree | Flat | None = None
        if use_tree(ctl, ctl.workers, link.free):
            tree = Tree(ctl, self.me, link.bells, self.skip, link.spin_ns, link.idle, link.skippers)
            if tree.children:  # its subtree reports through it at every tag
                self.skip.may = False
            self.agreement = tree
        elif link.free:
            self.agreement = Flat(ctl, self.me, self.skip, link.spin_ns, link.idle)
        self._report = (NONE_T, 0, NONE_T, 0)  # this worker's report of the current tag
        # the timing trace's events (target property ``tracing``), its waits for the others
        # among them, or None
        self.timeline: Timeline | None = None
        self._writer = -1  # while waiting for a batch: its writer's first cell if it may skip

    def _signal(self) -> int:
        return self.cells[STOP_ASKED]  # written by the supervisor

    # ------------------------------------------------------------------ the run

    def run(self) -> None:
        """Report ready, then run tags until the stop tag (or an abort/failure)."""
        self._thread_id = threading.get_ident()
        cells, base = self.cells, self.base
        self.link.ctl.cells[base + STATUS] = W_READY
        ring_if_sleeping(cells, COORD_SLEEP, self.coord_bell)
        coord = self.coordinator
        engine = self.engine
        free = self.link.free
        checkpoint = self.checkpoint
        try:
            if coord is not None:
                coord.start(self)
            self._await_go(0)
            self._first_tag()
            if checkpoint is not None or engine.tape is not None:  # they act at every tag
                self.skip.may = False
            while True:
                self._run_tag()
                if self.transitions:
                    self.modes.apply(self)
                final = engine.time == engine.stop_time and engine.micro == engine.stop_micro
                if checkpoint is not None and not final:
                    checkpoint.tag_done(self)  # this worker's part, before it reports DONE
                self._end_tag(final)
                if free:
                    timeline = self.timeline
                    t0 = perf_counter_ns() if timeline is not None else 0
                    more = self._agree(final)
                    if timeline is not None:
                        timeline.span(SYNC_TAG, t0, perf_counter_ns())
                    if not more:
                        break
                    if self.skip.may and not self.rq and not engine.at_stop():
                        self._skip()
                    continue
                if coord is not None:
                    coord.step()
                    if checkpoint is not None:
                        checkpoint.combine(self.stop_signalled())
                if final:
                    break
                timeline = self.timeline
                t0 = perf_counter_ns() if timeline is not None else 0
                self._await_go(self.seq + 1)
                if timeline is not None:
                    timeline.span(SYNC_TAG, t0, perf_counter_ns())
                self._enter_tag()
            if self.exit is not None:
                raise self.exit
        finally:
            engine.finished = True

    def send_output(self) -> None:
        """Send what the reactions printed during the current tag to the coordinator. Nothing
        printed, nothing is sent: the channel of this tag's parity then still holds an earlier
        tag's number, which reads as no text
        (:func:`reactors.parallel.coordinator.write_output`)."""
        if self.captured.chunks:
            port, writers = self.link.output
            port._v, port._p = self.captured.take(), True
            writers[self.seq & 1].publish(self.seq)

    # ------------------------------------------------------------------ between tags

    def _go_ready(self) -> bool:
        cells = self.cells
        return (
            cells[GO_SEQ] >= self._want
            or cells[STATE] == ABORT
            or len(self.inbox) > self._accounted
        )

    def _chan_ready(self) -> bool:
        cells = self.cells
        return (
            cells[self._cell] >= self._want
            or cells[STATE] == ABORT
            or (self._writer >= 0 and self.skip.skipping(self._writer))
        )

    def _await_go(self, seq: int) -> None:
        cells = self.cells
        if cells[GO_SEQ] >= seq and not self.inbox:
            return
        link = self.link
        self._want = seq
        link.ctl.flush()  # what this worker queued for other nodes, before it waits
        while True:
            wait(self._go_ready, cells, self.base + SLEEP, self.bell, link.spin_ns, link.idle)
            if cells[STATE] == ABORT:
                raise Aborted()
            if cells[GO_SEQ] >= seq:
                return
            self._provisional()

    def _provisional(self) -> None:
        """While waiting for the next tag: report a lower bound of the tags of physical
        events (and stop requests) that other threads posted, so the coordinator can choose
        an earlier tag. Nothing is queued yet (see :meth:`_enter_tag`)."""
        items = list(self.inbox)
        self._accounted = len(items)
        engine = self.engine
        after = (engine.time, engine.micro + 1)  # the first tag still open to them
        top = self.queue.peek()
        nt, nm = (top[0], top[1]) if top is not None else (NONE_T, 0)
        rt, rm = engine.stop_time, engine.stop_micro
        for item in items:
            if item[0] is None:
                rt, rm = min((rt, rm), after)
                continue
            tag = item[0]._landing(item[1], item[2], after)
            if tag is not None:
                nt, nm = min((nt, nm), tag)
        ctl = self.link.ctl
        ctl.write_report(self.me, nt, nm, rt, rm)
        ctl.flush()
        self.coord_bell.ring()

    def _enter_tag(self) -> None:
        cells = self.cells
        engine = self.engine
        gt, gm = cells[GO_T], cells[GO_M]
        engine.stop_time, engine.stop_micro = cells[STOP_T], cells[STOP_M]
        self.seq += 1
        if self.inbox:
            self._place_posted(gt, gm)
        engine.advance(gt, gm, self.present)
        if gt == engine.stop_time and gm == engine.stop_micro:
            self._trigger_shutdown()

    def _place_posted(self, gt: int, gm: int) -> None:
        """Queue the physical events posted before tag ``(gt, gm)`` started, at that tag or
        later (the coordinator may have chosen it without them); stop requests stay in the
        inbox for the end of the tag, as on one worker."""
        keep = []
        inbox = self.inbox
        while inbox:
            item = inbox.popleft()
            if item[0] is None:
                keep.append(item)
                continue
            a, phys, delay, value = item
            a._land(phys, delay, (gt, gm), value)
        inbox.extend(keep)
        self._accounted = 0

    def _first_tag(self) -> None:
        cells = self.cells
        self.seq = 0
        start = cells[GO_T]
        if self.resume is not None:  # the snapshot's tag (it ran already): restore, run nothing
            self.engine.enter_start(cells[START_T], cells[STOP_T], cells[STOP_M])
            self.engine.time, self.engine.micro = start, cells[GO_M]
            self.resume.restore(self)
            return
        self.engine.enter_start(start, cells[STOP_T], cells[STOP_M])
        self._enter_start_tag(start)
        if self.engine.tape is not None:
            self.engine.tape.begin(self)

    def _end_tag(self, final: bool) -> None:
        cells, base = self.cells, self.base
        if self.recorder is not None:
            self.recorder.record(self)
        if final:
            shared = self.link.ctl.cells
            shared[base + STATUS] = W_FINISHED
        else:
            engine = self.engine
            if self.inbox:
                self._accounted = 0
            top = engine.earliest()
            nt, nm = top if top is not None else (NONE_T, 0)
            if self.link.free:
                if cells[STOP_ASKED]:  # the supervisor's stop on a signal: at the next tag
                    engine.lower_stop(engine.time, engine.micro + 1)
                r = self.report_cells[self.seq & 1]
                self._report = (nt, nm, engine.stop_time, engine.stop_micro)
                self.link.ctl.write_cells(r, self._report)
            else:
                self.link.ctl.write_report(self.me, nt, nm, engine.stop_time, engine.stop_micro)
        self.send_output()
        if self.link.arrived:  # before DONE: no writer overwrites them before every DONE
            settle(self.link.arrived)
        self.link.ctl.set_done(self.me, self.seq, self.link.free and not final)
        if self.agreement is not None:
            self.agreement.done()
        else:
            ring_if_sleeping(cells, COORD_SLEEP, self.coord_bell)

    # ------------------------------------------------------------------ free-running

    def _skip(self) -> None:
        """Skip the tags before this worker's earliest event
        (:mod:`reactors.parallel.skipped_tags`): report it, sleep until worker 0 calls this worker
        back at that event or at the stop tag, whichever the run reaches first, and enter that
        tag."""
        link, engine = self.link, self.engine
        top = engine.earliest()
        nt, nm = top if top is not None else (NONE_T, 0)
        # the report of this tag (nobody reads it before every worker's DONE of this tag
        # or this skip); that of the last tag run stays valid: nothing changed since
        r = self.report_cells[self.seq & 1]
        link.ctl.write_cells(r, (nt, nm, engine.stop_time, engine.stop_micro))
        self.seq, gt, gm, engine.stop_time, engine.stop_micro = self.skip.sleep(
            self.base, self.seq, (nt, nm), self.bell, link.spin_ns, link.idle
        )
        engine.advance(gt, gm, self.present)
        if engine.at_stop():
            self._trigger_shutdown()

    def _agree(self, final: bool) -> bool:
        """Wait until every worker completed the current tag (:mod:`reactors.parallel.agreement`:
        up the tree, or every worker's ``DONE``), then enter the next tag, decided here or
        by the tree's root; False after the stop tag."""
        agreement = self.agreement
        assert agreement is not None  # a free-running run
        seq = self.seq
        combined = agreement.combine(seq, self._report, self.bell)
        coord = self.coordinator
        if coord is not None:  # worker 0: every worker completed tag ``seq``
            coord.complete(seq, final)
            if self.checkpoint is not None:
                self.checkpoint.combine(self.stop_signalled())  # every worker's part
        if agreement.decides:
            decision = (NONE_T, 0, NONE_T, 0) if final else self._decide(combined)
            agreement.announce(seq, decision)
        else:
            decision = agreement.decision(seq, self.bell)
        if final:
            return False
        self._enter_agreed(*decision)
        return True

    def _decide(self, report: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """The tag after the current one and the stop tag, from the combined ``report`` of
        every worker (the rule of one worker: the earliest pending event, never past the stop
        tag, which is the earliest of the workers' stop tags)."""
        engine = self.engine
        nt, nm, st, sm = report
        top = None if nt == NONE_T else (nt, nm)
        tag, stop, _ = decide(top, (engine.time, engine.micro), (st, sm), False, True, 0)
        assert tag is not None  # never idle without keepalive
        return tag[0], tag[1], stop[0], stop[1]

    def _enter_agreed(self, gt: int, gm: int, st: int, sm: int) -> None:
        """Enter the agreed tag ``(gt, gm)`` with the stop tag ``(st, sm)``."""
        engine = self.engine
        engine.stop_time, engine.stop_micro = st, sm
        stop = (st, sm)
        self.seq += 1
        if self.me == 0:
            self.link.ctl.note_tag(gt, gm, self.seq)
        engine.advance(gt, gm, self.present)
        if gt == stop[0] and gm == stop[1]:
            self._trigger_shutdown()
        if self.me == 0 and self.skip.others:
            self.skip.call(self.seq)

    # ------------------------------------------------------------------ one tag

    def _run_tag(self) -> None:
        """Run the tag's reactions in rank order, receiving each incoming crossing before
        the first reaction here that reads it and publishing each outgoing one after the
        last that writes it."""
        # The rank loop of reactors.core.engine (a rank queued twice runs once), inlined as in
        # the single-worker loop: a call per reaction costs several percent of a round trip.
        rq, table, cells = self.rq, self.table, self.cells
        link = self.link
        captured = self.captured
        seq = self.seq
        engine = self.engine
        if seq == 0 or (engine.time == engine.stop_time and engine.micro == engine.stop_micro):
            inc, out = link.incoming, link.outgoing
        else:  # no startup or shutdown reaction runs: what only they write is absent
            inc, out = link.steady_in, link.steady_out
        ni, no = len(inc), len(out)
        i = j = 0
        pop = heappop
        last = -1
        try:
            while True:
                r = rq[0] if rq else _END
                k = inc[i][0] if i < ni else _END
                if j < no and out[j][0] < min(r, k):
                    # after the tag's last reaction the worker's DONE sends what it published
                    j = link.publish(out, j, min(r, k), seq, r != _END or k != _END)
                if k <= r and k != _END:
                    self._receive(inc[i], seq)
                    i += 1
                    continue
                if not rq:
                    break
                rank = pop(rq)
                if rank != last:
                    last = rank
                    if cells[STATE] == ABORT:
                        raise Aborted()
                    fn, args = table[rank]
                    captured.rank = rank
                    try:
                        fn(*args)
                    except SystemExit as e:
                        if not engine.at_stop():
                            raise
                        self._exit_at_stop(e, rank)
        except Aborted:
            raise
        except BaseException:
            if last >= 0:
                self.failed = self.program.reactions[last]
            raise

    def _receive(
        self, batch: tuple[int, list[tuple[int, ChannelReader]], int, int], seq: int
    ) -> None:
        """Take the crossings of an incoming batch that this worker reads, each as soon as
        its writer published it (absent, without waiting, while the writer skips the tag)."""
        cells = self.cells
        _, readers, cell, writer = batch
        base = seq * BATCH_SEQ
        for pos, reader in readers:
            if cells[cell] < base + pos:
                wb = self.skip.first[writer]
                if wb >= 0 and self.skip.skipping(wb):
                    continue  # not published at this tag: absent (cleared as the tag began)
                self._writer = wb
                link, me = self.link, self.base
                self._cell, self._want = cell, base + pos
                # polling, take each crossing as it comes; asleep, wake for the batch's last
                cells[me + WAIT_AT] = base + readers[-1][0]
                cells[me + WAIT_CELL] = cell
                link.ctl.flush()
                timeline = self.timeline
                t0 = perf_counter_ns() if timeline is not None else 0
                wait(self._chan_ready, cells, me + SLEEP, self.bell, link.spin_ns, link.idle)
                if timeline is not None:
                    timeline.span(SYNC_CROSSINGS, t0, perf_counter_ns())
                cells[me + WAIT_CELL] = 0
                if cells[STATE] == ABORT:
                    raise Aborted()
                if cells[cell] < base + pos:  # the writer skips the tag
                    continue
            reader.receive(seq)
