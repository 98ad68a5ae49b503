"""Source files: what lfc accepts as the text of a ``.lf`` file before parsing it.

Only a regular file is read (a FIFO would block the read, a device such as ``/dev/zero`` never
ends), of at most :data:`MAX_SOURCE_BYTES`, and its text must be UTF-8 without a NUL
character (Python compiles no code with one, and a reaction body is Python). Each refusal is
an error: at the import that names the file, or with no position for the main file; a byte
that cannot be decoded and a NUL are located in the file itself.
"""

from __future__ import annotations

import os
import stat

from .diagnostics import Reporter
from .limits import MAX_SOURCE_BYTES
from .tree import Pos

# What a path that is not a regular file is, for the message (stat's file types).
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a device (character special file)"),
    (stat.S_ISBLK, "a device (block special file)"),
    (stat.S_ISSOCK, "a socket"),
)


class _Refused(Exception):
    """The file is not one lfc reads; the message says why."""


def read_source(path: str, rep: Reporter, at: Pos | None) -> str | None:
    """The text of the ``.lf`` file ``path``, or None after reporting why it cannot be used.

    ``at`` is where the file is named (an import), None for the main file. A file that is not
    regular, is larger than :data:`MAX_SOURCE_BYTES` or cannot be read is reported at ``at``;
    a byte that is not UTF-8, or a NUL character, at its own line and column (the text is then
    in ``rep.sources`` for the caret). Nothing is raised.
    """
    try:
        data = _read_regular(path)
    except (OSError, _Refused) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        rep.error(f"cannot read '{path}': {reason}", at)
        return None
    text = data.decode("utf-8", errors="replace")
    rep.sources[path] = text
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        rep.error(
            f"the file is not UTF-8 text: byte 0x{data[e.start]:02x} cannot be decoded "
            "(save it as UTF-8)",
            _byte_pos(path, data, e.start),
        )
        return None
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        rep.error(
            "a NUL character (byte 0x00) cannot stand in a .lf file (Python code cannot hold "
            "one; write '\\0' in a string)",
            Pos(path, line, nul - text.rfind("\n", 0, nul)),
        )
        return None
    return text


def _read_regular(path: str) -> bytes:
    """The bytes of ``path``, a regular file of at most MAX_SOURCE_BYTES.

    The type is checked before the file is opened (opening a FIFO for reading waits for a
    writer) and again on what was opened (the path may have changed in between).

    Raises:
        _Refused: ``path`` is not a regular file, or is too large.
        OSError: it cannot be opened or read.
    """
    _check(os.stat(path))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        _check(os.fstat(fd))
        data = f.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:  # it grew after fstat
        raise _Refused(_too_large(len(data)))
    return data


def _check(st: os.stat_result) -> None:
    """Raise :class:`_Refused` unless ``st`` is a regular file within MAX_SOURCE_BYTES."""
    if not stat.S_ISREG(st.st_mode):
        raise _Refused(f"it is {_kind(st.st_mode)}, not a regular file")
    if st.st_size > MAX_SOURCE_BYTES:
        raise _Refused(_too_large(st.st_size))


def special_file(path: str) -> tuple[str, str] | None:
    """The first file at or below ``path`` (links followed) that is neither a regular file
    nor a folder, and what it is (``"a FIFO (named pipe)"``); None when there is none or
    ``path`` does not exist."""
    found = _special(path)
    if found or not os.path.isdir(path):
        return found
    for folder, dirs, files in os.walk(path):
        for name in sorted(dirs + files):
            found = _special(os.path.join(folder, name))
            if found:
                return found
    return None


def _special(path: str) -> tuple[str, str] | None:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else (path, _kind(mode))


def _kind(mode: int) -> str:
    """What a file of stat mode ``mode`` that is not regular is, for a message."""
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def _too_large(size: int) -> str:
    return f"it has {size:,} bytes, more than the maximum of {MAX_SOURCE_BYTES:,} for a .lf file"


def _byte_pos(path: str, data: bytes, offset: int) -> Pos:
    """The line and column (1-based, in characters of the decodable text before it) of byte
    ``offset`` of ``data``."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    column = len(data[line_start:offset].decode("utf-8", errors="replace")) + 1
    return Pos(path, data.count(b"\n", 0, offset) + 1, column)
