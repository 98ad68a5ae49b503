"""Logical time: the :class:`Tag` value type, time-unit helpers and time constants.

The table of unit spellings (``msec``, ``ms``...) built on these helpers is
:mod:`reactors.core.units`.

All times are integer nanoseconds (spec §1.2, §2.7, §3.1). A tag is a pair
``(time, microstep)`` ordered lexicographically. The runtime itself keeps tags as two
plain ints on the hot path; :class:`Tag` is the immutable object handed to user code.
"""

from __future__ import annotations

from operator import index as _index
from typing import Final, NoReturn

BILLION = 1_000_000_000

#: Largest time; ``forever`` in LF. Also the value of LinguaFrancaBase's ``FOREVER``.
FOREVER: Final = 0x7FFF_FFFF_FFFF_FFFF
#: The constant exported to programs as ``NEVER``. It is LinguaFrancaBase's value
#: (-(2**64 - 1)), which is *not* INT64_MIN (spec §1.2 note); the LF literal ``never``
#: compiles to ``NSEC(-9223372036854775808)`` = :data:`NEVER_INT64` instead.
NEVER: Final = -0xFFFF_FFFF_FFFF_FFFF
#: INT64_MIN, the runtime's own "no time" value (what ``never`` compiles to).
NEVER_INT64: Final = -0x8000_0000_0000_0000

instant_t = int
interval_t = int


def NSEC(t: int) -> int:
    """``t`` nanoseconds, in nanoseconds."""
    return t


def USEC(t: int) -> int:
    """``t`` microseconds, in nanoseconds."""
    return t * 1_000


def MSEC(t: int) -> int:
    """``t`` milliseconds, in nanoseconds."""
    return t * 1_000_000


def SEC(t: int) -> int:
    """``t`` seconds, in nanoseconds."""
    return t * BILLION


def MINUTE(t: int) -> int:
    """``t`` minutes, in nanoseconds."""
    return t * 60 * BILLION


def HOUR(t: int) -> int:
    """``t`` hours, in nanoseconds."""
    return t * 3_600 * BILLION


def DAY(t: int) -> int:
    """``t`` days, in nanoseconds."""
    return t * 86_400 * BILLION


def WEEK(t: int) -> int:
    """``t`` weeks, in nanoseconds."""
    return t * 604_800 * BILLION


NSECS, USECS, MSECS, SECS = NSEC, USEC, MSEC, SEC
MINUTES, HOURS, DAYS, WEEKS = MINUTE, HOUR, DAY, WEEK


class Tag:
    """A logical tag ``(time, microstep)`` as user code sees it (spec §2.7).

    ``Tag(time=0, microstep=0)`` or positionally ``Tag(t, m)``; both must be ints (TypeError
    otherwise). Attributes ``time`` (ns since the epoch) and ``microstep`` are read-only.
    Tags compare lexicographically with other tags only: comparing with anything else,
    ``==`` included, raises TypeError. Tags are not hashable. ``str`` gives
    ``Tag(time=<t>, microstep=<m>)``.
    """

    __slots__ = ("_time", "_microstep")
    __hash__ = None  # type: ignore[assignment]  # tags are not hashable, as in LF

    _time: int
    _microstep: int

    def __init__(self, time: int = 0, microstep: int = 0):
        object.__setattr__(self, "_time", _index(time))
        object.__setattr__(self, "_microstep", _index(microstep))

    @property
    def time(self) -> int:
        """Time in nanoseconds since the epoch."""
        return self._time

    @property
    def microstep(self) -> int:
        """Microstep (superdense index within ``time``)."""
        return self._microstep

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Tag attribute '{name}' is read-only")

    def _key(self, other: object) -> tuple[tuple[int, int], tuple[int, int]]:
        if not isinstance(other, Tag):
            raise TypeError(f"cannot compare Tag with {type(other).__name__}")
        return (self._time, self._microstep), (other._time, other._microstep)

    def __eq__(self, other: object) -> bool:
        a, b = self._key(other)
        return a == b

    def __ne__(self, other: object) -> bool:
        a, b = self._key(other)
        return a != b

    def __lt__(self, other: object) -> bool:
        a, b = self._key(other)
        return a < b

    def __le__(self, other: object) -> bool:
        a, b = self._key(other)
        return a <= b

    def __gt__(self, other: object) -> bool:
        a, b = self._key(other)
        return a > b

    def __ge__(self, other: object) -> bool:
        a, b = self._key(other)
        return a >= b

    def __str__(self) -> str:
        return f"Tag(time={self._time}, microstep={self._microstep})"

    __repr__ = __str__

    def __reduce__(self) -> tuple[type[Tag], tuple[int, int]]:
        return (Tag, (self._time, self._microstep))


def tag_compare(t1: Tag, t2: Tag) -> int:
    """-1, 0 or 1 as ``t1`` is before, equal to or after ``t2`` (spec §2.7).

    Raises TypeError unless both arguments are :class:`Tag`.
    """
    if not isinstance(t1, Tag) or not isinstance(t2, Tag):
        raise TypeError("tag_compare() takes two Tag arguments")
    a = (t1._time, t1._microstep)
    b = (t2._time, t2._microstep)
    return (a > b) - (a < b)
