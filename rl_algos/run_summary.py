"""What a run directory says about its run: found by the files a run writes when it starts
(``config.json``, ``.run_id``), never by its name, and summed up from ``config.json``,
``returns.csv``, ``metrics.csv`` and the marks the runtime leaves beside the run's snapshots.

A run's status is one of:

- ``running``: a process holds the run's lock (``checkpoints/.<program>.<run>.lock``, taken
  while a program with snapshots writes the run), or, for a run without snapshots, no
  learning curve is drawn yet and its files changed in the last :data:`RECENT_S` seconds;
- ``solved``: the mean return of :data:`WINDOW` episodes reached ``target_return``;
- ``budget``: the run reached its stop tag without reaching it (the runtime's
  ``.finished`` mark: its ``max_steps`` or its ``-o`` time limit);
- ``stopped``: stopped before that (Ctrl-C, a signal, an error, killed);
- ``ended``: a run without snapshots (``--checkpoint_every 0``) that ended without reaching
  the target short of its ``max_steps``: whether at its time limit or stopped, nothing on
  disk tells.

Environment steps are the last logged ones (the newest episode of returns.csv or
``charts/SPS`` row of metrics.csv, written every second), and
steps per second the last ``charts/SPS`` (the mean since the run started).
"""

from __future__ import annotations

import csv
import datetime
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .record import CONFIG_FILE, read_record
from .runlog import CHECKPOINTS, is_run_directory, run_id_of, run_started

#: Episodes averaged for a run's final mean return: those of the episode logger's window.
WINDOW = 20
#: Seconds within which a run without snapshots still writing its files counts as running.
RECENT_S = 30.0
RETURNS = "returns.csv"
METRICS = "metrics.csv"
CURVE = "learning_curve.png"


@dataclass(frozen=True)
class Returns:
    """The finished episodes of a run (returns.csv): the environment ``steps`` taken when
    each ended ((E,) int64) and its ``returns`` ((E,) float64)."""

    steps: np.ndarray
    returns: np.ndarray

    def final_mean(self, window: int = WINDOW) -> float | None:
        """Mean return of the last ``window`` episodes (fewer when fewer ended); None
        without an episode."""
        return float(self.returns[-window:].mean()) if len(self.returns) else None

    def steps_to_target(self, target: float, window: int = WINDOW) -> int | None:
        """The environment steps at which the mean of the last ``window`` returns first
        reached ``target`` (with ``window`` episodes in, as the episode logger judges);
        None if it never did."""
        means = moving_mean(self.returns, window)[window - 1 :]
        reached = np.flatnonzero(means >= target)
        return int(self.steps[window - 1 + reached[0]]) if len(reached) else None


@dataclass(frozen=True)
class RunSummary:
    """One run: its directory ``path``, what config.json records (``program``, ``env_id``,
    ``seed``, ``run_id``, the main reactor's ``parameters`` with those of reactors inside it
    that the command line gave, ``"PATH.NAME"`` -> the LF text), its start (seconds since the
    epoch; None when unknown), ``status`` (see the module docstring), ``episodes``,
    ``env_steps`` (the last logged), ``final_return`` (mean of the last :data:`WINDOW`) and
    ``sps`` (environment steps per second; None before the first second)."""

    path: str
    program: str
    env_id: str
    seed: Any
    run_id: str
    started: float | None
    status: str
    episodes: int
    env_steps: int
    final_return: float | None
    sps: float | None
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def short_id(self) -> str:
        """The first 8 digits of the run id."""
        return self.run_id[:8]

    def started_text(self) -> str:
        """``2026-11-28 12:43:57`` (local time), or ``?``."""
        if self.started is None:
            return "?"
        return datetime.datetime.fromtimestamp(self.started).strftime("%Y-%m-%d %H:%M:%S")


def find_runs(paths: Sequence[str]) -> list[str]:
    """The run directories in ``paths`` (each a run directory, or a folder searched at any
    depth; snapshot folders and hidden ones are not searched), sorted, without repeats.

    Raises:
        FileNotFoundError: a path that does not exist.
    """
    found: set[str] = set()
    for path in paths:
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path} does not exist or is not a folder")
        found.update(_runs_below(path))
    return sorted(found)


def _runs_below(top: str) -> Iterator[str]:
    for folder, dirs, _ in os.walk(top):
        if is_run_directory(folder):
            dirs[:] = []
            yield os.path.normpath(folder)
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != CHECKPOINTS)


def read_returns(run_dir: str) -> Returns:
    """The episodes of ``run_dir/returns.csv`` (none when it is missing or empty); a last
    line cut short (a run killed while writing it) is left out."""
    steps: list[int] = []
    returns: list[float] = []
    for row in _rows(os.path.join(run_dir, RETURNS)):
        try:
            step, ret = int(row["step"]), float(row["return"])
        except (KeyError, TypeError, ValueError):
            continue
        steps.append(step)
        returns.append(ret)
    return Returns(np.asarray(steps, np.int64), np.asarray(returns, np.float64))


