"""Placement of reactor instances on workers: a pure function of the program model and W.

The compiler's pipeline fills in the placement for the target's ``workers`` (:func:`placed`:
``worker`` of each reactor in graph.json, for the viewer); the runtime recomputes it for the W
it actually runs with, so ``-w N`` needs no recompilation. Both call :func:`place`.

Rules, in order:

1. *Groups* of instances that must share a worker (union-find):
   - a modal instance and everything inside it (mode state and the activity of contained
     reactors are local to one worker);
   - all instances whose reactions write the same root channel (one writer per channel);
   - a synthetic ``after``/``~>`` delay instance and the writer of its input.
2. A group containing an instance with a ``pin`` (from ``@worker(n)`` on the instantiation)
   goes to worker ``n mod W`` (the pin of its lowest instance id wins).
3. Banks next: the groups led by the members of one bank are dealt round-robin, member ``i``
   on worker ``(s + i) mod W`` where ``s`` is the least-loaded worker when the bank is placed.
4. The other groups, heaviest first (weight = number of reactions; ties by lowest instance
   id), go to the least-loaded worker (ties: lowest worker index), so heavy groups end up
   apart; except that a group that exchanges values with members of banks (a hub that
   steps a bank of environments and gathers their results) goes to the worker that holds
   the most of the channels between them (ties: the least loaded), so that when a bank
   does not divide evenly the hub sits with the larger share and fewer values cross
   workers. Channels written only at the start or stop tag
   (:func:`reactors.parallel.topology.at_edges_only`) do not count.
5. Instances without reactions follow their parent (worker 0 for the main reactor).
"""

from __future__ import annotations

import dataclasses
import os

from ..model.program import Program, ReactorInstance
from ..model.references import ChannelKey
from .topology import Access, access


class _Union:
    def __init__(self, n: int):
        self.up = list(range(n))

    def find(self, i: int) -> int:
        while self.up[i] != i:
            self.up[i] = self.up[self.up[i]]
            i = self.up[i]
        return i

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.up[max(ra, rb)] = min(ra, rb)  # the lowest id stays the representative


def groups(program: Program, acc: Access | None = None) -> list[int]:
    """``group[reactor id]``: the lowest instance id of the group it must share a worker with
    (``acc``: the program's :func:`reactors.parallel.topology.access`, computed when not given)."""
    reactors = program.reactors
    u = _Union(len(reactors))
    for inst in reactors:  # parents come before children
        p = inst.parent
        while p is not None:
            if reactors[p].modes:
                u.join(p, inst.id)
            p = reactors[p].parent
    if acc is None:
        acc = access(program)
    for ranks in acc.writes.values():
        owners = sorted({acc.reactor[r] for r in ranks})
        for o in owners[1:]:
            u.join(owners[0], o)
    for inst in reactors:
        if inst.synthetic:
            for r in acc.writes.get(acc.root.get(ChannelKey(inst.id, "inp", 0)), ()):
                u.join(inst.id, acc.reactor[r])
    return [u.find(i) for i in range(len(reactors))]


def federates(program: Program) -> list[int]:
    """``federate[reactor id]`` of a federated program: each top-level instance (a bank
    member each) is a federate, numbered in instance order; what lfc adds for ``after``
    delays, and anything else that must share a worker with another reactor (:func:`groups`),
    goes with the federate of its group's first top-level instance.

    Raises ValueError for a program that is not federated (or has no top-level instance)."""
    reactors = program.reactors
    if not program.federated:
        raise ValueError(f"{program.name} is not a federated program")
    top: dict[int, int] = {}  # reactor id -> its top-level ancestor
    for inst in reactors:  # parents come before children
        if inst.parent is not None:
            top[inst.id] = top.get(inst.parent, inst.id)
    order = [i.id for i in reactors if i.parent == 0 and not i.synthetic]
    if not order:
        raise ValueError(f"{program.name} has no federate")
    number = {rid: k for k, rid in enumerate(order)}
    group = groups(program)
    first: dict[int, int] = {}  # group -> federate of its first member that has one
    for inst in reactors:
        fed = number.get(top.get(inst.id, -1))
        if fed is not None:
            first.setdefault(group[inst.id], fed)
    return [first.get(group[i.id], 0) for i in reactors]


def _weights(program: Program, group: list[int]) -> dict[int, int]:
    w: dict[int, int] = {}
    for inst in program.reactors:
        n = len(inst.reactions)
        if n:
            w[group[inst.id]] = w.get(group[inst.id], 0) + n
    return w


