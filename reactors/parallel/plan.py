"""The plan of a parallel run: which worker runs which reactor, and which channels cross.

A :class:`Plan` is a pure function of the graph and the worker count, so the supervisor and
every worker compute (or receive) the same one. Its channels are numbered once for every
transport: the crossings first (:func:`reactors.parallel.topology.crossings`, in their order), then
two stdout channels per worker (:meth:`Plan.output_channel`, one for tags of each parity), which
carry what that worker's reactions printed during a tag to the coordinator. Two, so that a
worker may send the text of tag ``s + 1`` before the coordinator printed that of tag ``s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.assembly import Assembly
from ..model.program import Program
from .placement import place, resolve_workers
from .topology import Batch, Crossing, access, batches, crossings


@dataclass(frozen=True)
class Plan:
    """Who runs what: ``placement[reactor id]`` -> worker, ``owned[w]`` the reactor ids of
    worker ``w``, ``crossings`` the channels between workers and ``batches`` how they are
    published (:mod:`reactors.parallel.topology`)."""

    workers: int
    placement: tuple[int, ...]
    owned: tuple[frozenset[int], ...]
    crossings: tuple[Crossing, ...]
    batches: tuple[Batch, ...] = ()

    @property
    def channels(self) -> int:
        """Channels of the run: the crossings, then two stdout channels per worker."""
        return len(self.crossings) + 2 * self.workers

    def output_channel(self, w: int, parity: int) -> int:
        """The index of worker ``w``'s stdout channel for tags ``seq`` with ``seq % 2 ==
        parity``."""
        return len(self.crossings) + 2 * w + parity

    def names(self, graph: Program, w: int) -> str:
        """The reactors of worker ``w`` that have reactions, for messages."""
        ids = [i for i in sorted(self.owned[w]) if graph.reactors[i].reactions]
        names = [graph.reactors[i].name for i in ids]
        return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def make_plan(graph: Program, workers: int, placement: Sequence[int] | None = None) -> Plan:
    """The plan for ``workers`` workers (a pure function of the graph), with the placement
    of :func:`reactors.parallel.placement.place` or ``placement`` (the worker of each reactor id,
    e.g. refined by :func:`reactors.parallel.costs.refine`; it must keep every group on one
    worker)."""
    if placement is None or len(placement) != len(graph.reactors):
        placement = place(graph, workers)
    owned: list[set[int]] = [set() for _ in range(workers)]
    for rid, w in enumerate(placement):
        owned[w].add(rid)
    found = crossings(graph, list(placement))
    return Plan(
        workers,
        tuple(placement),
        tuple(frozenset(o) for o in owned),
        tuple(found),
        tuple(batches(found, access(graph).level)),
    )


def free_running(graph: Program, fast: bool, keepalive: bool) -> bool:
    """Whether the workers of a run may agree on every next tag among themselves, each from
    all workers' reports, instead of waiting for the coordinator's decision: when no rule
    needs physical time (``fast``, no physical action, no keepalive idling), the next tag is
    a pure function of the reports (:func:`reactors.core.engine.decide`), so every worker
    computes the same one and a tag costs one exchange instead of a round through the
    coordinator."""
    return fast and not keepalive and not graph.physical_actions


def workers_for(graph: Program, requested: int) -> int:
    """The resolved worker count (see :func:`reactors.parallel.placement.resolve_workers`); always 1
    for a program with the target property ``single-threaded: true``."""
    if graph.target.single_threaded:
        return 1
    return resolve_workers(graph, requested)


def written_ports(graph: Program, program: Assembly, owned: frozenset[int]) -> list:
    """The root ports (:class:`reactors.core.port.Port`) written by reactions of the reactors in
    ``owned``, in the graph's order of root channels."""
    acc = access(graph)
    roots = program.extra["roots"]
    return [
        roots[root]
        for root, ranks in acc.writes.items()
        if any(acc.reactor[r] in owned for r in ranks)
    ]
