"""The processes transport: one ``spawn``-ed process per worker (worker 0 also coordinates
the tags); the program's own process supervises (:mod:`reactors.parallel.supervisor`).

Shared state: one control segment (``<prefix>ctl``, :class:`reactors.parallel.sync.Control`) and the
channels' slot segments (:mod:`reactors.parallel.shm`), all named with a per-run ``prefix``; one
``eventfd`` bell per worker and one for the supervisor, handed to the children at spawn. The
supervisor waits in ``poll`` on its bell and on the workers' process sentinels, so a worker
killed by a signal is noticed at once (:class:`reactors.parallel.transport.WorkerDied`). Stopped
workers are joined, then terminated, then killed; at the end every segment with the run's
prefix (:func:`reactors.parallel.shm_owner.run_prefix`, which names the supervisor) is unlinked; a
run killed with its whole process group leaves them to the next run's
:func:`reactors.parallel.shm_owner.reclaim`. Workers ignore SIGINT and SIGHUP (the supervisor
handles a Ctrl-C or hang-up of the whole process group); a worker whose parent died is told at once
by the kernel (SIGTERM, ``PR_SET_PDEATHSIG`` on Linux; elsewhere it notices within 50 ms of its
next wait) and exits, unlinking the segments of its run.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing import reduction, resource_tracker
from multiprocessing.process import BaseProcess
from types import ModuleType
from typing import Any

from ..core.context import CTX
from ..core.errors import SourceMap, report
from ..core.log import Log
from ..core.process_end import quick_exit
from ..model.program import Program
from ..model.target import DEFAULTS
from .codec import Arrived
from .plan import Plan
from .shm import Reader, Segment, Writer, unlink_prefix
from .shm_owner import process_stat, run_prefix
from .sync import (
    ABORT,
    FAILS,
    STATE,
    STATUS,
    STOP_ASKED,
    W_FAILED,
    W_FINISHED,
    Aborted,
    Control,
    FdBell,
)
from .transport import Bell, Endpoint, Idle, Waker, WorkerDied
from .worker_main import report_failure, worker_main
from .worker_stdout import Captured

_SUPERVISED = frozenset({signal.SIGINT, signal.SIGHUP})  # handled by the supervisor alone
SPIN_NS = 300_000  # poll this long before blocking (while the cores are free), ns
_GRACE_S = 2.0  # how long stopped workers get to exit before SIGTERM, then SIGKILL
_EXIT_S = 60.0  # how long finished workers get to write their records and exit


class _Fd:
    """A file descriptor that a spawned child inherits (duplicated while spawning)."""

    def __init__(self, fd: int):
        self.fd = fd

    def __reduce__(self) -> tuple:
        return (_rebuild_fd, (reduction.DupFd(self.fd),))


def _rebuild_fd(dup: Any) -> int:
    return dup.detach()


@dataclass(frozen=True)
class WorkerSpec:
    """What any worker process of a run needs (:func:`run_worker`): the generated module's
    path and name, the graph, the plan, its own index, the run's segment prefix, the
    launcher's options, the logging level and the supervising process's id."""

    module_path: str
    module_name: str
    graph: Program
    plan: Plan
    me: int
    prefix: str
    opts: Any
    logging: str
    parent: int


@dataclass(frozen=True)
class _Spec(WorkerSpec):
    """A spawned worker's spec (pickled by spawn): also its inherited bells' descriptors."""

    fds: list


class ShmChannels:
    """One worker process's ends of the channels, through shared memory
    (:mod:`reactors.parallel.shm`; run prefix ``prefix``)."""

    def __init__(self, ctl: Control, prefix: str, me: int):
        self.ctl, self.prefix, self.me = ctl, prefix, me
        self.writers: list[Any] = []  # Writers, or what wraps one (reactors.cluster.net.NetWriter)
        self.arrived: list[Arrived] = []  # the values its readers left in the block this tag

    def writer(self, index: int, readers: tuple[int, ...], port: Any) -> Writer:
        w = Writer(self.ctl, index, readers, port, self.prefix)
        self.writers.append(w)
        return w

    def reader(self, index: int, port: Any) -> Reader:
        return Reader(self.ctl, index, self.me, port, self.prefix, self.arrived)

    def started(self, me: int, sched: Any) -> None:
        CTX.sched = sched

    def close(self) -> None:
        for w in self.writers:
            w.close()


class ProcessTransport:
    """The :class:`reactors.parallel.transport.Transport` of one process per worker: allocates the
    run's control segment and eventfds at construction; :meth:`close` unlinks every segment
    of the run."""

    def __init__(self, plan: Plan):
        self.plan = plan
        n = plan.workers
        self.prefix = run_prefix()
        size = Control.size(n, plan.channels, len(plan.batches))
        self.segment = Segment(self.prefix + "ctl", True, size)
        buf = self.segment.buf
        assert buf is not None  # an open segment has its buffer
        self.control = Control(buf, n, plan.channels, len(plan.batches))
        self.control.init()
        self.fds = self._bells(n)
        self.procs: list[BaseProcess] = []

    def _bells(self, n: int) -> list[int]:
        """The descriptors of the bells: one per worker, then the supervisor's (eventfds
        that the spawned workers inherit)."""
        return [FdBell.new() for _ in range(n + 1)]

    def start(self, module: ModuleType, graph: Program, opts: Any, log: Log) -> None:
        """Spawn one process per worker (each kept as soon as it runs). The workers start
        with SIGINT and SIGHUP blocked: a Ctrl-C to the process group while a worker still
        imports the program is the supervisor's to handle."""
        ctx = mp.get_context("spawn")
        path = os.path.abspath(module.__file__ or "")
        level = graph.target.logging or DEFAULTS.logging
        fds = [_Fd(f) for f in self.fds]
        resource_tracker.ensure_running()  # started by a spawn, it would unblock SIGINT there
        with _blocked(_SUPERVISED):
            for w in range(self.plan.workers):
                spec = _Spec(
                    path,
                    module.__name__,
                    graph,
                    self.plan,
                    w,
                    self.prefix,
                    opts,
                    level,
                    os.getpid(),
                    fds,
                )
                p = ctx.Process(target=_child, args=(spec,), name=f"lf-worker-{w}", daemon=True)
                p.start()
                self.procs.append(p)

    def watch(self) -> tuple[Bell, Idle]:
        """The supervisor's eventfd, polled with the workers' process sentinels."""
        sentinels = {p.sentinel: w for w, p in enumerate(self.procs)}
        bell = FdBell(self.fds[self.plan.workers], extra=sentinels)
        return bell, lambda ready: self._check_dead(ready, sentinels, bell)

    def _check_dead(self, ready: list[int], sentinels: dict, bell: FdBell) -> None:
        """Raise WorkerDied if a worker process ended without finishing or reporting a
        failure (a failure is raised by the supervisor itself, from the worker's STATUS)."""
        ctl = self.control
        for fd in ready:
            w = sentinels.get(fd)
            if w is None:
                continue
            p = self.procs[w]
            p.join(1.0)  # the sentinel closes a moment before the exit status is known
            status = ctl.cells[ctl.worker_base(w) + STATUS]
            bell.poll.unregister(fd)
            if status == W_FAILED or (status == W_FINISHED and p.exitcode == 0):
                continue
            if ctl.cells[FAILS]:  # another worker failed first: its report says why this one ended
                continue
            raise WorkerDied(f"worker {w} {_death(p.exitcode)}", w)

    def worker_bells(self) -> list[Waker]:
        return [_EventFd(f) for f in self.fds[: self.plan.workers]]

    def join(self) -> None:
        for p in self.procs:  # workers write their records, then exit
            p.join(_EXIT_S)

    def shutdown(self, grace_s: float | None = None) -> None:
        """Join the workers; SIGTERM then SIGKILL those still alive after the grace period
        (``grace_s`` seconds, default 2)."""
        procs = self.procs
        end = time.monotonic() + (_GRACE_S if grace_s is None else grace_s)
        for p in procs:
            p.join(max(0.0, end - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(1.0)
            if p.is_alive():
                p.kill()
                p.join(1.0)
            p.close()

    def channels(self) -> ShmChannels:
        return ShmChannels(self.control, self.prefix, 0)

    def close(self) -> None:
        """Drop the control block, unlink every segment of the run, close the eventfds."""
        self.control.release()
        try:
            self.segment.close()
        except BufferError:  # a view is still alive somewhere: the mapping goes at exit
            pass
        unlink_prefix(self.prefix)
        for f in self.fds:
            os.close(f)


def _death(code: int | None) -> str:
    """How a worker process with exit code ``code`` ended, for messages."""
    if code and code < 0:
        return f"was killed by signal {signal.Signals(-code).name}"
    return f"exited unexpectedly with status {code}"


class _EventFd:
    """Rings an eventfd (to stop workers without building their poll objects)."""

    def __init__(self, fd: int):
        self.fd = fd

    def ring(self) -> None:
        os.eventfd_write(self.fd, 1)


# ---------------------------------------------------------------------------- the child


def _import(path: str, name: str) -> ModuleType:
    """The generated module, under the name it has in the coordinator's process, so that
    values pickled by one process (and the digests of such values) name the same module.

    A program run as a script is ``__main__`` there; spawn has already run it here as
    ``__mp_main__`` (aliased as ``__main__``), and its classes and functions are renamed
    back to ``__main__``.
    """
    mod = sys.modules.get("__mp_main__" if name == "__main__" else name)
    if mod is None or os.path.realpath(getattr(mod, "__file__", "") or "") != os.path.realpath(
        path
    ):
        spec = importlib.util.spec_from_file_location(
            "__mp_main__" if name == "__main__" else name, path
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import the program {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    if name == "__main__":
        sys.modules["__main__"] = mod
        for obj in list(vars(mod).values()):
            if getattr(obj, "__module__", None) == "__mp_main__":
                try:
                    obj.__module__ = "__main__"
                except (AttributeError, TypeError):
                    pass
    return mod


@contextlib.contextmanager
def _blocked(signals: frozenset[int]) -> Iterator[None]:
    """Block ``signals`` in the calling thread meanwhile (processes it starts inherit the
    mask); those that came are delivered on leaving."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _child(spec: _Spec) -> None:
    """Entry point of a worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor handles Ctrl-C
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # so does it a hang-up
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SUPERVISED)  # blocked since the spawn
    _end_with_parent(spec)
    ran = run_worker(spec, [FdBell(f) for f in spec.fds], lambda ctl: _idle(ctl, spec))
    if ran is None:  # the run already ended
        quick_exit(1)
    status, asked = ran
    # the atexit functions include rl_algos.salvage, if a hard stop skipped the shutdown;
    # stopped on a signal, the user waits: threads are not joined
    quick_exit(status, wait_threads=not asked)


def run_worker(
    spec: Any,
    bells: list[Bell],
    idle: Callable[[Control], Idle],
    attach: Callable[[Any], tuple[Control, Any, int]] | None = None,
) -> tuple[int, int] | None:
    """Be worker ``spec.me`` of the run whose control segment is ``spec.prefix + "ctl"``
    (``spec``: that of its transport), woken by ``bells`` (one per
    worker, then the supervisor's), with the idle check ``idle(ctl)``. ``attach(spec)``
    gives the control block, the channel ends and the spin budget (ns) when they are not the
    shared-memory ones of :func:`attach_shm`. Returns the worker's exit status and the
    ``STOP_ASKED`` cell at its end (non-zero: stopped on a signal), or None when the run
    already ended (no control segment)."""
    try:
        ctl, channels, spin_ns = (attach or attach_shm)(spec)
    except FileNotFoundError:
        return None
    log = Log(spec.logging)
    end = Endpoint(ctl, bells, channels, spin_ns, idle(ctl))
    status = 1
    try:
        module = _import(spec.module_path, spec.module_name)
        captured = Captured(sys.stdout, owner=threading.get_ident())
        sys.stdout = captured
        status = worker_main(module, spec.graph, spec.plan, spec.me, end, spec.opts, log, captured)
    except BaseException as exc:  # importing the program failed
        what = f"worker {spec.me} (importing the program)"
        status = report(exc, what, SourceMap(None, []), log=log)
        report_failure(ctl, bells, spec.me, status)
    finally:
        sys.stdout = sys.__stdout__
        if sys.stdout is not None:
            with contextlib.suppress(OSError, ValueError):  # said by the supervisor
                sys.stdout.flush()
        asked = ctl.cells[STOP_ASKED]
        ctl.release()
    return status, asked


def attach_shm(spec: Any) -> tuple[Control, ShmChannels, int]:
    """Worker ``spec.me``'s control block (on the segment ``spec.prefix + "ctl"``, kept
    mapped as ``ctl.segment``), its shared-memory channel ends and the spin budget
    (:data:`SPIN_NS`). Raises FileNotFoundError when the segment is gone (the run ended)."""
    seg = Segment(spec.prefix + "ctl")
    assert seg.buf is not None  # an open segment has its buffer
    ctl = Control(seg.buf, spec.plan.workers, spec.plan.channels, len(spec.plan.batches))
    ctl.segment = seg  # the mapping lives as long as the block
    return ctl, ShmChannels(ctl, spec.prefix, spec.me), SPIN_NS


_PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


def death_signal(sig: int) -> None:
    """Ask the kernel to send ``sig`` to this process when the thread that started it ends
    (Linux ``PR_SET_PDEATHSIG``; elsewhere, or without prctl, nothing). The caller then
    checks ``os.getppid()``: the parent may have died before the request."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def _end_with_parent(spec: _Spec) -> None:
    """Make this worker end as soon as the supervising process dies, even while it never
    waits (two workers answering each other inside the spin): on Linux the kernel sends
    SIGTERM at the parent's death (``PR_SET_PDEATHSIG``); the handler then unlinks the
    run's segments and exits at once with status 1. A SIGTERM while the parent lives (the
    supervisor forcing a stopped worker out) keeps its default action."""

    def on_term(signum: int, frame: Any) -> None:
        if not _parent_lives(spec.parent):
            unlink_prefix(spec.prefix)
            os._exit(1)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    death_signal(signal.SIGTERM)  # without prctl, the idle check still notices
    if os.getppid() != spec.parent:  # it died before the request
        on_term(signal.SIGTERM, None)


def _parent_lives(parent: int, settle_s: float = 0.05) -> bool:
    """Whether the supervising process ``parent`` lives, watched for ``settle_s`` seconds: a
    dying parent may still be this process's parent for a moment (the kernel first hands its
    children to another of its threads, which is being killed too), so a SIGTERM from it is
    the death signal unless it stays alive and not a zombie."""
    end = time.monotonic() + settle_s
    while True:
        if os.getppid() != parent:
            return False
        stat = process_stat(parent)  # None without /proc: trust getppid alone
        if stat is not None and stat[0] in ("Z", "X"):
            return False
        if time.monotonic() >= end:
            return True
        time.sleep(0.005)


def _idle(ctl: Control, spec: _Spec) -> Idle:
    """A worker's idle check: stop on an abort, or when the supervising process died (then
    unlink the run's segments, since nobody else will)."""

    def idle(_ready: list[int]) -> None:
        if ctl.cells[STATE] == ABORT:
            raise Aborted()
        if os.getppid() != spec.parent:
            unlink_prefix(spec.prefix)
            raise Aborted()

    return idle
