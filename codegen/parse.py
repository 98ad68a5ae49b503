"""Parse a Lingua Franca (target Python) file into the AST of :mod:`codegen.tree`.

The grammar is ``grammar.lark`` (LALR(1), contextual lexer). The parse tree is turned into
frozen dataclasses by :class:`_ToAst`, one small method per grammar rule. Syntax errors become
``file:LINE:COL: error: ...`` diagnostics; no lark or Python exception escapes.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, NamedTuple, get_args

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import PatternStr

from .diagnostics import Reporter
from .lexing import code_body, end_position, find_lexical_error, line_col
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

__all__ = ["parse", "parse_file"]

_EXPR = (Literal, Time, ParamRef, Code, ListExpr, BraceList)
# Deeper parse trees (expressions nested inside each other) are refused: the compiler's later
# passes recurse on them too.
_MAX_TREE_DEPTH = 300
_MEMBER = get_args(Member)

# How terminals are named in "expected one of: ..." (keywords and punctuation are quoted).
_TERMINAL_NAMES = {
    "IDENT": "identifier",
    "INT": "integer",
    "NEGINT": "integer",
    "FLOAT": "number",
    "STRING": "string",
    "CHAR": "character literal",
    "CODE": "code block '{= ... =}'",
    "UNIT": "time unit",
    "BOOL": "boolean",
    "KEBAB": "property name",
    "PROPWORD": "identifier or path",
    "PKGPATH": "'<package/path.lf>'",
    "HOST": "host name",
    "TYPE": "type",
    "$END": "end of file",
}


def parse(text: str, file: str, reporter: Reporter) -> Model:
    """Parse the text of one ``.lf`` file.

    Parameters:
        text: the file's contents.
        file: the path used in positions and messages.
        reporter: receives the syntax error, if any; the text is recorded in
            ``reporter.sources`` so that diagnostics can show the line.

    Returns:
        The file's :class:`~codegen.tree.Model`.

    Raises:
        CompileError: after reporting a syntax or lexical error (via ``reporter.check()``).
    """
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    reporter.sources[file] = text
    try:
        with _no_cycle_collection():
            return _ToAst(file, text).parse(text)
    except UnexpectedInput as err:
        message, offset = _describe(err, text)
        line, col = line_col(text, offset) if offset < len(text) else end_position(text)
        reporter.error(message, Pos(file, line, col))
    except VisitError as err:  # a bug in a transformer method, not in the user's file
        reporter.error(f"internal error while parsing {file}: {err.orig_exc!r}", None)
    except RecursionError:
        reporter.error(f"{file}: expression nested too deeply", None)
    reporter.check()
    raise AssertionError("unreachable: an error was reported")


def parse_define(name: str, text: str, reporter: Reporter) -> Model:
    """Parse ``lfc -D name=text`` as a file ``<-D name>`` that declares one main reactor with
    the one parameter ``name = text`` (so that it is checked like one written in a file).

    Raises:
        CompileError: after reporting a syntax error in ``text``.
    """
    return parse(f"target Python\nmain reactor X({name} = {text}) {{}}\n", f"<-D {name}>", reporter)


def parse_file(path: str, reporter: Reporter) -> Model:
    """Read and parse one ``.lf`` file.

    Parameters:
        path: the file to read (UTF-8); it is also the file name used in positions.
        reporter: receives read and syntax errors.

    Returns:
        The file's :class:`~codegen.tree.Model`.

    Raises:
        CompileError: when the file cannot be read (an error with no position, "cannot read
            ...") or does not parse.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        reporter.error(f"cannot read {path}: {reason}", None)
        reporter.check()
    return parse(text, path, reporter)


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause Python's cycle collector: a parse makes millions of objects that all live on
    (the tree, then the AST; no cycles among them), and on a large file the collector's
    repeated scans of them took more time than the parse itself. Memory is still freed by
    reference counting."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = Path(__file__).with_name("grammar.lark").read_text(encoding="utf-8")
    lark = Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        propagate_positions=False,  # positions come with the reductions
        maybe_placeholders=False,
        cache=True,
    )
    _install_reductions(lark)
    return lark


# --------------------------------------------------------------------------- error messages


def _describe(err: UnexpectedInput, text: str) -> tuple[str, int]:
    """``(message, offset)`` for a lark error; a lexical cause at or before it takes precedence."""
    if isinstance(err, UnexpectedToken):
        value = err.token.value
        offset = len(text) if err.token.type == "$END" else err.token.start_pos
        offset += len(value) - len(value.lstrip())  # a time unit token starts with blanks
        found = _found(err.token)
    else:
        offset = getattr(err, "pos_in_stream", -1)
        offset = offset if 0 <= offset < len(text) else len(text)
        found = f"character {text[offset]!r}" if offset < len(text) else "end of file"
    code_re = re.compile(_lark().get_terminal("CODE").pattern.to_regexp())
    lexical = find_lexical_error(text, code_re)
    if lexical is not None and lexical.offset <= offset:
        return lexical.message, lexical.offset
    expected = _expected(err) - _IGNORED
    if found == "end of file" and expected & _CLOSERS:
        expected &= _CLOSERS  # at the end only closing what is open can help
    names = sorted({_display(t) for t in expected})
    if not names:
        return f"unexpected {found}", offset
    listed = names[0] if len(names) == 1 else "one of: " + ", ".join(names)
    return f"unexpected {found}, expected {listed}", offset


_IGNORED = {"WS", "LINE_COMMENT", "BLOCK_COMMENT"}
_CLOSERS = {"RBRACE", "RPAR", "RSQB"}


