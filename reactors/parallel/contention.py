"""Whether a waiting worker may spin, and how many cores it may count on
(:func:`reactors.parallel.sync.wait` asks :data:`CONTENTION` at each wait; ``-w 0`` and the
warning of a run with more workers than cores ask :func:`usable_cores`)."""

from __future__ import annotations

import os
import threading
import time
from typing import Final

LOADAVG_ENV: Final = "REACTORS_LOADAVG"


class Contention:
    """Whether a waiter may spin: not while other runnable tasks already fill the cores.

    A spinning waiter is one more task that wants a core. When the other runnable tasks
    (the worker it waits for included) are at least as many as the machine's cores, a long
    spin only takes CPU time from them, so the waiter blocks after its quick poll
    (:func:`wait`); the kernel wakes a blocked
    waiter quickly, since it slept. Read from the running-task count of ``/proc/loadavg``
    (or of the file in its format that the environment variable ``REACTORS_LOADAVG`` names,
    e.g. for tests) at each question, since it changes with every wake-up: the worker waited
    for may be runnable on the waiter's own core right now, where a spin only delays it (with
    a count cached for 10 ms the waiter polled 20 µs there, or spun 300 µs when the count had
    been read while that worker slept; measured with one busy
    process: ``bench`` EnvBank of 8 environments of ~132 µs on ``-w 2``, 1,190-1,205 against
    1,231-1,249 µs per round; the round trip of PingPong, 41-42 against 50-55 µs). The file is
    kept open and re-read in place (~0.5 µs); the count includes the reader itself. That count
    is the whole machine's (also inside a container), so it is compared with the machine's cores
    (``os.cpu_count()``), not with those this process may use. Where the file does not
    exist, waiters always spin. ``elsewhere``: how many of those tasks are workers of the
    same run on other nodes that share this host (a cluster emulated on one machine): on a
    real cluster they would not run here, and what this process waits for comes from them
    over the network, so they are not counted.
    """

    def __init__(self, path: str | None = None):
        self.path = path or os.environ.get(LOADAVG_ENV) or "/proc/loadavg"
        self.cores = os.cpu_count() or 1
        self.elsewhere = 0
        # this process is a worker of a run with more workers than the host's usable cores
        # (set by reactors.parallel.worker_main): a waiter yields before it blocks (:func:`wait`)
        self.crowded = False
        self.fd = -1  # the file, kept open (opened at the first read; -2: it cannot be read)

    def spin_ok(self) -> bool:
        """Whether spinning pays now: read at each call (~0.5 µs)."""
        return self._others() - self.elsewhere < self.cores

    def busy_now(self, samples: int = 5, gap_s: float = 0.002) -> bool:
        """Whether other runnable tasks fill the cores (:meth:`others_now`)."""
        return self.others_now(samples, gap_s) >= self.cores

    def others_now(self, samples: int = 5, gap_s: float = 0.002) -> int:
        """How many tasks of other processes want a core now: the median of ``samples``
        reads ``gap_s`` seconds apart (one read catches passing tasks: a process that is
        exiting, the shell that started this one); for decisions taken once, such as
        ``-w 0``'s. This process's own other threads do not count: e.g. the thread pool
        numpy's OpenBLAS starts spins for ~0.1 s after ``import numpy``, which is when
        ``-w 0`` decides, and is idle once the run goes on."""
        seen = []
        for i in range(samples):
            if i:
                time.sleep(gap_s)
            # a thread of ours that flips between running and waiting (a spinning thread
            # pool) is counted as ours if it runs on either side of the read
            before = _own_running_threads()
            running = self._others()
            seen.append(max(0, running - max(before, _own_running_threads())))
        return sorted(seen)[len(seen) // 2]

    def _others(self) -> int:
        """Runnable tasks other than the caller (0 when unknown)."""
        fd = self.fd
        try:
            if fd == -1:
                fd = self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            if fd < 0:
                return 0
            running = os.pread(fd, 128, 0).split()[3].split(b"/")[0]
            return int(running) - 1
        except OSError:
            self.fd = -2
            return 0
        except (IndexError, ValueError):
            return 0


def _own_running_threads() -> int:
    """Threads of this process other than the caller's that are running or runnable now
    (0 where ``/proc`` cannot tell)."""
    me = threading.get_native_id()
    n = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for tid in tids:
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                state = f.read().rpartition(b") ")[2][:1]
        except OSError:
            continue  # the thread ended
        n += state == b"R"
    return n


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which ``taskset`` and container
    cpusets narrow; ``os.cpu_count()`` where the platform cannot tell): the most workers that
    each get a core of their own."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


CONTENTION = Contention()