def _banks(reactors: tuple[ReactorInstance, ...], leads: list[int]) -> list[list[int]]:
    """The groups led by members of one bank (same parent and name, width > 1), per bank in
    order of first member, members in bank order."""
    banks: dict[tuple[int | None, str], list[int]] = {}
    for g in sorted(leads):
        info = reactors[g]
        if info.bank_width > 1:
            banks.setdefault((info.parent, info.short), []).append(g)
    return [sorted(m, key=lambda g: reactors[g].bank_index) for m in banks.values()]


def _bank_channels(
    acc: Access, group: list[int], reactors: tuple[ReactorInstance, ...]
) -> dict[int, dict[int, int]]:
    """``talk[g][m]``: how many root channels a group ``g`` led by no bank member shares with
    the group ``m`` of a bank member (one writes, the other reads), counting only channels
    exchanged at every tag (not those written only by ``startup``/``shutdown`` reactions)."""
    talk: dict[int, dict[int, int]] = {}
    for root, wranks in acc.writes.items():
        if all(acc.edge[r] for r in wranks):
            continue
        ends = {group[acc.reactor[r]] for r in wranks}
        ends |= {group[acc.reactor[r]] for r in acc.reads.get(root, ())}
        members = {g for g in ends if reactors[g].bank_width > 1}
        for g in ends - members:
            counts = talk.setdefault(g, {})
            for m in members:
                counts[m] = counts.get(m, 0) + 1
    return talk


def max_parallel(program: Program, acc: Access | None = None) -> int:
    """How many reactions can ever run at once: the most groups with a reaction at one level
    (``acc``: the program's :func:`reactors.parallel.topology.access`, computed when not given)."""
    if acc is None:
        acc = access(program)
    group = groups(program, acc)
    per_level: dict = {}
    for rank, rid in enumerate(acc.reactor):
        per_level.setdefault(acc.level[rank], set()).add(group[rid])
    return max((len(s) for s in per_level.values()), default=1)


def resolve_workers(program: Program, requested: int, cores: int | None = None) -> int:
    """The number of workers to run with: ``requested`` (0: one per core, capped by
    :func:`max_parallel`), never more than the number of groups that have reactions, and at
    least 1. ``cores`` defaults to ``os.cpu_count()``."""
    n = int(requested)
    if n < 0:
        raise ValueError(f"the number of workers must be >= 0, not {n}")
    if n == 1:
        return 1
    if n == 0:
        n = min(cores or os.cpu_count() or 1, max_parallel(program))
    return max(1, min(n, len(_weights(program, groups(program)))))


def target_workers(program: Program) -> int:
    """The number of workers the target asks for, resolved (:func:`resolve_workers`; 1 for a
    ``single-threaded`` program)."""
    t = program.target
    return 1 if t.single_threaded else resolve_workers(program, t.workers)


def placed(program: Program, workers: int | None = None) -> Program:
    """``program`` with every reactor's ``worker`` set by :func:`place` for ``workers``
    (default: :func:`target_workers`)."""
    at = place(program, target_workers(program) if workers is None else workers)
    return dataclasses.replace(
        program,
        reactors=tuple(dataclasses.replace(r, worker=w) for r, w in zip(program.reactors, at)),
    )


def place(program: Program, workers: int, acc: Access | None = None) -> list[int]:
    """``worker[reactor id]`` in ``range(workers)`` following the module's rules (``acc``:
    the program's :func:`reactors.parallel.topology.access`, computed when not given).

    Raises ValueError when ``workers`` < 1.
    """
    if workers < 1:
        raise ValueError(f"placement needs at least one worker, not {workers}")
    reactors = program.reactors
    if acc is None:
        acc = access(program)
    group = groups(program, acc)
    weight = _weights(program, group)
    pins: dict[int, int] = {}
    for inst in reactors:
        if inst.pin is not None and group[inst.id] not in pins:
            pins[group[inst.id]] = inst.pin % workers
    load = [0] * workers
    at: dict[int, int] = {}
    for g, w in sorted(pins.items()):
        at[g] = w
        load[w] += weight.get(g, 0)
    for members in _banks(reactors, [g for g in weight if g not in at]):
        start = min(range(workers), key=lambda k: (load[k], k))
        for g in members:
            w = (start + reactors[g].bank_index) % workers
            at[g] = w
            load[w] += weight[g]
    talk = _bank_channels(acc, group, reactors)
    for g in sorted((g for g in weight if g not in at), key=lambda g: (-weight[g], g)):
        held = [0] * workers  # channels to bank members placed on each worker
        for partner, n in talk.get(g, {}).items():
            if partner in at:
                held[at[partner]] += n
        most = max(held)
        w = min((k for k in range(workers) if held[k] == most), key=lambda k: (load[k], k))
        at[g] = w
        load[w] += weight[g]
    out: list[int] = []
    for inst in reactors:
        g = group[inst.id]
        if g not in at:
            at[g] = out[inst.parent] if inst.parent is not None else 0
        out.append(at[g])
    return out
