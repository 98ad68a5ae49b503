"""Benchmark workload 4: multi-agent inference, ours beside the peers (env steps/s).

N = 4 and N = 10 policy reactors each run a small MLP on their car's observation; a server
steps the traffic junction of ``lf_src/bench/junction.py`` with the joint action. Ours is
``lf_src/bench/Junction.lf``. Peers, with the same environment and policies:

- plain loop: the N policies and the environment called in turn in one process (its summed
  rewards must equal ours);
- Ray: one actor per agent, one remote call per agent per step, ``ray.get`` every step, the
  environment in the driver (the paper's pattern); Ray Compiled Graph: the same actors as a
  static DAG (observations in, actions out).

Ray is measured over fewer steps than ours; the figures are steady-state rates after warm-up.
``--quick`` runs 10 agents only (the one with a target) for fewer steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .common import Row, scratch
from .programs import build_or_error, our_rows, result_of, workload_module
from .raysession import compiled, rate, ray_or_skip
from .rows import Table

SEED = 1


@dataclass
class Plan:
    agents: tuple
    steps: int  # ours and the plain loop
    ray_steps: int
    timeout: float  # s one run of our program may take
    warmup: int = 20


QUICK = Plan(agents=(10,), steps=10000, ray_steps=200, timeout=120)
FULL = Plan(agents=(4, 10), steps=100000, ray_steps=2000, timeout=600)


def plain_loop(n: int, steps: int) -> tuple[float, float]:
    """(steps/s, summed rewards) of the policies and the junction called in turn."""
    j = workload_module("junction")
    env, policies = j.Junction(n, SEED), [j.Policy(SEED, i) for i in range(n)]
    obs = env.reset()
    actions = np.zeros(n, dtype=np.int64)
    reward = 0.0
    t0 = 0.0
    for s in range(steps + 1):
        for i, p in enumerate(policies):
            actions[i] = p.act(obs[i])
        obs, rewards, _ = env.step(actions)
        reward += float(rewards.sum())
        if s == 0:
            t0, reward = time.perf_counter(), 0.0
    return steps / (time.perf_counter() - t0), reward


class PolicyHost:
    """Ray actor: agent ``index``'s :class:`junction.Policy`."""

    def __init__(self, index: int):
        self.policy = workload_module("junction").Policy(SEED, index)

    def act(self, obs):
        return self.policy.act(obs)


def ray_rate(ray, policies, steps: int, warmup: int) -> float:
    env = workload_module("junction").Junction(len(policies), SEED)
    state = {"obs": env.reset()}

    def one_step(_):
        obs = state["obs"]
        actions = ray.get([p.act.remote(obs[i]) for i, p in enumerate(policies)])
        state["obs"] = env.step(np.array(actions))[0]

    return 1.0 / rate(steps, warmup, one_step)


def cg_rate(ray, policies, steps: int, warmup: int) -> float:
    from ray.dag import InputNode, MultiOutputNode

    env = workload_module("junction").Junction(len(policies), SEED)
    state = {"obs": env.reset()}
    with InputNode() as inp:
        dag = MultiOutputNode([p.act.bind(inp[i]) for i, p in enumerate(policies)])
    with compiled(dag) as graph:

        def one_step(_):
            obs = state["obs"]
            actions = ray.get(graph.execute(*obs))
            state["obs"] = env.step(np.array(actions))[0]

        return 1.0 / rate(steps, warmup, one_step)


def run(quick: bool) -> list[Row]:
    plan = QUICK if quick else FULL
    tmp = scratch()
    tables, ours = {}, {}
    for n in plan.agents:
        t = tables[n] = Table(f"Multi-agent junction, {n} agents", "env steps/s")

        results: dict = {}
        launcher = build_or_error(
            "Junction", {"n": n, "steps": plan.steps, "seed": SEED}, tmp / f"n{n}"
        )
        speedup = 1.3 if n == 10 else None
        our_rows(
            t,
            launcher,
            "steps_per_s",
            f"{plan.steps} steps",
            plan.timeout,
            results,
            speedup_target=speedup,
            auto=True,
        )
        ours[n] = result_of(results)

        def plain(n=n):
            r, reward = plain_loop(n, plan.steps)
            same = ours.get(n, {}).get("reward") == reward
            return r, f"{plan.steps} steps; rewards {'equal to' if same else 'DIFFER from'} ours"

        t.peer("plain Python loop (1 process)", plain)
    _ray_rows(tables, plan)
    return [r for t in tables.values() for r in t.rows]


def _ray_rows(tables: dict, plan: Plan) -> None:
    names = ("Ray actors (remote call per agent per step)", "Ray Compiled Graph (static actor DAG)")
    with ray_or_skip(tables.values(), names) as ray:
        if ray is None:
            return
        for n, t in tables.items():
            policies = [ray.remote(PolicyHost).remote(i) for i in range(n)]
            note = f"{plan.ray_steps} steps"
            t.peer(
                names[0],
                lambda: ray_rate(ray, policies, plan.ray_steps, plan.warmup),
                note=note,
                target=10 if n == 10 else None,
            )
            t.peer(names[1], lambda: cg_rate(ray, policies, plan.ray_steps, plan.warmup), note=note)
            for p in policies:
                ray.kill(p)
