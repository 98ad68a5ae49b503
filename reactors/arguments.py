"""Main-reactor parameters given on a program's command line (``--seed 3``).

A value is an LF expression, read as the compiler reads a parameter default: an integer or a
number (``3``, ``-1.5e3``), a string (``"CartPole-v1"``), ``true``/``false``, a time
(``10 msec``, ``forever``, ``never``), a list (``[1, 2 sec]``) or target code
(``{= dict(a=1) =}``); the messages are the compiler's. One convenience: a bare word for a
parameter whose default is a quoted string is that string (``--env_id CartPole-v1``).

Target code is evaluated when the program is built, in the generated module's namespace (as
the parameter's default would be), in every worker; the other values are plain Python values.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .tag import FOREVER, NEVER_INT64
from .units import is_unit, parse_duration

_TIME = re.compile(r"(\d+)\s*([A-Za-z_]\w*)")
_WORD = re.compile(r"[A-Za-z_]\w*")
_PAIRS = {"[": "]", "(": ")", "{": "}"}
#: A bare word a string parameter takes as its value: ``CartPole-v1``, ``runs/a``, ``ALE/Pong-v5``.
_WORD_OR_PATH = re.compile(r"[A-Za-z_][\w./:-]*")
_KEYWORDS = ("true", "false", "True", "False", "forever", "never")


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


def argument(name: str, text: str, default: str = "") -> Argument:
    """``--name text`` checked as an LF value; ``default`` is the parameter's default as
    written (a quoted default makes a bare word a string: the text is then quoted).

    Raises:
        ValueError: ``--name text: <the compiler's message>`` when ``text`` is not a value.
    """
    s = text.strip()
    if _quoted(default.strip()) and _WORD_OR_PATH.fullmatch(s) and s not in _KEYWORDS:
        s = repr(s)
    try:
        parse_value(s)
    except ValueError as e:
        raise ValueError(f"--{name} {text}: {e}") from None
    return Argument(name, s)


def parse_value(text: str) -> Any:
    """The value of the LF expression ``text``: int, float, str, bool, int nanoseconds for a
    time, a list of values, or :class:`Code`.

    Raises:
        ValueError: ``text`` is not an LF value (the message is the compiler's, e.g.
            "invalid time unit 'foos'").
    """
    s = text.strip()
    if not s:
        raise ValueError("expected a value")
    if s.startswith("{=") and s.endswith("=}") and len(s) >= 4:
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
    if time and not s.lower().startswith("0x") and not _number(s):
        magnitude, unit = time.groups()
        if not is_unit(unit):
            raise ValueError(f"invalid time unit '{unit}'")
        return parse_duration(magnitude, unit)
    if _WORD.fullmatch(s):
        raise ValueError(f"a parameter default cannot refer to '{s}'")
    try:
        value = ast.literal_eval(s)
    except (ValueError, SyntaxError):
        raise ValueError(f"cannot read {s!r} as an LF value") from None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"cannot read {s!r} as an LF value")
    return value


def _number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _quoted(s: str) -> bool:
    return len(s) >= 2 and s[0] == s[-1] and s[0] in "'\""


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
