"""The tags a worker skips, in a free-running run on several workers
(:mod:`reactors.parallel.worker_scheduler`).

A worker other than 0 that reads no crossing but at the start and stop tags (a source of the
others, or a worker with nothing placed on it) has nothing to do at a tag where none of its
reactions is triggered. After agreeing on such a tag it *skips*: it writes its report for
that tag, then its earliest event in its ``SKIP_T``/``SKIP_M`` cells and the tag's number in
``SKIP_FROM`` (the publishing cell), wakes the workers that sleep, and sleeps itself. While
its ``DONE`` stays below ``SKIP_FROM``, every other worker takes it as skipping each tag
before that event but the stop tag (:meth:`Skips.skipping`): its crossings are absent there
and its ``DONE`` is not awaited; its report stays valid, since nothing changes on it. Worker 0,
on entering the first tag that it does not skip (its earliest event, or the stop tag if a
stop comes first), writes that tag, the stop tag and the tag's number in the worker's
``CALL_*`` cells (``CALL_SEQ`` last) and rings it (:meth:`Skips.call`); the worker enters that
tag and runs on as usual. Each cell keeps one writer, and every worker reads the same answer
at every tag, so the run's results do not change (the determinism tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..core.engine import TagEngine
from .sync import (
    ABORT,
    CALL_M,
    CALL_SEQ,
    CALL_SM,
    CALL_ST,
    CALL_T,
    DONE,
    FAILS,
    SKIP_FROM,
    SKIP_M,
    SKIP_T,
    SLEEP,
    STATE,
    Aborted,
    Bell,
    Control,
    Idle,
    Waker,
    wait,
)


class Skips:
    """The skipping rules as worker ``me`` applies them: ``ctl`` the control block,
    ``bells[w]`` worker ``w``'s bell, ``skippers`` the workers (never 0) that may skip,
    ``engine`` this worker's tag engine (the current and stop tags the rules compare with).

    ``may``: whether this worker may skip (its scheduler clears it when a checkpointer or a
    recording acts at every tag); ``others``: the first cell and bell of each other worker
    that may; ``done_of``: each worker's ``DONE`` cell with its first cell if it may skip,
    else -1; ``peers``: each other worker's ``SLEEP`` cell, bell and the same first cell or -1;
    ``skipped``: how many tags this worker skipped."""

    def __init__(
        self,
        ctl: Control,
        me: int,
        bells: Sequence[Waker],
        skippers: Iterable[int],
        engine: TagEngine,
    ):
        self.ctl = ctl
        self.cells = ctl.local_cells
        self.engine = engine
        may = set(skippers)
        self.may = me in may
        first = [ctl.worker_base(w) if w in may and w != me else -1 for w in range(ctl.workers)]
        self.first = first
        self.others = [(first[w], bells[w]) for w in range(ctl.workers) if first[w] >= 0]
        self.done_of = [(ctl.worker_base(w) + DONE, first[w]) for w in range(ctl.workers)]
        self.peers = [
            (ctl.worker_base(w) + SLEEP, bells[w], first[w]) for w in range(ctl.workers) if w != me
        ]
        self.skipped = 0
        self._called_at = 0  # the cell and the tag number a sleeping skip waits for
        self._from = 0

    def skipping(self, b: int) -> bool:
        """Whether the worker whose cells start at ``b`` skips the current tag: it announced
        a skip that it has not ended (its ``DONE`` is below its ``SKIP_FROM``), the tag is
        before its earliest event and is not the stop tag."""
        cells, engine = self.cells, self.engine
        start = cells[b + SKIP_FROM]
        t, m = cells[b + SKIP_T], cells[b + SKIP_M]
        if cells[b + DONE] >= start:  # read last: a later skip's cells come after a DONE
            return False
        if engine.time > t or (engine.time == t and engine.micro >= m):
            return False
        return not engine.at_stop()

    def all_done(self, seq: int) -> bool:
        """As :func:`reactors.parallel.sync.all_done`: whether every worker published ``DONE`` of
        tag number ``seq`` or skips the tag, or one failed, or the run was aborted."""
        cells = self.cells
        for cell, b in self.done_of:
            if cells[cell] < seq and (b < 0 or not self.skipping(b)):
                return cells[FAILS] != 0 or cells[STATE] == ABORT
        return True

    def asleep_in_skip(self, b: int) -> bool:
        """Whether the worker whose cells start at ``b`` is in a skip and not called back."""
        cells = self.cells
        start = cells[b + SKIP_FROM]
        return cells[b + DONE] < start and cells[b + CALL_SEQ] < start

    def wake_peers(self) -> None:
        """Ring the other workers that sleep, but those asleep in a skip (worker 0 calls
        them back): they wait for nothing that this worker does."""
        cells = self.cells
        for sleep_cell, bell, b in self.peers:
            if cells[sleep_cell] and (b < 0 or not self.asleep_in_skip(b)):
                bell.ring()

    def sleep(
        self,
        base: int,
        seq: int,
        until: tuple[int, int],
        bell: Bell,
        spin_ns: int,
        idle: Idle | None,
    ) -> tuple[int, int, int, int, int]:
        """This worker (cells from ``base``, woken by ``bell``; ``spin_ns`` and ``idle`` as
        for :func:`reactors.parallel.sync.wait`) skips from tag number ``seq`` on, until its
        earliest event ``until`` (time ns, microstep; ``FOREVER`` for none): announce it and sleep
        until worker 0 calls it back. The caller wrote its report for ``seq`` already.
        Returns the tag to enter: ``(tag number, time ns, microstep, stop time ns, stop
        microstep)``.

        Raises:
            Aborted: the run was aborted or a worker failed meanwhile.
        """
        cells, shared = self.cells, self.ctl.cells
        shared[base + SKIP_T] = until[0]
        shared[base + SKIP_M] = until[1]
        shared[base + SKIP_FROM] = seq
        self.ctl.flush()
        self.wake_peers()  # those waiting for this worker's DONE or crossings
        self._called_at, self._from = base + CALL_SEQ, seq
        if not self._called():
            wait(self._called, cells, base + SLEEP, bell, spin_ns, idle)
        if cells[FAILS] or cells[STATE] == ABORT:
            raise Aborted()
        call = cells[base + CALL_SEQ]
        self.skipped += call - seq
        return (
            call,
            cells[base + CALL_T],
            cells[base + CALL_M],
            cells[base + CALL_ST],
            cells[base + CALL_SM],
        )

    def _called(self) -> bool:
        cells = self.cells
        return cells[self._called_at] >= self._from or cells[FAILS] != 0 or cells[STATE] == ABORT

    def call(self, seq: int) -> None:
        """Worker 0, having entered tag number ``seq``: call back every worker whose skip
        ends at this tag."""
        cells, engine = self.cells, self.engine
        shared = self.ctl.cells
        for b, bell in self.others:
            start = cells[b + SKIP_FROM]
            if cells[b + CALL_SEQ] >= start or cells[b + DONE] >= start or self.skipping(b):
                continue
            shared[b + CALL_T] = engine.time
            shared[b + CALL_M] = engine.micro
            shared[b + CALL_ST] = engine.stop_time
            shared[b + CALL_SM] = engine.stop_micro
            shared[b + CALL_SEQ] = seq
            self.ctl.flush()
            if cells[b + SLEEP]:
                bell.ring()
