"""Time values of LF source (spec §1.2): conversion to nanoseconds and to Python text.

The table of units is the runtime's (:mod:`reactors.core.units`); ``forever`` and ``never`` are
the two time words that take no magnitude.
"""

from __future__ import annotations

from reactors.core.tag import FOREVER, NEVER_INT64
from reactors.core.units import UNITS

INT64_MAX = FOREVER
INT64_MIN = NEVER_INT64
#: Time words written where a unit goes, without a magnitude.
TIME_WORDS = ("forever", "never")


def is_time_unit(unit: str | None) -> bool:
    """Whether a time literal's ``unit`` is valid: absent (None), a unit or a time word."""
    return unit is None or unit in UNITS or unit in TIME_WORDS


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
    return min(magnitude * UNITS[unit].ns, INT64_MAX)


def python_time(magnitude: int, unit: str | None) -> str:
    """The Python expression emitted for a time value, e.g. ``MSEC(10)``."""
    if unit == "forever":
        return "FOREVER"
    if unit == "never":
        return "NEVER"
    if unit is None:
        return str(magnitude)
    return f"{UNITS[unit].helper}({magnitude})"
