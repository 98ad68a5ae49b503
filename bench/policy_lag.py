"""Policy lag: steps/s of PPO with ``--policy_lag 1`` (the update overlapping the next rollout,
rl_algos.lag) beside the synchronous ``--policy_lag 0``, measured in the same invocation
(``python -m bench --only policy_lag``).

AtariPPO (a short Pong run: the update is ~1 s of torch per 1,024 steps on the CPU) and
CartPolePPO on 2 workers; the two lags are run alternately, each figure the median of 3 runs
(1 in quick mode), the rate the one the program itself reports over its run (its start,
the same for both, left out). The ratio is lag 1 over lag 0; the target on a 2-core
machine is 1.1x for AtariPPO. Each row notes the load average before its runs.
"""

from __future__ import annotations

import re
import statistics
import subprocess
from pathlib import Path

from .common import ROOT, Row, build, scratch
from .programs import load_average
from .rows import Table

#: program -> the options of its runs (a budget of tens of seconds)
RUNS = {
    "AtariPPO": ("--max_steps", "6144", "--checkpoint_every", "0"),
    "CartPolePPO": ("--max_steps", "30000", "--target_return", "1e9", "--checkpoint_every", "0"),
}
WORKERS = "2"
_RATE = re.compile(r"\| ([\d,]+) steps/s")


def steps_per_s(launcher: Path, cwd: Path, lag: int) -> float:
    """The steps/s the run's logger reports at its end. Raises RuntimeError when the run
    fails or prints no rate."""
    args = [str(launcher), *RUNS[launcher.name], "-w", WORKERS, "--policy_lag", str(lag)]
    cwd.mkdir(parents=True)
    p = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=900)
    rates = _RATE.findall(p.stdout + p.stderr)
    if p.returncode not in (0, 1) or not rates:
        raise RuntimeError(
            f"{launcher.name} --policy_lag {lag} exited {p.returncode}: {p.stderr[-300:]}"
        )
    return float(rates[-1].replace(",", ""))


def rows_of(name: str, n: int, folder: Path) -> list[Row]:
    """The rows of one program: lag 1 (ours) and lag 0, ``n`` alternated runs each."""
    table = Table(f"{name} policy lag, -w {WORKERS}", "steps/s")
    load = load_average()
    try:
        launcher = build(ROOT / "lf_src" / f"{name}.lf", folder / name)
        runs: dict[int, list[float]] = {0: [], 1: []}
        for i in range(n):
            for lag in (0, 1):
                runs[lag].append(steps_per_s(launcher, folder / f"{name}-{lag}-{i}", lag))
    except Exception as e:  # noqa: BLE001 - a failure becomes the rows' status
        failed = e
        table.ours(lambda: _raise(failed))
        return table.rows
    note = f"median of {n}, alternated; load {load:.1f} before"
    figures = {lag: statistics.median(r) for lag, r in runs.items()}
    shown = {lag: ", ".join(f"{x:,.0f}" for x in r) for lag, r in runs.items()}
    table.ours(lambda: (figures[1], f"--policy_lag 1: {shown[1]}"), note)
    target = 1.1 if name == "AtariPPO" else None
    # the ratio of the lag-0 row is lag 1 over lag 0
    table.peer("--policy_lag 0 (synchronous)", lambda: (figures[0], shown[0]), note, target)
    return table.rows


def _raise(e: Exception) -> tuple[float, str]:
    raise e


def run(quick: bool) -> list[Row]:
    """The rows of AtariPPO and CartPolePPO (``quick``: one run of each lag)."""
    folder = scratch()
    n = 1 if quick else 3
    return [row for name in RUNS for row in rows_of(name, n, Path(folder))]
