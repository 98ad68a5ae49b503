"""Who owns a run's shared memory, and reclaiming what ended runs left in ``/dev/shm``.

A parallel run names everything it puts in ``/dev/shm`` (its control block, its channels'
slots, a cluster node's copy, the bells and sockets of a Ray run) with one prefix,
:func:`run_prefix`, that says who made it: the supervising process's pid and start time (in
clock ticks since boot, from ``/proc/<pid>/stat``, so that a pid the kernel gave to another
process since is not taken for the owner), and the *space* of that pid (the machine's boot
and the pid namespace: a copy kept on another host of a cluster, or made in a container with
its own pids that shares ``/dev/shm``, belongs to a pid this process cannot see):

    lf<pid>x<start>t<space><token><what>     e.g. lf31337x8812345t9f0c22e1a4b7c9d0ctl

Every run unlinks its own segments however it ends, unless it cannot: a SIGKILL to its
process group (``timeout -s KILL``, ``docker kill``, the OOM killer) ends every process of it
at once. :func:`reclaim`, called as any program starts, removes what such runs left: the
entries of ``/dev/shm`` with a prefix of this form, of this space, whose owner no longer
lives (no such process, another process under that pid, or a zombie). It never touches an
entry of a live owner, one of another space, one named otherwise (not a run's of ours), or
one that this user may not delete (``/dev/shm``'s sticky bit lets only the owner of an entry,
or root, remove it).
"""

from __future__ import annotations

import binascii
import os
import re

SHM_DIR = "/dev/shm"

#: A run's prefix (:func:`run_prefix`): owner pid, its start time, space, random token.
_PREFIX = re.compile(r"lf(\d+)x(\d+)t([0-9a-f]{8})[0-9a-f]{8}")


def process_stat(pid: int) -> tuple[str, int] | None:
    """The state letter (``R``, ``S``, ``Z``...) and start time (clock ticks since boot) of
    process ``pid`` from ``/proc/<pid>/stat``, or None when there is no such process (or no
    ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # the name in (...) may hold spaces
        return fields[0].decode(), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def space() -> str:
    """This process's pid space as 8 hex digits: a checksum of the machine's boot id and the
    pid namespace's inode (pids of two spaces say nothing about each other)."""
    parts = []
    for path in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        try:
            parts.append(os.readlink(path) if path.endswith("/pid") else _read(path))
        except OSError:
            parts.append(os.uname().nodename)
    return f"{binascii.crc32(' '.join(parts).encode()):08x}"


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def owner_tag() -> str:
    """``lf<pid>x<start>t<space>``: this process as the owner of what a run leaves behind
    if it is killed (see the module's docstring); followed by 8 hex digits in every name."""
    pid = os.getpid()
    stat = process_stat(pid)
    start = stat[1] if stat is not None else 0
    return f"lf{pid}x{start}t{space()}"


def run_prefix() -> str:
    """The prefix of what a new run of this process puts in ``/dev/shm`` (see the module's
    docstring); unique per run (a random token)."""
    return f"{owner_tag()}{os.urandom(4).hex()}"


def reclaim(directory: str = SHM_DIR) -> int:
    """Remove the entries of ``directory`` (``/dev/shm``) that runs of this space left when
    their owner died (see the module's docstring); returns how many were removed. Without
    ``/proc`` (where an owner's life cannot be checked) nothing is removed."""
    if process_stat(os.getpid()) is None:
        return 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    here = space()
    alive: dict[tuple[int, int], bool] = {}
    removed = 0
    for name in names:
        m = _PREFIX.match(name)
        if m is None or m[3] != here:
            continue
        owner = (int(m[1]), int(m[2]))
        if owner not in alive:
            alive[owner] = _lives(*owner)
        if alive[owner]:
            continue
        try:
            os.unlink(os.path.join(directory, name))
            removed += 1
        except OSError:  # gone meanwhile, another user's, or not a file
            pass
    return removed


def _lives(pid: int, start: int) -> bool:
    """Whether process ``pid`` started at ``start`` (clock ticks since boot) still runs."""
    stat = process_stat(pid)
    return stat is not None and stat[1] == start and stat[0] not in ("Z", "X")


__all__ = ["SHM_DIR", "owner_tag", "process_stat", "reclaim", "run_prefix", "space"]
