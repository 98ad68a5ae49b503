"""The communication structure of a program, computed from its model alone (pure data).

Used by :mod:`reactors.parallel.placement` (which reactors must share a worker) and by the parallel
backends (which port channels cross workers, and when in a tag each must be sent and
received). Every worker computes the same answers from the same graph, so nothing here is
ever sent between processes.

Vocabulary: a *channel key* is ``(reactor id, port name, channel index)``; its *root* is the
key reached by following zero-delay connections upstream (docs/PROGRAM.md); every channel of
a root shares the root's value and presence. A reaction is identified by its *rank*: its
position in the order ``(model rank, id)``, exactly as :func:`reactors.model.build.build` numbers
it. Channel keys are :class:`reactors.model.references.ChannelKey` (plain tuples compare equal to
them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..model.program import Program, ReactionSpec
from ..model.references import (
    Builtin,
    BuiltinTrigger,
    ChannelKey,
    ChannelsArg,
    PortKey,
    PortRef,
    Ref,
)


def order(program: Program) -> list[ReactionSpec]:
    """The program's reactions in rank order (index == dense rank used by the runtime)."""
    return sorted(program.reactions, key=lambda r: (r.rank, r.id))


def port_channels(program: Program) -> dict[PortKey, list[ChannelKey]]:
    """``(reactor id, port) -> [channel keys]`` for every port of every instance."""
    return {
        PortKey(inst.id, p.name): [ChannelKey(inst.id, p.name, c) for c in range(p.channels)]
        for inst in program.reactors
        for p in inst.ports
    }


def roots(program: Program) -> dict[ChannelKey, ChannelKey]:
    """``channel key -> root channel key`` (connection cycles are reported by the build)."""
    up = {c.dst: c.src for c in program.channels}
    out = {}
    for chans in port_channels(program).values():
        for key in chans:
            k, seen = key, set()
            while k in up and k not in seen:
                seen.add(k)
                k = up[k]
            out[key] = k
    return out


def _ports_of(
    items: Iterable[Ref], ports: dict, root: dict, channels_arg: Iterable[ChannelKey] = ()
) -> set[ChannelKey]:
    found = set()
    for item in items:
        if isinstance(item, PortRef):
            for key in ports.get((item.reactor, item.name), ()):
                found.add(root[key])
    for rid, port, ch in channels_arg:
        found.add(root[(rid, port, ch)])
    return found


@dataclass
class Access:
    """Which reactions (by rank) write and read each root channel.

    ``writes[root]`` / ``reads[root]``: sets of ranks; ``reactor[rank]``: the reactor id of a
    reaction; ``level[rank]``: its level; ``edge[rank]``: whether it can run only at the first
    tag or the stop tag (:func:`at_edges_only`); ``root``: the root of every channel key
    (:func:`roots`).
    """

    writes: dict = field(default_factory=dict)
    reads: dict = field(default_factory=dict)
    reactor: list = field(default_factory=list)
    level: list = field(default_factory=list)
    edge: list = field(default_factory=list)
    root: dict = field(default_factory=dict)


_EDGES = (Builtin.STARTUP, Builtin.SHUTDOWN)


def at_edges_only(program: Program, rx: ReactionSpec) -> bool:
    """Whether reaction ``rx`` runs only at the start tag or the stop tag: triggered by
    ``startup`` and/or ``shutdown`` alone, outside every mode (a mode's ``startup`` reactions
    run again when the mode is entered with a reset, spec §3.12)."""
    if not rx.triggers or rx.mode is not None:
        return False
    if not all(isinstance(t, BuiltinTrigger) and t.kind in _EDGES for t in rx.triggers):
        return False
    i: int | None = rx.reactor
    while i is not None:
        inst = program.reactors[i]
        if inst.mode is not None:
            return False
        i = inst.parent
    return True


def access(program: Program) -> Access:
    """Readers (triggers and sources) and writers (effects) of every root channel."""
    ports, root = port_channels(program), roots(program)
    acc = Access(root=root)
    for rank, rx in enumerate(order(program)):
        acc.reactor.append(rx.reactor)
        acc.level.append(rx.level)
        acc.edge.append(at_edges_only(program, rx))
        src_arg: tuple[ChannelKey, ...] = ()
        dst_arg: tuple[ChannelKey, ...] = ()
        for a in rx.args:
            if isinstance(a, ChannelsArg):
                if a.name == "dst":
                    dst_arg = a.channels
                else:
                    src_arg = a.channels
        for r in _ports_of(rx.effects, ports, root, dst_arg):
            acc.writes.setdefault(r, set()).add(rank)
        for r in _ports_of(rx.triggers + rx.sources, ports, root, src_arg):
            acc.reads.setdefault(r, set()).add(rank)
    return acc