def read_sps(run_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``charts/SPS`` rows of ``run_dir/metrics.csv``: (steps (N,) int64, steps per
    second since the start (N,) float64)."""
    steps, rates = [], []
    for row in _rows(os.path.join(run_dir, METRICS)):
        if row.get("tag") == "charts/SPS":
            try:
                steps.append(int(row["step"]))
                rates.append(float(row["value"]))
            except (TypeError, ValueError):
                continue
    return np.asarray(steps, np.int64), np.asarray(rates, np.float64)


def _rows(path: str) -> Iterator[dict[str, str]]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            yield from csv.DictReader(f)
    except FileNotFoundError:
        return


def moving_mean(values: np.ndarray, n: int) -> np.ndarray:
    """The mean of the last ``n`` values at each position (of fewer at the first ``n - 1``):
    (E,) float64 for (E,) ``values``.

    Raises:
        ValueError: ``n`` is less than 1.
    """
    if n < 1:
        raise ValueError(f"a moving mean needs a window of at least 1, not {n}")
    v = np.asarray(values, np.float64)
    sums = np.cumsum(np.concatenate(([0.0], v)))
    ends = np.arange(1, len(v) + 1)
    starts = np.maximum(ends - n, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def summarize(run_dir: str) -> RunSummary:
    """The summary of the run in ``run_dir``.

    Raises:
        ValueError: its config.json is not JSON.
    """
    try:
        record = read_record(run_dir)
    except ValueError as e:
        raise ValueError(f"{os.path.join(run_dir, CONFIG_FILE)} is not JSON: {e}") from None
    params = dict(record.get("parameters") or {})
    rets = read_returns(run_dir)
    run_id = str(record.get("run_id") or run_id_of(run_dir))
    program = str(record.get("program") or os.path.basename(os.path.dirname(run_dir)))
    last_step = int(rets.steps[-1]) if len(rets.steps) else 0
    sps_steps, rates = read_sps(run_dir)
    return RunSummary(
        path=run_dir,
        program=program,
        env_id=str(record.get("env_id") or params.get("env_id") or "?"),
        seed=record.get("seed", params.get("seed")),
        run_id=run_id,
        started=run_started(run_dir),
        status=run_status(run_dir, program, run_id, rets, params),
        episodes=len(rets.returns),
        env_steps=max(last_step, int(sps_steps[-1]) if len(sps_steps) else 0),
        final_return=rets.final_mean(),
        sps=float(rates[-1]) if len(rates) else None,
        parameters={**params, **(record.get("forwarded") or {})},
    )


def run_status(
    run_dir: str, program: str, run_id: str, rets: Returns, params: Mapping[str, Any]
) -> str:
    """``running``, ``solved``, ``budget``, ``stopped`` or ``ended`` (see the module
    docstring) for the run ``run_id`` of ``program`` in ``run_dir`` whose episodes are
    ``rets`` and main-reactor parameters ``params``."""
    marks = os.path.join(run_dir, CHECKPOINTS, f".{program}.{run_id[:8]}")
    lock = f"{marks}.lock"
    if os.path.exists(lock) and _held(lock):
        return "running"
    target = params.get("target_return")
    if isinstance(target, (int, float)) and rets.steps_to_target(float(target)) is not None:
        return "solved"
    if os.path.exists(f"{marks}.finished"):
        return "budget"
    if os.path.exists(lock):
        return "stopped"
    if not os.path.exists(os.path.join(run_dir, CURVE)):
        return "running" if _written_lately(run_dir) else "stopped"
    budget = params.get("max_steps")
    if isinstance(budget, int) and len(rets.steps) and int(rets.steps[-1]) >= budget:
        return "budget"
    return "ended"


def _held(lock: str) -> bool:
    """Whether a process holds the lock file ``lock`` (an exclusive ``flock``): a shared
    lock cannot be taken then (taken and released at once otherwise)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _written_lately(run_dir: str) -> bool:
    newest = 0.0
    for name in (RETURNS, METRICS):
        try:
            newest = max(newest, os.path.getmtime(os.path.join(run_dir, name)))
        except OSError:
            continue
    return time.time() - newest < RECENT_S


def config_differences(runs: Sequence[RunSummary]) -> list[str]:
    """The parameters whose values are not the same in every run of ``runs`` that records
    them (runs of several programs: a parameter of one program only differs if its runs
    differ in it), in the order the runs record them; none for one run. A parameter of a
    reactor inside the main one (``learner.hidden``) is recorded only when the command line
    gave it: a run of the same program without it had the default, which counts as a value."""
    values: dict[str, set[str]] = {}
    programs: dict[str, set[str]] = {}  # a contained parameter -> the programs that record it
    for r in runs:
        for name, value in r.parameters.items():
            values.setdefault(name, set()).add(json.dumps(value, sort_keys=True))
            if "." in name:
                programs.setdefault(name, set()).add(r.program)
    for name, which in programs.items():
        if any(r.program in which and name not in r.parameters for r in runs):
            values[name].add("(default)")
    return [name for name, seen in values.items() if len(seen) > 1]


def value_text(value: Any) -> str:
    """A parameter value as a person reads it: ``0.0003``, ``true``, ``[64, 64]``, ``Acrobot-v1``."""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:g}"
    return json.dumps(value)


def differing_text(run: RunSummary, names: Sequence[str]) -> str:
    """``learning_rate=0.0003 seed=2``: the values of ``names`` in ``run`` (those it records)."""
    return " ".join(f"{n}={value_text(run.parameters[n])}" for n in names if n in run.parameters)
