"""The next-tag agreement of a free-running run (:mod:`reactors.parallel.worker_scheduler`;
DESIGN.md, "Many cores and one GPU"): a combining tree (:class:`Tree`), or, for fewer than
:data:`TREE_FROM` workers and across nodes, the flat exchange (:class:`Flat`); both answer
``combine``, ``decides``, ``announce``, ``decision`` and ``done``.

Each worker ends a tag with its *report*: its earliest pending event and its stop tag (the
cells ``REPORT[p]`` of the tag's parity ``p``, published by its ``DONE``). The next tag is the
earliest of all the events, never past the earliest of the stop tags
(:func:`reactors.core.engine.decide`); the minimum of tags is associative, so the reports can be
combined in any grouping. Here they are combined up a tree of fan-out :data:`ARITY` rooted at
worker 0:

- a worker with children waits until each child has published (an inner child its
  ``SUB_DONE``, a leaf its ``DONE``, or a leaf that skips the tag:
  :mod:`reactors.parallel.skipped_tags`), takes the minimum of their reports and its own, and,
  unless it is the root, publishes it (``SUBREP[p]``, then ``SUB_DONE``) and rings its parent
  if that sleeps;
- the root (worker 0) then knows that every worker completed the tag: it completes the tag
  (prints its output, combines a snapshot), decides the next tag and publishes it in the
  header (``AGREE[p]``, then ``AGREE_SEQ``);
- every other worker waits for ``AGREE_SEQ``, reads the decision and rings its children that
  sleep.

So at every tag a worker touches the cells of at most :data:`ARITY` children, its own and the
root's decision, whatever the worker count W (:meth:`Tree.cells`), against every worker's
``DONE`` and report with the flat exchange; the price is ``log_ARITY W`` hops instead of one.
The workers that may skip tags come last in the tree's order, so they are leaves wherever
the tree has room; one that has children does not skip, so a skip never holds up a subtree. Parities keep a
fast worker's next publication from overwriting what a slow one still has to read: a cell of
parity ``p`` is written again two tags later, which needs every worker past the tag between.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final

from .skipped_tags import Skips
from .sync import (
    ABORT,
    AGREE,
    AGREE_SEQ,
    DONE,
    FAILS,
    REPORT,
    SLEEP,
    STATE,
    SUB_DONE,
    SUBREP,
    Aborted,
    Bell,
    Control,
    Idle,
    Waker,
    all_done,
    wait,
)

ARITY: Final = 4  # children per worker: depth log4(W), so 2 hops at 16 workers, 3 at 64
TREE_FROM: Final = 3  # fewer workers agree by the flat exchange: with 2 a tree only adds a hop

Report = tuple[int, int, int, int]  # (next event ns, its microstep, stop tag ns, its microstep)


def layout(workers: int, skippers: Iterable[int]) -> list[list[int]]:
    """The children of each worker, by worker: breadth-first, :data:`ARITY` children each,
    over worker 0 (the root), the workers that never skip, then those that may
    (``skippers``), so that these are leaves wherever the tree has room. A worker with children
    does not skip (:class:`Tree`): its subtree's reports go through it at every tag."""
    may = set(skippers)
    order = [0] + [w for w in range(1, workers) if w not in may] + sorted(may - {0})
    children: list[list[int]] = [[] for _ in range(workers)]
    for i in range(1, len(order)):
        children[order[(i - 1) // ARITY]].append(order[i])
    return children


class Tree:
    """Worker ``me``'s part in the agreement: ``ctl`` the control block, ``bells`` every
    worker's bell, ``skips`` its :class:`reactors.parallel.skipped_tags.Skips` (which children
    skip the current tag), ``spin_ns`` and ``idle`` as for :func:`reactors.parallel.sync.wait`,
    ``skippers`` the workers that may skip tags."""

    def __init__(
        self,
        ctl: Control,
        me: int,
        bells: Sequence[Waker],
        skips: Skips,
        spin_ns: int,
        idle: Idle | None,
        skippers: Iterable[int],
    ):
        self.ctl = ctl
        self.cells = ctl.local_cells
        self.me = me
        self.base = ctl.worker_base(me)
        self.skips = skips
        self.spin_ns, self.idle = spin_ns, idle
        children = layout(ctl.workers, skippers)
        mine = children[me]
        self.parent = next((p for p, c in enumerate(children) if me in c), -1)
        # each child: its publishing cell, its report cells by parity, its first cell if it
        # may skip (else -1), its SLEEP cell and its bell
        self.children: list[tuple[int, tuple[int, int], int, int, Waker]] = []
        for c in mine:
            b = ctl.worker_base(c)
            if children[c]:
                kids: tuple[int, int, int] = (b + SUB_DONE, b + SUBREP[0], b + SUBREP[1])
            else:
                kids = (b + DONE, b + REPORT[0], b + REPORT[1])
            first = skips.first[c]
            self.children.append((kids[0], (kids[1], kids[2]), first, b + SLEEP, bells[c]))
        if self.parent >= 0:
            pb = ctl.worker_base(self.parent)
            self.parent_sleep: int = pb + SLEEP
            self.parent_bell: Waker | None = bells[self.parent]
        else:
            self.parent_sleep, self.parent_bell = -1, None
        self._seq = 0  # the tag number the current wait is for

    @property
    def decides(self) -> bool:
        """Whether this worker decides the next tag: the root."""
        return self.parent < 0

    def done(self) -> None:
        """After this worker's ``DONE``: nothing (:meth:`combine` rings the parent)."""

    def cells_touched(self) -> list[int]:
        """The control cells this worker reads or writes at a tag to agree on the next one,
        beyond its own report and ``DONE`` (what the tests count against W)."""
        out = [AGREE_SEQ, *range(AGREE[0], AGREE[0] + 4), *range(AGREE[1], AGREE[1] + 4)]
        for done, reps, _, sleep, _ in self.children:
            out += [done, sleep, *range(reps[0], reps[0] + 4), *range(reps[1], reps[1] + 4)]
        if self.children and self.parent >= 0:
            out += [self.base + SUB_DONE, *range(self.base + SUBREP[0], self.base + SUBREP[0] + 4)]
            out += [*range(self.base + SUBREP[1], self.base + SUBREP[1] + 4), self.parent_sleep]
        elif self.parent >= 0:
            out.append(self.parent_sleep)
        return out

    # ------------------------------------------------------------------ up the tree

    def _children_done(self) -> bool:
        cells, seq = self.cells, self._seq
        skips = self.skips
        for done, _, first, _, _ in self.children:
            if cells[done] < seq and (first < 0 or not skips.skipping(first)):
                return cells[FAILS] != 0 or cells[STATE] == ABORT
        return True

    def combine(self, seq: int, own: Report, bell: Bell) -> Report:
        """Wait until every child completed tag number ``seq`` (or skips it), and return the
        minimum of their reports and ``own``; a worker with a parent publishes it.

        Raises:
            Aborted: the run was aborted or a worker failed meanwhile.
        """
        cells = self.cells
        nt, nm, st, sm = own
        if self.children:
            self._seq = seq
            self._await(self._children_done, bell)
            p = seq & 1
            for _, reps, _, _, _ in self.children:
                r = reps[p]
                et, em, rt, rm = cells[r], cells[r + 1], cells[r + 2], cells[r + 3]
                if et < nt or (et == nt and em < nm):
                    nt, nm = et, em
                if rt < st or (rt == st and rm < sm):
                    st, sm = rt, rm
            if self.parent >= 0:
                ctl = self.ctl
                ctl.write_cells(self.base + SUBREP[p], (nt, nm, st, sm))
                ctl.cells[self.base + SUB_DONE] = seq
        if self.parent_bell is not None and cells[self.parent_sleep]:
            self.parent_bell.ring()
        return nt, nm, st, sm

    # ------------------------------------------------------------------ down the tree

    def announce(self, seq: int, decision: Report) -> None:
        """The root: publish the tag after tag number ``seq`` (time ns, microstep, and the
        stop tag) and ring its children that sleep; at the run's last tag the decision is
        only that every worker completed it."""
        ctl = self.ctl
        ctl.write_cells(AGREE[seq & 1], decision)
        ctl.cells[AGREE_SEQ] = seq
        self._ring_children()

    def _decided(self) -> bool:
        cells = self.cells
        return cells[AGREE_SEQ] >= self._seq or cells[FAILS] != 0 or cells[STATE] == ABORT

    def decision(self, seq: int, bell: Bell) -> Report:
        """Any worker but the root: wait for the root's decision after tag number ``seq``,
        ring its own children that sleep, and return it.

        Raises:
            Aborted: the run was aborted or a worker failed meanwhile.
        """
        cells = self.cells
        self._seq = seq
        self._await(self._decided, bell)
        self._ring_children()
        a = AGREE[seq & 1]
        return cells[a], cells[a + 1], cells[a + 2], cells[a + 3]

    def _await(self, cond: Callable[[], bool], bell: Bell) -> None:
        _await(self.ctl, self.base, cond, bell, self.spin_ns, self.idle)

    def _ring_children(self) -> None:
        """Ring the children that sleep, but those asleep in a skip (worker 0 calls them
        back)."""
        cells, skips = self.cells, self.skips
        for _, _, first, sleep, bell in self.children:
            if cells[sleep] and (first < 0 or not skips.asleep_in_skip(first)):
                bell.ring()


def _await(
    ctl: Control, base: int, cond: Callable[[], bool], bell: Bell, spin_ns: int, idle: Idle | None
) -> None:
    """Return once ``cond()`` holds: the worker whose cells start at ``base`` waits
    (:func:`reactors.parallel.sync.wait`, sleeping on ``bell``), after sending what it queued
    for other nodes.

    Raises:
        Aborted: the run was aborted or a worker failed meanwhile.
    """
    cells = ctl.local_cells
    if not cond():
        ctl.flush()
        wait(cond, cells, base + SLEEP, bell, spin_ns, idle)
    if cells[FAILS] or cells[STATE] == ABORT:
        raise Aborted()


class Flat:
    """The flat exchange, worker ``me``'s part (arguments as for :class:`Tree`): every worker
    waits for every other's ``DONE`` (or its skip) and takes the minimum of every report
    itself; for fewer than :data:`TREE_FROM` workers, and across nodes. Every worker decides
    (``decides``), so :meth:`announce` and :meth:`decision` have nothing to do."""

    decides: Final = True

    def __init__(self, ctl: Control, me: int, skips: Skips, spin_ns: int, idle: Idle | None):
        self.ctl = ctl
        self.cells = ctl.local_cells
        self.base = ctl.worker_base(me)
        self.skips = skips
        self.spin_ns, self.idle = spin_ns, idle
        self.done_cells = [ctl.worker_base(w) + DONE for w in range(ctl.workers)]
        self.report_cells = [
            [ctl.worker_base(w) + REPORT[p] for w in range(ctl.workers)] for p in (0, 1)
        ]
        self._seq = 0  # the tag number the current wait is for

    def _all_done(self) -> bool:
        if self.skips.others:
            return self.skips.all_done(self._seq)
        return all_done(self.cells, self.done_cells, self._seq)

    def done(self) -> None:
        """After this worker's ``DONE``: ring the others that sleep (they wait for it)."""
        self.skips.wake_peers()

    def combine(self, seq: int, own: Report, bell: Bell) -> Report:
        """Wait until every worker completed tag number ``seq`` (or skips it) and return the
        minimum of every report and ``own``.

        Raises:
            Aborted: the run was aborted or a worker failed meanwhile.
        """
        self._seq = seq
        _await(self.ctl, self.base, self._all_done, bell, self.spin_ns, self.idle)
        cells = self.cells
        nt, nm, st, sm = own
        for r in self.report_cells[seq & 1]:
            et, em, rt, rm = cells[r], cells[r + 1], cells[r + 2], cells[r + 3]
            if et < nt or (et == nt and em < nm):
                nt, nm = et, em
            if rt < st or (rt == st and rm < sm):
                st, sm = rt, rm
        return nt, nm, st, sm

    def announce(self, seq: int, decision: Report) -> None:
        """Nothing: every worker decided alike."""

    def decision(self, seq: int, bell: Bell) -> Report:
        """Never asked: every worker decides (``decides``)."""
        raise AssertionError("the flat exchange has no decision to wait for")


def use_tree(ctl: Control, workers: int, free: bool) -> bool:
    """Whether a run agrees through the :class:`Tree`: a free-running one of at least
    :data:`TREE_FROM` workers on one host (``ctl.one_host``; between nodes every written cell is
    sent to every node anyway, so the flat exchange needs no more messages and fewer hops)."""
    return free and workers >= TREE_FROM and ctl.one_host
