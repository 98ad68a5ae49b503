"""A tiny stand-in for the compiler's back end, for runtime tests.

Tests describe a program as reactor classes (written like generated code) plus instances,
reactions and connections; :class:`Kit` turns that into a :class:`reactors.model.program.Program`
(levels, inferred deadlines and ranks computed as spec §3.5 says) and a module object, and runs
it through ``reactors.launch.main.run_graph``. Everything is built from the model's own classes, so
the description cannot drift from what the compiler writes.

Trigger/source/effect items:
``"startup"``, ``"shutdown"``, ``"reset"``, ``("timer", name)``, ``("action", name)``,
``("port", reactor_id, name)``, ``("mode", name, "reset"|"history")`` (effects only).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Sequence

from reactors.api import ReactorBase
from reactors.launch.main import run_graph
from reactors.model import program as pm
from reactors.model import references

Item = str | tuple
BIG = 1 << 63


def act(
    name: str,
    origin: str = "logical",
    min_delay: int = 0,
    min_spacing: int | None = None,
    policy: str = "defer",
    mode: str | None = None,
) -> pm.ActionSpec:
    """An action declaration (times in ns)."""
    return pm.ActionSpec(
        name=name,
        origin=pm.Origin(origin),
        min_delay=min_delay,
        min_spacing=min_spacing,
        policy=pm.Policy(policy),
        mode=mode,
    )


class Kit:
    """Builds a program model and module for one test program. ``target``: target settings
    (``fast`` defaults to true)."""

    def __init__(self, name: str = "Main", **target: object):
        self.name = name
        self.module = types.ModuleType(f"kit_{name}")
        self.module.__file__ = None
        self.target = pm.TargetSettings(**{"fast": True, **target})  # type: ignore[arg-type]
        self.reactors: list[pm.ReactorInstance] = []
        self.reactions: list[pm.ReactionSpec] = []
        self.channels: list[pm.Channel] = []
        self.line_map: list[pm.LineRange] = []

    # ------------------------------------------------------------------ description

    def add(
        self,
        short: str,
        cls: type = ReactorBase,
        parent: int | None = None,
        params: dict | Callable | None = None,
        ports: Sequence[str | tuple[str, int]] = (),
        timers: Sequence[tuple] = (),
        actions: Sequence[pm.ActionSpec] = (),
        modes: Sequence[str] = (),
        mode: str | None = None,
        bank_index: int = 0,
        bank_width: int = 1,
        pin: int | None = None,
    ) -> int:
        """Add an instance; returns its id. ``ports``: names (outputs) or (name, width);
        ``timers``: (name, offset, period[, mode]); ``modes``: names, the first initial."""
        rid = len(self.reactors)
        name = short if parent is None else f"{self.reactors[parent].name}.{short}"
        pyclass = f"_{cls.__name__}_{rid}"
        setattr(self.module, pyclass, cls)
        fn = f"_lf_params_{rid}"
        params = params or {}
        setattr(self.module, fn, params if callable(params) else (lambda p, b, d=params: dict(d)))
        self.reactors.append(
            pm.ReactorInstance(
                id=rid,
                name=name,
                short=short,
                class_name=cls.__name__,
                pyclass=pyclass,
                parent=parent,
                bank_index=bank_index,
                bank_width=bank_width,
                params=fn,
                mode=mode,
                file="test.lf",
                line=1,
                pin=pin,
                ports=tuple(_port(p) for p in ports),
                timers=tuple(
                    pm.TimerSpec(name=t[0], offset=t[1], period=t[2], mode=t[3] if t[3:] else None)
                    for t in timers
                ),
                actions=tuple(actions),
                modes=tuple(pm.ModeSpec(name=m, initial=i == 0) for i, m in enumerate(modes)),
            )
        )
        return rid

    def reaction(
        self,
        rid: int,
        triggers: Sequence[Item] = (),
        sources: Sequence[Item] = (),
        effects: Sequence[Item] = (),
        args: Sequence[references.Arg] | None = None,
        deadline: int | None = None,
        mode: str | None = None,
        name: str | None = None,
        function: str | None = None,
        mutable: Sequence[str] = (),
    ) -> int:
        """Add the next reaction of instance ``rid``; returns its id. ``args`` defaults to
        one argument per distinct port/action/mode (own ports by name, contained ports as a
        ``contained`` capsule named after the child); ``mutable`` names own inputs passed
        as mutable copies."""
        index = sum(1 for r in self.reactions if r.reactor == rid)
        if args is None:
            args = self._default_args(rid, [*triggers, *sources, *effects], mutable)
        self.reactions.append(
            pm.ReactionSpec(
                id=len(self.reactions),
                reactor=rid,
                index=index,
                name=name,
                function=function or f"reaction_function_{index}",
                deadline=deadline,
                deadline_function=None if deadline is None else f"deadline_function_{index}",
                mode=mode,
                triggers=tuple(_ref(t) for t in triggers),
                sources=tuple(_ref(t) for t in sources),
                effects=tuple(_ref(t) for t in effects),
                args=tuple(args),
                file="test.lf",
                line=1,
            )
        )
        return len(self.reactions) - 1

    def connect(
        self, src: int, sport: str, dst: int, dport: str, width: int = 1, src_ch=0, dst_ch=0
    ) -> None:
        """Connect ``width`` channels of ``src.sport`` to ``dst.dport`` (zero delay)."""
        for i in range(width):
            self.channels.append(pm.Channel(src, sport, src_ch + i, dst, dport, dst_ch + i))

    def _default_args(
        self, rid: int, items: list[Item], mutable: Sequence[str]
    ) -> list[references.Arg]:
        args: list[references.Arg] = []
        seen: set = set()
        contained: dict[int, int] = {}  # child id -> position in args
        for t in items:
            if isinstance(t, str) or t[0] == "timer" or t in seen:
                continue
            seen.add(t)
            if t[0] == "action":
                args.append(references.ActionArg(t[1], t[1]))
            elif t[0] == "mode":
                args.append(references.ModeArg(t[1], t[1], references.Transition(t[2])))
            elif t[1] == rid:
                arg = references.MutableArg if t[2] in mutable else references.PortArg
                args.append(arg(t[2], rid, t[2]))
            elif t[1] in contained:
                c = args[contained[t[1]]]
                args[contained[t[1]]] = dataclasses.replace(c, ports=(*c.ports, t[2]))
            else:
                contained[t[1]] = len(args)
                args.append(references.ContainedArg(self.reactors[t[1]].short, t[1], (t[2],)))
        return args

    # ------------------------------------------------------------------ analysis

    def program(self) -> pm.Program:
        """The program model, with levels, inferred deadlines and ranks filled in."""
        succ = self._precedence()
        level: dict[int, int] = {}
        preds = {i: [a for a, bs in succ.items() if i in bs] for i in succ}

        def lvl(i: int, stack: tuple = ()) -> int:
            if i in stack:
                raise ValueError("causality cycle in test program")
            if i not in level:
                level[i] = 1 + max((lvl(a, stack + (i,)) for a in preds[i]), default=-1)
            return level[i]

        inferred: dict[int, int | None] = {}

        def infer(i: int) -> int | None:
            if i not in inferred:
                own = self.reactions[i].deadline
                vals = [v for v in [own, *(infer(b) for b in succ[i])] if v is not None]
                inferred[i] = min(vals) if vals else None
            return inferred[i]

        rx = [
            dataclasses.replace(r, level=lvl(r.id), inferred_deadline=infer(r.id))
            for r in self.reactions
        ]
        order = sorted(
            rx,
            key=lambda r: (
                BIG if r.inferred_deadline is None else r.inferred_deadline,
                r.level,
                r.reactor,
                r.index,
            ),
        )
        rank = {r.id: i for i, r in enumerate(order)}
        return pm.Program(
            name=self.name,
            main_file="/tmp/test.lf",
            source_directory="/tmp/src",
            package_directory="/tmp",
            module="test.py",
            target=self.target,
            reactors=tuple(
                dataclasses.replace(i, reactions=tuple(r.id for r in rx if r.reactor == i.id))
                for i in self.reactors
            ),
            reactions=tuple(dataclasses.replace(r, rank=rank[r.id]) for r in rx),
            channels=tuple(self.channels),
            line_map=tuple(self.line_map),
        )

    def _precedence(self) -> dict[int, set[int]]:
        """Reaction id -> downstream reaction ids (spec §3.5)."""
        rx = self.reactions
        succ: dict[int, set[int]] = {r.id: set() for r in rx}
        for rid in {r.reactor for r in rx}:
            mine = [r for r in rx if r.reactor == rid]
            for a, b in zip(mine, mine[1:]):
                succ[a.id].add(b.id)
        down: dict[tuple, set] = {}
        for c in self.channels:
            down.setdefault(c.src[:2], set()).add(c.dst[:2])
        readers: dict[tuple, list[pm.ReactionSpec]] = {}
        for r in rx:
            for t in r.triggers + r.sources:
                if isinstance(t, references.PortRef):
                    readers.setdefault((t.reactor, t.name), []).append(r)
        for r in rx:
            for e in r.effects:
                if isinstance(e, references.PortRef):
                    self._reach(r, (e.reactor, e.name), down, readers, succ)
        return succ

    @staticmethod
    def _reach(r: pm.ReactionSpec, start: tuple, down: dict, readers: dict, succ: dict) -> None:
        todo, seen = [start], set()
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            for q in readers.get(p, []):
                other_mode = q.reactor == r.reactor and q.mode != r.mode and q.mode and r.mode
                if q is not r and not other_mode:
                    succ[r.id].add(q.id)
            todo.extend(down.get(p, ()))

    def run(self, *args: str) -> int:
        """Build and run; returns the exit status."""
        return run_graph(self.module, self.program(), args)


def _port(p: str | tuple[str, int]) -> pm.PortSpec:
    name, width = (p, pm.PLAIN_WIDTH) if isinstance(p, str) else p
    # the runtime treats inputs and outputs alike; a test names only what it connects
    return pm.PortSpec(name=name, kind=pm.PortKind.OUTPUT, width=width)


def _ref(t: Item) -> references.Ref:
    if isinstance(t, str):
        return references.BuiltinTrigger(references.Builtin(t))
    kind = t[0]
    if kind == "port":
        return references.PortRef(t[1], t[2])
    if kind == "mode":
        return references.ModeRef(t[1], references.Transition(t[2]))
    return references.TimerRef(t[1]) if kind == "timer" else references.ActionRef(t[1])
