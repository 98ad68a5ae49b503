"""``lf-rl runs``: the runs under ``runs/`` (or the folders named) as a table.

``lf-rl runs [DIR ...] [--program P] [--sort KEY] [--reverse] [--csv | --json]`` shows, for each
run (see :mod:`rl_algos.run_summary`), its program, environment, seed, start time, status,
episodes, environment steps, final mean return (last 20 episodes), steps per second, and the
parameters whose values differ between the runs listed; as a table on a terminal (rich), or as
CSV or JSON for scripts (full paths, every differing parameter a field of its own).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from .run_summary import (
    RunSummary,
    config_differences,
    differing_text,
    find_runs,
    summarize,
    value_text,
)

#: The columns of every row, in order; ``--sort`` takes any of them or a parameter's name.
COLUMNS = (
    "run", "program", "env", "seed", "started", "status", "episodes", "steps", "return", "sps",
)  # fmt: skip


def add_parser(sub: Any) -> None:
    """Register ``lf-rl runs`` in the subparsers ``sub``."""
    p = sub.add_parser("runs", help="list training runs and how they went")
    p.add_argument("dirs", nargs="*", metavar="DIR", help="folders of runs (default: runs)")
    p.add_argument("--program", default=None, help="only the runs of this program")
    p.add_argument(
        "--sort",
        default="started",
        help=f"column to sort by ({', '.join(COLUMNS)}) or a parameter's name (default started)",
    )
    p.add_argument("--reverse", action="store_true", help="sort largest first")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="CSV on standard output")
    fmt.add_argument("--json", action="store_true", help="JSON on standard output")


def run(args: argparse.Namespace) -> int:
    """``lf-rl runs``: print the runs found."""
    dirs = args.dirs or ["runs"]
    if not args.dirs and not os.path.isdir("runs"):
        raise FileNotFoundError(
            "no runs/ folder here: a program writes its runs into runs/ of the folder it runs in"
        )
    runs = [summarize(d) for d in find_runs(dirs)]
    if args.program:
        runs = [r for r in runs if r.program == args.program]
    differing = config_differences(runs)
    runs = sort_runs(runs, args.sort, args.reverse)
    if args.csv:
        write_csv(runs, differing, sys.stdout)
    elif args.json:
        json.dump(rows(runs, differing), sys.stdout, indent=1)
        print()
    else:
        print_table(runs, differing, ", ".join(dirs))
    return 0


def row(run: RunSummary, differing: Sequence[str]) -> dict[str, Any]:
    """One run as a flat mapping: :data:`COLUMNS` (``run``: its directory), ``run_id`` and,
    under ``params``, the values of the parameters in ``differing``."""
    return {
        "run": run.path,
        "program": run.program,
        "env": run.env_id,
        "seed": run.seed,
        "started": run.started_text(),
        "status": run.status,
        "episodes": run.episodes,
        "steps": run.env_steps,
        "return": run.final_return,
        "sps": run.sps,
        "run_id": run.run_id,
        "params": {n: run.parameters.get(n) for n in differing},
    }


def rows(runs: Sequence[RunSummary], differing: Sequence[str]) -> list[dict[str, Any]]:
    """Every run as :func:`row` gives it."""
    return [row(r, differing) for r in runs]


def sort_runs(runs: Sequence[RunSummary], key: str, reverse: bool = False) -> list[RunSummary]:
    """``runs`` sorted by column or parameter ``key`` (runs without a value last).

    Raises:
        ValueError: ``key`` is neither a column nor a parameter of any of the runs.
    """
    params = {n for r in runs for n in r.parameters}
    if key not in COLUMNS and key not in params:
        valid = ", ".join(COLUMNS)
        raise ValueError(f"cannot sort by {key!r}: give a column ({valid}) or a parameter")

    def value(r: RunSummary) -> Any:
        v = row(r, [key])["params"][key] if key not in COLUMNS else row(r, [])[key]
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)

    present = [r for r in runs if _has(r, key)]
    kinds = {isinstance(value(r), str) for r in present}
    if len(kinds) > 1:  # numbers and texts mixed: compare as texts
        present.sort(key=lambda r: str(value(r)), reverse=reverse)
    else:
        present.sort(key=value, reverse=reverse)
    return present + [r for r in runs if not _has(r, key)]


def _has(run: RunSummary, key: str) -> bool:
    if key in COLUMNS:
        return row(run, [])[key] is not None
    return key in run.parameters


def write_csv(runs: Sequence[RunSummary], differing: Sequence[str], out: Any) -> None:
    """``runs`` as CSV on ``out``: a header of :data:`COLUMNS`, ``run_id`` and the names in
    ``differing``, then one line per run."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow([*COLUMNS, "run_id", *differing])
    for r in rows(runs, differing):
        params = [value_text(r["params"][n]) if n in r["params"] else "" for n in differing]
        w.writerow([*("" if r[c] is None else r[c] for c in COLUMNS), r["run_id"], *params])


def print_table(runs: Sequence[RunSummary], differing: Sequence[str], where: str) -> None:
    """``runs`` as a rich table on standard output (the run as its short id; the values of
    the ``differing`` parameters in one column)."""
    from rich.console import Console
    from rich.table import Table

    if not runs:
        print(f"no runs in {where}")
        return
    table = Table(title=f"{len(runs)} run{'s' if len(runs) > 1 else ''} in {where}")
    for name in ("run", "program", "env", "seed", "started", "status"):
        table.add_column(name, no_wrap=True)
    for name in ("episodes", "steps", "return", "steps/s"):
        table.add_column(name, justify="right", no_wrap=True)
    if differing:
        table.add_column("differing parameters")
    for r in runs:
        cells = [r.short_id, r.program, r.env_id, str(r.seed), r.started_text(), r.status]
        cells += [str(r.episodes), f"{r.env_steps:,}", _num(r.final_return, ".1f")]
        cells.append(_num(r.sps, ",.0f"))
        table.add_row(*cells, *([differing_text(r, differing)] if differing else []))
    console = Console()
    if not console.is_terminal:  # a file or a pipe: no terminal's width to fit in
        console = Console(width=200)
    console.print(table)


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
