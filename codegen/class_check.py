"""The validator's rules on flattened classes (inheritance applied, instances known): every
name resolves (:mod:`codegen.names`), references in reactions and connections are of the right
kind, state initialisers name parameters, no two writers conflict. The rules on each file's
declarations are :mod:`codegen.check`'s.
"""

from __future__ import annotations

from . import tree
from .classes import ClassTable, ReactorClass
from .diagnostics import Reporter
from .names import check_names
from .scope import check_declarations


def check_classes(table: ClassTable, rep: Reporter) -> None:
    """Rules on flattened classes: every name resolves (:mod:`codegen.names`), no name hides
    one of the runtime (:mod:`codegen.scope`), references in reactions and connections are of
    the right kind, no write conflicts."""
    for cls in table.all():
        check_names(cls, rep)
        check_declarations(cls, rep)
        _ClassChecker(cls, rep).run()


class _ClassChecker:
    def __init__(self, cls: ReactorClass, rep: Reporter):
        self.cls, self.rep = cls, rep

    def run(self) -> None:
        for st in self.cls.states:
            for ref in _param_refs(st.node.init):
                if self.cls.param(ref.name) is None:
                    self.rep.error(
                        f"'{ref.name}' is not a parameter of reactor '{self.cls.name}' "
                        "(use {= ... =} for Python code)",
                        ref.pos,
                    )
        for ch in self.cls.children:
            self.instantiation(ch)
        written: dict[str, list] = {}
        for c in self.cls.connections:
            self.connection(c.node, c.mode, written)
        for r in self.cls.reactions:
            self.reaction(r.node, r.mode, written)

    def instantiation(self, ch) -> None:
        if ch.cls.decl.main or ch.cls.decl.federated:
            self.rep.error("a main reactor cannot be instantiated", ch.node.pos)
        names = {p.name for p in ch.cls.parameters}
        for a in ch.node.assignments:
            if a.name not in names:
                self.rep.error(f"reactor '{ch.cls.name}' has no parameter '{a.name}'", a.pos)

    def port_of(self, ref: tree.VarRef):
        if ref.container is None:
            return self.cls.port(ref.name)
        child = self.cls.child(ref.container)
        return child.cls.port(ref.name) if child else None

    def connection(self, c: tree.Connection, mode, written) -> None:
        for ref in c.lhs:
            p = self.port_of(ref)
            if p is None:
                continue
            if (ref.container is None) != (p.kind == "input"):
                self.rep.error(
                    f"'{ref}' cannot be the source of a connection: use an input of this "
                    "reactor or an output of a contained reactor",
                    ref.pos,
                )
        for ref in c.rhs:
            p = self.port_of(ref)
            if p is None:
                continue
            if (ref.container is None) != (p.kind == "output"):
                self.rep.error(
                    f"'{ref}' cannot be the destination of a connection: use an output of "
                    "this reactor or an input of a contained reactor",
                    ref.pos,
                )
            self.write(str(ref), mode, ref.pos, written, "connection")

    def write(self, key: str, mode, pos, written, how: str) -> None:
        for other_mode, other_how in written.get(key, []):
            if other_mode is None or mode is None or other_mode == mode:
                if how == "connection" or other_how == "connection":
                    self.rep.error(
                        f"'{key}' is written by more than one connection or by both a "
                        "connection and a reaction",
                        pos,
                    )
                    break
        written.setdefault(key, []).append((mode, how))

    def reaction(self, x: tree.Reaction, mode, written) -> None:
        for ref in list(x.triggers) + list(x.sources):
            if ref.container is None and ref.name in ("startup", "shutdown", "reset"):
                continue
            p = self.port_of(ref)
            if p is None:
                continue
            if ref.container is None and p.kind == "output":
                self.rep.error(
                    f"a reaction cannot be triggered by or read its own output '{ref}'", ref.pos
                )
            if ref.container is not None and p.kind == "input":
                self.rep.error(
                    f"a reaction cannot be triggered by or read the input '{ref}' of a "
                    "contained reactor",
                    ref.pos,
                )
        for eff in x.effects:
            if isinstance(eff, tree.ModeTransition):
                continue
            p = self.port_of(eff)
            if p is None:
                if eff.container is None and self.cls.named(tree.TimerDecl, eff.name):
                    self.rep.error(f"a timer ('{eff.name}') cannot be an effect", eff.pos)
                continue
            if eff.container is None and p.kind == "input":
                self.rep.error(f"a reaction cannot write its own input '{eff}'", eff.pos)
            elif eff.container is not None and p.kind == "output":
                self.rep.error(
                    f"a reaction cannot write the output '{eff}' of a contained reactor", eff.pos
                )
            else:
                self.write(str(eff), mode, eff.pos, written, "reaction")


def _param_refs(e):
    if isinstance(e, tree.ParamRef):
        yield e
    elif isinstance(e, tree.ListExpr):
        for i in e.items:
            yield from _param_refs(i)
