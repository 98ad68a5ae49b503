"""The processes backend: one ``spawn``-ed process per worker (worker 0 also coordinates
the tags); the program's own process supervises (:func:`reactors.parallel.supervise`).

Shared state: one control segment (``<prefix>ctl``, :class:`reactors.sync.Control`) and the
channels' slot segments (:mod:`reactors.shm`), all named with a per-run ``prefix``; one
``eventfd`` bell per worker and one for the supervisor, handed to the children at spawn. The
supervisor waits in ``poll`` on its bell and on the workers' process sentinels, so a worker
killed by a signal is noticed at once. Every exit path (normal end, a reaction error or
``exit(n)``, a worker killed, Ctrl-C, SIGTERM) ends the same way: workers are told to stop,
joined (then terminated, then killed), the last tag's pending output is printed, and every
segment with the run's prefix is unlinked. Workers ignore SIGINT (the supervisor handles a
Ctrl-C of the whole process group); a worker whose parent died notices within 50 ms of its
next wait and exits, unlinking the segments of its run.
"""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import secrets
import signal
import sys
import threading
from dataclasses import dataclass
from multiprocessing import reduction

from .context import CTX
from .coordinator import WorkerFailed
from .log import Log
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
from .shm import Reader, Segment, Writer, unlink_prefix
from .sync import ABORT, STATE, STATUS, W_FAILED, W_FINISHED, Control, FdBell
from .target import DEFAULTS
from .worker import Aborted, Captured

SPIN_NS = 50_000  # spin (with sched_yield) this long before blocking, ns
_GRACE_S = 2.0  # how long stopped workers get to exit before SIGTERM, then SIGKILL
_EXIT_S = 60.0  # how long finished workers get to write their records and exit
STATUS_TERMINATED = 128 + signal.SIGTERM


class WorkerDied(Exception):
    """A worker process ended without reporting (killed by a signal, or crashed)."""

    def __init__(self, message: str, worker: int):
        super().__init__(message)
        self.worker = worker


class Terminated(BaseException):
    """SIGTERM reached the supervising process."""


class _Fd:
    """A file descriptor that a spawned child inherits (duplicated while spawning)."""

    def __init__(self, fd: int):
        self.fd = fd

    def __reduce__(self):
        return (_rebuild_fd, (reduction.DupFd(self.fd),))


def _rebuild_fd(dup) -> int:
    return dup.detach()


@dataclass
class _Spec:
    """Everything a worker process needs (pickled by spawn)."""

    module_path: str
    module_name: str
    graph: Program
    plan: object
    me: int
    prefix: str
    fds: list
    opts: object
    logging: str
    parent: int


class ShmChannels:
    """Crossings of one worker process through shared memory (:mod:`reactors.shm`)."""

    def __init__(self, ctl, prefix: str, me: int):
        self.ctl, self.prefix, self.me = ctl, prefix, me
        self.writers = []

    def writer(self, index: int, readers, port) -> Writer:
        w = Writer(self.ctl, index, readers, port, self.prefix)
        self.writers.append(w)
        return w

    def reader(self, index: int, port) -> Reader:
        return Reader(self.ctl, index, self.me, port, self.prefix)

    def started(self, me: int, sched) -> None:
        CTX.sched = sched

    def close(self) -> None:
        for w in self.writers:
            w.close()


def run_processes(module, graph: Program, plan, opts, log) -> int:
    """Run ``plan`` with one process per worker; returns the exit status."""
    n = plan.workers
    prefix = f"lf{os.getpid()}x{secrets.token_hex(4)}"
    seg = Segment(prefix + "ctl", True, Control.size(n, channel_count(plan)))
    ctl = Control(seg.buf, n, channel_count(plan))
    ctl.init()
    fds = [FdBell.new() for _ in range(n + 1)]  # one per worker, then the supervisor's
    procs = []
    status, message = 1, None
    old_term = _on_sigterm()
    try:
        _spawn(module, graph, plan, opts, prefix, fds, procs)
        sentinels = {p.sentinel: w for w, p in enumerate(procs)}
        bell = FdBell(fds[n], extra=sentinels)
        status = supervise(ctl, bell, lambda ready: _check_dead(ready, sentinels, procs, ctl, bell))
        for p in procs:  # workers write their records, then exit
            p.join(_EXIT_S)
        merge_records(opts, n)
    except WorkerFailed as f:
        status = f.status
    except WorkerDied as e:
        message = f"{e} (it ran {plan.names(graph, e.worker)}); stopping."
    except KeyboardInterrupt:
        status, message = 130, "---- Interrupted (Ctrl-C); stopping."
    except Terminated:
        status, message = STATUS_TERMINATED, "---- Terminated (SIGTERM); stopping."
    finally:
        saved = _ignore_signals()  # a second Ctrl-C or SIGTERM must not cut the clean-up
        stop_workers(ctl, [_EventFd(f) for f in fds[:n]])
        _shutdown(procs)
        write_pending_output(ctl, output_readers(ShmChannels(ctl, prefix, 0), plan), sys.stdout)
        ctl.release()
        try:
            seg.close()
        except BufferError:  # a view is still alive somewhere: the mapping goes at exit
            pass
        unlink_prefix(prefix)
        for f in fds:
            os.close(f)
        _restore_signals(saved, old_term)
    if message:
        (log.error if status == 1 else log.info)(message)
    return status


