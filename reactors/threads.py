"""The threads backend: one thread per worker in the program's process.

For reactions whose work releases the GIL (torch, large numpy operations) and for
free-threaded CPython builds. The coordinator, workers, control block and per-tag protocol are
those of the processes backend; only the transport differs: a crossing hands the value
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

from .context import CTX
from .coordinator import WorkerFailed
from .parallel import (
    channel_count,
    merge_records,
    output_readers,
    stop_workers,
    supervise,
    worker_main,
    write_pending_output,
)
from .program import Program
from .sync import C_STATE, Control, ThreadBell
from .worker import Captured

_JOIN_S = 2.0


def _spin_ns() -> int:
    gil = getattr(sys, "_is_gil_enabled", None)
    return 50_000 if gil is not None and not gil() else 0


class _PerThread:
    """Stands in for ``CTX.sched``: the scheduler of the calling worker thread."""

    def __init__(self):
        self.by_thread = {}
        self.default = None

    def __getattr__(self, name):
        s = self.by_thread.get(threading.get_ident(), self.default)
        return getattr(s, name)


class _Stdout:
    """Stands in for ``sys.stdout``: each worker thread prints into its own
    :class:`reactors.worker.Captured`; other threads print directly."""

    def __init__(self, real):
        self.real = real
        self.by_thread = {}

    def write(self, text: str) -> int:
        return self.by_thread.get(threading.get_ident(), self.real).write(text)

    def flush(self) -> None:
        self.by_thread.get(threading.get_ident(), self.real).flush()

    def __getattr__(self, name):
        return getattr(self.real, name)


class _Writer:
    """Publishes a crossing's value object and presence for the readers of other threads."""

    def __init__(self, cells, base: int, port, slot: list):
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

    def __init__(self, cells, base: int, port, slot: list):
        self.cells, self.state_cell, self.port, self.slot = cells, base + C_STATE, port, slot

    def receive(self, seq: int) -> None:
        if self.cells[self.state_cell] == 2 * seq + 1:
            port = self.port
            port._v = self.slot[0]
            port.trigger()


class _Channels:
    def __init__(self, ctl, slots: list, per_thread: _PerThread, stdout):
        self.ctl, self.slots, self.per_thread, self.stdout = ctl, slots, per_thread, stdout

    def writer(self, index: int, _readers, port) -> _Writer:
        return _Writer(self.ctl.cells, self.ctl.channel_base(index), port, self.slots[index])

    def reader(self, index: int, port) -> _Reader:
        return _Reader(self.ctl.cells, self.ctl.channel_base(index), port, self.slots[index])

    def started(self, me: int, sched) -> None:
        me_thread = threading.get_ident()
        self.per_thread.by_thread[me_thread] = sched
        if me == 0:
            self.per_thread.default = sched
        self.stdout.by_thread[me_thread] = sched.captured

    def close(self) -> None:
        """Nothing to release."""


def run_threads(module, graph: Program, plan, opts, log) -> int:
    """Run ``plan`` with one thread per worker; returns the exit status."""
    n = plan.workers
    ctl = Control(bytearray(Control.size(n, channel_count(plan))), n, channel_count(plan))
    ctl.init()
    bells = [ThreadBell() for _ in range(n + 1)]  # one per worker, then the supervisor's
    per_thread = _PerThread()
    saved = CTX.sched
    CTX.sched = per_thread
    slots = [[None] for _ in range(channel_count(plan))]
    threads = []
    real_stdout = sys.stdout
    stdout = sys.stdout = _Stdout(real_stdout)
    chans = _Channels(ctl, slots, per_thread, stdout)
    status = 1
    try:
        for w in range(n):
            args = (
                module,
                graph,
                plan,
                w,
                ctl,
                bells,
                chans,
                _spin_ns(),
                None,
                opts,
                log,
                Captured(real_stdout),
            )
            t = threading.Thread(target=worker_main, args=args, name=f"lf-worker-{w}", daemon=True)
            t.start()
            threads.append(t)
        status = supervise(ctl, bells[-1])
        for t in threads:
            t.join()
        merge_records(opts, n)
    except WorkerFailed as f:
        status = f.status
    except KeyboardInterrupt:
        status = 130
        log.info("---- Interrupted (Ctrl-C); stopping.")
    finally:
        stop_workers(ctl, bells[:-1])
        for t in threads:
            t.join(_JOIN_S)
        CTX.sched = saved
        sys.stdout = real_stdout
        write_pending_output(ctl, output_readers(chans, plan), real_stdout)
        sys.stdout.flush()
    return status
