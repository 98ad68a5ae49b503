"""CPU-bound pure-Python reactors on 2 workers against 1 worker (target >= 1.8x).

``lf_src/bench/Speedup.lf``: each round, 4 reactors each run a pure-Python loop calibrated to
about 20 ms on this machine (the GIL lets one process run only one of them at a time), and a
driver gathers their checksums. The figure is ms per round measured inside the program after
a warm-up round (start-up excluded), the median of several runs; the checksum must be the same
on both worker counts.
"""

from __future__ import annotations

import statistics
import time

from .common import Row, scratch
from .programs import build_program
from .programs import run as run_program

N, TARGET_MS = 4, 20.0


def calibrate(ms: float = TARGET_MS) -> int:
    """Loop iterations that take about ``ms`` milliseconds here (the Work reactor's loop)."""

    def loop(n):
        acc = 0
        for i in range(n):
            acc = (acc * 31 + i) % 1000003
        return acc

    n = 50_000
    best = min(_timed(loop, n) for _ in range(3))
    return max(1000, int(n * ms / 1e3 / best))


def _timed(fn, n) -> float:
    t0 = time.perf_counter()
    fn(n)
    return time.perf_counter() - t0


def run(quick: bool) -> list[Row]:
    work = calibrate()
    rounds, reps = (5, 1) if quick else (20, 3)
    launcher = build_program("Speedup", {"n": N, "rounds": rounds, "work": work}, scratch())
    ms, sums = {}, set()
    for w in (1, 2):
        results = [run_program(launcher, n_workers=w, timeout=600).result for _ in range(reps)]
        ms[w] = statistics.median(r["ms_per_round"] for r in results)
        sums |= {r["checksum"] for r in results}
    status = "ok" if len(sums) == 1 else f"FAILED: checksums differ {sorted(sums)}"
    work_note = f"{N} reactors x {work:,} iterations (~{TARGET_MS:.0f} ms each) per round"
    speedup = ms[1] / ms[2]
    return [
        Row(
            f"{N} CPU-bound reactors, {rounds} rounds",
            "ours, 2 workers (processes)",
            ms[2],
            "ms/round",
            status=status,
            note=f"speed-up {speedup:.2f}x over 1 worker; target >= 1.8x; {work_note}",
        ),
        Row(
            f"{N} CPU-bound reactors, {rounds} rounds",
            "ours, 1 worker",
            ms[1],
            "ms/round",
            ratio=speedup,
            status=status,
            note="ratio = speed-up of 2 workers",
        ),
    ]
