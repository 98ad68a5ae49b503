"""One worker's share of a program, run tag by tag (W > 1).

A worker (a process or a thread) runs, at each agreed tag, the triggered reactions of the
reactors placed on it, in rank order, and exchanges port values with other workers through
*crossings* (root channels whose writer lives here and readers elsewhere, or the reverse):

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
see on one worker. How the worker then reaches the next tag (the coordinator's ``GO``, or the
workers' own agreement) is :mod:`reactors.parallel.tag_steps`.
"""

from __future__ import annotations

import threading
from time import perf_counter_ns
from typing import TYPE_CHECKING, Final

from ..core.event_queue import heappop
from .codec import settle
from .sync import (
    ABORT,
    BATCH_SEQ,
    COORD_SLEEP,
    GO_M,
    GO_T,
    NONE_T,
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
from .tag_steps import TagSteps
from .transport import ChannelReader

if TYPE_CHECKING:
    pass

_END: Final = 1 << 62  # a rank larger than any
# the timing trace's names of a worker's waits for the others
SYNC_TAG: Final = "sync: next tag"
SYNC_CROSSINGS: Final = "sync: crossings"


class WorkerScheduler(TagSteps):
    """Runs the reactions of ``program`` (built with ``owned``) at the tags the coordinator
    publishes. Exceptions of reactions propagate from :meth:`run` with ``failed`` set; an
    abort by the coordinator raises :class:`Aborted`. ``recorder``: what records each tag
    (:class:`reactors.records.trace.TagRecorder`: the digest, the recording) or None;
    ``coordinator``: the
    :class:`reactors.parallel.coordinator.Coordinator` that worker 0 runs between its tags."""

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

    def _chan_ready(self) -> bool:
        cells = self.cells
        return (
            cells[self._cell] >= self._want
            or cells[STATE] == ABORT
            or (self._writer >= 0 and self.skip.skipping(self._writer))
        )

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
