"""Building and running the paper's workloads as our own `.lf` programs.

Each program in ``lf_src/bench/`` prints one line ``RESULT {json}`` when it ends; the figures
in it are measured inside the program, after a warm-up round, so they leave out the
interpreter's start, imports and environment creation (as the peers' figures do). The launch
of the whole process is timed too and reported in the notes.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .common import ROOT, Row, cores, last_lines, launch

LF_BENCH = ROOT / "lf_src" / "bench"


def workers() -> int:
    """Worker count our programs run with: one per core, or ``$LF_BENCH_WORKERS``."""
    return int(os.environ.get("LF_BENCH_WORKERS") or cores())


def build_program(name: str, defines: dict, out: Path, folder: Path = LF_BENCH) -> Path:
    """Build ``<folder>/<name>.lf`` (default ``lf_src/bench/``) into ``out`` with main-reactor
    parameter defaults overridden (``lfc -D NAME=VALUE``; a value is an LF expression, so a
    string is quoted).

    Returns the launcher. Raises RuntimeError with lfc's messages on a compile error.
    """
    args = [a for k, v in defines.items() for a in ("-D", f"{k}={_lf(v)}")]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "codegen.cli",
            "-q",
            "-o",
            str(out),
            *args,
            str(folder / f"{name}.lf"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return out / "bin" / name


def _lf(value) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


@dataclass
class Outcome:
    """What one run of a program reported: ``result`` (its RESULT json, which counts the OS
    ``processes`` its reactors ran in), ``wall`` (s, the whole process), the ``workers`` it
    was asked for and the machine's ``load`` (1-minute load average) when it ended."""

    result: dict
    wall: float
    workers: int = 1
    load: float = float("nan")
    runnable: float = float("nan")

    def note(self) -> str:
        """Worker count asked for, processes used (when the program counts them) and
        whole-process time, for a Row's note;
        "LOADED" when other tasks than the run's kept the cores busy before it started."""
        procs = self.result.get("processes")  # a program that does not count them: not said
        where = f": ran in {procs} process(es)" if procs is not None else ""
        mark = "LOADED: " if self.runnable > cores() else ""
        return (
            f"{mark}-w {self.workers}{where}; whole run {self.wall:.1f} s "
            f"with start-up; load {self.load:.1f}, runnable before {self.runnable:.1f}"
        )


def run(launcher: Path, *args: str, n_workers: int | None = None, timeout: float = 600) -> Outcome:
    """Run a built program with ``-w n_workers`` (default: one per core); parse its RESULT.

    Raises RuntimeError when it exits non-zero or prints no RESULT line.
    """
    cmd = [str(launcher), "-w", str(n_workers if n_workers is not None else workers()), *args]
    wait_for_ray_exit()
    busy = runnable()
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    # a session of its own, so that a run past its time is ended with all its workers
    p = launch(cmd, None, timeout, env)
    if p.code is None:
        raise RuntimeError(f"{launcher.name} did not finish in {timeout:.0f} s (killed)")
    if p.code != 0:
        raise RuntimeError(f"{launcher.name} exited {p.code}: {last_lines(p.stdout + p.stderr)}")
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            return Outcome(result, p.seconds, int(cmd[2]), load_average(), busy)
    raise RuntimeError(f"{launcher.name} printed no RESULT line: {last_lines(p.stdout + p.stderr)}")


def runnable(samples: int = 5, every_s: float = 0.05) -> float:
    """Tasks that want a core now (the running count of /proc/loadavg, less this process),
    averaged over a few samples; NaN where unknown."""
    seen = []
    for _ in range(samples):
        try:
            with open("/proc/loadavg", "rb") as f:
                seen.append(int(f.read().split()[3].split(b"/")[0]) - 1)
        except (OSError, IndexError, ValueError):
            return float("nan")
        time.sleep(every_s)
    return sum(seen) / len(seen)


def wait_for_ray_exit(limit_s: float = 30.0) -> None:
    """Wait (at most ``limit_s``) until no Ray process is alive, so that none competes with
    our run (``ray.shutdown()`` returns before its raylet and GCS have exited)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end and _ray_alive():
        time.sleep(0.5)


def _ray_alive() -> bool:
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read(300)
        except OSError:
            continue
        if b"raylet" in cmd or b"gcs_server" in cmd or cmd.startswith(b"ray::"):
            return True
    return False


def load_average() -> float:
    """The machine's 1-minute load average (other processes compete for the cores)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def workload_module(name: str):
    """Import a shared workload module of ``lf_src/bench`` (e.g. ``stepper``) in this process."""
    if str(LF_BENCH) not in sys.path:
        sys.path.insert(0, str(LF_BENCH))
    return importlib.import_module(name)


