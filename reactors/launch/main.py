"""Entry point of a generated program: its options (parsed by :mod:`reactors.launch.options`),
build, run, exit status (spec §2.9, §5.3).

``main(module, graph_path, argv)`` is what the generated module's ``main`` calls. It returns
the process exit status: 0 on normal end, ``n`` when a reaction called ``exit(n)``, 1 when a
reaction raised or the program could not start; on SIGINT (Ctrl-C), SIGTERM or SIGHUP the run
stops at the next tag, after its shutdown reactions (a second signal stops it at once), with
status 130, 143 or 129.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING

from ..core.clock import Clock
from ..core.context import CTX
from ..core.errors import (
    STATUS_INTERRUPTED,
    BuildFailure,
    GraphError,
    LaunchError,
    RecordError,
    Signalled,
    SourceMap,
    StopSignals,
    catch_stop_signals,
    report,
    restore_signals,
)
from ..core.log import Log
from ..core.scheduler import Scheduler
from ..core.stdout_failure import is_output_failure, output_failed
from ..model.arguments import beneath
from ..model.build import build
from ..model.program import Program
from ..model.target import DEFAULTS
from ..parallel.shm_owner import owner_tag, reclaim
from ..records.checkpoint import attach, claim, run_ended, with_arguments
from ..records.checkpoint_policy import policy_of
from ..records.recording_file import ReplayError, load, manifest
from ..records.replay import Tape, tape_for
from ..records.snapshot import SnapshotError
from ..records.user_key import key_problem
from .options import Options, command_line_error, parse_options, program_args, usage

if TYPE_CHECKING:
    from ..parallel.costs import Calibrator
    from ..records.trace import Digest, TagHook, Timeline, _Recording


def main(module: ModuleType | str, graph_path: str, argv: Sequence[str] | None = None) -> int:
    """Run the program described by ``graph_path`` with the classes of ``module``.

    ``module`` is the generated module (or its import name); ``argv`` the command line,
    either ``sys.argv`` (first item the program) or only the options (default:
    ``sys.argv[1:]``). Returns the exit status; prints errors to stderr.
    """
    if isinstance(module, str):
        module = importlib.import_module(module)
    try:
        program = load_program(module, graph_path)
    except LaunchError as e:
        sys.stderr.write(f"ERROR: {e}\n")
        return 1
    return run_graph(module, program, program_args(argv))


def load_program(module: ModuleType, graph_path: str) -> Program:
    """The program of ``graph_path`` (graph.json), refused when ``module`` (its
    ``BUILD_ID``) and the file were written by two different builds.

    Raises:
        GraphError: the file cannot be read, is malformed (see :meth:`Program.load`), or
            comes from another build than the module (the message says to rebuild).
    """
    program = Program.load(graph_path)
    module_id = getattr(module, "BUILD_ID", "")
    if program.build_id and module_id != program.build_id:
        raise GraphError(
            f"{graph_path}: written by another build than {getattr(module, '__file__', module)} "
            f"(build id {program.build_id!r} != {module_id!r}); rebuild the program with lfc"
        )
    return program


def read_command_line(module: ModuleType, graph: Program, args: Sequence[str]) -> Options | int:
    """The options ``args`` of the program ``graph`` (its generated module ``module``), or
    the exit status once they are answered: 0 after ``--help`` printed the usage, 1 after a
    command-line error printed its line and the pointer to ``--help``. Needs nothing of the
    module but its path, so the launcher answers before the module's imports (torch)."""
    try:
        opts = parse_options(
            list(args), graph.target, graph.main_parameters, graph.contained_parameters
        )
    except (LaunchError, ValueError) as e:
        sys.stderr.write(command_line_error(graph, getattr(module, "__file__", None), e))
        return 1
    if opts.help:
        print(usage(graph))
        return 0
    return opts