def _expected(err: UnexpectedInput) -> set[str]:
    """Terminal names that the parser accepts where it failed (exact, unlike LALR lookaheads)."""
    # UnexpectedToken knows what was expected; UnexpectedCharacters what was allowed
    fallback = set(
        err.expected if isinstance(err, UnexpectedToken) else getattr(err, "allowed", None) or ()
    )
    parser = getattr(err, "interactive_parser", None)
    if parser is None:
        return fallback
    try:
        return set(parser.accepts())
    except UnexpectedInput:
        return fallback


def _found(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    if token.type == "CODE":
        return "code block '{= ... =}'"
    value = token.value.strip()
    return repr(value if len(value) <= 30 else value[:27] + "...")


def _display(name: str) -> str:
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    try:
        pattern = _lark().get_terminal(name).pattern
    except KeyError:
        return name
    if isinstance(pattern, PatternStr):
        return f"'{pattern.value}'"
    keyword = re.fullmatch(r"(\w+)\\b", pattern.value)  # keywords are /word\b/
    return f"'{keyword.group(1)}'" if keyword else name.lower()


# --------------------------------------------------------------------------- tree to AST


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


class _Start(NamedTuple):
    """Where a rule's text starts (what lark's ``meta`` would give: ``line``, ``column``)."""

    line: int
    column: int


class _Reduction(NamedTuple):
    """How the parser reduces one grammar rule: its name (or alias), which matched symbols
    stay (their index, and whether they are an inlined ``_rule`` whose children are spliced
    in) and whether a single remaining child stands for the rule (``?rule``)."""

    name: str
    keep: tuple[tuple[int, bool], ...]
    expand_single: bool


#: The :class:`_ToAst` of the parse under way (the parser's callbacks are shared).
_BUILDER: ContextVar[_ToAst] = ContextVar("_BUILDER")


def _reduce(how: _Reduction, children: list) -> Any:
    return _BUILDER.get().reduce(how, children)


def _install_reductions(lark: Lark) -> None:
    """Make ``lark``'s parser build the AST while it parses (one :meth:`_ToAst.reduce` per
    rule), instead of a parse tree to transform afterwards: the same children reach the
    same methods, with the positions of the rules' first tokens, filtered and inlined as
    lark's tree builder does."""
    callbacks = lark._callbacks  # shared with lark's LALR parser
    for rule in list(callbacks):
        keep = tuple(
            (i, not sym.is_term and sym.name.startswith("_"))
            for i, sym in enumerate(rule.expansion)
            if rule.options.keep_all_tokens or not (sym.is_term and sym.filter_out)
        )
        name = str(rule.alias or rule.origin.name)
        how = _Reduction(name, keep, bool(rule.options.expand1 and not rule.alias))
        callbacks[rule] = partial(_reduce, how)


class _ToAst:
    """One method per grammar rule, called as ``rule(meta, children)`` while the parser
    reduces the rule (:meth:`reduce`), with the children already AST nodes; ``meta`` gives
    the rule's first position. A rule without a method stays a ``Tree``; a ``CODE`` token
    becomes a :class:`~codegen.tree.Code`."""

    def __init__(self, file: str, text: str):
        self.file, self.text = file, text
        self._rules: dict[str, Any] = {}
        # (line, column, depth) of each node made and not yet taken by its parent, by id()
        self._made: dict[int, tuple[int | None, int | None, int]] = {}

    def parse(self, text: str) -> Any:
        """The AST of ``text`` (lark's exceptions propagate).

        Raises:
            RecursionError: expressions nested deeper than :data:`_MAX_TREE_DEPTH`.
            VisitError: a rule's method raised (a bug here, not in the user's file).
        """
        token = _BUILDER.set(self)
        try:
            return _lark().parse(text)
        finally:
            _BUILDER.reset(token)

    def reduce(self, how: _Reduction, children: list) -> Any:
        """The node for one reduction of rule ``how`` over the matched ``children``."""
        made = self._made
        line = column = None
        depth = 0
        for c in children:
            if isinstance(c, Token):
                if line is None:
                    line, column = c.line, c.column
                continue
            entry = made.pop(id(c), None)
            if entry is not None:
                if line is None:
                    line, column = entry[0], entry[1]
                depth = max(depth, entry[2])
        kept: list = []
        for i, splice in how.keep:
            c = children[i]
            if splice:
                if kept:
                    kept += c.children
                else:  # a repetition's left-recursive rule: extend its list, not a copy
                    kept = c.children
            elif isinstance(c, Token) and c.type == "CODE":
                kept.append(self.CODE(c))
            else:
                kept.append(c)
        if how.expand_single and len(kept) == 1:
            node = kept[0]
        else:
            depth += not how.name.startswith("_")  # an inlined rule adds no level
            if depth > _MAX_TREE_DEPTH:
                raise RecursionError(f"parse tree deeper than {_MAX_TREE_DEPTH}")
            node = self._make(how.name, kept, line, column)
        if not isinstance(node, Token):
            made[id(node)] = (line, column, depth)
        return node

    def _make(self, name: str, kept: list, line: int | None, column: int | None) -> Any:
        try:
            rule = self._rules[name]
        except KeyError:
            rule = self._rules[name] = getattr(self, name, None)
        if rule is None:
            return Tree(name, kept)
        meta = _Start(line, column)  # type: ignore[arg-type]  # a rule with a method has tokens
        try:
            return rule(meta, kept)
        except RecursionError:
            raise
        except Exception as e:
            raise VisitError(name, Tree(name, kept), e) from e

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
