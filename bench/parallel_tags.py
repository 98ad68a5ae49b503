"""Parallel that pays on RL-sized tags: 2 workers against 1 on the acting loops RL programs
are made of, with and without other busy processes, and what ``-w 0`` chooses.

``lf_src/bench/EnvBank.lf``: a hub and a bank of environment reactors of a calibrated cost
(numpy state; a float32 observation and a ``(reward, done)`` tuple out per step);
``lf_src/bench/TinyBank.lf``: reactions of about a microsecond passing ints, where parallel
workers cannot pay. The figure is µs per round, measured inside the program after a warm-up
round (the median of several runs); the checksum must be the same on every worker count.

Busy processes are our own (a bounded pure-Python loop each, stopped when the row is done);
each row's note gives the 1-minute load average and the tasks that wanted a core just before
its runs (:func:`bench.programs.runnable`: the average lags, and still counts the busy
processes of the row before for a minute), and a row that other tasks than ours found with
more runnable tasks than cores says so ("LOADED").
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from .common import ROOT, Row, build, cores, scratch, variant
from .programs import build_program, load_average, runnable
from .programs import run as run_program
from .rows import Table


def numpy_step_us() -> float:
    """µs of one numpy step of an EnvBank environment on this machine (best of 5)."""
    import numpy as np

    s = np.random.default_rng(1).standard_normal(8)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(2000):
            s = np.sin(s) * 0.9 + 0.05
        best = min(best, (time.perf_counter() - t0) / 2000 * 1e6)
    return best


@dataclass(frozen=True)
class Case:
    """One row group: ``program`` built with ``defines``; ``busy`` background processes;
    ``target``: the -w 2 / -w 1 ratio aimed at (None: reported only)."""

    title: str
    program: str
    defines: dict
    busy: int = 0
    target: float | None = None


class Busy:
    """``n`` busy pure-Python processes for at most ``seconds``; stopped on exit."""

    def __init__(self, n: int, seconds: float):
        code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass\n"
        self.procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]

    def __enter__(self) -> Busy:
        time.sleep(0.2 if self.procs else 0)
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def cases(quick: bool) -> list[Case]:
    """The rows to measure: environment reactors of ~13 µs and ~133 µs of numpy work per step
    (calibrated here, :func:`numpy_step_us`), the latter with 0, 1 and 2 busy processes, and
    reactions of ~1 µs; fewer rounds when ``quick``."""
    step = numpy_step_us()
    small, large = max(1, round(10 / step)), max(1, round(130 / step))
    r_small, r_large, r_tiny = (300, 100, 2000) if quick else (2000, 400, 20000)
    env12 = f"~{small * step + 2:.0f} µs"
    env140 = f"~{large * step + 2:.0f} µs"
    heavy = {"n": 8, "iters": large, "rounds": r_large}
    with_busy = [
        Case(f"8 env reactors of {env140}{_busy_text(busy)}", "EnvBank", heavy, busy, target)
        for busy, target in ((0, 1.33), (1, 1.0), (2, None))
    ]
    return [
        Case(
            f"16 env reactors of {env12}",
            "EnvBank",
            {"n": 16, "iters": small, "rounds": r_small},
            0,
            1.2,
        ),
        *with_busy,
        Case("8 reactions of ~1 µs passing ints", "TinyBank", {"n": 8, "rounds": r_tiny}),
    ]


def _busy_text(busy: int) -> str:
    return "" if not busy else f", {busy} busy process" + ("es" if busy > 1 else "")


def case_rows(case: Case, reps: int) -> list[Row]:
    """Build ``case``'s program and measure it on -w 1, -w 2 and -w 0 (after one -w 0 run that
    measures its reactions), the three in turn ``reps`` times (so that they see the same
    conditions), each repetition starting with the next of them (where the kernel put the busy
    processes depends on the run before, so no count always follows the same one); its rows
    (the median µs per round of each, ratios, load)."""
    launcher = build_program(case.program, case.defines, scratch())
    load, others = load_average(), runnable()  # before our busy processes start
    marked = "LOADED " if others > cores() else ""
    runs: dict[int, list[dict]] = {1: [], 2: [], 0: []}
    with Busy(case.busy, 600):
        run_program(launcher, n_workers=0, timeout=600)  # -w 0 measures once (no profile yet)
        order = list(runs)
        for rep in range(reps):
            k = rep % len(order)
            for workers in order[k:] + order[:k]:
                runs[workers].append(run_program(launcher, n_workers=workers, timeout=600).result)
    us1, us2, us0 = (statistics.median(r["us_per_round"] for r in runs[w]) for w in (1, 2, 0))
    sums = {r["checksum"] for got in runs.values() for r in got}
    status = "ok" if len(sums) == 1 else f"FAILED: checksums differ {sorted(sums)}"
    note = (
        f"{marked}load {load:.2f}, runnable {others:.1f} before, {cores()} cores, "
        f"{case.busy} busy process(es) of ours"
    )
    table = Table(case.title, "µs/round", higher_better=False)
    table.ours(lambda: (us2, f"-w 2; {note}"))
    table.peer(
        "ours on 1 worker (-w 1)", lambda: us1, note="ratio = -w 2 speed-up", target=case.target
    )
    best = min(us1, us2)
    table.rebase(best, "ratio = the better of -w 1 and -w 2 / -w 0")
    table.peer("ours, -w 0 (chosen)", lambda: us0, target=None)
    rows = table.rows
    zero = rows[-1]
    zero.ratio = best / us0 if us0 else None
    zero.note = f"{zero.note}; target -w 0 >= 0.95 x best: {'MET' if zero.ratio and zero.ratio >= 0.95 else 'MISSED'}"
    for r in rows:
        if r.status == "ok":
            r.status = status
    return rows


def overlap(events: list[dict]) -> tuple[float, float]:
    """From a two-worker timing trace (Chrome trace events, µs): the share of the traced span
    in which both workers ran a reaction at once, and the share in which either did."""
    spans: dict[int, list[tuple[float, float]]] = {}
    for e in events:
        spans.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
    if len(spans) != 2:
        raise RuntimeError(f"expected a trace of 2 workers, got {len(spans)}")
    a, b = (_union(s) for s in spans.values())
    start = min(a[0][0], b[0][0])
    end = max(a[-1][1], b[-1][1])
    both = _length(_intersect(a, b))
    either = _length(a) + _length(b) - both
    return both / (end - start), either / (end - start)


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _intersect(a: list, b: list) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _length(spans: list) -> float:
    return sum(e - s for s, e in spans)


def overlap_rows(quick: bool) -> list[Row]:
    """EnvBank (8 environments of ~140 µs) on 2 workers with the timing trace: how much of the
    time the two workers run reactions at once (they would take turns if waiting serialised
    them)."""
    step = numpy_step_us()
    iters, rounds = max(1, round(130 / step)), 50 if quick else 200
    folder = scratch()
    source = variant(
        ROOT / "lf_src" / "bench" / "EnvBank.lf",
        {
            "fast: true": "fast: true, tracing: true",
            "EnvBank(n = 16, iters = 8, rounds = 1000": f"EnvBank(n = 8, iters = {iters}, rounds = {rounds}",
        },
        folder / "src",
    )
    launcher = build(source, folder)
    load = load_average()
    r = subprocess.run([str(launcher), "-w", "2"], cwd=folder, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-300:])
    events = json.loads((folder / "EnvBank.trace.json").read_text())["traceEvents"]
    both, either = overlap(events)
    return [
        Row(
            f"Overlap of 2 workers, 8 env reactors of ~{iters * step:.0f} µs",
            "ours (-w 2, tracing: true)",
            100 * both,
            "% of the span both run reactions",
            note=f"either runs one {100 * either:.0f}% of it; {rounds} rounds; load {load:.2f} before",
        )
    ]


def run(quick: bool) -> list[Row]:
    """Every case's rows, then the overlap row; a case that fails is a FAILED row."""
    reps = 1 if quick else 3
    rows: list[Row] = []
    for case in cases(quick):
        try:
            rows += case_rows(case, reps)
        except Exception as e:  # noqa: BLE001 - a failed case is a row, never dropped
            rows.append(Row(case.title, "ours", None, "µs/round", status=f"FAILED: {e}"[:240]))
    try:
        rows += overlap_rows(quick)
    except Exception as e:  # noqa: BLE001
        rows.append(Row("Overlap of 2 workers", "ours", None, "%", status=f"FAILED: {e}"[:240]))
    return rows
