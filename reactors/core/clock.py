"""Physical time and waiting for it (spec §3.1, §3.13).

The scheduler asks a :class:`Clock` to wait until a physical time; any thread may
:meth:`Clock.wake` it early (a physical action was scheduled, a stop was requested), and the
scheduler then recomputes its next tag. A worker of a parallel run uses its own clock
(:class:`reactors.parallel.worker_scheduler.WorkerScheduler`'s) with ``now`` and ``wake``: the
coordinator decides every tag, and a wake-up rings the worker's bell.
"""

from __future__ import annotations

import threading
from time import time_ns
from typing import Final

from mypy_extensions import mypyc_attr

_MAX_WAIT_S: Final = 1.0  # wait in slices so that signals (Ctrl-C) are seen promptly everywhere


@mypyc_attr(allow_interpreted_subclasses=True)  # reactors.records.replay's clock
class Clock:
    """Wall-clock time in ns since the epoch, with an interruptible wait."""

    __slots__ = ("_wake",)

    def __init__(self) -> None:
        self._wake = threading.Event()

    def now(self) -> int:
        """Physical time now, in ns since the epoch."""
        return time_ns()

    def wait_until(self, t: int) -> bool:
        """Block until physical time >= ``t`` (ns). True if reached, False if woken first."""
        wake = self._wake
        while True:
            left = t - time_ns()
            if left <= 0:
                return True
            if wake.wait(min(left / 1e9, _MAX_WAIT_S)):
                wake.clear()
                return False

    def wait_for_wake(self) -> None:
        """Block until :meth:`wake` is called (keepalive with nothing to do)."""
        wake = self._wake
        while not wake.wait(_MAX_WAIT_S):
            pass
        wake.clear()

    def wake(self) -> None:
        """Interrupt a current or the next wait (thread-safe)."""
        self._wake.set()
