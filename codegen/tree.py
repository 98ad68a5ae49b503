"""The abstract syntax tree of a Lingua Franca (Python target) file.

Plain frozen dataclasses, one per construct of ``lf-python-spec.md`` §1. Every node
carries the :class:`Pos` it came from so that later stages can report
``file.lf:LINE:COL: error: ...``. The parser (:mod:`codegen.parse`) builds these; no
stage mutates them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pos:
    """A position in a source file: 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


# --------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Literal:
    """A literal copied verbatim into Python: ``42``, ``-5``, ``1.5``, ``"s"``, ``'c'``, ``True``."""

    text: str
    pos: Pos


@dataclass(frozen=True)
class Time:
    """A time value ``<magnitude> <unit>``; ``unit`` is None for a bare ``0``.

    ``forever`` and ``never`` are represented with unit ``"forever"``/``"never"`` and magnitude 0.
    The unit is kept as written; :mod:`codegen.check` validates it.
    """

    magnitude: int
    unit: str | None
    pos: Pos


@dataclass(frozen=True)
class ParamRef:
    """A bare identifier in an expression: a reference to a parameter of the enclosing reactor."""

    name: str
    pos: Pos


@dataclass(frozen=True)
class Code:
    """A target-code block ``{= ... =}``.

    ``text`` is the body de-indented by its common leading whitespace (a one-line body is
    stripped); ``pos`` is the position of ``{=``; ``body_line`` is the file line on which the
    first line of ``text`` stands (for line maps).
    """

    text: str
    pos: Pos
    body_line: int


@dataclass(frozen=True)
class ListExpr:
    """A bracket list ``[e1, e2]`` (Python list)."""

    items: tuple[Expr, ...]
    pos: Pos


@dataclass(frozen=True)
class BraceList:
    """A brace list ``{a, b}`` or parenthesised list ``(a, b)``: parsed so that the checker can
    reject it for Python with a located error."""

    items: tuple[Expr, ...]
    kind: str  # "brace" | "paren"
    pos: Pos


Expr = Literal | Time | ParamRef | Code | ListExpr | BraceList


# --------------------------------------------------------------------------- target, imports


@dataclass(frozen=True)
class KeyValue:
    """One ``key: value`` pair of a target property list or of a nested dictionary."""

    key: str
    value: PropValue
    pos: Pos


@dataclass(frozen=True)
class PropDict:
    pairs: tuple[KeyValue, ...]
    pos: Pos


@dataclass(frozen=True)
class PropList:
    items: tuple[PropValue, ...]
    pos: Pos


@dataclass(frozen=True)
class PropIdent:
    """A bare identifier or path value (``DEBUG``, ``include/hello.py``)."""

    text: str
    pos: Pos


PropValue = Literal | Time | PropIdent | PropDict | PropList


@dataclass(frozen=True)
class Target:
    name: str
    properties: tuple[KeyValue, ...]
    pos: Pos


@dataclass(frozen=True)
class ImportedName:
    name: str
    alias: str | None
    pos: Pos


@dataclass(frozen=True)
class Import:
    """``import A, B as C from "path.lf"``; ``package`` is True for the ``<pkg/...>`` form."""

    names: tuple[ImportedName, ...]
    path: str
    package: bool
    pos: Pos


@dataclass(frozen=True)
class Preamble:
    code: Code
    visibility: str | None  # "private" | "public" | None
    pos: Pos


# --------------------------------------------------------------------------- attributes


@dataclass(frozen=True)
class AttrParam:
    """One attribute argument: positional (``name`` None) or ``key = value``."""

    name: str | None
    value: Expr
    pos: Pos


@dataclass(frozen=True)
class Attribute:
    """``@name`` or ``@name(args)``."""

    name: str
    params: tuple[AttrParam, ...]
    pos: Pos


# --------------------------------------------------------------------------- reactor members


@dataclass(frozen=True)
class Parameter:
    """A reactor parameter; ``doc`` is its one-line description from the comment beside or
    above it (:mod:`codegen.doc_comments`), "" without one."""

    name: str
    default: Expr | None  # None is an error reported by the checker
    type: str | None  # any type annotation (an error in Python)
    attributes: tuple[Attribute, ...]
    pos: Pos
    doc: str = ""


@dataclass(frozen=True)
class StateVar:
    name: str
    init: Expr | None
    reset: bool
    type: str | None
    attributes: tuple[Attribute, ...]
    pos: Pos
    init_style: str = "="  # "=" | "brace" | "paren" (the latter two are errors in Python)


@dataclass(frozen=True)
class Width:
    """A width specification ``[N]``, ``[p]``, ``[a + 2]``; ``terms`` is empty for ``[]``."""

    terms: tuple[Literal | ParamRef | Code | WidthOf, ...]
    pos: Pos


@dataclass(frozen=True)
class WidthOf:
    """``widthof(x)`` inside a width: an error for Python, kept for the message."""

    ref: str
    pos: Pos


