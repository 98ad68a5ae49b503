"""Lingua Franca's time units (spec §1.2): the one table of spellings and sizes.

Every time in this project is an integer number of nanoseconds. The runtime parses durations
given on a program's command line with this table, the compiler converts time literals with it
(``codegen.units``) and the graph viewer prints durations with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .tag import DAY, FOREVER, HOUR, MINUTE, MSEC, NSEC, SEC, USEC, WEEK


@dataclass(frozen=True)
class TimeUnit:
    """One LF time unit.

    ``spellings``: every way LF writes it (the first is the canonical one, e.g. ``"msec"``);
    ``ns``: nanoseconds per unit; ``helper``: the name of the runtime function that converts a
    count of this unit to nanoseconds (``MSEC``, one of :mod:`reactors.core.tag`'s helpers, which
    hold the sizes); ``symbol``: its short form in diagrams (``"ms"``), or None where diagrams
    give the value in a smaller unit (days show as hours).
    """

    spellings: tuple[str, ...]
    ns: int
    helper: str
    symbol: str | None


def _unit(spellings: tuple[str, ...], helper: Callable[[int], int], symbol: str | None) -> TimeUnit:
    return TimeUnit(spellings, helper(1), helper.__name__, symbol)


#: Every LF time unit, smallest first.
TIME_UNITS: tuple[TimeUnit, ...] = (
    _unit(("nsec", "ns", "nsecs"), NSEC, "ns"),
    _unit(("usec", "us", "usecs"), USEC, "us"),
    _unit(("msec", "ms", "msecs"), MSEC, "ms"),
    _unit(("sec", "s", "secs", "second", "seconds"), SEC, "s"),
    _unit(("minute", "min", "mins", "minutes"), MINUTE, "min"),
    _unit(("hour", "h", "hours"), HOUR, "h"),
    _unit(("day", "d", "days"), DAY, None),
    _unit(("week", "wk", "weeks"), WEEK, "week"),
)

#: Unit spelling -> its :class:`TimeUnit`.
UNITS: dict[str, TimeUnit] = {s: u for u in TIME_UNITS for s in u.spellings}


def is_unit(spelling: str) -> bool:
    """Whether ``spelling`` names an LF time unit (``"msec"``, ``"ms"``, ``"weeks"``...)."""
    return spelling in UNITS


def parse_duration(magnitude: str, unit: str) -> int:
    """``("10", "msec")`` -> 10_000_000 ns (spec §5.3 option values).

    Raises ValueError for a non-integer magnitude or an unknown unit.
    """
    if unit not in UNITS:
        raise ValueError(f"unknown time unit '{unit}'")
    return int(magnitude) * UNITS[unit].ns


def format_duration(ns: int | None) -> str | None:
    """``10_000_000`` -> ``'10 ms'``: the largest diagram unit that divides the value exactly.

    None gives None, 0 gives ``'0'`` and a value at or beyond INT64 bounds ``'forever'``.
    """
    if ns is None:
        return None
    if ns == 0:
        return "0"
    if abs(ns) >= FOREVER:
        return "forever"
    return next(
        f"{ns // u.ns} {u.symbol}"
        for u in reversed(TIME_UNITS)
        if u.symbol is not None and ns % u.ns == 0
    )
