"""The validator: the rules of spec §1 that the grammar alone does not enforce.

Every problem is reported through a :class:`Reporter` with its position; checking goes on
after an error so that one run reports as much as it can. Rules on declarations are checked
here, per file on the AST; rules that depend on inheritance or instantiation are checked on
flattened classes by :mod:`codegen.class_check`.
"""

from __future__ import annotations

import keyword
import os

from . import tree
from .diagnostics import Reporter
from .loader import Program
from .parse import is_name
from .units import is_time_unit

# What reaches reaction and method code as an argument beside ``self``.
_ARGUMENTS = {"port", "timer", "action", "instance", "mode"}

RESERVED = set(keyword.kwlist) | {
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_Bool",
    "_Complex",
    "_Generic",
    "_Imaginary",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
}
ATTRIBUTES = {
    "label",
    "icon",
    "side",
    "layout",
    "maxwait",
    "absent_after",
    "transient",
    "sparse",
    "enclave",
    "property",
    "language",
    "timeout",
    "fast",
    "keepalive",
    "logging",
    "build_type",
    "clock_sync",
    "platform",
    "worker",
    "node",
    "_c_body",
    "_tpoLevel",
    "_fed_config",
    "_network_sender",
    "_network_receiver",
    "_enclave_connection",
}
POLICIES = ("defer", "drop", "replace", "update")


def check_files(program: Program, rep: Reporter) -> None:
    """Declaration-level rules for every file of the program."""
    for path, model in program.files.items():
        _FileChecker(model, rep, main=(path == program.main_file)).run()


def find_main(program: Program, rep: Reporter) -> tree.Reactor | None:
    """The main (or federated) reactor of the main file; errors for several or a bad name."""
    model = program.files.get(program.main_file)
    if model is None:
        return None
    mains = [r for r in model.reactors if r.main or r.federated]
    for extra in mains[1:]:
        rep.error("a program has exactly one main reactor", extra.pos)
    if not mains:
        return None
    main = mains[0]
    stem = os.path.splitext(os.path.basename(program.main_file))[0]
    if main.name is not None and main.name != stem:
        rep.error(
            f"the main reactor's name must match the file name '{stem}'", main.name_pos or main.pos
        )
    elif main.name is None and not is_name(stem):
        rep.error(
            f"the main reactor takes its name from the file, and '{stem}' is not a name: "
            "rename the file (letters, digits and '_', not starting with a digit)",
            main.pos,
        )
    if main.federated:
        rep.warning(
            "the federation runs as one program; with --cluster ray each federate runs on a "
            "worker of its own, a Ray actor",
            main.pos,
        )
    return main


