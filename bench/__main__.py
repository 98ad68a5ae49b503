"""`make bench`: every benchmark, one table, written to bench/results/<date>.md and .json.

Usage: python -m bench [--quick] [--only NAME ...]

Benchmark workloads 1 to 5 (``gym_sim``, ``atari_sim``, ``sync_qlearn``, ``multi_agent``,
``broadcast16``) are the reactor paper's (Kwok, Lohstroh, Lee, SPAA 2024; docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import platform
import sys
import traceback
from importlib import metadata

from rich.console import Console
from rich.table import Table

from .common import ROOT, Row, cores

BENCHMARKS = [
    "pingpong",
    "speedup",
    "roundtrip",
    "cluster",
    "parallel_tags",
    "recording",
    "broadcast",
    "lfc_speed",
    "gym_sim",
    "atari_sim",
    "sync_qlearn",
    "multi_agent",
    "broadcast16",
    "snapshots",
    "sb3_cartpole",
    "sb3_atari",
    "scale",
    "policy_lag",
    "env_engines",
    "gather_rows",
]


def _versions() -> dict[str, str]:
    from reactors import native

    # the programs run as this process does: the runtime's compiled modules, or its sources
    runtime = "compiled (mypyc)" if native.compiled() else "from its sources"
    out = {"python": platform.python_version(), "runtime": runtime}
    for pkg in ("numpy", "torch", "gymnasium", "ray", "ale-py", "envpool", "stable-baselines3"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def _run_one(name: str, quick: bool) -> list[Row]:
    try:
        return importlib.import_module(f"bench.{name}").run(quick)
    except Exception as e:  # a failed run is reported, never dropped
        traceback.print_exc()
        return [Row(name, "ours", None, "", status=f"FAILED: {type(e).__name__}: {e}"[:200])]


def _fmt(x) -> str:
    if x is None:
        return "—"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def _markdown(rows: list[Row], header: str) -> str:
    lines = [
        header,
        "",
        "| workload | peer | figure | unit | ratio (ours better > 1) | status | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.workload} | {r.peer} | {_fmt(r.figure)} | {r.unit} | {_fmt(r.ratio)} | "
            f"{r.status} | {r.note} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, one repetition")
    ap.add_argument("--only", nargs="*", choices=BENCHMARKS, help="run only these")
    args = ap.parse_args(argv)
    rows: list[Row] = []
    for name in args.only or BENCHMARKS:
        rows.extend(_run_one(name, args.quick))
    versions = _versions()
    stamp = dt.datetime.now().strftime("%Y-%m-%d")
    header = (
        f"Benchmarks of {stamp} on {cores()} cores ({platform.machine()}), "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + (" (quick mode)" if args.quick else "")
    )
    table = Table(title=header)
    for col in ("workload", "peer", "figure", "unit", "ratio", "status", "note"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.workload, r.peer, _fmt(r.figure), r.unit, _fmt(r.ratio), r.status, r.note)
    Console(width=200).print(table)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    # A partial run (--only) or a quick one never overwrites the full table of the day.
    stem = (
        stamp + ("-quick" if args.quick else "") + ("-" + "-".join(args.only) if args.only else "")
    )
    if (out / f"{stem}.md").exists():  # an earlier invocation of the same set today: keep it
        stem += "-" + dt.datetime.now().strftime("%H%M%S")
    (out / f"{stem}.md").write_text(_markdown(rows, header))
    (out / f"{stem}.json").write_text(
        json.dumps(
            {
                "date": stamp,
                "cores": cores(),
                "versions": versions,
                "quick": args.quick,
                "rows": [r.to_json() for r in rows],
            },
            indent=1,
        )
    )
    # a row skipped for want of hardware or a package ("skipped: no GPU") is not a failure
    return 0 if all(r.status == "ok" or r.status.startswith("skipped:") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
