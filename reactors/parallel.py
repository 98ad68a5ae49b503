"""Running a program on W > 1 workers: the plan, the backend choice, a worker's life, and
the supervision of a run.

``run(module, graph, opts, log, workers)`` is what :mod:`reactors.launch` calls when the
resolved number of workers is above one. The backend (``--backend``) is ``processes`` by
default on a GIL build of CPython and ``threads`` on a free-threaded one. Both run the same
:class:`reactors.worker.WorkerScheduler` in every worker, worker 0 also running the
:class:`reactors.coordinator.Coordinator`, while the program's own process (or main thread)
only supervises (:func:`supervise`); they differ only in how the control block, bells and
port crossings are provided (:mod:`reactors.processes`, :mod:`reactors.threads`).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from .build import build
from .context import CTX
from .coordinator import Coordinator, failure, write_output
from .errors import BuildFailure, SourceMap, report
from .placement import place, resolve_workers
from .program import Origin, Program
from .sync import ABORT, CODE, FAILS, FINISHED, GO_SEQ, STATE, STATUS, W_FAILED
from .topology import access, crossings
from .trace import Digest, Timeline, merge, write_timeline
from .worker import Aborted, Link, OutputPort, WorkerScheduler

BACKENDS = ("processes", "threads")


@dataclass
class Plan:
    """Who runs what: ``placement[reactor id]`` -> worker, ``owned[w]`` the reactor ids of
    worker ``w``, ``crossings`` the channels between workers (:mod:`reactors.topology`)."""

    workers: int
    placement: list
    owned: list
    crossings: list

    def names(self, graph: Program, w: int) -> str:
        """The reactors of worker ``w`` that have reactions, for messages."""
        ids = [i for i in sorted(self.owned[w]) if graph.reactors[i].reactions]
        names = [graph.reactors[i].name for i in ids]
        return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def channel_count(plan: Plan) -> int:
    """Channels in the control block: the crossings, then one stdout channel per worker."""
    return len(plan.crossings) + plan.workers


def make_plan(graph: Program, workers: int) -> Plan:
    """The plan for ``workers`` workers (a pure function of the graph)."""
    placement = place(graph, workers)
    owned = [set() for _ in range(workers)]
    for rid, w in enumerate(placement):
        owned[w].add(rid)
    return Plan(workers, placement, owned, crossings(graph, placement))


def default_backend() -> str:
    """``threads`` on a free-threaded CPython (GIL disabled), else ``processes``."""
    gil = getattr(sys, "_is_gil_enabled", None)
    return "threads" if gil is not None and not gil() else "processes"


def workers_for(graph: Program, requested: int) -> int:
    """The resolved worker count (see :func:`reactors.placement.resolve_workers`); always 1
    for a program with the target property ``single-threaded: true``."""
    if graph.target.single_threaded:
        return 1
    return resolve_workers(graph, requested)


def run(module, graph: Program, opts, log, workers: int) -> int:
    """Run on ``workers`` (> 1) workers with ``opts.backend``; returns the exit status."""
    backend = opts.backend or default_backend()
    plan = make_plan(graph, workers)
    log.log(f"---- Running on {workers} workers ({backend})")
    if opts.fast and any(a.origin == Origin.PHYSICAL for r in graph.reactors for a in r.actions):
        log.warn("fast execution with physical actions: physical tags may lag logical time")
    if backend == "threads":
        from .threads import run_threads

        return run_threads(module, graph, plan, opts, log)
    from .processes import run_processes

    return run_processes(module, graph, plan, opts, log)


def written_ports(graph: Program, program, owned: set) -> list:
    """The root ports written by reactions of the reactors in ``owned``."""
    acc = access(graph)
    roots = program.extra["roots"]
    return [
        roots[root]
        for root, ranks in acc.writes.items()
        if any(acc.reactor[r] in owned for r in ranks)
    ]


def output_readers(channels, plan: Plan) -> list:
    """``(OutputPort, reader)`` of every worker's stdout channel (for :func:`write_output`)."""
    ports = [OutputPort() for _ in range(plan.workers)]
    return [(p, channels.reader(len(plan.crossings) + w, p)) for w, p in enumerate(ports)]


