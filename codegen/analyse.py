"""Analysis of the elaborated program: the reaction precedence graph, causality loops, levels,
inferred deadlines and the total priority order (spec §3.5, §3.6).
"""

from __future__ import annotations

from collections import defaultdict

from .diagnostics import Reporter
from .instance import Channel, Elaborated, ReactionInst
from .units import INT64_MAX


def precedence_graph(prog: Elaborated) -> dict[int, set[int]]:
    """Edges reaction id -> downstream reaction ids (spec §3.5 (a) and (b)).

    (a) consecutive declared reactions of one instance; (b) a reaction writing a port to every
    reaction reading a channel reachable from it through zero-delay connections, except between
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
            if ref["kind"] == "port":
                readers[(ref["reactor"], ref["name"])].append(r)
    insts = prog.instances
    for r in prog.reactions:
        for ref in r.effects:
            if ref["kind"] != "port":
                continue
            for ch in insts[ref["reactor"]].channels(ref["name"]):
                for iid, port, _ in _reach(ch, downstream):
                    for q in readers.get((iid, port), ()):
                        if q is r or (
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


def analyse(prog: Elaborated, rep: Reporter) -> None:
    """Set ``level``, ``inferred_deadline`` and ``rank`` on every reaction.

    A causality loop is reported as an error naming every reaction of the cycle with its
    ``.lf`` file and line; levels are then not computed.
    """
    succ = precedence_graph(prog)
    order = _topological(prog.reactions, succ)
    if order is None:
        _report_cycles(prog, succ, rep)
        return
    for r in order:
        for s in succ.get(r.id, ()):
            q = prog.reactions[s]
            q.level = max(q.level, r.level + 1)
    for r in reversed(order):
        d = INT64_MAX if r.deadline is None else r.deadline
        for s in succ.get(r.id, ()):
            q = prog.reactions[s]
            d = min(d, INT64_MAX if q.inferred_deadline is None else q.inferred_deadline)
        r.inferred_deadline = None if d == INT64_MAX else d
    ranked = sorted(
        prog.reactions,
        key=lambda r: (
            INT64_MAX if r.inferred_deadline is None else r.inferred_deadline,
            r.level,
            r.owner.id,
            r.index,
        ),
    )
    for i, r in enumerate(ranked):
        r.rank = i


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
    import os

    return os.path.basename(path)
