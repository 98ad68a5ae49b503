"""Benchmark workload 3: synchronized parallel Q-learning, ours beside the peers (total s).

Per round: 16 rollouts x 100 Blackjack-v1 steps (epsilon-greedy MLP, epsilon 0.1) -> replay
buffer -> one DQN update on a minibatch of 500 (also 1,000 and 2,000) -> new weights to every
rollout. Ours is ``lf_src/bench/QLearn.lf``. Peers run the same roles (``lf_src/bench/qlearn.py``)
in the same order, so their final weights must equal ours (the notes say whether they do):

- plain loop: the 16 rollouts, the buffer and the learner called in turn in one process;
- Ray: 16 rollout actors, a buffer actor and a learner actor; per round one remote call each,
  object refs passed actor to actor, ``ray.get`` of the new weights (the paper's pattern);
- Ray Compiled Graph: the same actors as a static DAG, weights in, weights out.

Figures are wall-clock seconds of ``rounds`` rounds after one untimed warm-up round.
``--quick`` runs the minibatch of 500 only (the one with a target) for a few rounds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .common import Row, scratch
from .programs import build_or_error, our_rows, result_of, workload_module
from .raysession import compiled, ray_or_skip
from .rows import Table

N, STEPS, SEED = 16, 100, 1


@dataclass
class Plan:
    rounds: int
    batches: tuple  # minibatch sizes measured
    plain_batches: tuple  # minibatch sizes that also get a plain-loop row
    timeout: float  # s one run of our program may take


QUICK = Plan(rounds=20, batches=(500,), plain_batches=(500,), timeout=120)
FULL = Plan(rounds=1000, batches=(500, 1000, 2000), plain_batches=(500,), timeout=900)


# ---------------------------------------------------------------- the same work, elsewhere


def plain_loop(batch: int, rounds: int) -> tuple[float, float]:
    """(seconds of ``rounds`` rounds after a warm-up round, checksum of the final weights)."""
    q = workload_module("qlearn")
    rollouts = [q.Rollout(SEED, i, STEPS, 0.1) for i in range(N)]
    replay, learner = q.Replay(SEED, batch), q.Learner(SEED)
    weights = learner.weights()
    t0 = 0.0
    for r in range(rounds + 1):
        for t in [ro.run(weights) for ro in rollouts]:
            replay.add(t)
        learner.update(replay.sample())
        weights = learner.weights()
        if r == 0:
            t0 = time.perf_counter()
    return time.perf_counter() - t0, q.checksum(weights)


class RolloutHost:
    """Ray actor: one :class:`qlearn.Rollout`, made afresh by :meth:`reset`."""

    def __init__(self, index: int):
        self.index = index

    def reset(self, _batch: int) -> None:
        self.rollout = workload_module("qlearn").Rollout(SEED, self.index, STEPS, 0.1)

    def run(self, weights):
        return self.rollout.run(weights)


class BufferHost:
    """Ray actor: the replay buffer; ``add_and_sample(*transitions) -> minibatch``."""

    def reset(self, batch: int) -> None:
        self.replay = workload_module("qlearn").Replay(SEED, batch)

    def add_and_sample(self, *transitions):
        for t in transitions:
            self.replay.add(t)
        return self.replay.sample()


class LearnerHost:
    """Ray actor: the DQN learner; :meth:`reset` returns the initial weights,
    ``update(minibatch)`` the new ones."""

    def reset(self, _batch: int):
        self.learner = workload_module("qlearn").Learner(SEED)
        return self.learner.weights()

    def update(self, minibatch):
        self.learner.update(minibatch)
        return self.learner.weights()


def start_actors(ray):
    """16 rollout actors, a buffer actor, a learner actor (processes), shared by all runs."""
    rollouts = [ray.remote(RolloutHost).remote(i) for i in range(N)]
    return rollouts, ray.remote(BufferHost).remote(), ray.remote(LearnerHost).remote()


def reset(ray, actors, batch: int):
    """Fresh roles in every actor (same seeds as ours); returns the initial weights."""
    rollouts, buffer, learner = actors
    ray.get([a.reset.remote(batch) for a in [*rollouts, buffer]])
    return ray.get(learner.reset.remote(batch))


def ray_round(actors, weights_ref):
    """One round with refs passed actor to actor; returns the new weights' ref."""
    rollouts, buffer, learner = actors
    batch = buffer.add_and_sample.remote(*[r.run.remote(weights_ref) for r in rollouts])
    return learner.update.remote(batch)


