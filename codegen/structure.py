"""Which parameters fix the program's structure or timing at compile time.

A parameter (of the main reactor or of a contained instance) that reaches (directly, or
through the parameters of the instances it is passed to) a bank or multiport width, a timer's
offset or period, an action's minimum delay or spacing, an ``after`` delay, a deadline or a
watchdog timeout is resolved by the compiler: the program's graph is built from its value.
Such a parameter can only change with ``lfc -D``; every other parameter is read when the
program starts and may be given on its command line (``--seed 3``, ``--learner.device cpu``).
"""

from __future__ import annotations

from collections.abc import Iterator

from reactors.model.forwarding import instance_path

from . import tree
from .instance import Elaborated, Instance

#: A parameter of the program: (instance path, parameter name); the path of the main
#: reactor is "", that of a contained instance its names below main without bank indexes
#: (:func:`reactors.model.forwarding.instance_path`).
Key = tuple[str, str]
#: Instance parameter name -> the program's parameters its value is computed from.
Sources = dict[str, frozenset[Key]]


def fixed_parameters(prog: Elaborated) -> dict[Key, str]:
    """Each parameter that fixes something at compile time -> what it fixes (e.g. ``"the
    width of bank Main.envs"``); the first use found is named."""
    fixed: dict[Key, str] = {}
    sources: dict[int, Sources] = {}
    for inst in prog.instances:  # parents come before their children
        sources[inst.id] = _sources(inst, sources)
        for expr, what in _structural_uses(inst):
            for ref in _param_refs(expr):
                for key in sorted(sources[inst.id].get(ref, frozenset())):
                    fixed.setdefault(key, what)
    return fixed


def _sources(inst: Instance, known: dict[int, Sources]) -> Sources:
    """The parameters each parameter of ``inst`` is computed from: itself, and those its
    instantiation's argument refers to."""
    if inst.parent is not None and inst.site is None:  # a lowered 'after' delay: its delay
        return {}  # is a use in the container
    path = instance_path(inst.name)
    out: Sources = {p.name: frozenset([(path, p.name)]) for p in inst.cls.parameters}
    if inst.parent is None or inst.site is None:
        return out
    parent = known[inst.parent.id]
    for a in inst.site.assignments:
        refs = frozenset(s for ref in _param_refs(a.value) for s in parent.get(ref, ()))
        out[a.name] = out.get(a.name, frozenset()) | refs
    return out


def _structural_uses(inst: Instance) -> Iterator[tuple[tree.Expr | tree.Width | None, str]]:
    """Each expression of ``inst``'s class the compiler resolves, with what it sets."""
    cls, name = inst.cls, inst.name
    for ch in cls.children:
        yield ch.node.width, f"the width of bank {name}.{ch.node.name}"
    for p in cls.ports:
        yield p.width, f"the width of port {name}.{p.name}"
    for t in cls.timers:
        yield t.node.offset, f"the offset of timer {name}.{t.node.name}"
        yield t.node.period, f"the period of timer {name}.{t.node.name}"
    for a in cls.actions:
        yield a.node.min_delay, f"the minimum delay of action {name}.{a.node.name}"
        yield a.node.min_spacing, f"the minimum spacing of action {name}.{a.node.name}"
    for c in cls.connections:
        yield c.node.delay, f"an 'after' delay in {name}"
    for r in cls.reactions:
        if r.node.deadline is not None:
            yield r.node.deadline.delay, f"a deadline in {name}"
    for w in cls.watchdogs:
        yield w.node.timeout, f"the timeout of watchdog {name}.{w.node.name}"


def _param_refs(expr: object) -> Iterator[str]:
    """Names of the parameters an expression (or a width) refers to."""
    if isinstance(expr, tree.ParamRef):
        yield expr.name
    elif isinstance(expr, tree.Width):
        for term in expr.terms:
            yield from _param_refs(term)
    elif isinstance(expr, (tree.ListExpr, tree.BraceList)):
        for item in expr.items:
            yield from _param_refs(item)