@dataclass(frozen=True)
class Crossing:
    """A root channel written in one worker and read in others.

    ``index``: position in the program's sorted list of crossings (names its shared memory);
    ``root``: the root channel key; ``writer``: the writing worker; ``readers``: the other
    workers that read it (sorted); ``last_write``: the highest rank that writes it;
    ``first_read``: reader worker -> the lowest rank there that reads it; ``edge``: every
    reaction that writes it runs only at the start or stop tag, so it can be present only
    there and is not exchanged at the tags between (e.g. what a ``startup`` reaction reports).
    """

    index: int
    root: tuple
    writer: int
    readers: tuple
    last_write: int
    first_read: dict
    edge: bool = False


def crossings(program: Program, worker_of: list[int], acc: Access | None = None) -> list[Crossing]:
    """Every root channel whose writer and some reader live in different workers.

    ``worker_of[reactor id]`` is the placement; ``acc``: the program's :func:`access`
    (computed when not given). Sorted by root key (the same in every worker).
    """
    if acc is None:
        acc = access(program)
    out: list[Crossing] = []
    for root in sorted(acc.writes, key=lambda k: (k[0], k[1], k[2])):
        wranks = acc.writes[root]
        writers = {worker_of[acc.reactor[r]] for r in wranks}
        assert len(writers) == 1, f"root {root} has writers in workers {sorted(writers)}"
        w = writers.pop()
        first: dict[int, int] = {}  # reading worker -> its first reading rank
        for r in acc.reads.get(root, ()):
            v = worker_of[acc.reactor[r]]
            if v != w:
                first[v] = min(first.get(v, r), r)
        if first:
            edge = all(acc.edge[r] for r in wranks)
            out.append(Crossing(len(out), root, w, tuple(sorted(first)), max(wranks), first, edge))
    return out


#: The most crossings in one batch (the batch cell counts them below
#: ``reactors.parallel.sync.BATCH_SEQ``).
BATCH_MAX = 4096


@dataclass(frozen=True)
class Batch:
    """Crossings that one writer worker publishes through one control cell, per tag: in
    order, each as soon as its last writer ran (a reader takes each as it comes), so one
    cache line and at most one wake-up per reader worker carry them all.

    ``index``: position in the program's list of batches (its control cell); ``writer``: the
    writing worker; ``members``: the crossings' indices; ``last_write``: the highest rank that
    writes any of them (the batch is published once the writer's reactions up to it ran);
    ``first_read``: reader worker -> the lowest rank there that reads any of them; ``edge``:
    its crossings are exchanged only at the start and stop tags (:attr:`Crossing.edge`).
    """

    index: int
    writer: int
    members: tuple[int, ...]
    last_write: int
    first_read: dict
    edge: bool = False

    @property
    def readers(self) -> tuple[int, ...]:
        """The reading workers, sorted."""
        return tuple(sorted(self.first_read))


def batches(found: list[Crossing], level: list[int]) -> list[Batch]:
    """The crossings grouped into batches: per writer, in order of ``last_write``, a crossing
    joins the current batch when its last writer has the batch's level (``level[rank]``) and
    it is written before every read of the batch's crossings, and it is exchanged at the same
    tags (:attr:`Crossing.edge`). Publishing a batch after its
    highest writing rank thus delays no reader past its first reading rank: the ranks between
    a batch's writes belong to one level, whose reactions do not read each other's outputs.
    """
    out: list[Batch] = []
    by_writer: dict[int, list[Crossing]] = {}
    for c in found:
        by_writer.setdefault(c.writer, []).append(c)
    for w in sorted(by_writer):
        group: list[Crossing] = []
        for c in sorted(by_writer[w], key=lambda c: (c.last_write, c.index)):
            if group and (
                level[c.last_write] != level[group[0].last_write]
                or c.edge != group[0].edge
                or c.last_write >= min(min(g.first_read.values()) for g in group)
                or len(group) >= BATCH_MAX
            ):
                out.append(_batch(len(out), w, group))
                group = []
            group.append(c)
        if group:
            out.append(_batch(len(out), w, group))
    return out


def _batch(index: int, writer: int, group: list[Crossing]) -> Batch:
    first: dict[int, int] = {}
    for c in group:
        for v, r in c.first_read.items():
            first[v] = min(first.get(v, r), r)
    members = tuple(c.index for c in group)
    return Batch(index, writer, members, max(c.last_write for c in group), first, group[0].edge)
