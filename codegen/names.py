"""Name resolution of the check stage: every name a class uses must name something.

Reactions' triggers, sources and effects, connection endpoints, parameter references in
widths, times and assignments, and ``lfc -D`` names are looked up on flattened classes, so
that elaboration only instantiates. Unknown names are reported through a :class:`Reporter`
with the position of the name; checking goes on after an error.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from reactors.model.arguments import close_match

from . import tree
from .classes import Child, ReactorClass
from .diagnostics import Reporter

ROLES = ("trigger", "source", "effect")


def check_names(cls: ReactorClass, rep: Reporter) -> None:
    """Report every name in ``cls`` that names nothing (reactions, connections, parameters)."""
    for r in cls.reactions:
        _reaction_names(cls, r.node, rep)
    for c in cls.connections:
        for ref in c.node.lhs + c.node.rhs:
            _endpoint_name(cls, ref, rep)
    for use in _param_uses(cls):
        if cls.param(use.name) is None:
            rep.error(f"'{use.name}' is not a parameter of this reactor", use.pos)
    known = {p.name for p in cls.parameters} | {"bank_index"}
    for ch in cls.children:
        for use in _assignment_refs(ch):
            if use.name not in known:
                rep.error(f"'{use.name}' is not a parameter of this reactor", use.pos)


def check_define_names(
    main: ReactorClass, defines: Mapping[str, str], rep: Reporter
) -> list[tuple[str, tree.Parameter]]:
    """The names of ``defines`` (``lfc -D NAME=VALUE``: NAME -> VALUE; ``PATH.NAME`` for a
    parameter of the instances at PATH inside ``main``) that name parameters, each with the
    parameter; each other one is reported with what it is likely a misspelling of
    (:func:`reactors.model.arguments.close_match`) and what there is."""
    known = []
    for name, value in defines.items():
        path, _, param = name.rpartition(".")
        cls = _instance_class(main, path, f"-D {name}={value}", rep) if path else main
        if cls is None:
            continue
        p = cls.param(param) if param != "bank_index" else None
        if p is not None:
            known.append((name, p))
            continue
        names = [q.name for q in cls.parameters if q.name != "bank_index"]
        whose = f"the main reactor '{main.name}'" if not path else f"'{path}' ({cls.name})"
        rep.error(
            f"-D {name}={value}: {whose} has no parameter '{param}'"
            + _alternatives(param, names, "parameters"),
            None,
        )
    return known


def _instance_class(main: ReactorClass, path: str, what: str, rep: Reporter) -> ReactorClass | None:
    """The class of the instances at ``path`` (``a.b``) inside ``main``, or None after
    reporting ``what`` names no such instance."""
    cls = main
    for part in path.split("."):
        child = cls.child(part)
        if child is None:
            names = [c.node.name for c in cls.children]
            rep.error(
                f"{what}: reactor '{cls.name}' has no instance '{part}'"
                + _alternatives(part, names, "instances"),
                None,
            )
            return None
        cls = child.cls
    return cls


def _alternatives(name: str, names: list[str], kind: str) -> str:
    """What an error about the unknown ``name`` adds: the likely meant one of ``names``
    (:func:`reactors.model.arguments.close_match`) and all of them, called ``kind``."""
    near = close_match(name, names)
    return (f"; did you mean '{near}'?" if near else "") + (
        f" (its {kind} are {', '.join(names)})" if names else ""
    )


def _reaction_names(cls: ReactorClass, x: tree.Reaction, rep: Reporter) -> None:
    for role, refs in zip(ROLES, (x.triggers, x.sources, x.effects)):
        for ref in refs:
            if isinstance(ref, tree.ModeTransition):
                if cls.mode(ref.mode) is None:
                    rep.error(f"'{ref.mode}' is not a mode of reactor '{cls.name}'", ref.pos)
            elif ref.container is not None:
                child = _child(cls, ref.container, ref.pos, rep)
                if child is not None and child.cls.port(ref.name) is None:
                    rep.error(
                        f"'{ref.name}' is not a port of '{ref.container}' "
                        f"(reactor '{child.cls.name}')",
                        ref.pos,
                    )
            elif cls.local_kind(ref.name, role) is None:
                rep.error(
                    f"'{ref.name}' is not a port, action or timer of reactor '{cls.name}'", ref.pos
                )


def _endpoint_name(cls: ReactorClass, ref: tree.VarRef, rep: Reporter) -> None:
    if ref.container is None:
        if cls.port(ref.name) is None:
            rep.error(f"'{ref.name}' is not a port of reactor '{cls.name}'", ref.pos)
        return
    child = _child(cls, ref.container, ref.pos, rep)
    if child is not None and child.cls.port(ref.name) is None:
        rep.error(f"'{ref.name}' is not a port of reactor '{child.cls.name}'", ref.pos)


def _child(cls: ReactorClass, name: str, pos: tree.Pos, rep: Reporter) -> Child | None:
    """The instantiation ``name`` used at ``pos``; None (reported unless its class is
    undefined, which was reported already) when there is none."""
    child = cls.child(name)
    if child is None and not any(m.name == name for m in cls.missing):
        rep.error(f"'{name}' is not an instance in reactor '{cls.name}'", pos)
    return child


def _param_uses(cls: ReactorClass) -> Iterator[tree.ParamRef]:
    """Parameter references that elaboration evaluates in the scope of an instance of ``cls``:
    widths, timer and action times, deadlines and ``after`` delays."""
    for p in cls.ports:
        yield from _width_refs(p.width)
    for ch in cls.children:
        yield from _width_refs(ch.node.width)
    for t in cls.timers:
        yield from _refs(t.node.offset, t.node.period)
    for a in cls.actions:
        yield from _refs(a.node.min_delay, a.node.min_spacing)
    for r in cls.reactions:
        if r.node.deadline is not None:
            yield from _refs(r.node.deadline.delay)
    for c in cls.connections:
        yield from _refs(c.node.delay)


def _assignment_refs(ch: Child) -> Iterator[tree.ParamRef]:
    """References in the values assigned to parameters of the instantiated class (evaluated in
    the scope of the containing instance; assignments to unknown parameters are never)."""
    for a in ch.node.assignments:
        if ch.cls.param(a.name) is not None:
            yield from _refs(a.value)


def _width_refs(width: tree.Width | None) -> Iterator[tree.ParamRef]:
    """References in a width up to its first term that elaboration rejects unevaluated."""
    for term in width.terms if width is not None else ():
        if isinstance(term, (tree.WidthOf, tree.Code)):
            return
        yield from _refs(term)


def _refs(*exprs: tree.Expr | None) -> Iterator[tree.ParamRef]:
    for e in exprs:
        if isinstance(e, tree.ParamRef):
            yield e
        elif isinstance(e, tree.ListExpr):
            yield from _refs(*e.items)