def run_graph(module: ModuleType, graph: Program, args: Sequence[str] = ()) -> int:
    """Like :func:`main` with an already loaded program (absolute paths) and option list."""
    opts = read_command_line(module, graph, args)
    if isinstance(opts, int):
        return opts
    target = graph.target
    log = Log(target.logging or DEFAULTS.logging)
    if opts.arguments:
        graph = dataclasses.replace(graph, arguments=opts.arguments)
    CTX.log = log
    CTX.source_directory = graph.source_directory
    CTX.package_directory = graph.package_directory
    CTX.run_id = opts.run_id
    opts.owner = CTX.owner = owner_tag()  # names the run's notes in the temporary folder
    if target.tracing:
        opts.trace_file = os.path.abspath(f"{graph.name or 'program'}.trace.json")
    for what, path in (("--digest", opts.digest), ("the timing trace", opts.trace_file)):
        problem = unwritable(path) if path else None
        if problem:
            log.error(f"{what}: cannot write {path}: {problem}")
            return 1
    problem = _replay_unusable(graph, opts, log) or _snapshots_unusable(graph, opts, log)
    if problem:
        log.error(problem)
        return 1
    if opts.replay and opts.arguments:  # with the recorded run's parameters
        graph = dataclasses.replace(graph, arguments=opts.arguments)
    if opts.resume:  # with the parameters of the run it continues
        graph = with_arguments(graph, opts.resume, opts.trust)
    reclaimed = reclaim()  # what runs killed with their process group left in /dev/shm
    reclaim(tempfile.gettempdir())  # and their notes (reactors.core.context.scratch_file)
    if reclaimed:
        log.log(f"---- Reclaimed {reclaimed} shared-memory segment(s) of ended runs.")
    workers = opts.workers
    if opts.cluster and graph.federated:  # one worker per federate, each its own actor
        from ..parallel.placement import federates
        from . import backends

        opts.placement = tuple(federates(graph))
        workers = max(opts.placement) + 1
        if opts.verbose:
            log.info(f"---- {workers} federates, one worker each (-w is ignored)")
        if workers > 1:
            return backends.run(module, graph, opts, log, workers)
    if workers == 0 and not target.single_threaded:
        workers = _auto_workers(module, graph, opts, log)
    if workers != 1:  # one worker (the default) does not even import the parallel code
        from . import backends

        workers = backends.workers_for(graph, workers)
        if workers > 1:
            return backends.run(module, graph, opts, log, workers)
    if opts.cluster:
        log.error(
            f"--cluster needs two workers or more (-w 2 or more; this run has {workers}): "
            "its workers become the cluster's actors"
        )
        return 1
    return _run(module, graph, opts, log)


def _snapshots_unusable(graph: Program, opts: Options, log: Log) -> str | None:
    """Why the run cannot take or resume snapshots as asked (checked at start-up, before
    building), or None. Makes the checkpoint directory given; ``opts.resume`` becomes the
    file, whose run this process then writes (:func:`reactors.records.checkpoint.claim`: its lock
    taken, its run id this run's)."""
    if opts.resume:
        try:
            opts.resume, run_id = claim(opts.resume, graph, log, opts.trust)
        except SnapshotError as e:
            return str(e)
        if run_id:  # the run it continues
            opts.run_id = CTX.run_id = run_id
    if not policy_of(opts).active or not opts.checkpoint_dir_given:
        return None  # else the program's own directory may win (reactors.records.checkpoint_policy)
    try:
        os.makedirs(opts.checkpoint_dir, exist_ok=True)
    except OSError as e:
        return f"--checkpoint-dir: cannot make {opts.checkpoint_dir}: {e}"
    probe = os.path.join(opts.checkpoint_dir, "probe")
    problem = unwritable(probe)
    return (
        f"--checkpoint-dir: cannot write in {opts.checkpoint_dir}: {problem}" if problem else None
    )


def _replay_unusable(graph: Program, opts: Options, log: Log) -> str | None:
    """Why the run cannot record or replay as asked (checked at start-up), or None. A
    replay runs fast, without keepalive, from the recording's start time to its stop tag,
    with the recorded run's main parameters (those given on its command line win)."""
    if opts.record and opts.replay:
        return "--record and --replay cannot be used together"
    if opts.record_every_tag and not opts.record:
        return "--record-every-tag goes with --record <file>"
    if opts.trust and not (opts.resume or opts.replay):
        return "--trust goes with --resume or --replay (the file it trusts)"
    if opts.resume and (opts.record or opts.replay):
        return "--resume cannot be used with --record or --replay (a recording starts at the start tag)"
    if opts.record or opts.replay or opts.resume or policy_of(opts).active:
        problem = key_problem()  # the key that authenticates their files
        if problem:
            return problem
    if opts.record:
        problem = unwritable(opts.record)
        return f"--record: cannot write {opts.record}: {problem}" if problem else None
    if not opts.replay:
        return None
    try:
        rec = load(opts.replay, opts.trust, log.warn)
    except (OSError, ReplayError) as e:
        return str(e)
    recorded = rec.manifest.get("program")
    if recorded != graph.name:
        return f"--replay: {opts.replay} is a recording of {recorded}, not of {graph.name}"
    if rec.manifest.get("graph") != manifest(graph, 1)["graph"]:
        log.warn(
            f"{graph.name} changed since {opts.replay} was recorded: "
            "the replay stops at the first tag whose results differ"
        )
    opts.arguments = beneath(rec.manifest.get("arguments", ()), opts.arguments)
    opts.fast, opts.keepalive, opts.timeout = True, False, None
    opts.replay_bounds = (rec.start_time, rec.stop)
    return None


