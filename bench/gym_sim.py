"""Benchmark workload 1: Gym simulation throughput, ours beside the peers (env steps/s).

A server steps 15 environments once per round with random actions and gathers the results.
Ours is ``lf_src/bench/GymSim.lf`` (a bank of 15 Env reactors, one worker per core; also
on one worker, whose row's ratio is then the speed-up from the extra workers). Peers,
all on the same 15 environments:

- plain loop: the same :class:`stepper.Stepper` objects stepped in turn in one process (its
  summed rewards must equal ours: same seeds, same actions, same states);
- machine limit: cores x the plain loop's rate (one core's sequential rate);
- gymnasium SyncVectorEnv and AsyncVectorEnv (shared memory, one process per env);
- Ray: one actor per env, one remote call per env per round, ``ray.get`` every round
  (the reactor paper's baseline); Ray Compiled Graph: the same actors in a static DAG.

Ray is measured over fewer rounds than ours (it is ~100x slower); rates are steady-state
rates after warm-up rounds, so the counts do not bias the comparison. ``--quick`` runs
CartPole only (the environment with targets) with fewer rounds.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from .common import Row, cores, scratch
from .programs import build_or_error, our_rows, result_of, workload_module
from .raysession import compiled, rate, ray_or_skip
from .rows import Table

ENV_IDS = ["CartPole-v1", "Pendulum-v1", "Blackjack-v1"]
N_ENVS = 15
SEED = 1
RAY_NAMES = (
    "Ray actors (remote call per env, ray.get per round)",
    "Ray Compiled Graph (static actor DAG)",
)


@dataclass
class Sizes:
    """Rounds per peer (a round = one step of each of the 15 environments); ``timeout``: s
    one run of our program may take."""

    ours: int
    sync: int
    async_: int
    ray: int
    warmup: int = 10
    timeout: float = 120


QUICK = Sizes(ours=2000, sync=2000, async_=300, ray=100)
FULL = Sizes(ours=10000, sync=10000, async_=2000, ray=1000, warmup=20, timeout=600)
#: our targets: ratio of ours (one worker per core) to Ray, to the plain loop, and to ours
#: on one worker (the speed-up of the extra workers)
TARGETS = {
    env: {"ray": 50, "plain": 1.2, "speedup": 1.3}
    for env in ("CartPole-v1", "Pendulum-v1", "Blackjack-v1")
}


# ---------------------------------------------------------------- peers in this process


def plain_loop(env_id: str, n: int, rounds: int, seed: int = SEED) -> tuple[float, dict]:
    """The same steppers stepped in turn in one process: (steps/s, {"reward", "episodes"})."""
    Stepper = workload_module("stepper").Stepper
    steppers = [Stepper(env_id, seed, i) for i in range(n)]
    for s in steppers:  # the warm-up round, as in our program
        s.step()
    reward, episodes = 0.0, 0
    t0 = time.perf_counter()
    for _ in range(rounds):
        for s in steppers:
            _, r, terminated, truncated = s.step()
            reward += r
            episodes += terminated or truncated
    dt = time.perf_counter() - t0
    for s in steppers:
        s.close()
    return rounds * n / dt, {"reward": reward, "episodes": episodes}


def random_actions(space, rng, n: int):
    """A batch of ``n`` random actions for a vector env whose single-env space is ``space``."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(space.n, size=n) + space.start
    return rng.uniform(space.low, space.high, size=(n, *space.shape)).astype(space.dtype)


def vector_rate(kind: str, env_id: str, n: int, rounds: int, warmup: int) -> float:
    """Steps/s of gymnasium's ``SyncVectorEnv`` or ``AsyncVectorEnv`` (shared memory)."""
    import gymnasium as gym

    make_env = workload_module("stepper").make_env
    fns = [lambda: make_env(env_id) for _ in range(n)]
    env = (
        gym.vector.SyncVectorEnv(fns)
        if kind == "sync"
        else gym.vector.AsyncVectorEnv(fns, shared_memory=True)
    )
    try:
        env.reset(seed=[SEED * 1000 + i for i in range(n)])
        rng = np.random.default_rng(SEED)
        space = env.single_action_space
        per_round = rate(rounds, warmup, lambda i: env.step(random_actions(space, rng, n)))
    finally:
        env.close()
    return n / per_round


