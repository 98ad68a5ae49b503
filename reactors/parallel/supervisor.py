"""The supervisor of a parallel run: the program's own process (or main thread) while the
workers run, whatever their transport (:class:`reactors.parallel.transport.Transport`).

It starts the workers, then waits in the kernel (:func:`supervise`) for the end of the run, a
worker's failure (the worker reported it; its status is the exit status) or a dead worker (the
transport's idle check raises :class:`reactors.parallel.transport.WorkerDied`; status 1). Ctrl-C,
SIGTERM or SIGHUP asks the coordinator to stop at the next tag (:func:`ask_stop`; the shutdown
reactions run) and the run ends with status 130, 143 or 129; a second one stops it at once, and
so does the first one while the workers are still starting (no reaction ran).
Every exit path ends the same way: workers are told to stop (:func:`stop_workers`), joined
(forced if they do not exit), the last tag's pending output is printed, and the transport's
resources are released and unlinked; a further Ctrl-C, SIGTERM or SIGHUP cannot cut that
clean-up short."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any, TextIO

from ..core.errors import (
    STATUS_INTERRUPTED,
    Signalled,
    StopSignals,
    catch_stop_signals,
    load_failure_marker,
    restore_signals,
)
from ..core.log import Log
from ..core.stdout_failure import output_failed
from ..model.program import Program
from .coordinator import Outputs, WorkerFailed, failure, write_output
from .plan import Plan
from .sync import ABORT, FAILS, FINISHED, PRINTED, STARTING, STATE, STOP_ASKED, Control
from .transport import Bell, Idle, Transport, Waker, WorkerDied
from .worker_records import cut_tag, merge_records
from .worker_stdout import output_readers

STATUS_TERMINATED = 128 + signal.SIGTERM
_HURRY_S = 0.2  # after a hard stop by a signal, how long workers get to exit before being forced


def run(
    transport: Transport, module: ModuleType, graph: Program, plan: Plan, opts: Any, log: Log
) -> int:
    """Run ``plan`` on ``transport`` and supervise it to its end; returns the exit status
    (``opts``: the launcher's options). Exceptions other than the run's own faults and
    signals (e.g. a worker that cannot be started) propagate, after the clean-up."""
    ctl = transport.control
    status, message, grace = 1, None, None
    marker = load_failure_marker(os.getpid())
    _remove(marker)  # left by an earlier process of this pid
    old = catch_stop_signals()  # a hard stop until the workers run
    wakers: list[Waker] = []  # whom a stop on a signal wakes: the workers, then the supervisor
    stop = StopSignals(lambda code: ask_stop(ctl, wakers, code), log)
    try:
        transport.start(module, graph, opts, log)
        bell, idle = transport.watch()
        wakers[:] = [*transport.worker_bells(), bell]
        with stop:
            status = supervise(ctl, bell, idle)
        transport.join()
        late = failure(ctl)  # after the run finished: a worker could not write its records
        status = stop.status or (late.status if late is not None else status)
    except WorkerFailed as f:
        status = f.status
    except WorkerDied as e:
        if not os.path.exists(marker):  # else the worker said why: its module did not load
            message = f"{e} (it ran {plan.names(graph, e.worker)}); stopping."
    except KeyboardInterrupt:
        status, message = STATUS_INTERRUPTED, "---- Interrupted (Ctrl-C); stopping."
        grace = _HURRY_S
    except Signalled as s:
        status, message = s.status, f"---- {s.message}; stopping."
        grace = _HURRY_S
    finally:
        saved = _ignore_signals()
        try:
            lost, unwritten = _end(transport, plan, opts, grace)
            if lost is not None:  # said once: by the coordinator if it failed first
                status = output_failed(lost, say=status == 0)
            for line in unwritten:  # records of the run that no worker said it could not write
                log.error(line)
                status = status or 1
        finally:
            _restore_signals(saved)
            restore_signals(old)
            _remove(marker)
    if stop.status is not None and message is not None and message.startswith("----"):
        status, message = stop.status, None  # a second signal: the first one was said
    if message:
        (log.error if status == 1 else log.info)(message)
    return status


def _end(
    transport: Transport, plan: Plan, opts: Any, grace_s: float | None
) -> tuple[OSError | None, list[str]]:
    """Stop and join the workers (forcing them after ``grace_s`` seconds; None: the
    transport's grace period), merge their records, print the pending output, release the
    transport. Returns the error if the output could not be written (closed pipe, full
    device), else None, and what of the records could not be written and no worker said
    (:func:`reactors.parallel.worker_records.merge_records`)."""
    ctl = transport.control
    try:
        stop_workers(ctl, transport.worker_bells())
        transport.shutdown(grace_s)
        unwritten = merge_records(opts, plan.workers, cut_tag(ctl))  # however the run ended
        try:
            write_pending_output(ctl, output_readers(transport.channels(), plan), sys.stdout)
            sys.stdout.flush()
        except OSError as e:
            return e, unwritten
        return None, unwritten
    finally:
        transport.close()


def supervise(ctl: Control, bell: Bell, idle: Idle | None = None) -> int:
    """What the program's own process (or main thread) does while workers run: wait, in the
    kernel, for the end of the run (0), a failure (raises
    :class:`reactors.parallel.coordinator.WorkerFailed`), or whatever ``idle(ready_fds)`` raises
    (dead workers). KeyboardInterrupt and other signals' exceptions propagate; a stop asked
    on a signal before the first tag (workers still starting: no reaction ran, none is owed)
    raises :class:`reactors.core.errors.Signalled` at once."""
    cells = ctl.cells
    while True:
        bell.clear()
        if cells[STATE] == FINISHED:
            return 0
        if cells[STOP_ASKED] and cells[STATE] == STARTING:
            raise Signalled(cells[STOP_ASKED], "stopped before the first tag")
        if cells[FAILS]:
            f = failure(ctl)  # FAILS is written after the worker's STATUS
            if f is not None:
                raise f
        ready = bell.wait(0.5)
        if idle is not None:
            idle(ready)


def ask_stop(ctl: Control, wakers: Sequence[Waker], status: int) -> None:
    """Ask the coordinator (worker 0, woken by ``wakers[0]``; in a free-running run, every
    worker at the end of its tag) to stop the run at the next tag, as ``request_stop()``
    does, and wake the supervisor (``wakers[-1]``, :func:`supervise`); ``status``: the exit
    status the run will end with (128 + a signal's number), which workers give to an
    ``exit()`` of the shutdown reactions."""
    ctl.cells[STOP_ASKED] = status
    wakers[0].ring()
    wakers[-1].ring()


def stop_workers(ctl: Control, bells: Sequence[Waker]) -> None:
    """Tell every worker to stop at its next wait or reaction (unless the run finished)."""
    if ctl.cells[STATE] != FINISHED:
        ctl.cells[STATE] = ABORT
        for b in bells:
            b.ring()


def write_pending_output(ctl: Control, outputs: Outputs, stream: TextIO) -> None:
    """After an abnormal end (workers stopped): print the text of the tags that the
    coordinator did not print (workers are at most one tag apart: two tags at most)."""
    printed = ctl.cells[PRINTED]
    for seq in (printed + 1, printed + 2):
        write_output(ctl, outputs, seq, stream)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _ignore_signals() -> tuple[Any, ...] | None:
    """Ignore SIGINT, SIGTERM and SIGHUP (during the clean-up); the handlers to restore."""
    if not _main_thread():
        return None
    return tuple(signal.signal(s, signal.SIG_IGN) for s in _ENDING)


def _restore_signals(saved: tuple[Any, ...] | None) -> None:
    if saved is None:
        return
    for s, h in zip(_ENDING, saved):
        signal.signal(s, h if h is not None else signal.SIG_DFL)


_ENDING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
