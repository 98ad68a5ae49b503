"""Benchmark workload 5, N = 16: broadcast/gather of a 10 MiB numpy array (ms per round).

``bench.broadcast`` compares N = 2, 4, 8 with Ray; this module adds N = 16 and the
references. Each round one 10 MiB uint8 array goes to 16 receivers, and each sends it back.
Ours is ``lf_src/bench/Broadcast16.lf``. Beside it:

- Ray: ``ray.put`` of the array, one ``echo`` call per receiver actor with the ref, ``ray.get``
  of the 16 returned arrays (each return is stored in Ray's object store); Ray Compiled Graph:
  the same actors in a static DAG;
- plain loop (1 process): 16 echo calls passing the array by reference (no transport at all);
- memcpy floor: 17 ``np.copyto`` of 10 MiB per round, what a transport that copies each
  message once (sender to shared memory, readers zero-copy) cannot go below.

The figure is wall-clock ms per round after warm-up rounds, i.e. the framework's overhead:
nothing else is computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import Row, scratch
from .programs import build_or_error, our_rows
from .raysession import compiled, rate, ray_or_skip
from .rows import Table

N, MIB = 16, 10


@dataclass
class Plan:
    rounds: int
    ray_rounds: int
    warmup: int = 3


QUICK = Plan(rounds=100, ray_rounds=20)
FULL = Plan(rounds=1000, ray_rounds=100, warmup=5)


def payload() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, MIB << 20, dtype=np.uint8)


class EchoHost:
    """Ray actor: returns what it receives."""

    def echo(self, data):
        return data


def plain_ms(rounds: int) -> float:
    echoes = [EchoHost() for _ in range(N)]
    data = payload()
    return rate(rounds, 3, lambda i: [e.echo(data) for e in echoes]) * 1e3


def memcpy_ms(rounds: int) -> float:
    data = payload()
    slots = [np.empty_like(data) for _ in range(2)]

    def one_round(_):
        for k in range(N + 1):
            np.copyto(slots[k % 2], data)

    return rate(rounds, 2, one_round) * 1e3


def ray_ms(ray, echoes, rounds: int, warmup: int) -> float:
    data = payload()

    def one_round(_):
        ref = ray.put(data)
        got = ray.get([e.echo.remote(ref) for e in echoes])
        assert all(g.shape == data.shape for g in got)

    return rate(rounds, warmup, one_round) * 1e3


def cg_ms(ray, echoes, rounds: int, warmup: int) -> float:
    from ray.dag import InputNode, MultiOutputNode

    data = payload()
    with InputNode() as inp:
        dag = MultiOutputNode([e.echo.bind(inp) for e in echoes])
    with compiled(dag) as graph:
        return rate(rounds, warmup, lambda i: ray.get(graph.execute(data))) * 1e3


def run(quick: bool) -> list[Row]:
    plan = QUICK if quick else FULL
    t = Table(f"Broadcast/gather {MIB} MiB, {N} receivers", "ms/round", higher_better=False)

    launcher = build_or_error("Broadcast16", {"n": N, "mib": MIB, "rounds": plan.rounds}, scratch())
    timeout = 120 if plan.rounds <= 100 else 600
    our_rows(t, launcher, "ms_per_round", f"{plan.rounds} rounds", timeout, auto=True)
    t.peer("plain Python loop (1 process, by reference)", lambda: plain_ms(plan.rounds))
    t.peer(
        f"memcpy floor ({N + 1} copies of {MIB} MiB)", lambda: memcpy_ms(max(10, plan.rounds // 10))
    )
    names = (
        "Ray actors (ray.put, remote call per receiver, ray.get)",
        "Ray Compiled Graph (static actor DAG)",
    )
    with ray_or_skip([t], names) as ray:
        if ray is None:
            return t.rows
        echoes = [ray.remote(EchoHost).remote() for _ in range(N)]
        note = f"{plan.ray_rounds} rounds"
        t.peer(
            names[0], lambda: ray_ms(ray, echoes, plan.ray_rounds, plan.warmup), note=note, target=3
        )
        t.peer(names[1], lambda: cg_ms(ray, echoes, plan.ray_rounds, plan.warmup), note=note)
    return t.rows
