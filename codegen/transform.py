"""The AST of :mod:`codegen.tree` built while lark parses a Lingua Franca file.

:func:`build` runs lark's parser with a :class:`_ToAst`, which has one small method per
grammar rule (``grammar.lark``), called as the LALR parser reduces the rule
(:mod:`codegen.reduction`), with the rule's children already turned into AST nodes.
:mod:`codegen.parse` makes the parser, drives it and reports syntax errors.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple, get_args

from lark import Lark, Token, Tree

from .lexing import code_body
from .reduction import Reducer
from .tree import (
    ActionDecl,
    Assignment,
    Attribute,
    AttrParam,
    BraceList,
    Code,
    Connection,
    Deadline,
    Expr,
    Import,
    ImportedName,
    Instantiation,
    KeyValue,
    ListExpr,
    Literal,
    Member,
    Method,
    MethodArg,
    Mode,
    Model,
    ModeTransition,
    Parameter,
    ParamRef,
    PortDecl,
    Pos,
    Preamble,
    PropDict,
    PropIdent,
    PropList,
    Reaction,
    Reactor,
    StateVar,
    Tardy,
    Target,
    Time,
    TimerDecl,
    VarRef,
    Watchdog,
    Width,
    WidthOf,
)

_EXPR = (Literal, Time, ParamRef, Code, ListExpr, BraceList)
_MEMBER = get_args(Member)


class _Type(NamedTuple):
    """A ``: type`` annotation (types are errors in Python; kept for the checker)."""

    text: str


class _Init(NamedTuple):
    """An initialiser ``= e``, ``(e)`` or ``{e}`` with its style."""

    style: str
    value: Expr | None


def _tokens(children, *types: str) -> list[Token]:
    return [c for c in children if isinstance(c, Token) and c.type in types]


def _first(children, kind, default=None):
    return next((c for c in children if isinstance(c, kind)), default)


def _of(children, kind) -> tuple:
    return tuple(c for c in children if isinstance(c, kind))


def _part(children, name: str) -> list:
    """Children of the sub-tree ``name`` (a helper rule with no transformer method)."""
    tree = next((c for c in children if isinstance(c, Tree) and c.data == name), None)
    return list(tree.children) if tree is not None else []


def _as_time(expr):
    """In a time position, a bare ``0`` is the time value zero (``Time(0, None)``)."""
    if isinstance(expr, Literal) and expr.text.lstrip("-") == "0":
        return Time(0, None, expr.pos)
    return expr


def _grouped(items: list, kind: str, pos: Pos):
    """The value of ``x(e)``/``x{e}``: the expression itself, or a BraceList for 0 or 2+ items."""
    return items[0] if len(items) == 1 else BraceList(tuple(items), kind, pos)


def build(lark: Lark, file: str, text: str) -> Any:
    """The AST (a :class:`~codegen.tree.Model`) of the text ``text`` of ``file``, parsed by
    ``lark`` (made with :func:`codegen.reduction.install_reductions`).

    Raises:
        UnexpectedInput: a syntax error (lark's).
        RecursionError: expressions nested deeper than :data:`codegen.reduction.MAX_TREE_DEPTH`.
        VisitError: a rule's method raised (a bug here, not in the user's file).
    """
    return _ToAst(file, text).parse(lark, text)


class _ToAst(Reducer):
    """One method per grammar rule, called as ``rule(meta, children)`` while the parser
    reduces the rule, with the children already AST nodes; ``meta`` gives the rule's first
    position. A rule without a method stays a ``Tree``; a ``CODE`` token becomes a
    :class:`~codegen.tree.Code`."""

    TERMINALS = frozenset({"CODE"})

    def __init__(self, file: str, text: str):
        super().__init__()
        self.file, self.text = file, text

    def _pos(self, meta) -> Pos:
        return Pos(self.file, meta.line, meta.column)

    def _tpos(self, token: Token) -> Pos:
        assert token.line is not None and token.column is not None  # the lexer sets both
        return Pos(self.file, token.line, token.column)

    def CODE(self, token: Token) -> Code:  # a terminal callback, not a rule
        pos = self._tpos(token)
        text, body_line = code_body(token.value, pos.line)
        return Code(text, pos, body_line)

    # ---- file, target, imports, preambles

    def start(self, meta, ch) -> Model:
        return Model(
            self.file,
            _first(ch, Target),
            _of(ch, Import),
            _of(ch, Preamble),
            _of(ch, Reactor),
            source=self.text,
        )

    def target_decl(self, meta, ch) -> Target:
        props = _first(ch, PropDict)
        return Target(str(ch[0]), props.pairs if props else (), self._pos(meta))

    def prop_dict(self, meta, ch) -> PropDict:
        return PropDict(tuple(ch), self._pos(meta))

    def key_value(self, meta, ch) -> KeyValue:
        key = ch[0][1:-1] if ch[0].type == "STRING" else str(ch[0])
        return KeyValue(key, ch[1], self._pos(meta))

    def prop_word(self, meta, ch) -> PropIdent:
        return PropIdent(str(ch[0]), self._pos(meta))

    def prop_list(self, meta, ch) -> PropList:
        return PropList(tuple(ch), self._pos(meta))

    def import_decl(self, meta, ch) -> Import:
        path = ch[-1]
        return Import(_of(ch, ImportedName), path[1:-1], path.type == "PKGPATH", self._pos(meta))

    def imported(self, meta, ch) -> ImportedName:
        return ImportedName(str(ch[0]), str(ch[1]) if len(ch) > 1 else None, self._pos(meta))

    def preamble(self, meta, ch) -> Preamble:
        visibility = str(ch[0]) if len(ch) > 1 else None
        return Preamble(ch[-1], visibility, self._pos(meta))

    # ---- attributes

    def attribute(self, meta, ch) -> Attribute:
        return Attribute(str(ch[0]), tuple(ch[1:]), self._pos(meta))

    def attr_param(self, meta, ch) -> AttrParam:
        name = str(ch[0]) if len(ch) > 1 else None
        return AttrParam(name, ch[-1], self._pos(meta))

    def reactor(self, meta, ch):
        """``attribute* declaration``: the attributes go on the declaration."""
        return replace(ch[-1], attributes=tuple(ch[:-1]))

    param = attributed = reactor

    # ---- reactors

    def reactor_decl(self, meta, ch) -> Reactor:
        mods = {t.type for t in _tokens(ch, "MAIN", "FEDERATED", "REALTIME")}
        names = _tokens(ch, "IDENT")
        name = names[0] if names else None
        return Reactor(
            name=str(name) if name else None,
            main="MAIN" in mods,
            federated="FEDERATED" in mods,
            realtime="REALTIME" in mods,
            parameters=tuple(_part(ch, "params")),
            type_params=tuple(str(t) for t in _part(ch, "type_list")),
            extends=tuple((str(t), self._tpos(t)) for t in _part(ch, "extends")),
            host=self._host(ch),
            members=_of(ch, _MEMBER),
            attributes=(),
            pos=self._pos(meta),
            name_pos=self._tpos(name) if name else None,
        )

    def _host(self, ch) -> str | None:
        host = _part(ch, "host")
        return str(host[0]) if host else None

    def param_decl(self, meta, ch) -> Parameter:
        kind = _first(ch, _Type)
        return Parameter(
            str(ch[0]), _first(ch, _EXPR), kind.text if kind else None, (), self._pos(meta)
        )

    def type_ann(self, meta, ch) -> _Type:
        return _Type(ch[0].text if isinstance(ch[0], Code) else str(ch[0]))

    # ---- state, ports, timers, actions

    def state_decl(self, meta, ch) -> StateVar:
        init, kind = _first(ch, _Init, _Init("=", None)), _first(ch, _Type)
        return StateVar(
            str(_tokens(ch, "IDENT")[0]),
            init.value,
            bool(_tokens(ch, "RESET")),
            kind.text if kind else None,
            (),
            self._pos(meta),
            init.style,
        )

    def init_eq(self, meta, ch) -> _Init:
        return _Init("=", ch[0])

    def init_paren(self, meta, ch) -> _Init:
        return _Init("paren", _grouped(ch, "paren", self._pos(meta)))

    def init_brace(self, meta, ch) -> _Init:
        return _Init("brace", _grouped(ch, "brace", self._pos(meta)))

    def port_decl(self, meta, ch) -> PortDecl:
        kind, name = _tokens(ch, "INPUT", "OUTPUT")[0], _tokens(ch, "IDENT")[0]
        typ = _first(ch, _Type)
        return PortDecl(
            str(kind),
            str(name),
            _first(ch, Width),
            bool(_tokens(ch, "MUTABLE")),
            typ.text if typ else None,
            (),
            self._pos(meta),
        )

    def width(self, meta, ch) -> Width:
        return Width(tuple(ch), self._pos(meta))

    def width_int(self, meta, ch) -> Literal:
        return Literal(str(ch[0]), self._pos(meta))

    def widthof(self, meta, ch) -> WidthOf:
        return WidthOf(".".join(ch), self._pos(meta))

    def timer_decl(self, meta, ch) -> TimerDecl:
        times = [_as_time(e) for e in ch[1:]] + [None, None]
        return TimerDecl(str(ch[0]), times[0], times[1], (), self._pos(meta))

    def action_decl(self, meta, ch) -> ActionDecl:
        origin = _tokens(ch, "LOGICAL", "PHYSICAL")
        times = [_as_time(e) for e in _of(ch, _EXPR)] + [None, None]
        policy, typ = _tokens(ch, "STRING"), _first(ch, _Type)
        return ActionDecl(
            str(_tokens(ch, "IDENT")[0]),
            str(origin[0]) if origin else None,
            times[0],
            times[1],
            policy[0][1:-1] if policy else None,
            typ.text if typ else None,
            (),
            self._pos(meta),
        )

    # ---- reactions, methods, watchdogs, modes

    def reaction_decl(self, meta, ch) -> Reaction:
        name, kind = _tokens(ch, "IDENT"), _tokens(ch, "REACTION", "MUTATION")[0]
        return Reaction(
            name=str(name[0]) if name else None,
            triggers=tuple(_part(ch, "triggers")),
            sources=tuple(_part(ch, "sources")),
            effects=tuple(_part(ch, "effects")),
            code=_first(ch, Code),
            deadline=_first(ch, Deadline),
            tardy=_first(ch, Tardy),
            attributes=(),
            pos=self._pos(meta),
            is_mutation=kind.type == "MUTATION",
        )

    def builtin_trigger(self, meta, ch) -> VarRef:
        return VarRef(None, str(ch[0]), False, self._pos(meta))

    keyword_effect = builtin_trigger

    def var_ref(self, meta, ch) -> VarRef:
        container = str(ch[0]) if len(ch) > 1 else None
        return VarRef(container, str(ch[-1]), False, self._pos(meta))

    def interleaved_ref(self, meta, ch) -> VarRef:
        return replace(self.var_ref(meta, ch), interleaved=True)

    def transition(self, meta, ch) -> ModeTransition:
        return ModeTransition(str(ch[1]), str(ch[0]), self._pos(meta))

    def deadline(self, meta, ch) -> Deadline:
        return Deadline(_as_time(ch[0]), ch[1], self._pos(meta))

    def tardy(self, meta, ch) -> Tardy:
        if ch[0].type == "TARDY":
            return Tardy(str(ch[0]), None, ch[1] if len(ch) > 1 else None, self._pos(meta))
        return Tardy(str(ch[0]), _as_time(ch[1]), ch[2], self._pos(meta))

    def method_decl(self, meta, ch) -> Method:
        ret = _first(ch, _Type)
        return Method(
            str(_tokens(ch, "IDENT")[0]),
            _of(ch, MethodArg),
            ret.text if ret else None,
            bool(_tokens(ch, "CONST")),
            ch[-1],
            self._pos(meta),
        )

    def method_arg(self, meta, ch) -> MethodArg:
        typ = _first(ch, _Type)
        return MethodArg(str(ch[0]), typ.text if typ else None, self._pos(meta))

    def watchdog_decl(self, meta, ch) -> Watchdog:
        return Watchdog(
            str(ch[0]), _as_time(ch[1]), tuple(_part(ch, "effects")), ch[-1], self._pos(meta)
        )

    def mode_decl(self, meta, ch) -> Mode:
        return Mode(
            str(_tokens(ch, "IDENT")[0]),
            bool(_tokens(ch, "INITIAL")),
            _of(ch, _MEMBER),
            self._pos(meta),
        )

    # ---- instances, connections

    def instantiation(self, meta, ch) -> Instantiation:
        name, cls = _tokens(ch, "IDENT")[:2]
        return Instantiation(
            str(name),
            str(cls),
            _first(ch, Width),
            _of(ch, Assignment),
            tuple(str(t) for t in _part(ch, "type_list")),
            self._host(ch),
            (),
            self._pos(meta),
        )

    def assign_eq(self, meta, ch) -> Assignment:
        return Assignment(str(ch[0]), ch[1], self._pos(meta))

    def assign_paren(self, meta, ch) -> Assignment:
        pos = self._pos(meta)
        return Assignment(str(ch[0]), _grouped(ch[1:], "paren", pos), pos, "paren")

    def assign_brace(self, meta, ch) -> Assignment:
        pos = self._pos(meta)
        return Assignment(str(ch[0]), _grouped(ch[1:], "brace", pos), pos, "brace")

    def connection(self, meta, ch) -> Connection:
        arrow = _tokens(ch, "ARROW", "PHYSICAL_ARROW")[0]
        split = ch.index(arrow)
        lhs, rhs = ch[:split], ch[split + 1 :]
        group = _first(lhs, Tree)
        iterated = group is not None and bool(_tokens(group.children, "PLUS"))
        lhs_refs = _of(group.children, VarRef) if group is not None else _of(lhs, VarRef)
        serializer = _tokens(rhs, "STRING")
        return Connection(
            lhs_refs,
            _of(rhs, VarRef),
            iterated,
            arrow.type == "PHYSICAL_ARROW",
            _as_time(_first(rhs, _EXPR)),
            serializer[0][1:-1] if serializer else None,
            (),
            self._pos(meta),
        )

    # ---- expressions

    def literal(self, meta, ch) -> Literal:
        return Literal(str(ch[0]), self._pos(meta))

    def time(self, meta, ch) -> Time:
        if len(ch) == 2:
            return Time(int(ch[0]), ch[1].strip(), self._pos(meta))
        return Time(0, str(ch[0]), self._pos(meta))

    def param_ref(self, meta, ch) -> ParamRef:
        return ParamRef(str(ch[0]), self._pos(meta))

    def list_expr(self, meta, ch) -> ListExpr:
        return ListExpr(tuple(ch), self._pos(meta))

    def brace_list(self, meta, ch) -> BraceList:
        return BraceList(tuple(ch), "brace", self._pos(meta))

    def paren_list(self, meta, ch) -> BraceList:
        return BraceList(tuple(ch), "paren", self._pos(meta))
