"""Main-reactor parameters given on a program's command line (``--seed 3``) or to ``lfc -D``.

A value is an LF expression, read as the compiler reads a parameter default: an integer or a
number (``3``, ``-1.5e3``), a string (``"CartPole-v1"``), ``true``/``false``, a time
(``10 msec``, ``forever``, ``never``), a list (``[1, 2 sec]``) or target code
(``{= dict(a=1) =}``).

A value must be of its parameter's :class:`Kind`: that of the declared type when there is one,
else that of the default's literal (:func:`kind_of`). An integer is fine for a number (as in
Python), a float is not fine for an integer (``2.0`` neither: the program would get the float
2.0, which ``range`` and numpy's seeds refuse), ``0`` is a time, a list's items
must be of the kind its default's items share (integers and numbers share "number"), and a
string parameter takes any text that is not quoted as that text (``--env_id CartPole-v1``,
``--tag 2024-01``). A parameter whose default is target code takes any value, and target code
given as a value is not checked (it is Python: what it returns is its author's business). The
rule is :func:`check`, used by the program's command line (:func:`argument`) and by ``lfc -D``.

Target code is evaluated when the program is built, in the generated module's namespace (as
the parameter's default would be), in every worker; the other values are plain Python values.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.tag import FOREVER, NEVER_INT64
from ..core.units import is_unit, parse_duration

_TIME = re.compile(r"(\d+)\s*([A-Za-z_]\w*)")
_PAIRS = {"[": "]", "(": ")", "{": "}"}


@dataclass(frozen=True)
class Argument:
    """``--name text``: a main parameter and the LF expression given for it."""

    name: str
    text: str


def to_pairs(arguments: Iterable[Argument]) -> list[list[str]]:
    """``[[name, text], ...]``: how a snapshot's or a recording's manifest keeps the
    arguments of a run."""
    return [[a.name, a.text] for a in arguments]


def beneath(kept: Iterable[Sequence[str]], given: tuple[Argument, ...]) -> tuple[Argument, ...]:
    """The arguments of an earlier run (``kept``, pairs from :func:`to_pairs`) with those
    ``given`` now on top: a run that continues or replays another takes its parameters unless
    told otherwise."""
    names = {a.name for a in given}
    return tuple(Argument(n, t) for n, t in kept if n not in names) + given


@dataclass(frozen=True)
class Code:
    """Target code ``{= text =}``, evaluated when the program is built."""

    text: str


class _NotAValue(ValueError):
    """The text is no LF value at all (a bare word, two numbers...)."""


@dataclass(frozen=True)
class Kind:
    """The kind of value a parameter takes: ``name`` is "int", "float" (a number), "bool",
    "string", "time" or "list"; ``item`` the kind every item of a list must be (None: any)."""

    name: str
    item: Kind | None = None

    @property
    def noun(self) -> str:
        """What a value of this kind is, in words: ``an integer``, ``a list of numbers``."""
        if self.name == "list" and self.item is not None:
            return f"a list of {_NOUNS[self.item.name][1]}"
        return _NOUNS[self.name][0]


#: Kind name -> (a value of it, values of it), in words.
_NOUNS = {
    "int": ("an integer", "integers"),
    "float": ("a number", "numbers"),
    "bool": ("true or false", "booleans"),
    "string": ("a string", "strings"),
    "time": ("a time", "times"),
    "list": ("a list", "lists"),
}
#: What a parameter whose default is target code takes, in words.
_ANY = "any LF value or {= code =}"
#: A declared type's name -> its kind (LF's and Python's names). The Python target refuses a
#: declared type (spec §1.6), so in practice the kind comes from the default.
_DECLARED = {
    "int": Kind("int"),
    "float": Kind("float"),
    "bool": Kind("bool"),
    "str": Kind("string"),
    "string": Kind("string"),
    "time": Kind("time"),
}


def kind_of(default: str, declared: str | None = None) -> Kind | None:
    """The kind of a parameter declared with type ``declared`` (None: none; a name not in
    the table: none either) and default ``default`` (its ``.lf`` text); None when any value
    will do: the default is target code, or no LF value."""
    if declared is not None and declared.strip() in _DECLARED:
        return _DECLARED[declared.strip()]
    try:
        return _literal_kind(default)
    except ValueError:
        return None


def check(name: str, text: str, default: str, declared: str | None = None, where: str = "") -> str:
    """``text`` given for the parameter ``name`` (default ``default``, its ``.lf`` text, at
    ``where``: ``file.lf:LINE``; declared type ``declared``) as the LF expression to use: the
    text itself, or a string parameter's text as a quoted string. The rule is the module's.

    Raises:
        ValueError: ``text`` is not a value of the parameter's kind; the message says what is
            wrong, the kind and the default: ``not an integer; seed takes an integer
            (default 1, P.lf:3)``.
    """
    kind = kind_of(default, declared)
    if kind == _DECLARED["string"]:
        text = _as_string(text)
    problem = _problem(text, kind)
    if problem is None:
        return text.strip()
    at = f", {where}" if where else ""
    raise ValueError(
        f"{problem}; {name} takes {kind.noun if kind else _ANY} (default {default}{at})"
    )


def argument(
    name: str, text: str, default: str = "", declared: str | None = None, where: str = ""
) -> Argument:
    """``--name text`` checked by :func:`check` (``default``, ``declared``, ``where``: the
    parameter's default text, declared type and ``file.lf:LINE``).

    Raises:
        ValueError: ``--name text: <what is wrong>; <the kind> (<the default>)``.
    """
    try:
        return Argument(name, check(name, text, default, declared, where))
    except ValueError as e:
        raise ValueError(f"--{name} {text}: {e}") from None


def close_match(name: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` that ``name`` is most likely a misspelling of (difflib's
    similarity ratio of at least 0.6, its default), or None."""
    found = difflib.get_close_matches(name, list(names), n=1)
    return found[0] if found else None


def _as_string(text: str) -> str:
    """A string parameter's ``text`` as an LF string (double quotes, as LF's grammar and
    Python read it): a quoted string requoted, target code as is, other text as it is."""
    s = text.strip()
    if _is_code(s):
        return s
    value: object = text
    if s.startswith(("'", '"')):
        try:
            value = ast.literal_eval(s)
        except (ValueError, SyntaxError):
            pass
    return json.dumps(value if isinstance(value, str) else text, ensure_ascii=False)


def _problem(text: str, kind: Kind | None) -> str | None:
    """What is wrong with ``text`` as a value of ``kind`` (None: of any kind), or None."""
    s = text.strip()
    if kind is not None and kind.item is not None and s.startswith("[") and s.endswith("]"):
        return _item_problem(s, kind.item)
    try:
        given = _literal_kind(s)
    except _NotAValue:
        return f"not {_NOUNS[kind.name][0] if kind else 'an LF value'}"
    except ValueError as e:
        return str(e)
    if kind is None or given is None or kind == given:  # given None: target code
        return None
    if kind.name == "time" and given.name == "int" and parse_value(s) != 0:
        return f"a time needs a unit (e.g. {s} msec)"
    if (kind.name, given.name) in (("time", "int"), ("float", "int")) or kind.name == given.name:
        return None  # 0 is a time; an integer is a number; a list of other items is a list
    return f"not {_NOUNS[kind.name][0]}"


def _item_problem(s: str, item: Kind) -> str | None:
    """What is wrong with an item of the list ``s`` as a value of ``item``, or None."""
    for part in _split_items(s[1:-1]):
        problem = _problem(part, item)
        if problem is not None:
            return f"{part.strip()} is {problem}" if problem.startswith("not ") else problem
    return None


def _literal_kind(text: str) -> Kind | None:
    """The kind of the LF value ``text``; None for target code.

    Raises:
        ValueError: ``text`` is not an LF value (:func:`parse_value`'s message).
    """
    s = text.strip()
    value = parse_value(s)
    if isinstance(value, Code):
        return None
    if isinstance(value, list):
        return Kind("list", _shared([_literal_kind(item) for item in _split_items(s[1:-1])]))
    if isinstance(value, bool):
        return Kind("bool")
    if isinstance(value, str):
        return Kind("string")
    if isinstance(value, float):
        return Kind("float")
    return Kind("time") if _is_time(s) else Kind("int")


def _shared(kinds: list[Kind | None]) -> Kind | None:
    """The kind that all of ``kinds`` are (integers and numbers: number); None when there
    are none, one is target code, or they differ."""
    if not kinds or None in kinds:
        return None
    if {k.name for k in kinds if k} == {"int", "float"}:
        return Kind("float")
    return kinds[0] if all(k == kinds[0] for k in kinds) else None


def parse_value(text: str) -> Any:
    """The value of the LF expression ``text``: int, float, str, bool, int nanoseconds for a
    time, a list of values, or :class:`Code`.

    Raises:
        ValueError: ``text`` is not an LF value (e.g. "invalid time unit 'foos'").
    """
    s = text.strip()
    if not s:
        raise ValueError("expected a value")
    if _is_code(s):
        return Code(s[2:-2].strip())
    if s[0] in "({":
        kind = "paren" if s[0] == "(" else "brace"
        raise ValueError(f"{kind} lists are not supported by the Python target: use [a, b]")
    if s[0] == "[":
        if not s.endswith("]"):
            raise ValueError(f"unclosed '[' in {s!r}")
        return [parse_value(item) for item in _split_items(s[1:-1])]
    return _scalar(s)


def _scalar(s: str) -> Any:
    if s in ("true", "True", "false", "False"):
        return s in ("true", "True")
    if s == "forever":
        return FOREVER
    if s == "never":
        return NEVER_INT64
    time = _TIME.fullmatch(s)
    if time and _is_time(s):
        magnitude, unit = time.groups()
        if not is_unit(unit):
            raise ValueError(f"invalid time unit '{unit}'")
        return parse_duration(magnitude, unit)
    try:
        value = ast.literal_eval(s)
    except (ValueError, SyntaxError):
        raise _NotAValue(f"cannot read {s!r} as an LF value") from None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _NotAValue(f"cannot read {s!r} as an LF value")
    return value


def _is_time(s: str) -> bool:
    """Whether the scalar ``s`` is written as a time: ``forever``, ``never`` or an integer
    and a unit (``10 msec``, ``2sec``)."""
    if s in ("forever", "never"):
        return True
    return bool(_TIME.fullmatch(s)) and not s.lower().startswith("0x") and not _number(s)


def _is_code(s: str) -> bool:
    return s.startswith("{=") and s.endswith("=}") and len(s) >= 4


def _number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _split_items(body: str) -> list[str]:
    """The items of a list body ``a, [b, c], "d,e"``, split at its top-level commas."""
    items, depth, start, i, quote = [], 0, 0, 0, ""
    while i < len(body):
        c = body[i]
        if quote:
            quote = "" if c == quote and body[i - 1] != "\\" else quote
        elif body.startswith("{=", i):
            end = body.find("=}", i + 2)
            i = len(body) if end < 0 else end + 1
        elif c in "'\"":
            quote = c
        elif c in _PAIRS:
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
        i += 1
    last = body[start:]
    if last.strip() or items:
        items.append(last)
    return items


def values(arguments: Iterable[Argument], namespace: Mapping[str, Any]) -> dict[str, Any]:
    """Parameter name -> Python value of each argument; target code is evaluated with a copy
    of ``namespace`` (the generated module's globals) as its globals.

    Raises:
        ValueError: a value that is not an LF value (see :func:`parse_value`).
        Exception: whatever evaluating target code raises.
    """
    return {a.name: _resolve(parse_value(a.text), namespace) for a in arguments}


def _resolve(value: Any, namespace: Mapping[str, Any]) -> Any:
    if isinstance(value, Code):
        return eval(f"({value.text}\n)", dict(namespace))  # noqa: S307 - the program's own code
    if isinstance(value, list):
        return [_resolve(v, namespace) for v in value]
    return value
