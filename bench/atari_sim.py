"""Benchmark workload 2: Atari simulation throughput, ours beside the peers (env steps/s).

GymSim's pattern on ale-py's games (``lf_src/bench/AtariSim.lf``): 15 environments, one step
each per round, 210x160x3 uint8 frames gathered by the server. Peers: those of
:mod:`bench.gym_sim`, plus ale-py's own vector env (``ale_py.vector_env.AtariVectorEnv``, C++
threads) and EnvPool, both set to the frames and dynamics of ``gym.make("ALE/<Game>-v5")``:
full 210x160 RGB, no frame stacking, frameskip 4, sticky actions 0.25, no no-op starts, no
fire reset, no reward clipping, no episodic life. (ale-py's env max-pools nothing; EnvPool
max-pools the last two frames of a skip, which it cannot turn off.) ``--quick`` runs Pong
only (the game with targets) with fewer rounds.
"""

from __future__ import annotations

import numpy as np

from .common import Row, cores
from .gym_sim import N_ENVS, SEED, Sizes, simulate
from .raysession import rate
from .rows import Table

ENV_IDS = ["ALE/Pong-v5", "ALE/MsPacman-v5", "ALE/SpaceInvaders-v5"]

QUICK = Sizes(ours=100, sync=100, async_=100, ray=40, warmup=5)
FULL = Sizes(ours=1000, sync=1000, async_=500, ray=300, warmup=10, timeout=600)

#: our targets for Pong: ratio to the machine's limit, Ray, AsyncVectorEnv, EnvPool
TARGETS = {"ALE/Pong-v5": {"limit": 0.8, "ray": 5, "async": 1, "envpool": 1}}


def game(env_id: str) -> str:
    """``ALE/MsPacman-v5`` -> ``MsPacman``."""
    return env_id.split("/")[1].rsplit("-", 1)[0]


def ale_vector_rate(env_id: str, n: int, rounds: int, warmup: int) -> float:
    """Steps/s of ale-py's ``AtariVectorEnv`` (one thread per core)."""
    from ale_py.vector_env import AtariVectorEnv
    from gymnasium.spaces import Discrete

    name = "".join("_" + c.lower() if c.isupper() else c for c in game(env_id)).lstrip("_")
    env = AtariVectorEnv(
        name,
        n,
        num_threads=cores(),
        img_height=210,
        img_width=160,
        grayscale=False,
        stack_num=1,
        frameskip=4,
        maxpool=False,
        noop_max=0,
        reward_clipping=False,
        use_fire_reset=False,
        episodic_life=False,
        repeat_action_probability=0.25,
    )
    try:
        env.reset(seed=SEED)
        actions = env.single_action_space
        assert isinstance(actions, Discrete)  # Atari's actions are numbered
        return n / _random_steps(env, int(actions.n), n, rounds, warmup)
    finally:
        env.close()


def envpool_rate(env_id: str, n: int, rounds: int, warmup: int) -> float:
    """Steps/s of EnvPool's gymnasium-style pool (one thread per core, synchronous)."""
    import envpool

    env = envpool.make(
        f"{game(env_id)}-v5",
        env_type="gymnasium",
        num_envs=n,
        batch_size=n,
        num_threads=cores(),
        seed=SEED,
        img_height=210,
        img_width=160,
        gray_scale=False,
        stack_num=1,
        frame_skip=4,
        noop_max=1,
        episodic_life=False,
        reward_clip=False,
        use_fire_reset=False,
        repeat_action_probability=0.25,
    )
    try:
        env.reset()
        return n / _random_steps(env, env.action_space.n, n, rounds, warmup)
    finally:
        env.close()


def _random_steps(env, n_actions: int, n: int, rounds: int, warmup: int) -> float:
    rng = np.random.default_rng(SEED)
    return rate(rounds, warmup, lambda i: env.step(rng.integers(n_actions, size=n)))


def extra_peers(table: Table, env_id: str, sizes: Sizes, targets: dict) -> None:
    table.peer(
        "ale-py AtariVectorEnv (C++ threads)",
        lambda: ale_vector_rate(env_id, N_ENVS, sizes.sync, sizes.warmup),
        note=f"{sizes.sync} rounds",
    )
    table.peer(
        "EnvPool (C++ threads)",
        lambda: envpool_rate(env_id, N_ENVS, sizes.sync, sizes.warmup),
        note=f"{sizes.sync} rounds",
        target=targets.get("envpool"),
    )


def run(quick: bool) -> list[Row]:
    return simulate(
        "AtariSim",
        ENV_IDS[:1] if quick else ENV_IDS,
        QUICK if quick else FULL,
        TARGETS,
        extra_peers=extra_peers,
        label=lambda e: f"Atari {e.split('/')[1]}",
    )