@dataclass(frozen=True)
class PortDecl:
    kind: str  # "input" | "output"
    name: str
    width: Width | None
    mutable: bool
    type: str | None
    attributes: tuple[Attribute, ...]
    pos: Pos


@dataclass(frozen=True)
class TimerDecl:
    name: str
    offset: Expr | None
    period: Expr | None
    attributes: tuple[Attribute, ...]
    pos: Pos


@dataclass(frozen=True)
class ActionDecl:
    name: str
    origin: str | None  # "logical" | "physical" | None (an error)
    min_delay: Expr | None
    min_spacing: Expr | None
    policy: str | None  # the string's contents, quotes removed
    type: str | None
    attributes: tuple[Attribute, ...]
    pos: Pos


@dataclass(frozen=True)
class VarRef:
    """A reference in a reaction signature or connection.

    ``container`` is the instance name for ``c.out`` (None for own ports/actions/timers);
    ``interleaved`` marks ``interleaved(b.p)``. Built-in triggers (``startup``, ``shutdown``,
    ``reset``) are VarRefs with container None and that name.
    """

    container: str | None
    name: str
    interleaved: bool
    pos: Pos

    def __str__(self) -> str:
        return f"{self.container}.{self.name}" if self.container else self.name


@dataclass(frozen=True)
class ModeTransition:
    """An effect ``reset(M)``, ``history(M)`` (kind) or a bare mode name (kind ``"default"``)."""

    mode: str
    kind: str  # "reset" | "history" | "default"
    pos: Pos


@dataclass(frozen=True)
class Deadline:
    delay: Expr
    code: Code
    pos: Pos


@dataclass(frozen=True)
class Tardy:
    """A federated ``STP(t)``/``STAA(t)``/``tardy`` handler (parsed; rejected by the checker)."""

    keyword: str
    delay: Expr | None
    code: Code | None
    pos: Pos


@dataclass(frozen=True)
class Reaction:
    name: str | None
    triggers: tuple[VarRef, ...]
    sources: tuple[VarRef, ...]
    effects: tuple[VarRef | ModeTransition, ...]
    code: Code | None  # None: a bodiless reaction declaration (an error in Python)
    deadline: Deadline | None
    tardy: Tardy | None
    attributes: tuple[Attribute, ...]
    pos: Pos
    is_mutation: bool = False


@dataclass(frozen=True)
class MethodArg:
    name: str
    type: str | None
    pos: Pos


@dataclass(frozen=True)
class Method:
    name: str
    args: tuple[MethodArg, ...]
    return_type: str | None
    const: bool
    code: Code
    pos: Pos


@dataclass(frozen=True)
class Assignment:
    """``name = value`` in an instantiation."""

    name: str
    value: Expr
    pos: Pos
    style: str = "="  # "=" | "brace" | "paren"


@dataclass(frozen=True)
class Instantiation:
    name: str
    class_name: str
    width: Width | None  # bank width; None for a single instance
    assignments: tuple[Assignment, ...]
    type_args: tuple[str, ...]
    host: str | None
    attributes: tuple[Attribute, ...]
    pos: Pos


@dataclass(frozen=True)
class Connection:
    """``lhs -> rhs [after d] [serializer "s"]``; ``iterated`` is the broadcast ``( ... )+`` form;
    ``physical`` is ``~>``."""

    lhs: tuple[VarRef, ...]
    rhs: tuple[VarRef, ...]
    iterated: bool
    physical: bool
    delay: Expr | None
    serializer: str | None
    attributes: tuple[Attribute, ...]
    pos: Pos


@dataclass(frozen=True)
class Watchdog:
    name: str
    timeout: Expr
    effects: tuple[VarRef | ModeTransition, ...]
    code: Code
    pos: Pos


@dataclass(frozen=True)
class Mode:
    name: str
    initial: bool
    members: tuple[Member, ...]
    pos: Pos


Member = (
    Preamble
    | StateVar
    | Method
    | PortDecl
    | TimerDecl
    | ActionDecl
    | Watchdog
    | Instantiation
    | Connection
    | Reaction
    | Mode
)


@dataclass(frozen=True)
class Reactor:
    """A reactor class. ``name`` is None only for an unnamed main/federated reactor."""

    name: str | None
    main: bool
    federated: bool
    realtime: bool
    parameters: tuple[Parameter, ...]
    type_params: tuple[str, ...]
    extends: tuple[tuple[str, Pos], ...]
    host: str | None
    members: tuple[Member, ...]
    attributes: tuple[Attribute, ...]
    pos: Pos
    name_pos: Pos | None = None

    def of(self, kind: type) -> list:
        """The members of one kind declared directly in the body (not inside modes)."""
        return [m for m in self.members if isinstance(m, kind)]


@dataclass(frozen=True)
class Model:
    """One parsed ``.lf`` file."""

    file: str
    target: Target | None
    imports: tuple[Import, ...]
    preambles: tuple[Preamble, ...]
    reactors: tuple[Reactor, ...]
    source: str = field(repr=False, default="")
