"""``lf-rl sweep``: a hyperparameter search with Optuna, each trial a run of a built program.

``lf-rl sweep PROGRAM --trials N [--jobs J] --param NAME=SPEC ... [--storage URL]
[--study NAME] [--direction maximize|minimize] [--objective return|steps_to_target]
[-- EXTRA...]`` runs ``bin/PROGRAM EXTRA... --NAME VALUE ...`` for each trial (see
:mod:`rl_algos.sweep_trial`), up to J at once (default: the cores this process may use), the
values chosen by Optuna's default sampler (TPE) within the SPECs (:mod:`rl_algos.sweep_space`).

The study lives in Optuna's storage (default ``sqlite:///runs/<program>-sweep.db``, study name
the program's): running the same command again continues it until N trials have finished,
so ``--trials`` is a total, not a number more. A trial finished with a value, or failed by its
program, counts; a trial interrupted counts not: one that this command stopped (Ctrl-C,
SIGTERM) is marked failed as it stops, one left running by a sweep that was killed is marked
failed when the next sweep of the study starts, and either is run again with the same values
as a new trial then. So that a trial still running is not taken for an interrupted one, one
sweep at a time drives a study: a second one is refused (a lock beside an SQLite storage;
with another storage, the user keeps to it).

At the end it prints every trial (values, objective, run directory), the best one and its full
command line.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import shlex
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .sweep_space import Dimension, check_space, command_value, parse_param, program_parameters
from .sweep_trial import OBJECTIVES, TrialProcess

#: Seconds between looks at the running trials.
POLL_S = 0.05
#: Study attributes: trial numbers interrupted, and those of them queued again.
INTERRUPTED, REQUEUED = "interrupted", "requeued"


@dataclass(frozen=True)
class SweepConfig:
    """A sweep as asked on the command line: the ``launcher`` (``bin/Foo``), the search
    space ``dims``, ``trials`` in all, ``jobs`` at once, Optuna's ``storage`` URL and
    ``study`` name, the ``direction`` and ``objective``, and ``extra`` arguments of every
    run."""

    launcher: str
    dims: tuple[Dimension, ...]
    trials: int
    jobs: int
    storage: str
    study: str
    direction: str
    objective: str
    extra: tuple[str, ...] = ()

    def command(self, params: dict[str, Any]) -> list[str]:
        """The command line of a trial with ``params`` (name -> value)."""
        out = [self.launcher, *self.extra]
        for dim in self.dims:
            out += [f"--{dim.name}", command_value(params[dim.name])]
        return out


def add_parser(sub: Any) -> None:
    """Register ``lf-rl sweep`` in the subparsers ``sub``."""
    p = sub.add_parser(
        "sweep",
        help="search hyperparameters with Optuna, one run of a built program per trial",
        description="Arguments after -- go to every run of the program.",
        epilog="example: lf-rl sweep bin/CartPolePPO --trials 20 --jobs 2 "
        "--param learning_rate=log:1e-4:3e-3 --param num_steps=choice:16,32,64 "
        "-- --max_steps 50000 --checkpoint_every 0 --seed 1 (no snapshots needed: a trial that "
        "stops is run again)",
    )
    p.add_argument("program", metavar="PROGRAM", help="a built program: bin/Foo, or Foo")
    p.add_argument("--trials", type=int, required=True, help="trials in all (the study's total)")
    p.add_argument("--jobs", type=int, default=None, help="runs at once (default: usable cores)")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=SPEC",
        help="a parameter searched: int:LOW:HIGH, float:LOW:HIGH, log:LOW:HIGH or choice:A,B,C",
    )
    p.add_argument(
        "--storage",
        default=None,
        help="Optuna storage URL (default sqlite:///runs/<program>-sweep.db)",
    )
    p.add_argument("--study", default=None, help="study name (default: the program's)")
    p.add_argument(
        "--direction", default=None, help="maximize or minimize (default: the objective's)"
    )
    p.add_argument(
        "--objective",
        default="return",
        help="return (default: last 20 episodes) or steps_to_target",
    )


def run(args: argparse.Namespace) -> int:
    """``lf-rl sweep``: run the study to its total of trials and print it."""
    cfg = config_of(args)
    with _one_driver(cfg), _stopped_by_sigterm():
        study = open_study(cfg)
        for line in requeue_interrupted(study):
            print(line)
        todo = cfg.trials - len(counted(study))
        if todo <= 0:
            print(
                f"study {cfg.study} has {len(counted(study))} finished trials already: "
                "give a larger --trials to run more"
            )
        else:
            run_trials(study, cfg, todo)
    print_summary(study, cfg)
    return 0 if any(t.value is not None for t in completed(study)) else 1


def config_of(args: argparse.Namespace) -> SweepConfig:
    """The sweep ``args`` ask for, checked against the program.

    Raises:
        ValueError, FileNotFoundError: one line naming what is wrong (no such program, a bad
            SPEC or count, a parameter the program does not have, an unknown objective).
    """
    launcher = find_launcher(args.program)
    if args.objective not in OBJECTIVES:
        raise ValueError(f"--objective {args.objective!r}: give {' or '.join(OBJECTIVES)}")
    direction = args.direction or OBJECTIVES[args.objective]
    if direction not in ("maximize", "minimize"):
        raise ValueError(f"--direction {direction!r}: give maximize or minimize")
    if args.trials < 1 or (args.jobs is not None and args.jobs < 1):
        raise ValueError("--trials and --jobs take a count of at least 1")
    if not args.param:
        raise ValueError("give at least one --param NAME=SPEC to search")
    dims = tuple(parse_param(p) for p in args.param)
    program = program_parameters(launcher)
    check_space(dims, program)
    extra = tuple(getattr(args, "extra", ()))
    _check_extra(extra, dims)
    name = program.name
    return SweepConfig(
        launcher=launcher,
        dims=dims,
        trials=args.trials,
        jobs=args.jobs or len(os.sched_getaffinity(0)),
        storage=args.storage or f"sqlite:///runs/{name}-sweep.db",
        study=args.study or name,
        direction=direction,
        objective=args.objective,
        extra=extra,
    )


def _check_extra(extra: Sequence[str], dims: Sequence[Dimension]) -> None:
    given = {a.split("=", 1)[0] for a in extra if a.startswith("--")}
    both = [d.name for d in dims if f"--{d.name}" in given]
    if both:
        raise ValueError(f"--{both[0]} is searched (--param) and also given after --")


def find_launcher(program: str) -> str:
    """The launcher of ``program``: the file itself (``bin/Foo``, ``./bin/Foo``) or, for a
    bare name, ``bin/<name>``.

    Raises:
        FileNotFoundError: there is no such executable file (the message says how to build it).
    """
    path = program if os.sep in program else os.path.join("bin", program)
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    name = os.path.basename(program)
    raise FileNotFoundError(
        f"no program {path}: build it first (make build, or .venv/bin/lfc lf_src/{name}.lf)"
    )


@contextlib.contextmanager
def _one_driver(cfg: SweepConfig) -> Iterator[None]:
    """Hold a lock beside an SQLite storage while the sweep runs (``.<db>.<study>.lock``;
    nothing for another storage). Raises ValueError when another sweep holds it."""
    prefix = "sqlite:///"
    if not cfg.storage.startswith(prefix):
        yield
        return
    db = cfg.storage[len(prefix) :]
    os.makedirs(os.path.dirname(db) or ".", exist_ok=True)
    study = re.sub(r"[^\w.-]", "_", cfg.study)
    lock = os.path.join(os.path.dirname(db), f".{os.path.basename(db)}.{study}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"another lf-rl sweep is running study {cfg.study} of {db}: wait until it ends"
            ) from None
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    """SIGTERM stops the sweep as Ctrl-C does (KeyboardInterrupt)."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def open_study(cfg: SweepConfig) -> Any:
    """The study ``cfg`` names, made if it is new (Optuna's logging quietened to warnings).

    Raises:
        ValueError: the storage cannot be opened, or the study's direction is another.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study(
            storage=cfg.storage,
            study_name=cfg.study,
            direction=optuna.study.StudyDirection[cfg.direction.upper()],
            load_if_exists=True,
        )
    except (ImportError, RuntimeError, optuna.exceptions.OptunaError) as e:
        raise ValueError(f"cannot open study {cfg.study} in {cfg.storage}: {e}") from None
    if study.direction.name.lower() != cfg.direction:
        raise ValueError(
            f"study {cfg.study} in {cfg.storage} is to {study.direction.name.lower()}: give "
            f"--direction {study.direction.name.lower()}, or another --study"
        )
    return study


def requeue_interrupted(study: Any) -> list[str]:
    """Mark failed the trials a killed sweep left running, and queue again, as new trials,
    those values of every interrupted trial not queued yet. Returns a line saying so per
    trial."""
    from optuna.trial import TrialState

    lines = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        _mark_interrupted(study, t.number)
        study.tell(t.number, state=TrialState.FAIL)
        lines.append(f"trial {t.number} was left running by a sweep that ended: marked failed")
    requeued = list(study.user_attrs.get(REQUEUED, []))
    for n in study.user_attrs.get(INTERRUPTED, []):
        if n not in requeued:
            study.enqueue_trial(study.trials[n].params, user_attrs={"rerun_of": n})
            requeued.append(n)
            lines.append(f"trial {n} was interrupted: its values are run again as a new trial")
    study.set_user_attr(REQUEUED, requeued)
    return lines


def _mark_interrupted(study: Any, number: int) -> None:
    done = list(study.user_attrs.get(INTERRUPTED, []))
    study.set_user_attr(INTERRUPTED, [*done, number])


def counted(study: Any) -> list[Any]:
    """The trials that count towards ``--trials``: finished with a value, or failed, but not
    interrupted."""
    from optuna.trial import TrialState

    interrupted = set(study.user_attrs.get(INTERRUPTED, []))
    ended = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)
    return [
        t for t in study.get_trials(deepcopy=False, states=ended) if t.number not in interrupted
    ]


def completed(study: Any) -> list[Any]:
    """The trials finished with a value."""
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))


def run_trials(study: Any, cfg: SweepConfig, todo: int) -> None:
    """Run ``todo`` trials, up to ``cfg.jobs`` at once; on Ctrl-C (or SIGTERM) stop those
    running, mark them interrupted and failed, and raise KeyboardInterrupt."""
    dists = {d.name: d.distribution() for d in cfg.dims}
    running: dict[int, tuple[Any, TrialProcess]] = {}
    try:
        while todo > 0 or running:
            while todo > 0 and len(running) < cfg.jobs:
                trial = study.ask(dists)
                command = cfg.command(trial.params)
                trial.set_user_attr("command", command)
                running[trial.number] = (trial, TrialProcess(command))
                todo -= 1
            for number in [n for n, (_, p) in running.items() if p.done()]:
                trial, proc = running.pop(number)
                _finish(study, cfg, trial, proc)
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        _interrupt(study, running)
        raise


def _finish(study: Any, cfg: SweepConfig, trial: Any, proc: TrialProcess) -> None:
    """Tell the study how ``trial`` went and print one line of it."""
    from optuna.trial import TrialState

    outcome = proc.outcome(cfg.objective)
    values = " ".join(f"{k}={shown(v)}" for k, v in trial.params.items())
    if outcome.run_dir:
        trial.set_user_attr("run_dir", _relative(outcome.run_dir))
    if outcome.interrupted:
        _mark_interrupted(study, trial.number)
        study.tell(trial, state=TrialState.FAIL)
        print(f"trial {trial.number}: {values}: interrupted ({outcome.error})", flush=True)
        return
    if outcome.value is None:
        trial.set_user_attr("error", outcome.error)
        study.tell(trial, state=TrialState.FAIL)
        print(f"trial {trial.number}: {values}: failed: {outcome.error}", flush=True)
        return
    study.tell(trial, outcome.value)
    print(
        f"trial {trial.number}: {values} -> {cfg.objective} {outcome.value:g} "
        f"({_relative(outcome.run_dir or '')})",
        flush=True,
    )


def _interrupt(study: Any, running: dict[int, tuple[Any, TrialProcess]]) -> None:
    from optuna.trial import TrialState

    for number, (trial, proc) in running.items():
        proc.stop()
        proc.outcome("return")  # closes its files
        _mark_interrupted(study, number)
        study.tell(trial, state=TrialState.FAIL)
    if running:
        numbers = ", ".join(str(n) for n in running)
        print(f"interrupted: trials {numbers} marked failed; the same command runs them again")


def print_summary(study: Any, cfg: SweepConfig) -> None:
    """Every trial of ``study`` as a table, then the best one and its command line."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"study {cfg.study} ({cfg.storage}): {cfg.objective}, {cfg.direction}")
    for col in ("trial", "state", *(d.name for d in cfg.dims), cfg.objective, "run directory"):
        table.add_column(col, no_wrap=col != "run directory")
    interrupted = set(study.user_attrs.get(INTERRUPTED, []))
    for t in study.trials:
        state = "interrupted" if t.number in interrupted else t.state.name.lower()
        if "rerun_of" in t.user_attrs:
            state += f" (rerun of {t.user_attrs['rerun_of']})"
        values = [shown(t.params[d.name]) if d.name in t.params else "" for d in cfg.dims]
        value = "" if t.value is None else f"{t.value:g}"
        table.add_row(str(t.number), state, *values, value, t.user_attrs.get("run_dir", ""))
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    console.print(table)
    best = _best(study)
    if best is None:
        print("no trial finished with a value")
        return
    print(f"best: trial {best.number}, {cfg.objective} {best.value:g}")
    print(f"command: {shlex.join(best.user_attrs.get('command', []))}")


def _relative(path: str) -> str:
    """``path`` from the current directory when it is below it, else as it is."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def shown(value: Any) -> str:
    """A sampled value as a person reads it (4 significant digits of a float; the command
    line has all of them)."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _best(study: Any) -> Any:
    try:
        return study.best_trial
    except ValueError:
        return None
