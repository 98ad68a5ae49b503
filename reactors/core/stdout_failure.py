"""The program's standard output failing: a closed pipe (``| head``) or a full device.

However many workers a run has, it ends the same way: on one worker a reaction's ``print``
fails, on several the coordinator's write of a tag's text; either way the rest of the output
goes nowhere, the exit status is 1, and the run says why unless the pipe's reader simply
closed it (:func:`output_failed`).
"""

from __future__ import annotations

import errno
import os
import select
import stat
import sys

from . import log
from .errors import has_user_frames


def output_failed(exc: OSError, say: bool = True) -> int:
    """The program's standard output cannot be written (``exc``): send the rest of the
    output nowhere (so that the interpreter's last flush does not fail again) and return the
    exit status, 1. A closed pipe (``| head``: its reader has all it wanted) ends the run
    quietly, as Python's documentation advises a program to do on SIGPIPE ("Note on
    SIGPIPE" in the ``signal`` module's); any other error (a full device) is said on stderr
    when ``say``."""
    stdout = sys.__stdout__
    try:
        if stdout is not None:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
            os.close(devnull)
    except (OSError, ValueError):
        pass
    if say and exc.errno != errno.EPIPE:
        log.say(f"ERROR: cannot write the program's output: {exc.strerror or exc}\n")
    return 1


def is_output_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a write of the program's standard output failing, not an error of
    the program: the runtime's own write of it (a closed pipe or a full device), or a
    reaction's ``print`` into a pipe whose reader closed it (``| head``)."""
    if not isinstance(exc, OSError) or exc.errno not in _OUTPUT_ERRORS:
        return False
    return not has_user_frames(exc) or _stdout_fails()


#: What a failed write of the standard output raises: a closed pipe, a full device.
_OUTPUT_ERRORS = (errno.EPIPE, errno.ENOSPC, errno.EDQUOT)


def _stdout_fails() -> bool:
    """Whether the process's standard output cannot be written: the reader of the pipe (or
    socket) that it is closed it (polling the writing end reports an error), or it is a
    file on a device with no free block left, or ``/dev/full``."""
    try:
        poll = select.poll()
        poll.register(1, 0)
        if any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0)):
            return True
        st = os.fstat(1)
        if stat.S_ISCHR(st.st_mode):
            return st.st_rdev == _DEV_FULL
        fs = os.fstatvfs(1)
        return fs.f_bavail == 0 or fs.f_bfree == 0
    except (OSError, ValueError, AttributeError):  # no such check here
        return False


#: The device number of ``/dev/full``, where every write fails with ENOSPC (Linux).
_DEV_FULL = os.makedev(1, 7)
