"""The runtime's own messages (spec §1.3 ``logging``): levels, and printing to stderr.

stdout belongs to the user's prints; everything the runtime says goes to stderr, filtered by
the program's ``logging`` level (``error`` < ``warn`` < ``info`` < ``log`` < ``debug``).
"""

from __future__ import annotations

import sys

from .target import DEFAULTS

#: The ``logging`` levels of the target property, least verbose first.
LEVELS = ("error", "warn", "info", "log", "debug")
#: Level name (and the alias ``warning``) -> verbosity: its position in :data:`LEVELS`.
_VERBOSITY = {name: i for i, name in enumerate(LEVELS)} | {"warning": LEVELS.index("warn")}


class Log:
    """Prints runtime messages at or below a verbosity level to stderr.

    ``level`` is a level name of :data:`LEVELS` or ``warning`` (case-insensitive); ValueError
    for an unknown one.
    """

    def __init__(self, level: str = DEFAULTS.logging) -> None:
        key = str(level).lower()
        if key not in _VERBOSITY:
            raise ValueError(f"unknown logging level '{level}'")
        self.level = _VERBOSITY[key]

    def _emit(self, level: str, prefix: str, msg: str) -> None:
        if _VERBOSITY[level] <= self.level:
            sys.stderr.write(prefix + msg + "\n")
            sys.stderr.flush()

    def error(self, msg: str) -> None:
        """Print ``ERROR: msg`` (always shown)."""
        self._emit("error", "ERROR: ", msg)

    def warn(self, msg: str) -> None:
        """Print ``WARNING: msg`` at level warn and above."""
        self._emit("warn", "WARNING: ", msg)

    def info(self, msg: str) -> None:
        """Print ``msg`` at level info and above."""
        self._emit("info", "", msg)

    def log(self, msg: str) -> None:
        """Print ``msg`` at level log and above."""
        self._emit("log", "", msg)

    def debug(self, msg: str) -> None:
        """Print ``DEBUG: msg`` at level debug."""
        self._emit("debug", "DEBUG: ", msg)
