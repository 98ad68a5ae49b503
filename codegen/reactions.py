"""Reaction instances: resolved triggers, sources, effects and the body's arguments (spec §2.2)."""

from __future__ import annotations

from . import tree
from .diagnostics import Reporter
from .instance import (
    ActionRef,
    BuiltinRef,
    Channel,
    Instance,
    ModeRef,
    PortRef,
    ReactionInst,
    Ref,
    TimerRef,
)
from .values import time_of

#: The generated class's method that runs reaction ``i`` (spec §2.1), and its deadline handler.
REACTION_FUNCTION = "reaction_function_{}"
DEADLINE_FUNCTION = "deadline_function_{}"


class _Args:
    """The ordered, de-duplicated argument list of one reaction function."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self.raw: list[dict] = []
        self.by_name: dict[str, dict] = {}

    def add(self, arg: dict, raw: bool = False) -> dict:
        if arg["name"] in self.by_name:
            return self.by_name[arg["name"]]
        self.by_name[arg["name"]] = arg
        (self.raw if raw else self.items).append(arg)
        return arg

    def all(self) -> list[dict]:
        return self.items + self.raw


def build_reaction(
    inst: Instance, index: int, node: tree.Reaction, mode: str | None, rep: Reporter
) -> ReactionInst:
    """One declared reaction of ``inst`` with its references and arguments; a bad deadline
    value is reported through ``rep`` (names were checked by :mod:`codegen.class_check`)."""
    r = ReactionInst(
        id=-1,
        owner=inst,
        index=index,
        node=node,
        mode=mode,
        function=REACTION_FUNCTION.format(index),
        file=node.pos.file,
        line=node.pos.line,
    )
    args = _Args()
    for trigger in node.triggers:
        r.triggers.extend(_resolve(inst, trigger, "trigger", args))
    for source in node.sources:
        r.sources.extend(_resolve(inst, source, "source", args))
    for effect in node.effects:
        r.effects.extend(_resolve(inst, effect, "effect", args))
    if not node.triggers:
        for p in inst.ports.values():
            if p.kind == "input":
                _port_arg(inst, p.name, args)
    r.args = args.all()
    if node.deadline is not None:
        r.deadline = time_of(node.deadline.delay, inst.params, rep, "a deadline")
        if r.deadline is None:
            r.deadline = 0
        r.deadline_function = DEADLINE_FUNCTION.format(index)
    return r


def forward_reaction(
    inst: Instance, mode: str, pairs: list[tuple[Channel, Channel]], pos: tree.Pos
) -> ReactionInst:
    """A synthetic reaction of ``inst`` in ``mode`` that copies each source channel's value to
    its destination channel when present (a connection declared inside a mode)."""
    r = ReactionInst(
        id=-1,
        owner=inst,
        index=len(inst.cls.reactions) + _forward_count(inst),
        node=None,
        mode=mode,
        function="_lf_forward",
        file=pos.file,
        line=pos.line,
    )
    seen_t, seen_e = set(), set()
    for (si, sp, _), (di, dp, _) in pairs:
        if (si, sp) not in seen_t:
            seen_t.add((si, sp))
            r.triggers.append(PortRef(si, sp))
        if (di, dp) not in seen_e:
            seen_e.add((di, dp))
            r.effects.append(PortRef(di, dp))
    r.args = [
        {"name": "src", "kind": "channels", "channels": [list(s) for s, _ in pairs]},
        {"name": "dst", "kind": "channels", "channels": [list(d) for _, d in pairs]},
    ]
    return r


def _forward_count(inst: Instance) -> int:
    return sum(1 for r in inst.reactions if r.node is None)


def _resolve(
    inst: Instance, ref: tree.VarRef | tree.ModeTransition, role: str, args: _Args
) -> list[Ref]:
    """The references ``ref`` makes from a reaction of ``inst``; names were resolved (and
    unknown ones reported) by :mod:`codegen.class_check`."""
    if isinstance(ref, tree.ModeTransition):
        return [_mode(ref.mode, ref.kind, args)]
    if ref.container is not None:
        return _contained(inst, ref.container, ref.name, args)
    name = ref.name
    kind = inst.cls.local_kind(name, role)
    if kind == "builtin":
        return [BuiltinRef(name)]
    if kind == "port":
        _port_arg(inst, name, args)
        return [PortRef(inst.id, name)]
    if kind == "action":
        args.add({"name": name, "kind": "action", "action": name})
        return [ActionRef(name)]
    if kind == "timer":
        return [TimerRef(name)]
    return [_mode(name, "default", args)]  # kind == "mode": an effect entering a mode


def _port_arg(inst: Instance, name: str, args: _Args) -> None:
    port = inst.ports[name]
    if port.kind == "input" and port.mutable:
        args.add({"name": name, "kind": "mutable", "reactor": inst.id, "port": name})
        args.add(
            {"name": f"mutable_{name}", "kind": "port", "reactor": inst.id, "port": name}, raw=True
        )
    else:
        args.add({"name": name, "kind": "port", "reactor": inst.id, "port": name})


def _mode(name: str, kind: str, args: _Args) -> ModeRef:
    transition = "history" if kind == "history" else "reset"
    args.add({"name": name, "kind": "mode", "mode": name, "transition": transition})
    return ModeRef(name, transition)


def _contained(inst: Instance, container: str, port: str, args: _Args) -> list[Ref]:
    members = inst.children.get(container)
    if not members:
        return []  # the instance was not made: a cyclic instantiation, already reported
    ids = [m.id for m in members]
    bank = members[0].site is not None and members[0].site.width is not None
    if bank:
        arg = args.add({"name": container, "kind": "bank", "reactors": ids, "ports": []})
        args.add(
            {
                "name": f"{container}_{port}",
                "kind": "bank_ports",
                "reactors": ids,
                "port": port,
            },
            raw=True,
        )
    else:
        arg = args.add({"name": container, "kind": "contained", "reactor": ids[0], "ports": []})
        args.add(
            {
                "name": f"{container}_{port}",
                "kind": "port",
                "reactor": ids[0],
                "port": port,
            },
            raw=True,
        )
    if port not in arg["ports"]:
        arg["ports"].append(port)
    return [PortRef(i, port) for i in ids]
