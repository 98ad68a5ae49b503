"""Reactor classes with names resolved and inheritance flattened (spec §1.4, §1.6).

A :class:`ReactorClass` holds every member a class has, its superclasses' first (reaction
order: inherited reactions precede the subclass's), each tagged with the mode it lives in.
Instantiations carry the class they instantiate, resolved in the scope of the file that
declared them (imports and aliases included).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, TypeVar

from . import tree
from .diagnostics import Reporter
from .loader import Program, resolve_import

#: Names a reaction may be triggered by without declaring them (unless a port has the name).
BUILTIN_TRIGGERS = ("startup", "shutdown", "reset")


N = TypeVar("N")


@dataclass(frozen=True)
class InMode(Generic[N]):
    """A member and the mode of its reactor that holds it (None: outside every mode)."""

    node: N
    mode: str | None


@dataclass(frozen=True)
class Child:
    """An instantiation inside a class, with its resolved class."""

    node: tree.Instantiation
    mode: str | None
    cls: ReactorClass


@dataclass(eq=False)
class ReactorClass:
    """A reactor class after inheritance: every member, superclasses' first."""

    name: str
    decl: tree.Reactor
    file: str
    pyclass: str = ""
    parameters: list[tree.Parameter] = field(default_factory=list)
    states: list[InMode[tree.StateVar]] = field(default_factory=list)
    ports: list[tree.PortDecl] = field(default_factory=list)
    timers: list[InMode[tree.TimerDecl]] = field(default_factory=list)
    actions: list[InMode[tree.ActionDecl]] = field(default_factory=list)
    reactions: list[InMode[tree.Reaction]] = field(default_factory=list)
    methods: list[tree.Method] = field(default_factory=list)
    preambles: list[tree.Preamble] = field(default_factory=list)
    children: list[Child] = field(default_factory=list)
    connections: list[InMode[tree.Connection]] = field(default_factory=list)
    modes: list[tree.Mode] = field(default_factory=list)
    watchdogs: list[InMode[tree.Watchdog]] = field(default_factory=list)
    supers: list[ReactorClass] = field(default_factory=list)
    missing: list[tree.Instantiation] = field(default_factory=list)  # class not found (reported)

    def param(self, name: str) -> tree.Parameter | None:
        return next((p for p in self.parameters if p.name == name), None)

    def port(self, name: str) -> tree.PortDecl | None:
        return next((p for p in self.ports if p.name == name), None)

    def child(self, name: str) -> Child | None:
        return next((c for c in self.children if c.node.name == name), None)

    def named(self, kind: type, name: str) -> InMode[Any] | None:
        """The timer/action (InMode) named ``name``, or None."""
        pool = self.timers if kind is tree.TimerDecl else self.actions
        return next((m for m in pool if m.node.name == name), None)

    def mode(self, name: str) -> tree.Mode | None:
        """The mode named ``name``, or None."""
        return next((m for m in self.modes if m.name == name), None)

    def local_kind(self, name: str, role: str) -> str | None:
        """What a name without a container means in a reaction's list ``role`` ("trigger",
        "source" or "effect"): "builtin", "port", "action", "timer" or "mode" (a mode only as
        an effect); None when it names nothing (an error, reported by :mod:`codegen.class_check`).
        """
        kind = self._member_kinds.get(name)
        if name in BUILTIN_TRIGGERS and role == "trigger" and kind != "port":
            return "builtin"
        if kind is not None:
            return kind
        if role == "effect" and self.mode(name) is not None:
            return "mode"
        return None

    @cached_property
    def _member_kinds(self) -> dict[str, str]:
        """ "port", "action" or "timer" for each such name (a port wins over an action, an
        action over a timer). Built on first use, when the class is complete."""
        kinds = {t.node.name: "timer" for t in self.timers}
        kinds.update((a.node.name, "action") for a in self.actions)
        kinds.update((p.name, "port") for p in self.ports)
        return kinds


