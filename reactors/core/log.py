"""The runtime's own messages (spec §1.3 ``logging``): levels, and printing to stderr.

stdout belongs to the user's prints; everything the runtime says goes to stderr, filtered by
the program's ``logging`` level (``error`` < ``warn`` < ``info`` < ``log`` < ``debug``).
Saying something never fails: a stderr that cannot be written (``2>/dev/full``, a closed
pipe) loses the text (:func:`say`), and whatever was saying it (a failure being reported, a
signal asking the run to stop) goes on.
"""

from __future__ import annotations

import sys

#: The ``logging`` levels of the target property, least verbose first.
LEVELS = ("error", "warn", "info", "log", "debug")
#: The level of a program whose ``target`` sets no ``logging`` (the target property's default,
#: :data:`reactors.model.target.DEFAULTS`).
DEFAULT_LEVEL = "info"
#: Level name (and the alias ``warning``) -> verbosity: its position in :data:`LEVELS`.
_VERBOSITY = {name: i for i, name in enumerate(LEVELS)} | {"warning": LEVELS.index("warn")}


#: How many messages :func:`say` could not write in this process.
dropped = 0


def say(text: str) -> bool:
    """Write ``text`` to stderr and flush it; whether it was written. When stderr cannot be
    written (a full device, a closed pipe or file, none at all) the text is dropped and
    counted in :data:`dropped`: no write of the runtime's messages raises."""
    global dropped
    err = sys.stderr
    try:
        if err is None:
            raise ValueError("no stderr")
        err.write(text)
        err.flush()
    except (OSError, ValueError):
        dropped += 1
        return False
    return True


class Log:
    """Prints runtime messages at or below a verbosity level to stderr.

    ``level`` is a level name of :data:`LEVELS` or ``warning`` (case-insensitive); ValueError
    for an unknown one.
    """

    def __init__(self, level: str = DEFAULT_LEVEL) -> None:
        key = str(level).lower()
        if key not in _VERBOSITY:
            raise ValueError(f"unknown logging level '{level}'")
        self.level = _VERBOSITY[key]

    def _emit(self, level: str, prefix: str, msg: str) -> None:
        if _VERBOSITY[level] <= self.level:
            say(prefix + msg + "\n")

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