def our_rows(
    table,
    launcher,
    key: str,
    note: str = "",
    timeout: float = 600,
    results: dict | None = None,
    one_worker: bool = True,
    speedup_target: float | None = None,
    auto: bool = False,
) -> None:
    """Our row (one worker per core) and, with several workers, our row on one worker (its
    ratio is then the speed-up from the extra workers, aimed at ``speedup_target``).
    ``launcher`` is the built program or the exception that building it raised; ``key`` names
    the figure in its RESULT; ``results[n_workers]`` receives each RESULT; ``one_worker=False``
    leaves out the run on one worker; ``auto``: also a row for ``-w 0`` (after one run that
    measures the reactions' costs), whose ratio is to the better of the other two (target
    0.95); the three worker counts then run in turn :data:`AUTO_REPS` times and each row gives
    the median run, so that they compare under the same conditions."""
    if isinstance(launcher, Exception):
        table.ours(lambda: _raise(launcher))
        return
    results = {} if results is None else results
    several = one_worker and workers() > 1
    runs: dict[int, list] = {}
    if auto and several:
        try:
            run(launcher, n_workers=0, timeout=timeout)  # measures: it has no profile yet
            for _ in range(AUTO_REPS):
                for n in (workers(), 1, 0):
                    runs.setdefault(n, []).append(run(launcher, n_workers=n, timeout=timeout))
        except Exception as e:  # noqa: BLE001 - each row below says it failed
            runs = {n: [e] for n in (workers(), 1, 0)}

    def go(n_workers: int):
        if n_workers in runs:
            out = _median(runs[n_workers], key, table.higher_better)
        else:
            out = run(launcher, n_workers=n_workers, timeout=timeout)
        results[n_workers] = out.result
        reps = f"median of {len(runs[n_workers])} runs" if n_workers in runs else ""
        return out.result[key], "; ".join(p for p in (note, reps, out.note()) if p)

    table.ours(lambda: go(workers()))
    if several:
        single = table.peer(
            "ours on 1 worker (-w 1)",
            lambda: go(1),
            note=f"ratio = speed-up from -w {workers()}",
            target=speedup_target,
        )
        if table.our_figure is None and single is not None:
            table.rebase(single, f"ratio to ours on 1 worker: -w {workers()} failed")
        if auto:
            auto_row(table, key, lambda: go(0), results)


#: Runs of each worker count for the rows with a ``-w 0`` row (:func:`our_rows`).
AUTO_REPS = 3


def _median(outs: list, key: str, higher_better: bool) -> Outcome:
    """The run of ``outs`` with the median figure ``key`` (the exception if one failed)."""
    for o in outs:
        if isinstance(o, Exception):
            raise o
    ranked = sorted(outs, key=lambda o: o.result[key], reverse=higher_better)
    return ranked[len(ranked) // 2]


def auto_row(table, key: str, measure, results: dict) -> None:
    """Our row with ``-w 0`` (``measure()``: its figure and note); its ratio: to the better of
    the other worker counts' figures ``key`` in ``results``."""
    key_figures = [r[key] for n, r in results.items() if n != 0 and r.get(key)]
    row = Row(table.workload, "ours, -w 0 (chosen)", None, table.unit)
    try:
        row.figure, row.note = measure()
        if key_figures and row.figure:
            best = max(key_figures) if table.higher_better else min(key_figures)
            row.ratio = row.figure / best if table.higher_better else best / row.figure
            met = "MET" if row.ratio >= 0.95 else "MISSED"
            row.note += f"; ratio to the better of the other worker counts, target >= 0.95: {met}"
    except Exception as e:  # noqa: BLE001 - a failure is a row
        row.status = f"FAILED: {type(e).__name__}: {e}"[:240]
    table.rows.append(row)


def result_of(results: dict) -> dict:
    """Our RESULT with one worker per core, else the one on one worker, else ``{}``."""
    return results.get(workers()) or results.get(1) or {}


def build_or_error(name: str, defines: dict, out: Path):
    """:func:`build_program`, or the exception it raised (for :func:`our_rows`)."""
    try:
        return build_program(name, defines, out)
    except Exception as e:  # noqa: BLE001 - reported as our failed row
        return e


def _raise(exc: BaseException):
    raise exc
