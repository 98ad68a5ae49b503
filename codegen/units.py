"""Time units of Lingua Franca (spec §1.2) and conversion of time values to nanoseconds."""

from __future__ import annotations

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

#: unit spelling -> (nanoseconds per unit, Python helper emitted for it)
UNITS: dict[str, tuple[int, str]] = {}
for _spellings, _ns, _helper in (
    (("nsec", "ns", "nsecs"), 1, "NSEC"),
    (("usec", "us", "usecs"), 1_000, "USEC"),
    (("msec", "ms", "msecs"), 1_000_000, "MSEC"),
    (("sec", "s", "secs", "second", "seconds"), 1_000_000_000, "SEC"),
    (("minute", "min", "mins", "minutes"), 60_000_000_000, "MINUTE"),
    (("hour", "h", "hours"), 3_600_000_000_000, "HOUR"),
    (("day", "d", "days"), 86_400_000_000_000, "DAY"),
    (("week", "wk", "weeks"), 604_800_000_000_000, "WEEK"),
):
    for _s in _spellings:
        UNITS[_s] = (_ns, _helper)


def to_ns(magnitude: int, unit: str | None) -> int:
    """Nanoseconds of ``magnitude unit``; ``forever``/``never`` saturate to INT64 bounds.

    Raises:
        KeyError: ``unit`` is not a time unit (callers report it as a located error).
    """
    if unit == "forever":
        return INT64_MAX
    if unit == "never":
        return INT64_MIN
    if unit is None:
        return magnitude
    return min(magnitude * UNITS[unit][0], INT64_MAX)


def python_time(magnitude: int, unit: str | None) -> str:
    """The Python expression emitted for a time value, e.g. ``MSEC(10)``."""
    if unit == "forever":
        return "FOREVER"
    if unit == "never":
        return "NEVER"
    if unit is None:
        return str(magnitude)
    return f"{UNITS[unit][1]}({magnitude})"


def format_ns(ns: int | None) -> str:
    """A short human form of a duration for messages and diagrams: ``10 ms``, ``1.5 s``."""
    if ns is None:
        return "none"
    if ns >= INT64_MAX:
        return "forever"
    for size, name in (
        (604_800_000_000_000, "weeks"),
        (86_400_000_000_000, "days"),
        (3_600_000_000_000, "h"),
        (60_000_000_000, "min"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ):
        if ns and ns % size == 0:
            return f"{ns // size} {name}"
    return f"{ns} ns"