def _auto_workers(module: ModuleType, graph: Program, opts: Options, log: Log) -> int:
    """The worker count of ``-w 0`` (:func:`reactors.parallel.costs.choose_now`, from the profile
    beside the program's module); when it is one worker, the run measures and saves a
    profile."""
    from ..parallel.contention import CONTENTION, usable_cores
    from ..parallel.costs import GRAPH_FILE, PROFILE, Profile, choose_now, explain

    folder = os.path.dirname(os.path.abspath(module.__file__ or "."))
    path = os.path.join(folder, PROFILE)
    profile = Profile.load(path)
    choice = choose_now(graph, profile, usable_cores(), CONTENTION.others_now, graph.worker_choice)
    explain(os.path.join(folder, GRAPH_FILE), choice, graph.worker_choice)
    if opts.verbose:
        log.info(f"-w 0: {choice.reason}")
    if choice.measure:
        opts.profile = path
    opts.placement = choice.placement
    return choice.workers


def unwritable(path: str) -> str | None:
    """Why the file ``path`` could not be written (checked at start-up, so that a run does
    not end with its records lost), or None if it can."""
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        return "it is a directory"
    if not os.path.isdir(folder):
        return f"no directory {folder}"
    if os.path.exists(path):
        return None if os.access(path, os.W_OK) else "permission denied"
    return None if os.access(folder, os.W_OK | os.X_OK) else f"{folder} is not writable"


def _run(module: ModuleType, graph: Program, opts: Options, log: Log) -> int:
    try:
        program = build(module, graph)
    except BuildFailure as f:
        smap = SourceMap(getattr(module, "__file__", None), graph.line_map)
        return report(f.exc, f.what, smap, log=log)
    except LaunchError as e:
        log.error(str(e))
        return 1
    except KeyboardInterrupt:
        return STATUS_INTERRUPTED
    if opts.fast and program.physical_actions and not opts.replay:
        log.warn("fast execution with physical actions: physical tags may lag logical time")
    sched = Scheduler(
        program,
        Clock(),
        fast=opts.fast,
        keepalive=opts.keepalive,
        timeout=opts.timeout,
        start_multiple=opts.start_multiple,
        log=log,
    )
    try:
        records = _recorders(sched, graph, opts)
    except ReplayError as e:
        log.error(str(e))
        return 1
    calibrator = _calibrator(sched, graph, opts)
    saved = catch_stop_signals()  # a hard stop until the run starts
    stop = StopSignals(partial(_signalled, sched), log)
    finished = False
    try:
        attach(sched, graph, opts, None, program.ports)
        try:
            with stop:
                sched.run()
            finished = True
        finally:  # on every exit: a failed or stopped run keeps the tags it completed
            run_ended(sched)
            _write_records(records, opts, finished)
        if calibrator is not None:
            _save_profile(calibrator, opts, log)
    except KeyboardInterrupt:
        if stop.status is None:  # raised by a reaction, or a Ctrl-C before the run began
            how = "KeyboardInterrupt" if sched.failed is not None else "Ctrl-C"
            log.info(f"---- Interrupted ({how}); stopping.")  # as a worker says it
        return stop.status or STATUS_INTERRUPTED
    except Signalled as s:
        if stop.status is None:
            log.info(f"---- {s.message}; stopping.")
        return stop.status or s.status
    except (SnapshotError, ReplayError, RecordError) as e:
        _say(e, log)
        return 1
    except BaseException as exc:
        if stop.status is not None and isinstance(exc, SystemExit):
            return stop.status  # exit() while stopping on a signal: the signal's status
        if is_output_failure(exc) and isinstance(exc, OSError):  # | head, as on workers
            return output_failed(exc)
        r = sched.failed
        if r is None:
            return report(exc, "the program", program.source_map, log=log)
        return report(exc, r.describe(), program.source_map, fallback=(r.file, r.line), log=log)
    finally:
        restore_signals(saved)
    return stop.status or 0


