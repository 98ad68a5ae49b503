"""Broadcast a 10 MiB numpy array to N = 2, 4, 8 reactors and gather it back, against
Ray actors doing the same (target: at least 3x lower overhead per round).

Ours: ``lf_src/bench/Broadcast16.lf`` with ``n`` = N on one worker per core: each round the
source sends the array to N echo reactors, each sends back what it received, the source checks
all N. Nothing else is computed, so ms per round (measured inside the program after a warm-up
round) is the framework's overhead. Ray: ``ray.put`` of the array, one ``echo`` call per actor
with the reference, ``ray.get`` of the N returned arrays, after warm-up rounds.
"""

from __future__ import annotations

import numpy as np

from .common import Row, scratch
from .programs import build_program, workers
from .programs import run as run_program
from .raysession import rate, ray_session

MIB = 10
SIZES = (2, 4, 8)


class Echo:
    """Ray actor: returns what it receives."""

    def echo(self, data):
        return data


def payload() -> np.ndarray:
    """The broadcast array: MIB MiB of seeded random uint8."""
    return np.random.default_rng(0).integers(0, 256, MIB << 20, dtype=np.uint8)


def ours_ms(n: int, rounds: int) -> float:
    launcher = build_program("Broadcast16", {"n": n, "mib": MIB, "rounds": rounds}, scratch())
    return run_program(launcher, n_workers=workers(), timeout=900).result["ms_per_round"]


def ray_ms(ray, n: int, rounds: int) -> float:
    actors = [ray.remote(Echo).remote() for _ in range(n)]
    data = payload()

    def one_round(_):
        ref = ray.put(data)
        got = ray.get([a.echo.remote(ref) for a in actors])
        assert all(g.shape == data.shape for g in got)

    try:
        return rate(rounds, 3, one_round) * 1e3
    finally:
        for a in actors:
            ray.kill(a)


def run(quick: bool) -> list[Row]:
    rounds, ray_rounds = (50, 20) if quick else (1000, 100)
    ours = {n: ours_ms(n, rounds) for n in SIZES}
    rows = []
    theirs: dict[int, float | None]
    try:
        with ray_session() as ray:
            theirs = {n: ray_ms(ray, n, ray_rounds) for n in SIZES}
        status = {n: "ok" for n in SIZES}
    except Exception as e:  # noqa: BLE001 - a failed peer is reported, never dropped
        theirs = {n: None for n in SIZES}
        status = {n: f"FAILED: {type(e).__name__}: {e}"[:200] for n in SIZES}
    for n in SIZES:
        w = f"Broadcast/gather {MIB} MiB to {n} reactors"
        rows.append(
            Row(
                w,
                f"ours ({workers()} workers, processes)",
                ours[n],
                "ms/round",
                note=f"{rounds} rounds; target: Ray / ours >= 3",
            )
        )
        ray_n = theirs[n]
        ratio = ray_n / ours[n] if ray_n else None
        rows.append(
            Row(
                w,
                "Ray actors (put, N echo calls, get)",
                theirs[n],
                "ms/round",
                ratio=ratio,
                status=status[n],
                note=f"{ray_rounds} rounds",
            )
        )
    return rows
