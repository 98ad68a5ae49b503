"""Compile-time values of LF expressions (spec §1.2).

Widths, timer offsets and periods, action delays, deadlines and ``after`` delays are resolved
at compile time from literals and parameter values. A parameter set by ``{= code =}`` has an
:class:`Opaque` value: it is fine at run time but cannot drive structure or timing.
"""

from __future__ import annotations

import ast as pyast
from dataclasses import dataclass
from typing import Any

from . import tree
from .diagnostics import Reporter
from .units import is_time_unit, to_ns


class TimeNs(int):
    """An integer number of nanoseconds that came from a time value (a "time-typed" value)."""


@dataclass(frozen=True)
class Opaque:
    """A value known only at run time (target code)."""

    text: str


def evaluate(expr: tree.Expr | None, scope: dict | None, rep: Reporter) -> Any:
    """The compile-time value of ``expr``.

    ``scope`` maps parameter names to values for parameter references (None: references are
    not allowed here). Unknown units and undefined parameters are reported through ``rep``
    and give None.
    """
    if expr is None:
        return None
    if isinstance(expr, tree.Time):
        if not is_time_unit(expr.unit):
            rep.error(f"invalid time unit '{expr.unit}'", expr.pos)
            return None
        return TimeNs(to_ns(expr.magnitude, expr.unit))
    if isinstance(expr, tree.Literal):
        return _literal(expr.text)
    if isinstance(expr, tree.ParamRef):
        if scope is None or expr.name not in scope:
            rep.error(f"'{expr.name}' is not a parameter of this reactor", expr.pos)
            return None
        return scope[expr.name]
    if isinstance(expr, tree.Code):
        return Opaque(expr.text)
    if isinstance(expr, tree.ListExpr):
        return [evaluate(e, scope, rep) for e in expr.items]
    return None


def _literal(text: str) -> Any:
    if text in ("true", "false"):
        return Opaque(text)
    if text.isascii() and text.isdigit() and (text[0] != "0" or text == "0"):
        return int(text)  # what literal_eval gives for a decimal integer, without parsing
    try:
        return pyast.literal_eval(text)
    except (ValueError, SyntaxError):
        return Opaque(text)


def time_of(expr: tree.Expr | None, scope: dict | None, rep: Reporter, what: str) -> int | None:
    """Resolve ``expr`` as a time in nanoseconds; None when absent or invalid (reported)."""
    if expr is None:
        return None
    value = evaluate(expr, scope, rep)
    if isinstance(value, int) and not isinstance(value, bool):
        if isinstance(value, TimeNs) or value == 0:
            return int(value)
        rep.error(f"{what} needs a time unit, e.g. '{value} msec'", expr.pos)
        return None
    if value is not None:
        rep.error(
            f"{what} must be a time value or a time parameter known at compile time", expr.pos
        )
    return None


def width_of(width: tree.Width | None, scope: dict, rep: Reporter) -> int:
    """The width of a multiport or bank; -2 for a plain port (no width given)."""
    if width is None:
        return -2
    if not width.terms:
        rep.error(
            "variable-width multiports and banks are not supported by the Python target", width.pos
        )
        return 1
    total = 0
    for term in width.terms:
        if isinstance(term, tree.WidthOf):
            rep.error("widthof(...) is not supported by the Python target", term.pos)
            return 1
        if isinstance(term, tree.Code):
            rep.error(
                "a width given by target code is not supported by the Python target", term.pos
            )
            return 1
        value = evaluate(term, scope, rep)
        if not isinstance(value, int) or isinstance(value, bool):
            if value is not None:
                rep.error("a width must be an integer literal or an integer parameter", term.pos)
            return 1
        total += value
    if total <= 0:
        rep.error(f"width must be positive, not {total}", width.pos)
        return 1
    return total