def _signalled(sched: Scheduler, status: int) -> None:
    """A signal asked the one-worker run ``sched`` to stop (``status``: 128 + its number):
    say so to ``lf.stop_signalled()``, then stop at the next tag."""
    sched.signalled = status
    sched.engine.post((None,))


def _calibrator(sched: Scheduler, graph: Program, opts: Options) -> Calibrator | None:
    """A :class:`reactors.parallel.costs.Calibrator` timing the first tags, if this run measures."""
    if opts.profile is None:
        return None
    from ..parallel.costs import Calibrator

    return Calibrator(sched, graph)


def _save_profile(calibrator: Calibrator, opts: Options, log: Log) -> None:
    profile = calibrator.profile()
    if profile is None or opts.profile is None:
        return
    saved = profile.save(opts.profile)
    if opts.verbose:
        what = f"saved {opts.profile}" if saved else f"could not write {opts.profile}"
        log.info(f"-w 0: measured {profile.tags} tags; {what}")


@dataclass
class _Records:
    """A one-worker run's recorders (None: not asked for): the per-tag hooks of the loop
    (``present``), the digest, the timing trace and the recording or replay tape."""

    present: _Recording | None = None
    digest: Digest | None = None
    timeline: Timeline | None = None
    tape: Tape | None = None


def _recorders(sched: Scheduler, graph: Program, opts: Options) -> _Records:
    """Attach the digest recorder, the timing trace and the recording or replay to a
    one-worker run, as asked.

    Raises:
        ReplayError: the recording cannot be written.
    """
    out = _Records()
    if not (opts.digest or opts.trace_file or opts.record or opts.replay):
        return out
    from ..records.trace import Digest, Timeline, record_single

    hooks: list[TagHook] = []
    if opts.digest:
        out.digest = Digest()
        hooks.append(out.digest._add)
    out.tape = tape_for(sched, graph, opts, None, 0, 1)
    if out.tape is not None:
        hooks.append(out.tape.tag_end)
    if hooks:
        out.present = record_single(sched, hooks)
    if opts.trace_file:
        out.timeline = Timeline(0)
        out.timeline.wrap(sched)
    return out


def _write_records(records: _Records, opts: Options, finished: bool) -> None:
    """Write the digest, the timing trace and the recording, each whatever happens to the
    others; the digest and the recording hold the last tag only when the run ``finished`` (a
    failed or stopped run left it part way). A replay checks that last tag.

    Raises:
        ReplayError: the replay's last tag departs from the recording, or the recording
            cannot be written.
        RecordError: the digest or the timing trace cannot be written (one line each).
    """
    from ..parallel.worker_records import write_all
    from ..records.trace import write_timeline

    present, digest, tape = records.present, records.digest, records.tape
    steps: list[Callable[[], None]] = []
    if digest is not None and opts.digest:
        if finished and present is not None:
            present.final(digest._add)
        steps.append(partial(digest.write_sorted, opts.digest))
    if records.timeline is not None and opts.trace_file:
        steps.append(partial(write_timeline, records.timeline.json_events(), opts.trace_file))
    if tape is not None:
        steps.append(partial(_close_tape, tape, present, finished))
    write_all(steps)


def _close_tape(tape: Tape, present: _Recording | None, finished: bool) -> None:
    """Close the recording or replay ``tape``, with the last tag if the run ``finished``."""
    final = None
    if finished and present is not None:
        present.final(tape.tag_end)
        final = tape.elapsed()
    tape.close(final)


def _say(e: BaseException, log: Log) -> None:
    """Say ``e`` (a snapshot, recording or record that failed), one line per line, after the
    error of the same kinds during which it was raised, if any (a run whose snapshot could
    not be written, whose digest then could not be written either)."""
    context = e.__context__
    if isinstance(context, (SnapshotError, ReplayError, RecordError)) and context is not e:
        _say(context, log)
    for line in str(e).splitlines():
        log.error(line)
