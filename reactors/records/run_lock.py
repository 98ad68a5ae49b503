"""The lock of a run whose files a process is writing.

A process that takes the snapshots of a run, or resumes one, holds an exclusive
``fcntl.flock`` on the run's lock file (beside its snapshots, named by
:func:`reactors.records.snapshot_runs.lock_path`) until it ends. A second process that would write
the same run (a second ``--resume`` of it, or a resume of a run still going) fails to take it and
is refused at once, before it touches anything. The kernel releases the lock when the process
ends, however it ends (SIGKILL and an out-of-memory kill included), so a dead run never leaves
a stale lock behind. The file stays: removing it while another process has it open would let
two processes lock two different files of one name. It holds the pid of the process that took
it last, for the message of the one refused.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time

from .snapshot import SnapshotError

_lock = threading.Lock()
_held: dict[str, int] = {}  # absolute path -> descriptor: the locks this process holds


def hold(path: str, what: str) -> None:
    """Take the lock file ``path`` (made if missing) for this process until it ends; nothing
    if this process holds it already. ``what`` starts the refusal: what cannot be done
    (``cannot resume run 1a2b3c4d of Foo``).

    Raises:
        SnapshotError: another process holds it (one line naming ``what``, that process's
            pid and ``path``), or the file cannot be made.
    """
    path = os.path.abspath(path)
    with _lock:
        if path in _held:
            return
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise SnapshotError(f"cannot make the lock file {path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            raise SnapshotError(
                f"{what}: it is being written by process {pid} (which holds {path}); "
                "wait until it ends, or stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[path] = fd


def _holder(fd: int, wait_s: float = 0.5) -> str:
    """The pid written in the lock file open as ``fd``, waiting up to ``wait_s`` seconds for
    a holder that has just taken the lock to write it ("?" if it still has not)."""
    deadline = time.monotonic() + wait_s
    while True:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text.isdigit() or time.monotonic() > deadline:
            return text if text.isdigit() else "?"
        time.sleep(0.01)
