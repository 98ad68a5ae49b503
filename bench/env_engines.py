"""Environment engines side by side: env steps/s of one group of 16 environments.

For each engine of :mod:`rl_algos.env_engines` (``loop``, the default and our row, then
``gymnasium-sync``, ``gymnasium-async``, ``envpool`` and, for Atari, ``ale-vector``), two
figures on the same environments and random actions:

- one :class:`rl_algos.envs.EnvGroup` of 16 environments stepped in this process (the engine
  alone, no runtime);
- ``lf_src/bench/EngineSim.lf``: one GymEnv reactor of 16 environments answering a server
  that sends random actions every round, on one worker (the engine inside a program, its
  EnvSteps crossing ports).

Ratios are the loop's rate over the engine's (>1: the loop is faster). The program rows say
whether an engine's checksums (summed rewards and observations) equal the loop's: they must
for the gymnasium engines and need not for the C++ pools (their own games and generators,
docs/environments.md). C++ pools run one thread each (``make_kwargs`` ``num_threads``).
``--quick`` runs CartPole only, with fewer rounds; the full run adds Pong.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .common import Row, scratch
from .programs import build_or_error
from .programs import run as run_program
from .rows import Table

K = 16
SEED = 1
#: engines measured for each environment
ENGINES = {
    "CartPole-v1": ("loop", "gymnasium-sync", "gymnasium-async", "envpool"),
    "ALE/Pong-v5": ("loop", "gymnasium-sync", "gymnasium-async", "envpool", "ale-vector"),
}
#: rounds (one step of each of the 16 environments) per measurement: (quick, full)
ROUNDS = {"CartPole-v1": (500, 3000), "ALE/Pong-v5": (30, 200)}
WARMUP = 5


def group_rate(env_id: str, engine: str, rounds: int, k: int = K) -> float:
    """Env steps/s of one EnvGroup of ``k`` environments of ``env_id`` stepped by ``engine``
    with random actions, after :data:`WARMUP` untimed rounds."""
    from rl_algos.envs import EnvGroup

    group = EnvGroup(env_id, k, np.random.default_rng(SEED), engine=engine)
    try:
        group.reset()
        n = int(group.action_space.n)  # type: ignore[attr-defined]  # Discrete spaces only
        actions = np.random.default_rng(SEED).integers(n, size=(WARMUP + rounds, k))
        for a in actions[:WARMUP]:
            group.step(a)
        t0 = time.perf_counter()
        for a in actions[WARMUP:]:
            group.step(a)
        return rounds * k / (time.perf_counter() - t0)
    finally:
        group.close()


def group_rows(env_id: str, rounds: int) -> list[Row]:
    """The EnvGroup table of ``env_id``: the loop first, then each other engine."""
    table = Table(f"{env_id}: one EnvGroup of {K} envs, by engine", "env steps/s")
    note = f"{rounds} rounds, in-process"
    table.ours(lambda: (group_rate(env_id, "loop", rounds), f"engine loop; {note}"))
    for engine in ENGINES[env_id][1:]:
        table.peer(f"engine {engine}", lambda e=engine: group_rate(env_id, e, rounds), note=note)
    return table.rows


def program_rows(env_id: str, rounds: int, tmp: Path) -> list[Row]:
    """The EngineSim table of ``env_id``: the program on one worker under each engine."""
    table = Table(f"{env_id}: EngineSim, one GymEnv of {K} envs (-w 1), by engine", "env steps/s")
    launcher = build_or_error(
        "EngineSim",
        {"env_id": env_id, "k": K, "rounds": rounds, "seed": SEED},
        tmp / env_id.replace("/", "_"),
    )
    loop: dict = {}

    def measure(engine: str):
        if isinstance(launcher, Exception):
            raise launcher
        out = run_program(launcher, "--engine", engine, n_workers=1)
        sums = (out.result["reward"], out.result["obs_sum"], out.result["episodes"])
        if engine == "loop":
            loop["sums"] = sums
            return out.result["steps_per_s"], out.note()
        same = "equal to" if sums == loop.get("sums") else "differ from"
        return out.result["steps_per_s"], f"checksums {same} the loop's; {out.note()}"

    table.ours(lambda: measure("loop"), note="engine loop")
    for engine in ENGINES[env_id][1:]:
        table.peer(f"engine {engine}", lambda e=engine: measure(e), note=f"{rounds} rounds")
    return table.rows


def run_rows(env_ids, quick: bool) -> list[Row]:
    """Both tables for each of ``env_ids``."""
    tmp = scratch()
    rows: list[Row] = []
    for env_id in env_ids:
        rounds = ROUNDS[env_id][0 if quick else 1]
        rows += group_rows(env_id, rounds)
        rows += program_rows(env_id, rounds, tmp)
    return rows


def run(quick: bool) -> list[Row]:
    """The rows of ``python -m bench --only env_engines``."""
    return run_rows(["CartPole-v1"] if quick else list(ENGINES), quick)
