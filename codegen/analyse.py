"""Analysis of the elaborated program: the reaction precedence graph, causality loops, levels,
inferred deadlines and the total priority order (spec §3.5, §3.6).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

from .diagnostics import Reporter
from .instance import Channel, Elaborated, PortRef, ReactionInst
from .units import INT64_MAX


@dataclass(frozen=True)
class Analysis:
    """What analysis computes, each indexed by reaction id (``Elaborated.reactions`` order).

    ``levels[i]``: length of the longest precedence path ending at ``i`` (0 for a root);
    ``inferred_deadlines[i]``: the smallest deadline (ns) of ``i`` and everything after it,
    None when none has one; ``ranks[i]``: position of ``i`` in the total priority order
    (inferred deadline, then level, then instance id, then declaration index).
    """

    levels: tuple[int, ...]
    inferred_deadlines: tuple[int | None, ...]
    ranks: tuple[int, ...]


def precedence_graph(prog: Elaborated) -> dict[int, set[int]]:
    """Edges reaction id -> downstream reaction ids (spec §3.5 (a) and (b)).

    (a) consecutive declared reactions of one instance; (b) a reaction writing a port to every
    reaction reading a channel reachable from it through zero-delay connections (the reaction
    itself included: ``p.out -> p.inp`` closes a loop through one reaction), except between
    reactions of one instance in different modes. Synthetic forwarding reactions take part only
    through ports.
    """
    succ: dict[int, set[int]] = defaultdict(set)
    for inst in prog.instances:
        declared = sorted((r for r in inst.reactions if r.node is not None), key=lambda r: r.index)
        for a, b in zip(declared, declared[1:]):
            succ[a.id].add(b.id)
    downstream: dict[Channel, list[Channel]] = defaultdict(list)
    for src, dst in prog.edges:
        downstream[src].append(dst)
    readers: dict[tuple[int, str], list[ReactionInst]] = defaultdict(list)
    for r in prog.reactions:
        for ref in r.triggers + r.sources:
            if isinstance(ref, PortRef):
                readers[(ref.reactor, ref.name)].append(r)
    insts = prog.instances
    for r in prog.reactions:
        for ref in r.effects:
            if not isinstance(ref, PortRef):
                continue
            for ch in insts[ref.reactor].channels(ref.name):
                for iid, port, _ in _reach(ch, downstream):
                    for q in readers.get((iid, port), ()):
                        if (
                            q.owner is r.owner
                            and q.mode != r.mode
                            and q.mode is not None
                            and r.mode is not None
                        ):
                            continue
                        succ[r.id].add(q.id)
    return succ


def _reach(start: Channel, downstream: dict) -> list[Channel]:
    out, stack, seen = [], [start], {start}
    while stack:
        c = stack.pop()
        out.append(c)
        for d in downstream.get(c, ()):
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return out


def analyse(prog: Elaborated, rep: Reporter) -> Analysis | None:
    """Levels, inferred deadlines and ranks of every reaction of ``prog`` (left unchanged).

    A causality loop is reported through ``rep`` as an error naming every reaction of the
    cycle with its ``.lf`` file and line; the result is then None.
    """
    succ = precedence_graph(prog)
    order = _topological(prog.reactions, succ)
    if order is None:
        _report_cycles(prog, succ, rep)
        return None
    levels = _levels(order, succ)
    deadlines = _inferred_deadlines(order, succ)
    ranked = sorted(
        prog.reactions,
        key=lambda r: (
            INT64_MAX if deadlines[r.id] is None else deadlines[r.id],
            levels[r.id],
            r.owner.id,
            r.index,
        ),
    )
    ranks = [0] * len(ranked)
    for i, r in enumerate(ranked):
        ranks[r.id] = i
    return Analysis(
        levels=tuple(levels),
        inferred_deadlines=tuple(deadlines),
        ranks=tuple(ranks),
    )


def _levels(order: list[ReactionInst], succ: dict[int, set[int]]) -> list[int]:
    """Longest-path depth of each reaction, from a topological ``order``."""
    levels = [0] * len(order)
    for r in order:
        for s in succ.get(r.id, ()):
            levels[s] = max(levels[s], levels[r.id] + 1)
    return levels


def _inferred_deadlines(order: list[ReactionInst], succ: dict[int, set[int]]) -> list[int | None]:
    """The smallest deadline (ns) of each reaction and everything downstream; None: none."""
    inferred: list[int | None] = [None] * len(order)
    for r in reversed(order):
        d = INT64_MAX if r.deadline is None else r.deadline
        for s in succ.get(r.id, ()):
            q = inferred[s]
            d = min(d, INT64_MAX if q is None else q)
        inferred[r.id] = None if d == INT64_MAX else d
    return inferred


def _topological(reactions: list[ReactionInst], succ) -> list[ReactionInst] | None:
    indeg = [0] * len(reactions)
    for bs in succ.values():
        for b in bs:
            indeg[b] += 1
    ready = [r.id for r in reactions if indeg[r.id] == 0]
    out = []
    while ready:
        i = ready.pop()
        out.append(reactions[i])
        for b in succ.get(i, ()):
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    return out if len(out) == len(reactions) else None


def _report_cycles(prog: Elaborated, succ, rep: Reporter) -> None:
    for comp in _strongly_connected(len(prog.reactions), succ):
        if len(comp) < 2 and comp[0] not in succ.get(comp[0], ()):
            continue
        cycle = _one_cycle(comp, succ)
        rs = [prog.reactions[i] for i in cycle]
        steps = "\n".join(f"    {r.describe()} ({_short(r.file)}:{r.line})" for r in rs)
        first = rs[0]
        pos = first.node.pos if first.node is not None else None
        rep.error(
            f"causality loop: these reactions depend on each other at the same tag:\n{steps}\n"
            f"    -> back to {first.describe()}\n"
            "  break the loop with 'after' on a connection, a logical action, or by reordering "
            "the reactions",
            pos,
        )


def _one_cycle(comp: list[int], succ) -> list[int]:
    members = set(comp)
    start = min(comp)
    path, seen = [start], {start}
    while True:
        nxt = sorted(s for s in succ.get(path[-1], ()) if s in members)
        back = [s for s in nxt if s in seen]
        if back:
            return path[path.index(back[0]) :]
        path.append(nxt[0])
        seen.add(nxt[0])


def _strongly_connected(n: int, succ) -> list[list[int]]:
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in range(n):
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    comps.append(comp)
            elif w not in index:
                index[w] = low[w] = counter
                counter += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(succ.get(w, ())))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return comps


def _short(path: str) -> str:
    return os.path.basename(path)