def worker_main(
    module,
    graph: Program,
    plan: Plan,
    me: int,
    ctl,
    bells,
    channels,
    spin_ns: int,
    idle,
    opts,
    log,
    captured,
) -> int:
    """Build worker ``me``'s share of the program and run it; returns its exit status
    (failures are reported here, on stderr, and told to the supervisor). ``captured`` is
    the :class:`reactors.worker.Captured` stdout of this worker's reactions; worker 0 also
    coordinates (:class:`reactors.coordinator.Coordinator`)."""
    CTX.log = log
    CTX.source_directory = graph.source_directory
    CTX.package_directory = graph.package_directory
    sched = None
    smap = SourceMap(getattr(module, "__file__", None), graph.line_map)
    try:
        try:
            program = build(module, graph, owned=plan.owned[me])
        except BuildFailure as f:
            return _failed(ctl, bells, me, report(f.exc, f.what, smap, log=log))
        roots = program.extra["roots"]
        incoming, outgoing = [], []
        for c in plan.crossings:
            if c.writer == me:
                w = channels.writer(c.index, c.readers, roots[c.root])
                outgoing.append((c.last_write, w, c.readers))
            elif me in c.readers:
                incoming.append(
                    (c.first_read[me], channels.reader(c.index, roots[c.root]), c.index)
                )
        port = OutputPort()
        output = (captured, (port, channels.writer(len(plan.crossings) + me, (), port)))
        digest = Digest(written_ports(graph, program, plan.owned[me])) if opts.digest else None
        link = Link(ctl, me, bells, spin_ns, idle, incoming, outgoing, output)
        coord = None
        if me == 0:
            coord = Coordinator(
                ctl,
                bells,
                bells[-1],
                output_readers(channels, plan),
                captured.real,
                fast=opts.fast,
                keepalive=opts.keepalive,
                timeout=opts.timeout,
                start_multiple=opts.start_multiple,
                log=log,
                spin_ns=spin_ns,
                idle=idle,
            )
        sched = WorkerScheduler(
            program, link, keepalive=opts.keepalive, log=log, recorder=digest, coordinator=coord
        )
        timeline = Timeline(me) if graph.target.tracing else None
        if timeline is not None:
            timeline.wrap(sched)
        channels.started(me, sched)
        sched.run()
        _write_records(opts, me, digest, timeline)
        return 0
    except Aborted:
        captured.spill()
        return 0
    except BaseException as exc:
        _send_or_spill(sched, captured)
        if isinstance(exc, KeyboardInterrupt):
            return _failed(ctl, bells, me, 130)
        r = sched.failed if sched is not None else None
        if r is None:
            status = report(exc, f"worker {me}", smap, log=log)
        else:
            status = report(exc, r.describe(), smap, fallback=(r.file, r.line), log=log)
        return _failed(ctl, bells, me, status)
    finally:
        channels.close()


def _send_or_spill(sched, captured) -> None:
    """Before reporting a failure: hand this tag's printed text to the coordinator (which
    prints it in order with the other workers'), or print it directly if there is no tag."""
    try:
        if sched is not None and sched.seq >= 0:
            sched.send_output()
            return
    except Exception:
        pass
    captured.spill()


def _failed(ctl, bells, me: int, status: int) -> int:
    base = ctl.worker_base(me)
    ctl.cells[base + CODE] = status
    ctl.cells[base + STATUS] = W_FAILED
    ctl.cells[FAILS] = 1  # every failing worker writes the same value: no race
    bells[-1].ring()
    bells[0].ring()
    return status


def supervise(ctl, bell, idle=None) -> int:
    """What the program's own process (or main thread) does while workers run: wait, in the
    kernel, for the end of the run (0), a failure (raises
    :class:`reactors.coordinator.WorkerFailed`), or whatever ``idle(ready_fds)`` raises
    (dead workers). KeyboardInterrupt and other signals' exceptions propagate."""
    cells = ctl.cells
    while True:
        bell.clear()
        if cells[STATE] == FINISHED:
            return 0
        if cells[FAILS]:
            f = failure(ctl)  # FAILS is written after the worker's STATUS
            if f is not None:
                raise f
        ready = bell.wait(0.5)
        if idle is not None:
            idle(ready)


def stop_workers(ctl, bells) -> None:
    """Tell every worker to stop at its next wait or reaction (unless the run finished)."""
    if ctl.cells[STATE] != FINISHED:
        ctl.cells[STATE] = ABORT
        for b in bells:
            b.ring()


def write_pending_output(ctl, outputs, stream) -> None:
    """After an abnormal end (workers stopped): print the text of the last tag that the
    coordinator did not print."""
    write_output(ctl, outputs, ctl.cells[GO_SEQ], stream)


def _write_records(opts, me: int, digest, timeline) -> None:
    if digest is not None:
        digest.write(f"{opts.digest}.w{me}")
    if timeline is not None:
        with open(f"{opts.trace_file}.w{me}", "w", encoding="utf-8") as f:
            json.dump(timeline.json_events(), f)


def merge_records(opts, workers: int) -> None:
    """After a successful run: combine the workers' digest and timeline files."""
    if opts.digest:
        merge([f"{opts.digest}.w{w}" for w in range(workers)], opts.digest)
    if opts.trace_file:
        events = []
        for w in range(workers):
            p = f"{opts.trace_file}.w{w}"
            if os.path.exists(p):
                with open(p, encoding="utf-8") as f:
                    events += json.load(f)
                os.unlink(p)
        write_timeline(events, opts.trace_file)