class ClassTable:
    """Builds :class:`ReactorClass` objects on demand from the files of a :class:`Program`."""

    def __init__(self, program: Program, rep: Reporter):
        self.program = program
        self.rep = rep
        self._scopes: dict[str, dict[str, tuple[str, tree.Reactor]]] = {}
        self._classes: dict[int, ReactorClass] = {}
        self._building: set[int] = set()
        self._pynames: set[str] = set()
        # classes whose instantiations are still to resolve: (class, its pending iterator)
        self._unresolved: list[tuple[ReactorClass, Iterator[tuple[Any, Any, str]]]] = []

    # ----------------------------------------------------------------- scopes

    def scope(self, file: str) -> dict[str, tuple[str, tree.Reactor]]:
        """Names visible in ``file``: its own reactors, then imported names (aliases)."""
        if file in self._scopes:
            return self._scopes[file]
        scope: dict[str, tuple[str, tree.Reactor]] = {}
        self._scopes[file] = scope
        model = self.program.files.get(file)
        if model is None:
            return scope
        for r in model.reactors:
            if r.name and not (r.main or r.federated):
                scope[r.name] = (file, r)
        for imp in model.imports:
            self._import_into(scope, file, imp)
        return scope

    def _import_into(self, scope: dict, file: str, imp: tree.Import) -> None:
        target = resolve_import(file, imp)
        model = self.program.files.get(target) if target else None
        if model is None:
            return  # reported by the loader
        for n in imp.names:
            found = next((r for r in model.reactors if r.name == n.name and not r.main), None)
            if found is None:
                self.rep.error(f"reactor '{n.name}' is not defined in '{imp.path}'", n.pos)
                continue
            local = n.alias or n.name
            if local in scope and scope[local][1] is not found:
                self.rep.error(f"'{local}' is already defined in this file", n.pos)
                continue
            scope[local] = (target, found)

    # ----------------------------------------------------------------- classes

    def get(self, file: str, decl: tree.Reactor) -> ReactorClass | None:
        """The flattened class for ``decl`` declared in ``file`` (None after an inheritance
        cycle), with the classes of its children, transitively, resolved.

        Children are resolved depth-first from an explicit stack, not by recursion, so that
        containment of any depth builds without exhausting Python's stack.
        """
        return self._get(file, decl, drive=True)

    def lookup(self, file: str, name: str, pos: tree.Pos | None) -> ReactorClass | None:
        """Resolve a class name as seen from ``file``; reports an error when undefined."""
        return self._lookup(file, name, pos, drive=True)

    def _lookup(
        self, file: str, name: str, pos: tree.Pos | None, drive: bool
    ) -> ReactorClass | None:
        hit = self.scope(file).get(name)
        if hit is None:
            self.rep.error(f"reactor class '{name}' is not defined", pos)
            return None
        return self._get(*hit, drive=drive)

    def _get(self, file: str, decl: tree.Reactor, drive: bool) -> ReactorClass | None:
        """As :meth:`get`; with ``drive`` False the children are left on the stack for the
        caller's :meth:`_resolve_children` loop."""
        key = id(decl)
        if key in self._classes:
            return self._classes[key]
        if key in self._building:
            self.rep.error(f"reactor '{decl.name}' extends itself (cyclic inheritance)", decl.pos)
            return None
        self._building.add(key)
        pending: list = []
        try:
            cls = self._build(file, decl, pending)
        finally:
            self._building.discard(key)
        self._classes[key] = cls  # before the children, so containment cycles terminate
        base = len(self._unresolved)
        self._unresolved.append((cls, iter(pending)))
        if drive:
            self._resolve_children(base)
        return cls

    def _resolve_children(self, base: int) -> None:
        """Resolve the pending instantiations on the stack above height ``base``, depth-first
        (the order a recursive resolution would take)."""
        while len(self._unresolved) > base:
            cls, pending = self._unresolved[-1]
            item = next(pending, None)
            if item is None:
                self._unresolved.pop()
                continue
            node, mode, where = item
            sub = self._lookup(where, node.class_name, node.pos, drive=False)
            if sub is not None:
                cls.children.append(Child(node, mode, sub))
            else:
                cls.missing.append(node)

    def _build(self, file: str, decl: tree.Reactor, pending: list) -> ReactorClass:
        name = decl.name or _stem(file)
        cls = ReactorClass(name=name, decl=decl, file=file, pyclass=self._pyname(name))
        for sname, spos in decl.extends:
            sup = self.lookup(file, sname, spos)
            if sup is not None:
                cls.supers.append(sup)
        for anc in _linearize(cls):
            self._absorb(cls, anc, pending)
        return cls

    def _absorb(self, cls: ReactorClass, src: ReactorClass, pending: list) -> None:
        """Add the members declared directly in ``src`` (itself or an ancestor) to ``cls``."""
        d = src.decl
        for p in d.parameters:
            old = cls.param(p.name)
            if old is not None:
                cls.parameters[cls.parameters.index(old)] = p  # subclass overrides the default
            else:
                cls.parameters.append(p)
        self._absorb_members(cls, src.file, d.members, None, pending)

    def _absorb_members(self, cls, file: str, members, mode: str | None, pending: list) -> None:
        """Sort ``members`` into ``cls``; instantiations go to ``pending`` (resolved later)."""
        for m in members:
            if isinstance(m, tree.Mode):
                cls.modes.append(m)
                self._absorb_members(cls, file, m.members, m.name, pending)
            elif isinstance(m, tree.Preamble):
                cls.preambles.append(m)
            elif isinstance(m, tree.Method):
                cls.methods.append(m)
            elif isinstance(m, tree.PortDecl):
                cls.ports.append(m)
            elif isinstance(m, tree.Instantiation):
                pending.append((m, mode, file))
            else:
                pool: list[InMode[Any]] = {
                    tree.StateVar: cls.states,
                    tree.TimerDecl: cls.timers,
                    tree.ActionDecl: cls.actions,
                    tree.Reaction: cls.reactions,
                    tree.Connection: cls.connections,
                    tree.Watchdog: cls.watchdogs,
                }[type(m)]
                pool.append(InMode(m, mode))

    def _pyname(self, name: str) -> str:
        base = f"_{name}"
        py, n = base, 2
        while py in self._pynames:
            py, n = f"{base}_{n}", n + 1
        self._pynames.add(py)
        return py

    def build_all(self) -> None:
        """Build every reactor class of every file, so that unused classes are checked too."""
        for path, model in list(self.program.files.items()):
            for r in model.reactors:
                if not (r.main or r.federated) or path == self.program.main_file:
                    self.get(path, r)

    def all(self) -> list[ReactorClass]:
        """Every class built so far, in build order."""
        return list(self._classes.values())


def _linearize(cls: ReactorClass) -> list[ReactorClass]:
    """Ancestors first, each once, then ``cls`` (depth-first, left to right; diamonds merged)."""
    seen: list[ReactorClass] = []

    def visit(c: ReactorClass) -> None:
        for s in c.supers:
            visit(s)
        if c not in seen:
            seen.append(c)

    visit(cls)
    return seen


def _stem(file: str) -> str:
    import os

    return os.path.splitext(os.path.basename(file))[0]