def local_rows(table: Table, env_id: str, sizes: Sizes, launcher, targets: dict) -> None:
    """Ours, the plain loop, the machine's limit and gymnasium's vector envs."""
    results: dict = {}
    our_rows(
        table,
        launcher,
        "steps_per_s",
        f"{sizes.ours} rounds",
        sizes.timeout,
        results,
        speedup_target=targets.get("speedup"),
        auto=True,
    )
    plain: dict = {}

    def plain_row():
        plain["rate"], check = plain_loop(env_id, N_ENVS, sizes.ours)
        mine = result_of(results)
        same = mine.get("reward") == check["reward"] and mine.get("episodes") == check["episodes"]
        return plain[
            "rate"
        ], f"{sizes.ours} rounds; rewards {'equal to' if same else 'DIFFER from'} ours"

    table.peer("plain Python loop (1 process)", plain_row, target=targets.get("plain"))
    limit = f"machine limit ({cores()} cores x plain loop)"
    if "rate" in plain:
        table.peer(limit, lambda: cores() * plain["rate"], target=targets.get("limit"))
    else:
        table.skip(limit, "the plain loop failed")
    table.peer(
        "gymnasium SyncVectorEnv",
        lambda: vector_rate("sync", env_id, N_ENVS, sizes.sync, sizes.warmup),
        note=f"{sizes.sync} rounds",
    )
    table.peer(
        "gymnasium AsyncVectorEnv (shared memory)",
        lambda: vector_rate("async", env_id, N_ENVS, sizes.async_, sizes.warmup),
        note=f"{sizes.async_} rounds",
        target=targets.get("async"),
    )


# ---------------------------------------------------------------- Ray


class StepperHost:
    """A Ray actor's state: one :class:`stepper.Stepper`, made or replaced by :meth:`make`."""

    def make(self, env_id: str, seed: int, index: int) -> int:
        self.stepper = workload_module("stepper").Stepper(env_id, seed, index)
        return os.getpid()

    def step(self, _round):
        return self.stepper.step()


def ray_rows(ray, hosts, env_id: str, sizes: Sizes, table: Table, target=None) -> None:
    """Rows for Ray actors (a remote call per env per round) and Ray Compiled Graph."""
    from ray.dag import InputNode, MultiOutputNode

    n = len(hosts)
    try:
        ray.get([h.make.remote(env_id, SEED, i) for i, h in enumerate(hosts)])
    except Exception as e:  # noqa: BLE001 - every failure becomes a row
        for name in RAY_NAMES:
            table.skip(name, f"{type(e).__name__}: {e}")
        return
    table.peer(
        RAY_NAMES[0],
        lambda: (
            n / rate(sizes.ray, sizes.warmup, lambda i: ray.get([h.step.remote(i) for h in hosts]))
        ),
        note=f"{sizes.ray} rounds",
        target=target,
    )
    with InputNode() as inp:
        dag = MultiOutputNode([h.step.bind(inp) for h in hosts])

    def cg():
        with compiled(dag) as graph:
            return n / rate(sizes.ray, sizes.warmup, lambda i: ray.get(graph.execute(i)))

    table.peer(RAY_NAMES[1], cg, note=f"{sizes.ray} rounds")


def ray_peers(tables: dict, sizes: Sizes, targets: dict) -> None:
    """Ray rows of every table, with one Ray session and one set of actors for all envs."""
    with ray_or_skip(tables.values(), RAY_NAMES) as ray:
        if ray is None:
            return
        hosts = [ray.remote(StepperHost).remote() for _ in range(N_ENVS)]
        for env_id, t in tables.items():
            ray_rows(ray, hosts, env_id, sizes, t, targets.get(env_id, {}).get("ray"))


# ---------------------------------------------------------------- the workload


def simulate(
    program: str,
    env_ids,
    sizes: Sizes,
    targets: dict,
    extra_peers=None,
    label=lambda env_id: env_id,
) -> list[Row]:
    """All rows of a simulation-throughput workload: local peers per env, then Ray per env
    (Ray's background processes would disturb the others)."""
    tmp = scratch()
    tables = {e: Table(f"{label(e)}: {N_ENVS} envs", "env steps/s") for e in env_ids}
    for env_id, t in tables.items():
        launcher = build_or_error(
            program,
            {"env_id": env_id, "n": N_ENVS, "rounds": sizes.ours, "seed": SEED},
            tmp / env_id.replace("/", "_"),
        )
        local_rows(t, env_id, sizes, launcher, targets.get(env_id, {}))
        if extra_peers:
            extra_peers(t, env_id, sizes, targets.get(env_id, {}))
    ray_peers(tables, sizes, targets)
    return [r for t in tables.values() for r in t.rows]


def run(quick: bool) -> list[Row]:
    return simulate("GymSim", ENV_IDS[:1] if quick else ENV_IDS, QUICK if quick else FULL, TARGETS)
