"""The process-wide runtime context that ``lf.*`` and ``ReactorBase`` methods consult.

Reaction code calls free functions (``lf.tag()``, ``request_stop()``) with no handle to the
runtime, so the running program registers itself here. One context per process: the
processes transport sets it once in each worker process; the threads transport sets ``sched``
to a stand-in that forwards to the calling worker thread's scheduler.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from time import time_ns
from typing import Any, Protocol

from .log import Log
from .reaction import Reaction


class RunningScheduler(Protocol):
    """What the API functions read from the running scheduler (times in ns)."""

    @property
    def time(self) -> int: ...

    @property
    def micro(self) -> int: ...

    @property
    def start_time(self) -> int: ...

    @property
    def current(self) -> Reaction | None: ...

    def request_stop(self) -> None: ...

    def stop_signalled(self) -> bool: ...

    def physical_time(self) -> int: ...


def new_run_id() -> str:
    """A fresh run id: 32 lowercase hex digits, unique across runs and machines."""
    return uuid.uuid4().hex


class Idle:
    """Stands in for the scheduler before one runs: time 0, nothing running."""

    time = micro = start_time = 0
    current = None
    finished = False

    def request_stop(self) -> None:
        """Nothing to stop yet."""

    @staticmethod
    def stop_signalled() -> bool:
        """No run, no signal to stop it."""
        return False

    @staticmethod
    def physical_time() -> int:
        """Physical time (ns since the epoch)."""
        return time_ns()


class Context:
    """What the API functions need: the scheduler (an :class:`Idle` before one runs),
    the program's directories, the runtime's :class:`reactors.core.log.Log`, the run id (made
    once by the launcher before workers start and handed to each; a fresh one stands in for
    code that runs outside a launched program), ``owner``, what names the run's supervisor
    (:func:`reactors.parallel.shm_owner.owner_tag`, handed to the workers as the run id is; ""
    outside a launched program), and ``main_parameters``, the main reactor's parameter
    values, name -> value (set by :func:`reactors.model.build.build` when it makes the main
    reactor, from the same defaults and command line in every worker; empty before), and
    ``forwarded``, the parameters of instances inside it given on the command line,
    ``"PATH.NAME"`` -> the LF expression given (set by the build too, in every worker)."""

    __slots__ = (
        "sched",
        "source_directory",
        "package_directory",
        "log",
        "trace_handles",
        "run_id",
        "owner",
        "main_parameters",
        "forwarded",
    )

    def __init__(self) -> None:
        self.sched: RunningScheduler = Idle()
        self.source_directory = ""
        self.package_directory = ""
        self.log = Log("info")
        self.trace_handles = 0
        self.run_id = new_run_id()
        self.owner = ""
        self.main_parameters: dict[str, Any] = {}
        self.forwarded: dict[str, str] = {}


#: The single context of this process.
CTX = Context()


def scratch_file(run_id: str, what: str) -> str:
    """Where the processes of the run ``run_id`` keep the small note ``what`` they share (a
    marker that one of them said a message, the folder of a snapshot's parts): a file of the
    temporary folder whose name starts with the run's owner (:attr:`Context.owner`), so that
    a note a SIGKILLed run could not remove is removed by the next program that starts
    (:func:`reactors.parallel.shm_owner.reclaim`); ``lf-<run>-<what>`` outside a launched
    program."""
    return os.path.join(tempfile.gettempdir(), f"{CTX.owner or 'lf-'}{run_id[:8]}-{what}")
