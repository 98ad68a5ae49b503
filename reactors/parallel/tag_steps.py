"""How a worker of a parallel run (W > 1) goes from one tag to the next: the part of
:class:`reactors.parallel.worker_scheduler.WorkerScheduler` between its tags.

At the end of a tag a worker reports its earliest pending event and stop request, sends what
its reactions printed and publishes ``DONE``. Then, by the protocol of the run
(:func:`reactors.parallel.plan.free_running`):

- *coordinated*: it waits for the coordinator's ``GO`` of the next tag (worker 0 runs the
  coordinator, which waits for every ``DONE``, prints, and decides the tag, possibly after
  waiting for physical time or physical events); while it waits, it reports what other threads
  posted (physical events, stop requests), so that the coordinator can choose an earlier tag;
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

These methods are those of a base class of ``WorkerScheduler`` (mypyc's native classes inherit
singly), so that they cost no more than methods of the class itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..core.clock import Clock
from ..core.engine import decide
from ..core.log import Log
from ..core.scheduler import Scheduler
from .agreement import Flat, Tree, use_tree
from .skipped_tags import Skips
from .sync import (
    ABORT,
    GO_M,
    GO_SEQ,
    GO_T,
    NONE_T,
    REPORT,
    SLEEP,
    STATE,
    STOP_ASKED,
    STOP_M,
    STOP_T,
    Aborted,
    wait,
)
from .worker_connections import Link

if TYPE_CHECKING:
    from ..core.assembly import Assembly
    from ..records.trace import TagRecorder, Timeline


class TagDecider(Protocol):
    """What worker 0 runs between its tags to decide the next one (the
    :class:`reactors.parallel.coordinator.Coordinator`)."""

    def start(self, worker: TagSteps) -> None:
        """Wait until every worker is ready and publish the start tag."""

    def step(self) -> bool:
        """Complete the current tag and publish the next; False after the stop tag."""

    def complete(self, seq: int, final: bool) -> None:
        """Free-running: complete tag ``seq`` (print its output; end the run if ``final``)."""


class _Clock(Clock):
    """Physical time for deadlines, and the wake-up used by physical actions' threads (a
    worker never waits for physical time itself: the coordinator does)."""

    __slots__ = ("worker",)

    def __init__(self, worker: TagSteps):
        super().__init__()
        self.worker = worker

    def wake(self) -> None:
        """Called by threads that posted to the inbox: ring unconditionally, since worker 0
        may be sleeping as the coordinator (physical time) rather than as a worker."""
        self.worker.bell.ring()


class TagSteps(Scheduler):
    """The state of a worker of a parallel run and its steps between tags (the module's
    docstring): the base of :class:`reactors.parallel.worker_scheduler.WorkerScheduler`, which
    runs the tags; see it for the arguments."""

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

    # ------------------------------------------------------------------ between tags

    def _go_ready(self) -> bool:
        cells = self.cells
        return (
            cells[GO_SEQ] >= self._want
            or cells[STATE] == ABORT
            or len(self.inbox) > self._accounted
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