def ray_time(ray, actors, batch: int, rounds: int) -> tuple[float, str]:
    """Ray actors, one remote call per role per round, ``ray.get`` of the weights each round."""
    weights = reset(ray, actors, batch)
    t0 = 0.0
    for r in range(rounds + 1):
        weights = ray.get(ray_round(actors, ray.put(weights)))
        if r == 0:
            t0 = time.perf_counter()
    return time.perf_counter() - t0, _same_note(weights, batch)


def cg_time(ray, actors, batch: int, rounds: int) -> tuple[float, str]:
    """Ray Compiled Graph: InputNode(weights) -> 16 rollouts -> buffer -> learner -> weights."""
    from ray.dag import InputNode

    rollouts, buffer, learner = actors
    weights = reset(ray, actors, batch)
    with InputNode() as inp:
        dag = learner.update.bind(buffer.add_and_sample.bind(*[r.run.bind(inp) for r in rollouts]))
    with compiled(dag) as graph:
        t0 = 0.0
        for r in range(rounds + 1):
            weights = ray.get(graph.execute(weights))
            if r == 0:
                t0 = time.perf_counter()
        return time.perf_counter() - t0, _same_note(weights, batch)


_OURS: dict = {}


def _same_note(weights, batch: int) -> str:
    """Whether final weights equal ours (same seeds, same order of work)."""
    q = workload_module("qlearn")
    ours = _OURS.get(batch)
    if ours is None:
        return ""
    mine = weights if isinstance(weights, float) else q.checksum(weights)
    return "final weights " + ("equal to ours" if mine == ours else "DIFFER from ours")


# ---------------------------------------------------------------- rows


def run(quick: bool) -> list[Row]:
    plan = QUICK if quick else FULL
    tmp = scratch()
    tables = {}
    for batch in plan.batches:
        t = tables[batch] = Table(
            f"Sync Q-learning, minibatch {batch}: {plan.rounds} rounds",
            "s total",
            higher_better=False,
        )

        results: dict = {}
        launcher = build_or_error(
            "QLearn", {"batch": batch, "rounds": plan.rounds}, tmp / f"b{batch}"
        )
        our_rows(
            t,
            launcher,
            "seconds",
            timeout=plan.timeout,
            results=results,
            one_worker=batch in plan.plain_batches,
            auto=batch in plan.plain_batches,
        )
        _OURS[batch] = result_of(results).get("checksum")
        if batch in plan.plain_batches:

            def plain(batch=batch):
                seconds, check = plain_loop(batch, plan.rounds)
                return seconds, _same_note(check, batch)

            t.peer("plain Python loop (1 process)", plain)
    _ray_rows(tables, plan)
    return [r for t in tables.values() for r in t.rows]


def _ray_rows(tables: dict, plan: Plan) -> None:
    names = (
        "Ray actors (a remote call per role per round)",
        "Ray Compiled Graph (static actor DAG)",
    )
    with ray_or_skip(tables.values(), names) as ray:
        if ray is None:
            return
        actors = start_actors(ray)
        for batch, t in tables.items():
            # ours <= 0.5x Ray's time at minibatch 500, <= Ray's at larger minibatches
            goal = 2 if batch <= 500 else 1
            t.peer(names[0], lambda b=batch: ray_time(ray, actors, b, plan.rounds), target=goal)
            t.peer(names[1], lambda b=batch: cg_time(ray, actors, b, plan.rounds))