class _EventFd:
    """Rings an eventfd (to stop workers without building their poll objects)."""

    def __init__(self, fd: int):
        self.fd = fd

    def ring(self) -> None:
        os.eventfd_write(self.fd, 1)


def _spawn(module, graph: Program, plan, opts, prefix: str, fds: list, procs: list) -> None:
    """Start one process per worker, appending each to ``procs`` as soon as it runs."""
    ctx = mp.get_context("spawn")
    path = os.path.abspath(module.__file__)
    level = graph.target.logging or DEFAULTS.logging
    for w in range(plan.workers):
        spec = _Spec(
            path,
            module.__name__,
            graph,
            plan,
            w,
            prefix,
            [_Fd(f) for f in fds],
            opts,
            level,
            os.getpid(),
        )
        p = ctx.Process(target=_child, args=(spec,), name=f"lf-worker-{w}", daemon=True)
        p.start()
        procs.append(p)


def _check_dead(ready, sentinels: dict, procs, ctl, bell) -> None:
    """Raise WorkerDied if a worker process ended without finishing or reporting a failure
    (a failure is raised by the coordinator itself, from the worker's STATUS)."""
    for fd in ready:
        w = sentinels.get(fd)
        if w is None:
            continue
        p = procs[w]
        p.join(1.0)  # the sentinel closes a moment before the exit status is known
        status = ctl.cells[ctl.worker_base(w) + STATUS]
        bell.poll.unregister(fd)
        if status == W_FAILED or (status == W_FINISHED and p.exitcode == 0):
            continue
        code = p.exitcode
        why = (
            f"was killed by signal {signal.Signals(-code).name}"
            if code and code < 0
            else f"exited unexpectedly with status {code}"
        )
        raise WorkerDied(f"worker {w} {why}", w)


def _shutdown(procs) -> None:
    """Join the workers; SIGTERM then SIGKILL those still alive after the grace period."""
    for p in procs:
        p.join(_GRACE_S)
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(1.0)
        if p.is_alive():
            p.kill()
            p.join(1.0)
        p.close()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _on_sigterm():
    """Turn SIGTERM into :class:`Terminated` while the run lasts; the old handler."""
    if not _main_thread():
        return None

    def handler(signum, frame):
        raise Terminated()

    return signal.signal(signal.SIGTERM, handler)


def _ignore_signals():
    """Ignore SIGINT and SIGTERM (during the clean-up); the handlers to restore."""
    if not _main_thread():
        return None
    return (
        signal.signal(signal.SIGINT, signal.SIG_IGN),
        signal.signal(signal.SIGTERM, signal.SIG_IGN),
    )


def _restore_signals(saved, old_term) -> None:
    if saved is None:
        return
    signal.signal(signal.SIGINT, saved[0])
    signal.signal(signal.SIGTERM, old_term if old_term is not None else saved[1])


# ---------------------------------------------------------------------------- the child


def _import(path: str, name: str):
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


def _child(spec: _Spec) -> None:
    """Entry point of a worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor handles Ctrl-C
    fds = list(spec.fds)
    n = spec.plan.workers
    try:
        seg = Segment(spec.prefix + "ctl")
    except FileNotFoundError:  # the run already ended
        sys.exit(1)
    ctl = Control(seg.buf, n, channel_count(spec.plan))
    bells = [FdBell(f) for f in fds]
    log = Log(spec.logging)
    channels = ShmChannels(ctl, spec.prefix, spec.me)

    def idle(_ready):
        if ctl.cells[STATE] == ABORT:
            raise Aborted()
        if os.getppid() != spec.parent:
            unlink_prefix(spec.prefix)
            raise Aborted()

    status = 1
    try:
        module = _import(spec.module_path, spec.module_name)
        captured = Captured(sys.stdout, owner=threading.get_ident())
        sys.stdout = captured
        status = worker_main(
            module,
            spec.graph,
            spec.plan,
            spec.me,
            ctl,
            bells,
            channels,
            SPIN_NS,
            idle,
            spec.opts,
            log,
            captured,
        )
    except BaseException as exc:  # importing the program failed
        from .errors import SourceMap, report

        status = report(
            exc, f"worker {spec.me} (importing the program)", SourceMap(None, []), log=log
        )
        from .parallel import _failed

        _failed(ctl, bells, spec.me, status)
    finally:
        sys.stdout = sys.__stdout__
        sys.stdout.flush()
        ctl.release()
    sys.exit(status)
