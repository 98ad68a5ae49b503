"""The main function of one worker of a parallel run, whatever its transport: build its share
of the program, connect its channel ends, run tags under the coordinator (worker 0 also
coordinates), write its records, and on a failure report it (on stderr) and tell the
supervisor through the control block (:func:`report_failure`).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from ..core.context import CTX
from ..core.errors import (
    BuildFailure,
    RecordError,
    SourceMap,
    exit_status,
    report,
    say_once,
)
from ..core.log import Log
from ..core.stdout_failure import is_output_failure, output_failed
from ..model.build import build
from ..model.program import Program
from ..records.checkpoint import attach, run_ended
from ..records.recording_file import ReplayError
from ..records.replay import replay_timing, tape_for
from ..records.snapshot import SnapshotError
from ..records.trace import Digest, Recorders, Timeline
from .contention import CONTENTION, usable_cores
from .coordinator import Coordinator
from .plan import Plan, free_running, written_ports
from .shm import SharedMemoryFull
from .sync import (
    CODE,
    FAILS,
    STATUS,
    STOP_ASKED,
    W_FAILED,
    Aborted,
    Control,
)
from .transport import Bell, Endpoint
from .worker_connections import Link
from .worker_records import write_records
from .worker_scheduler import WorkerScheduler
from .worker_stdout import Captured, output_readers, stdout_port


def worker_main(
    module: ModuleType,
    graph: Program,
    plan: Plan,
    me: int,
    end: Endpoint,
    opts: Any,
    log: Log,
    captured: Captured,
) -> int:
    """Build worker ``me``'s share of the program and run it; returns its exit status
    (failures are reported here, on stderr, and told to the supervisor). ``end``: what the
    transport gives this worker; ``opts``: the launcher's options; ``captured``: the stdout
    of this worker's reactions. Does not raise: any exception (``exit(n)`` and Ctrl-C, 130,
    included) becomes the status."""
    CTX.log = log
    CTX.source_directory = graph.source_directory
    CTX.package_directory = graph.package_directory
    CTX.run_id = opts.run_id
    CTX.owner = getattr(opts, "owner", "")
    CONTENTION.crowded = end.ctl.one_host and plan.workers > usable_cores()
    sched: WorkerScheduler | None = None
    digest: Digest | None = None
    timeline: Timeline | None = None
    smap = SourceMap(getattr(module, "__file__", None), graph.line_map)
    try:
        try:
            program = build(module, graph, owned=plan.owned[me])
        except BuildFailure as f:
            first = _first_failure()
            status = report(f.exc, f.what, smap, log=log) if first else exit_status(f.exc)
            return report_failure(end.ctl, end.bells, me, status)
        sched, digest, timeline = _scheduler(program, graph, plan, me, end, opts, log, captured)
        end.channels.started(me, sched)
        sched.run()
        if opts.verbose and sched.skip.skipped:
            log.info(
                f"---- worker {me} skipped {sched.skip.skipped:,} of {sched.seq + 1:,} tags "
                "(no reaction of its own triggered, no crossing read)"
            )
        write_records(opts, me, digest, timeline, sched.engine.tape, finished=True)
        return 0
    except Aborted:
        captured.spill()
        _write_left(opts, me, digest, timeline, _tape(sched), log)
        return 0
    except BaseException as exc:
        status = 1
        try:
            _send_or_spill(sched, captured)
            status = _status(exc, sched, me, smap, log) if _first_failure() else exit_status(exc)
        finally:  # the supervisor hears of the failure, whatever reporting it did
            report_failure(end.ctl, end.bells, me, status)
        _write_left(opts, me, digest, timeline, _tape(sched), log)  # what it computed before
        return status
    finally:
        run_ended(sched)
        end.channels.close()


def _scheduler(
    program: Any,
    graph: Program,
    plan: Plan,
    me: int,
    end: Endpoint,
    opts: Any,
    log: Log,
    captured: Captured,
) -> tuple[WorkerScheduler, Digest | None, Timeline | None]:
    """Worker ``me``'s scheduler of ``program`` (its share), connected to its channels, and
    the recorders it feeds: the digest (``--digest``) and the timeline (``tracing``)."""
    free = free_running(graph, opts.fast, opts.keepalive)
    link = _link(plan, me, end, program, captured, free)
    written = written_ports(graph, program, plan.owned[me])
    digest = Digest(written) if opts.digest else None
    coord = _coordinator(plan, end, opts, log, captured) if me == 0 else None
    sched = WorkerScheduler(
        program, link, keepalive=opts.keepalive, log=log, recorder=digest, coordinator=coord
    )
    tape = tape_for(sched, graph, opts, written, me, plan.workers)
    if tape is not None:
        sched.recorder = tape if digest is None else Recorders(digest, tape)
        if coord is not None and opts.replay:
            coord.engine.timing = replay_timing(coord.engine.timing, opts)
    resume = attach(sched, graph, opts, plan.owned[me], written, me=me, workers=plan.workers)
    if coord is not None:
        coord.resume = resume
    timeline = Timeline(me) if graph.target.tracing else None
    if timeline is not None:
        timeline.wrap(sched)
        sched.timeline = timeline  # and its waits for the other workers
    return sched, digest, timeline


def _tape(sched: WorkerScheduler | None) -> Any:
    """The recording or replay tape of ``sched`` (None: none, or no scheduler yet)."""
    return None if sched is None else sched.engine.tape


def _status(
    exc: BaseException, sched: WorkerScheduler | None, me: int, smap: SourceMap, log: Log
) -> int:
    """Report ``exc`` on stderr, naming the failed reaction (and its .lf line) if a reaction
    raised it; the exit status (Ctrl-C: 130, not reported; ``exit()`` after the supervisor
    asked a stop on a signal: that signal's status, not reported)."""
    asked = sched.cells[STOP_ASKED] if sched is not None else 0
    if asked and isinstance(exc, SystemExit):
        return asked  # exit() while stopping on a signal: the signal's status, said already
    if isinstance(exc, KeyboardInterrupt):  # raised by the program: workers ignore SIGINT
        log.info("---- Interrupted (KeyboardInterrupt); stopping.")
        return 130
    if isinstance(exc, SharedMemoryFull):
        log.error(f"worker {me}: {exc}")
        return 1
    if isinstance(exc, (SnapshotError, ReplayError, RecordError)):
        _say_once(exc, log)
        return 1
    if is_output_failure(exc) and isinstance(exc, OSError):
        return output_failed(exc)
    r = sched.failed if sched is not None else None
    if r is not None and _read_only_write(exc):
        exc.add_note(
            "hint: an array received from another worker is read-only (shared, not copied); "
            "declare the input `mutable` (mutable input name) to get a copy to write into"
        )
    if r is None:
        return report(exc, f"worker {me}", smap, log=log)
    return report(exc, r.describe(), smap, fallback=(r.file, r.line), log=log)


def _write_left(
    opts: Any,
    me: int,
    digest: Digest | None,
    timeline: Timeline | None,
    tape: Any,
    log: Log,
) -> None:
    """After the run stopped or failed: write worker ``me``'s records (those not written
    yet); one that cannot be written is said (once), the run having ended anyway."""
    try:
        write_records(opts, me, digest, timeline, tape)
    except (RecordError, ReplayError) as e:
        _say_once(e, log)


def _say_once(exc: BaseException, log: Log) -> None:
    """Say ``exc`` (a snapshot, recording or record that failed) unless another worker of
    the run said the same (workers that cannot write their parts of one file, on a full
    disk, fail alike)."""
    if say_once(CTX.run_id, str(exc)):
        for line in str(exc).splitlines():
            log.error(line)


def _read_only_write(exc: BaseException) -> bool:
    """Whether ``exc`` is numpy refusing a write into a read-only array."""
    return isinstance(exc, ValueError) and "is read-only" in str(exc)


def _link(plan: Plan, me: int, end: Endpoint, program: Any, captured: Captured, free: bool) -> Link:
    """Worker ``me``'s :class:`reactors.parallel.worker_connections.Link`: its crossings' ends, in
    and out, by batch, and its stdout channels; ``free``: whether the workers agree on tags
    themselves (:func:`reactors.parallel.plan.free_running`)."""
    roots = program.extra["roots"]
    channels = end.channels
    ctl = end.ctl
    incoming, outgoing = [], []
    edge = set()
    for b in plan.batches:
        members = [plan.crossings[i] for i in b.members]
        cell = ctl.batch_cell(b.index)
        if b.edge:
            edge.add(cell)
        if b.writer == me:
            for pos, c in enumerate(members, 1):
                writer = channels.writer(c.index, c.readers, roots[c.root])
                outgoing.append((c.last_write, writer, cell, pos, b.readers))
        elif me in b.first_read:
            readers = [
                (pos, channels.reader(c.index, roots[c.root]))
                for pos, c in enumerate(members, 1)
                if me in c.readers
            ]
            incoming.append((b.first_read[me], readers, cell, b.writer))
    port = stdout_port()
    sends = (
        channels.writer(plan.output_channel(me, 0), (), port),
        channels.writer(plan.output_channel(me, 1), (), port),
    )
    output = (captured, (port, sends))
    steady = {w for b in plan.batches if not b.edge for w in b.first_read}
    skippers = [w for w in range(1, plan.workers) if w not in steady] if free else []
    return Link(
        end.ctl,
        me,
        end.bells,
        end.spin_ns,
        end.idle,
        incoming,
        outgoing,
        output,
        free,
        edge,
        skippers,
        channels.arrived,
    )


def _coordinator(plan: Plan, end: Endpoint, opts: Any, log: Log, captured: Captured) -> Coordinator:
    """The :class:`reactors.parallel.coordinator.Coordinator` that worker 0 runs between its
    tags."""
    return Coordinator(
        end.ctl,
        end.bells,
        end.bells[-1],
        output_readers(end.channels, plan),
        captured.real,
        fast=opts.fast,
        keepalive=opts.keepalive,
        timeout=opts.timeout,
        start_multiple=opts.start_multiple,
        log=log,
        spin_ns=end.spin_ns,
        idle=end.idle,
    )


def _send_or_spill(sched: WorkerScheduler | None, captured: Captured) -> None:
    """Before reporting a failure: hand this tag's printed text to the coordinator (which
    prints it in order with the other workers'), or print it directly if there is no tag."""
    try:
        if sched is not None and sched.seq >= 0:
            sched.send_output()
            return
    except Exception:
        pass
    captured.spill()


def _first_failure() -> bool:
    """Whether this worker's failure is the first of the run, which it then reports: the
    run ends on it, as on one worker, which stops at its first failure. A failure on
    another worker after it (its consequence, or a reaction that failed at the same tag) is
    not told. Claimed, atomically, by a marker file of the run in the temporary folder
    (:func:`reactors.core.errors.say_once`; one per host: workers on other hosts of a cluster
    claim their own)."""
    return say_once(CTX.run_id, "a failure of the run")


def report_failure(ctl: Control, bells: Sequence[Bell], me: int, status: int) -> int:
    """Tell the supervisor (and the coordinator) that worker ``me`` failed with exit status
    ``status`` (already reported on stderr); returns ``status``."""
    base = ctl.worker_base(me)
    ctl.cells[base + CODE] = status
    ctl.cells[base + STATUS] = W_FAILED
    ctl.cells[FAILS] = 1  # every failing worker writes the same value: no race
    bells[-1].ring()
    bells[0].ring()
    return status
