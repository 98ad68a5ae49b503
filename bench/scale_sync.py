"""Synchronisation time per tag from the runtime's timing trace: where the per-tag cost of more
workers goes, on any machine.

A worker's trace (target property ``tracing: true``) holds, besides its reactions, the spans
where it waits for the others: ``sync: next tag`` (agreeing on the next tag: the combining tree
of :mod:`reactors.parallel.agreement`, or the coordinator's ``GO``) and ``sync: crossings``
(values from other workers). This row group builds GymSim (CartPole, 16 environments) with
tracing on, runs it at W = 1, 2, 4, 8, 16 whatever the core count, and gives for each W the
median over workers of their ``sync:`` µs per tag, and the largest. On a machine with fewer
cores than W (``--oversubscribe``), that time includes waiting for a core.
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Sequence
from pathlib import Path

from .common import ROOT, Row, cores
from .programs import build_program
from .rows import failure
from .scale_runs import run_once, verify

UNIT = "µs sync/tag"
SYNC = "sync:"
TAG_SPAN = "sync: next tag"


def per_worker(trace: Path) -> dict[int, float]:
    """Each worker's ``sync:`` time per tag, µs, from a Chrome/Perfetto trace (a list of
    ``"ph": "X"`` events with ``name``, ``pid`` (the worker) and ``dur`` (µs), or an object
    with them as ``traceEvents``); tags are counted by the ``sync: next tag`` spans of the
    worker with the most (a worker that skips tags has fewer). Empty without such spans."""
    data = json.loads(trace.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    spent: dict[int, float] = {}
    tags: dict[int, int] = {}
    for e in events:
        name = e.get("name", "")
        if name.startswith(SYNC):
            spent[e["pid"]] = spent.get(e["pid"], 0.0) + e["dur"]
        if name == TAG_SPAN:
            tags[e["pid"]] = tags.get(e["pid"], 0) + 1
    n = max(tags.values(), default=0)
    return {w: t / n for w, t in spent.items()} if n else {}


def traced_gymsim(tmp: Path) -> Path:
    """GymSim with 16 CartPole environments built with ``tracing: true``, in ``tmp``."""
    src = tmp / "src"
    src.mkdir(parents=True, exist_ok=True)
    lf = (ROOT / "lf_src" / "bench" / "GymSim.lf").read_text()
    head = "target Python { fast: true, workers: 0,"
    assert head in lf, "GymSim.lf's target declaration changed"
    (src / "GymSim.lf").write_text(lf.replace(head, head + " tracing: true,"))
    shutil.copy(ROOT / "lf_src" / "bench" / "stepper.py", src)
    return build_program("GymSim", {"n": 16}, tmp / "out", folder=src)


def sync_rows(
    title: str, tmp: Path, counts: Sequence[int], rounds: int, expected: dict
) -> list[Row]:
    """A row per worker count of ``counts`` (above 1): the median over workers of their
    ``sync:`` µs per tag in a traced GymSim run of ``rounds`` rounds (each checked against
    ``expected``, the plain loop's RESULT values), the largest in the note."""
    try:
        launcher = traced_gymsim(tmp)
    except Exception as e:  # a build that fails is a row, not a crash
        return [Row(title, "ours", None, UNIT, status=failure(e))]
    rows = []
    for w in (c for c in counts if c > 1):
        row = Row(title, f"ours -w {w}", None, UNIT)
        rows.append(row)
        trace = launcher.parent.parent / "GymSim.trace.json"
        trace.unlink(missing_ok=True)
        try:
            flag = ["--oversubscribe"] if w > cores() else []  # else it runs one per core
            run = run_once(
                launcher, w, ["--rounds", str(rounds), *flag], cwd=launcher.parent.parent
            )
        except Exception as e:
            row.status = failure(e)
            continue
        wrong = verify(run.result, expected)
        got = per_worker(trace) if trace.exists() else {}
        if wrong or len(got) != w:
            row.status = f"FAILED: {wrong or f'a trace of {len(got)} workers, not {w}'}"[:240]
            continue
        row.figure = statistics.median(got.values())
        over = f"{w} workers on {cores()} cores (it includes waiting for a core); " * (w > cores())
        row.note = (
            f"{over}largest {max(got.values()):.1f} µs (worker {max(got, key=got.__getitem__)}); "
            f"load {run.load:.2f} before"
        )
    return rows
