"""The threads transport: one thread per worker in the program's process.

For reactions whose work releases the GIL (torch, large numpy operations) and for
free-threaded CPython builds. The coordinator, workers, control block and per-tag protocol are
those of the processes transport; only the transport differs: a crossing hands the value
*object* to the readers (connections are by reference, as on one worker; no copy), and the
bells are ``threading.Event`` objects. On a GIL build, waiters do not spin (a spinning thread
would hold the GIL the others need); on a free-threaded build they spin as processes do.

Reaction code calls ``lf.tag()``, ``request_stop()``... through the process-wide context;
here its ``sched`` is a :class:`_PerThread` that forwards to the calling worker's scheduler
(threads that reactions start are served by worker 0: tags are common to all workers, and a
stop request is global).
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType
from typing import Any, TextIO

from ..core.context import CTX
from ..core.errors import SourceMap, report
from ..core.log import Log
from ..model.program import Program
from .plan import Plan
from .sync import C_STATE, Control, ThreadBell
from .transport import Endpoint
from .worker_main import report_failure, worker_main
from .worker_stdout import Captured

_JOIN_S = 2.0


def _spin_ns() -> int:
    gil = getattr(sys, "_is_gil_enabled", None)
    return 50_000 if gil is not None and not gil() else 0


def _worker(
    module: ModuleType,
    graph: Program,
    plan: Plan,
    me: int,
    end: Endpoint,
    opts: Any,
    log: Log,
    captured: Captured,
) -> None:
    """A worker thread: :func:`reactors.parallel.worker_main.worker_main`, which reports its own
    failures; should anything escape it, the failure is still reported and told to the
    supervisor (a thread that ended unheard would leave the others waiting for it)."""
    try:
        worker_main(module, graph, plan, me, end, opts, log, captured)
    except BaseException as exc:
        report_failure(end.ctl, end.bells, me, report(exc, f"worker {me}", SourceMap(None, [])))


class _PerThread:
    """Stands in for ``CTX.sched``: the scheduler of the calling worker thread."""

    def __init__(self) -> None:
        self.by_thread: dict[int, Any] = {}
        self.default: Any = None

    def __getattr__(self, name: str) -> Any:
        s = self.by_thread.get(threading.get_ident(), self.default)
        return getattr(s, name)


class _Stdout:
    """Stands in for ``sys.stdout``: each worker thread prints into its own
    :class:`reactors.parallel.worker_stdout.Captured`; other threads print directly."""

    def __init__(self, real: TextIO):
        self.real = real
        self.by_thread: dict[int, Captured] = {}

    def write(self, text: str) -> int:
        return self.by_thread.get(threading.get_ident(), self.real).write(text)

    def flush(self) -> None:
        self.by_thread.get(threading.get_ident(), self.real).flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


class _Writer:
    """Publishes a crossing's value object and presence for the readers of other threads."""

    def __init__(self, cells: memoryview, base: int, port: Any, slot: list):
        self.cells, self.cell, self.port, self.slot = cells, base + C_STATE, port, slot

    def publish(self, seq: int) -> None:
        port = self.port
        if port._p:
            self.slot[0] = port._v
            self.cells[self.cell] = 2 * seq + 1
        else:
            self.cells[self.cell] = 2 * seq


class _Reader:
    """Receives a crossing's value object (shared, not copied)."""

    def __init__(self, cells: memoryview, base: int, port: Any, slot: list):
        self.cells, self.state_cell, self.port, self.slot = cells, base + C_STATE, port, slot

    def receive(self, seq: int) -> None:
        if self.cells[self.state_cell] == 2 * seq + 1:
            port = self.port
            port._v = self.slot[0]
            port.trigger()


class _Channels:
    """The channels of a threads run (every worker's ends): ``slots[index]`` holds channel
    ``index``'s value object."""

    def __init__(self, ctl: Control, slots: list, per_thread: _PerThread, stdout: _Stdout):
        self.ctl, self.slots, self.per_thread, self.stdout = ctl, slots, per_thread, stdout
        self.arrived: list[Any] = []  # values cross by reference: none is left anywhere

    def writer(self, index: int, _readers: tuple[int, ...], port: Any) -> _Writer:
        return _Writer(self.ctl.cells, self.ctl.channel_base(index), port, self.slots[index])

    def reader(self, index: int, port: Any) -> _Reader:
        return _Reader(self.ctl.cells, self.ctl.channel_base(index), port, self.slots[index])

    def started(self, me: int, sched: Any) -> None:
        me_thread = threading.get_ident()
        self.per_thread.by_thread[me_thread] = sched
        if me == 0:
            self.per_thread.default = sched
        self.stdout.by_thread[me_thread] = sched.captured

    def close(self) -> None:
        """Nothing to release."""


class ThreadTransport:
    """The :class:`reactors.parallel.transport.Transport` of one thread per worker: the control
    block is a ``bytearray``, a channel is a one-element list holding the value object. While the
    workers run, ``CTX.sched`` and ``sys.stdout`` dispatch by the calling thread."""

    def __init__(self, plan: Plan):
        self.plan = plan
        n, channels = plan.workers, plan.channels
        size = Control.size(n, channels, len(plan.batches))
        self.control = Control(bytearray(size), n, channels, len(plan.batches))
        self.control.init()
        self.bells = [ThreadBell() for _ in range(n + 1)]  # one per worker, then the supervisor's
        self.real_stdout: TextIO = sys.stdout
        self.stdout = _Stdout(self.real_stdout)
        self.per_thread = _PerThread()
        slots = [[None] for _ in range(channels)]
        self.chans = _Channels(self.control, slots, self.per_thread, self.stdout)
        self.threads: list[threading.Thread] = []
        self.saved_sched: Any = None
        self.installed = False

    def start(self, module: ModuleType, graph: Program, opts: Any, log: Log) -> None:
        """Install the per-thread context and stdout; start one thread per worker."""
        self.saved_sched, CTX.sched = CTX.sched, self.per_thread
        sys.stdout = self.stdout
        self.installed = True
        end = Endpoint(self.control, self.bells, self.chans, _spin_ns(), None)
        for w in range(self.plan.workers):
            args = (module, graph, self.plan, w, end, opts, log, Captured(self.real_stdout))
            t = threading.Thread(target=_worker, args=args, name=f"lf-worker-{w}", daemon=True)
            t.start()
            self.threads.append(t)

    def watch(self) -> tuple[ThreadBell, None]:
        return self.bells[-1], None

    def worker_bells(self) -> list[ThreadBell]:
        return self.bells[:-1]

    def join(self) -> None:
        for t in self.threads:
            t.join()

    def shutdown(self, grace_s: float | None = None) -> None:
        """Join the workers (threads cannot be forced: one still running after the grace
        period, ``grace_s`` seconds or 2, is left, as a daemon); give back ``CTX.sched`` and
        ``sys.stdout``."""
        for t in self.threads:
            t.join(_JOIN_S if grace_s is None else grace_s)
        if self.installed:
            CTX.sched = self.saved_sched
            sys.stdout = self.real_stdout
            self.installed = False

    def channels(self) -> _Channels:
        return self.chans

    def close(self) -> None:
        """Nothing to unlink: everything is garbage-collected."""
