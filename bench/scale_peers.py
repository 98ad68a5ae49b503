"""Plain loops of the ``scale`` benchmark's programs: the reference results and peer figures.

``lf_src/bench/EnvBank.lf`` and ``TinyBank.lf`` compute a checksum that a plain loop over the
same arithmetic, with the same seeds, reproduces exactly (``tests/test_bench_programs.py``
checks the programs against the same rule); GymSim and AtariSim are checked against
:func:`bench.gym_sim.plain_loop`. The peers that step gymnasium's and ale-py's vector
environments are :mod:`bench.gym_sim`'s and :mod:`bench.atari_sim`'s.
"""

from __future__ import annotations

import time

import numpy as np


def envbank_plain(n: int, iters: int, rounds: int, seed: int = 1) -> tuple[float, float]:
    """EnvBank's work in one process: ``n`` environments of ``iters`` numpy steps each (a
    float64 state of 8), ``rounds`` + 1 rounds (round 0 is the warm-up, left out of the time),
    folded into the hub's checksum. Returns (µs per timed round, the checksum the program
    prints)."""
    states = [np.random.default_rng([seed, i]).standard_normal(8) for i in range(n)]
    drive = [0.05 * (i % 5) for i in range(n)]
    checksum, t0 = 0.0, time.perf_counter()
    for rnd in range(rounds + 1):
        if rnd == 1:
            t0 = time.perf_counter()
        total = 0.0
        for i in range(n):
            s, a = states[i], drive[i] + 0.01 * (rnd % 7)
            for _ in range(iters):
                s = np.sin(s) * 0.9 + a
            states[i] = s
            total += float(s.sum()) + float(s.astype(np.float32)[1]) + bool(s[0] > 0.5)
        checksum = (checksum * 0.5 + total) % 1e6
    return (time.perf_counter() - t0) / max(rounds, 1) * 1e6, checksum


def tinybank_checksum(n: int, rounds: int) -> int:
    """TinyBank's checksum: ``rounds`` + 1 rounds of ``n`` cells answering
    ``(round * 31 + index) % 1000003``, folded by the hub in channel order."""
    checksum = 0
    for rnd in range(rounds + 1):
        for i in range(n):
            checksum = (checksum * 7 + (rnd * 31 + i) % 1000003) % 1000003
    return checksum


def envpool_missing() -> str | None:
    """None when EnvPool imports here; else why not (its rows are then skipped)."""
    try:
        import envpool  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means no EnvPool row
        return f"EnvPool does not import ({type(e).__name__}: {e})"[:200]
    return None
