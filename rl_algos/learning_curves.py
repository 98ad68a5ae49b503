"""``lf-rl plot``: the learning curves of several runs in one figure.

``lf-rl plot RUN_DIR... [-o FILE.png] [--x steps|time] [--smooth N]`` draws, for each run (a
run directory, or a folder of runs: every run in it), the moving mean of the last N episode
returns of its ``returns.csv`` against the environment steps at which they ended, or against
the wall-clock seconds since the run started (``--x time``, estimated from the run's
``charts/SPS``). A curve is labelled by the parameters whose values differ between the runs
plotted (``learning_rate=0.0003 seed=2``), or by its directory's name when none do.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .plotter import Line, Overlay, draw_overlay, pyplot
from .run_summary import (
    WINDOW,
    RunSummary,
    config_differences,
    differing_text,
    find_runs,
    moving_mean,
    read_returns,
    read_sps,
    summarize,
)

X_LABELS = {"steps": "environment steps", "time": "wall-clock seconds (from charts/SPS)"}


def add_parser(sub: Any) -> None:
    """Register ``lf-rl plot`` in the subparsers ``sub``."""
    p = sub.add_parser("plot", help="draw the learning curves of runs in one figure")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories or folders of runs")
    p.add_argument(
        "-o", "--output", default="learning_curves.png", help="file (default learning_curves.png)"
    )
    p.add_argument("--x", default="steps", help="steps (default) or time (wall-clock seconds)")
    p.add_argument(
        "--smooth", type=int, default=WINDOW, help=f"episodes in the moving mean (default {WINDOW})"
    )


def run(args: argparse.Namespace) -> int:
    """``lf-rl plot``: write the figure and say where."""
    path = plot_runs(args.runs, args.output, args.x, args.smooth)
    print(f"wrote {path}")
    return 0


def plot_runs(paths: Sequence[str], output: str, x: str = "steps", smooth: int = WINDOW) -> str:
    """Draw the curves of the runs in ``paths`` (see :func:`curves`) into ``output``.

    Raises:
        FileNotFoundError: a path that is not there, or no run in them.
        ValueError: see :func:`curves`, and a file suffix matplotlib writes no format for.
    """
    found = find_runs(paths)
    if not found:
        raise FileNotFoundError(f"no run in {', '.join(paths)}")
    runs = [summarize(d) for d in found]
    lines = curves(runs, x, smooth)
    title = f"mean return of the last {smooth} episodes"
    return draw_overlay(pyplot(), Overlay(lines, X_LABELS[x], output, title))


def curves(runs: Sequence[RunSummary], x: str, smooth: int) -> list[Line]:
    """One line per run of ``runs``: the moving mean of ``smooth`` episode returns ((E,)
    float64) against the environment steps at which they ended (``x = "steps"``) or the
    seconds since the run started (``"time"``, see :func:`wall_seconds`), labelled by
    :func:`labels`. A run without an episode has an empty line.

    Raises:
        ValueError: ``x`` is neither steps nor time, ``smooth`` is less than 1, or a run
            has episodes but no ``charts/SPS`` for ``x = "time"``.
    """
    if x not in X_LABELS:
        raise ValueError(f"--x {x!r}: give steps or time")
    if smooth < 1:
        raise ValueError(f"--smooth {smooth}: give at least 1 episode")
    out = []
    for run, label in zip(runs, labels(runs)):
        rets = read_returns(run.path)
        xs = rets.steps.astype(np.float64)
        if x == "time" and len(xs):
            xs = wall_seconds(run.path, rets.steps)
        out.append(Line(label, xs.tolist(), moving_mean(rets.returns, smooth).tolist()))
    return out


def wall_seconds(run_dir: str, steps: np.ndarray) -> np.ndarray:
    """Seconds since the run started at which it had taken ``steps`` ((E,) ints) environment
    steps, (E,) float64: each ``charts/SPS`` row gives one point (steps / rate: the rate is the
    mean since the start), linearly between them, from (0, 0), and at the last rate after the
    last row. A resumed run's rate counts from its resume, so its times are approximate.

    Raises:
        ValueError: metrics.csv has no ``charts/SPS`` row (a run shorter than a second).
    """
    at, rates = read_sps(run_dir)
    keep = rates > 0
    at, rates = at[keep], rates[keep]
    if not len(at):
        raise ValueError(
            f"{run_dir} has no charts/SPS in metrics.csv (a run shorter than a second): "
            "plot it against --x steps"
        )
    px = np.concatenate(([0.0], at.astype(np.float64)))
    py = np.concatenate(([0.0], at / rates))
    s = np.asarray(steps, np.float64)
    inside = np.interp(s, px, py)
    beyond = py[-1] + (s - px[-1]) / rates[-1]
    return np.where(s > px[-1], beyond, inside)


def labels(runs: Sequence[RunSummary]) -> list[str]:
    """The legend of each run: its values of the parameters that differ between ``runs``
    (after its program's name when ``runs`` are of several programs), or its directory's
    name when it has none of them; a label two runs share gets their short run ids."""
    differing = config_differences(runs)
    several = len({r.program for r in runs}) > 1
    names = []
    for r in runs:
        text = differing_text(r, differing)
        if several:
            text = f"{r.program} {text}".strip() if text else r.program
        names.append(text or os.path.basename(r.path))
    return [
        f"{n} ({r.short_id})" if names.count(n) > 1 and r.short_id else n
        for n, r in zip(names, runs)
    ]