class _FileChecker:
    def __init__(self, model: tree.Model, rep: Reporter, main: bool):
        self.model, self.rep, self.main = model, rep, main

    def run(self) -> None:
        m, rep = self.model, self.rep
        stem = os.path.splitext(os.path.basename(m.file))[0]
        if stem[:1].isdigit():
            rep.error("a .lf file name must not start with a digit", tree.Pos(m.file, 1, 1))
        if m.target is None:
            rep.error(
                "missing target declaration: add 'target Python' at the top", tree.Pos(m.file, 1, 1)
            )
        names: dict[str, tree.Pos] = {}
        for r in m.reactors:
            if r.name and not r.main:
                if r.name in names:
                    rep.error(
                        f"reactor '{r.name}' is declared twice in this file", r.name_pos or r.pos
                    )
                names[r.name] = r.pos
            self.reactor(r)
        self.unused_imports()

    def unused_imports(self) -> None:
        used: set[str] = set()
        for r in self.model.reactors:
            used.update(n for n, _ in r.extends)
            used.update(i.class_name for i in _walk(r.members, tree.Instantiation))
        for imp in self.model.imports:
            for n in imp.names:
                if (n.alias or n.name) not in used:
                    self.rep.warning(f"unused import '{n.alias or n.name}'", n.pos)

    def name(self, name: str, pos: tree.Pos, what: str) -> None:
        if name.startswith("__"):
            self.rep.error(f"{what} names must not start with '__': '{name}'", pos)
        elif name in RESERVED:
            self.rep.error(
                f"'{name}' is a reserved word of the Python target and cannot name a {what}", pos
            )
        elif name == "self" and what in _ARGUMENTS:
            self.rep.error(f"'self' names the reactor in target code and cannot name a {what}", pos)

    def attributes(self, attrs) -> None:
        for a in attrs:
            if a.name not in ATTRIBUTES:
                self.rep.error(f"unknown attribute '@{a.name}'", a.pos)

    def reactor(self, r: tree.Reactor) -> None:
        rep = self.rep
        if r.name:
            self.name(r.name, r.name_pos or r.pos, "reactor")
        self.attributes(r.attributes)
        if r.type_params:
            rep.error("generic reactors are not supported by the Python target", r.pos)
        for p in r.parameters:
            self.name(p.name, p.pos, "parameter")
            self.attributes(p.attributes)
            if p.type:
                rep.error("types are not allowed in the Python target", p.pos)
            if p.default is None:
                rep.error(f"parameter '{p.name}' needs a default value", p.pos)
            else:
                self.expr(p.default, refs=False)
        if r.main or r.federated:
            for port in _walk(r.members, tree.PortDecl):
                rep.error("a main reactor cannot have inputs or outputs", port.pos)
        self.members(r, r.members, in_mode=False)
        self.duplicates(r)
        self.modes(r)

    def members(self, r: tree.Reactor, members, in_mode: bool) -> None:
        for m in members:
            check = getattr(self, f"m_{type(m).__name__}", None)
            if check is not None:
                check(r, m, in_mode)

    def m_Mode(self, r, m: tree.Mode, in_mode):
        self.name(m.name, m.pos, "mode")
        for bad in m.members:
            if isinstance(bad, (tree.PortDecl, tree.Method, tree.Preamble, tree.Mode)):
                self.rep.error("a mode cannot contain ports, methods, preambles or modes", bad.pos)
        self.members(r, m.members, in_mode=True)

    def m_Preamble(self, r, p: tree.Preamble, in_mode):
        if p.visibility:
            self.rep.warning(f"'{p.visibility}' has no meaning in the Python target", p.pos)

    def m_StateVar(self, r, s: tree.StateVar, in_mode):
        self.name(s.name, s.pos, "state variable")
        self.attributes(s.attributes)
        if s.type:
            self.rep.error("types are not allowed in the Python target", s.pos)
        if s.init_style != "=":
            self.rep.error("initialise state with '=' in the Python target", s.pos)
        self.expr(s.init, refs=True)

    def m_PortDecl(self, r, p: tree.PortDecl, in_mode):
        self.name(p.name, p.pos, "port")
        self.attributes(p.attributes)
        if p.type:
            self.rep.error("types are not allowed in the Python target", p.pos)
        if p.mutable and p.kind == "output":
            self.rep.error("only inputs can be mutable", p.pos)

    def m_TimerDecl(self, r, t: tree.TimerDecl, in_mode):
        self.name(t.name, t.pos, "timer")
        self.attributes(t.attributes)
        self.expr(t.offset, refs=True)
        self.expr(t.period, refs=True)

    def m_ActionDecl(self, r, a: tree.ActionDecl, in_mode):
        self.name(a.name, a.pos, "action")
        self.attributes(a.attributes)
        if a.origin is None:
            self.rep.error("an action must be declared 'logical' or 'physical'", a.pos)
        if a.type:
            self.rep.error("types are not allowed in the Python target", a.pos)
        if a.policy is not None and a.policy not in POLICIES:
            self.rep.error(f"unknown policy '{a.policy}': use one of {', '.join(POLICIES)}", a.pos)
        self.expr(a.min_delay, refs=True)
        self.expr(a.min_spacing, refs=True)

    def m_Method(self, r, m: tree.Method, in_mode):
        self.name(m.name, m.pos, "method")
        if m.return_type or any(a.type for a in m.args):
            self.rep.error("types are not allowed in the Python target", m.pos)

    def m_Watchdog(self, r, w: tree.Watchdog, in_mode):
        self.rep.error("watchdogs are not supported by the Python target", w.pos)

    def m_Instantiation(self, r, i: tree.Instantiation, in_mode):
        self.name(i.name, i.pos, "instance")
        self.attributes(i.attributes)
        if i.type_args:
            self.rep.error("generic reactors are not supported by the Python target", i.pos)
        if i.host:
            self.rep.warning(
                "'at' chooses the node of the instance's worker with --cluster ray (Ray resource "
                "'node:ADDRESS', or the host name); without it, it has no effect",
                i.pos,
            )
        for a in i.assignments:
            if a.style != "=":
                self.rep.error("assign parameters with '=' in the Python target", a.pos)
            self.expr(a.value, refs=True)

    def m_Connection(self, r, c: tree.Connection, in_mode):
        self.attributes(c.attributes)
        if c.serializer is not None:
            self.rep.warning("'serializer' applies to federated connections only; ignored", c.pos)
        if c.delay is not None and not isinstance(
            c.delay, (tree.Time, tree.ParamRef, tree.Literal)
        ):
            self.rep.error("an 'after' delay must be a time value or a parameter", c.delay.pos)
        self.expr(c.delay, refs=True)
        for ref in c.lhs + c.rhs:
            if ref.interleaved and ref.container is None:
                self.rep.error("interleaved(...) applies to a port of a bank", ref.pos)

    def m_Reaction(self, r, x: tree.Reaction, in_mode):
        rep = self.rep
        self.attributes(x.attributes)
        if x.is_mutation:
            rep.warning("'mutation' has no semantics of its own; treated as a reaction", x.pos)
        if x.code is None:
            rep.error(
                "reaction declarations without a body are not supported by the Python target", x.pos
            )
        if not x.triggers:
            rep.warning("reaction has no trigger: it will never run", x.pos)
        if x.tardy is not None:
            rep.warning(
                f"'{x.tardy.keyword}' handlers apply to federated programs only; ignored",
                x.tardy.pos,
            )
        triggers = {str(t) for t in x.triggers}
        for s in x.sources:
            if str(s) in triggers:
                rep.error(f"'{s}' is both a trigger and a source", s.pos)
        if x.deadline is not None:
            self.expr(x.deadline.delay, refs=True)

    def expr(self, e, refs: bool) -> None:
        if e is None:
            return
        if isinstance(e, tree.Time) and e.unit is not None:
            if not is_time_unit(e.unit):
                self.rep.error(f"invalid time unit '{e.unit}'", e.pos)
        elif isinstance(e, tree.BraceList):
            self.rep.error(
                f"{e.kind} lists are not supported by the Python target: use [a, b]", e.pos
            )
        elif isinstance(e, tree.ParamRef) and not refs:
            self.rep.error(f"a parameter default cannot refer to '{e.name}'", e.pos)
        elif isinstance(e, tree.ListExpr):
            for i in e.items:
                self.expr(i, refs)

    def duplicates(self, r: tree.Reactor) -> None:
        seen: dict[str, str] = {}
        for p in r.parameters:
            if p.name in seen:
                self.rep.error(
                    f"parameter '{p.name}' is already declared in reactor '{r.name or 'main'}'",
                    p.pos,
                )
            seen[p.name] = "parameter"
        kinds = (
            tree.StateVar,
            tree.PortDecl,
            tree.TimerDecl,
            tree.ActionDecl,
            tree.Instantiation,
            tree.Method,
            tree.Mode,
            tree.Watchdog,
        )
        for m in _walk(r.members, kinds):
            what = type(m).__name__
            if m.name in seen:
                self.rep.error(
                    f"'{m.name}' is already declared in reactor '{r.name or 'main'}'", m.pos
                )
            seen[m.name] = what

    def modes(self, r: tree.Reactor) -> None:
        modes = [m for m in r.members if isinstance(m, tree.Mode)]
        if modes and sum(m.initial for m in modes) != 1:
            self.rep.error("a modal reactor needs exactly one initial mode", modes[0].pos)
        reset_targets = {
            e.mode if isinstance(e, tree.ModeTransition) else e.name
            for x in _walk(r.members, tree.Reaction)
            for e in x.effects
            if (isinstance(e, tree.ModeTransition) and e.kind != "history")
            or (
                isinstance(e, tree.VarRef)
                and e.container is None
                and e.name in {m.name for m in modes}
            )
        }
        for m in modes:
            if m.name not in reset_targets:
                continue
            has_reset = any(
                any(t.name == "reset" and t.container is None for t in x.triggers)
                for x in m.members
                if isinstance(x, tree.Reaction)
            )
            for s in m.members:
                if isinstance(s, tree.StateVar) and not s.reset and not has_reset:
                    self.rep.error(
                        f"state '{s.name}' of mode '{m.name}', which is entered by a reset "
                        "transition, must be 'reset state' or the mode needs a "
                        "reaction(reset)",
                        s.pos,
                    )


def _walk(members, kinds):
    for m in members:
        if isinstance(m, tree.Mode):
            yield from _walk(m.members, kinds)
        if isinstance(m, kinds):
            yield m


def check_defines(models: dict[str, tree.Model], rep: Reporter) -> dict[str, tree.Expr]:
    """Check each ``lfc -D NAME=VALUE`` as the file declaring its parameter would be checked
    (``models``: NAME -> the one-parameter file of :func:`codegen.parse.parse_define`).

    Returns:
        NAME -> VALUE expression, to override the main instance's parameter defaults.
    """
    values = {}
    for name, model in models.items():
        _FileChecker(model, rep, main=True).run()
        value = model.reactors[0].parameters[0].default
        if value is not None:  # always: the text parsed as 'NAME = VALUE'
            values[name] = value
    return values
