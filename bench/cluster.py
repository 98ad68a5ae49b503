"""Two Ray nodes of this machine: a round trip between two workers, and GymSim, beside Ray.

The cluster is ``ray.cluster_utils.Cluster``: a head node and one more node, one CPU each, so
that the two workers of a run (and Ray's actor) land on different nodes of this host. Ours:
``lf_src/bench/PingPong.lf`` with ``--cluster ray=ADDRESS -w 2`` (its workers are Ray actors;
values and tags cross between the two nodes over the network transport, TCP through the
host's cluster address, :mod:`reactors.cluster.net`), per message: a run of ``n`` messages minus a
run of 1. Ray: a call of an actor on the other node that returns
its argument plus one (``ray.get(actor.ping.remote(k))``), and the same call through a Ray
Compiled Graph (``execute(k).get()``). The three are measured in turns, ``reps`` times (this
machine is shared: its load drifts within minutes), and each figure is the median of its
turns; the ratio is the median of the ratios of the same turn. Target: ours <= 1/5 of a Ray
actor call.

GymSim (``lf_src/bench/GymSim.lf``, CartPole, 15 environments) with ``--cluster ray=ADDRESS
-w 2``: the environment bank spread over the two nodes' workers; beside it 15 Ray actors
spread over the same nodes (scheduling strategy ``SPREAD``), one remote call per environment
per round and ``ray.get`` every round, as in :mod:`bench.gym_sim`. Target: ours >= 10x Ray.

A 10 MiB numpy array broadcast to 4 reactors and gathered back (``lf_src/bench/Broadcast16.lf``,
``n`` = 4) with ``--cluster ray=ADDRESS -w 2``: the receivers dealt over the two nodes'
workers; beside it ``ray.put`` and one call to each of 4 Ray actors on the other node, as in
:mod:`bench.broadcast`. No target.

The nodes are on one host, so the network is the host's loopback path to its own address:
between hosts add the wire's latency to both sides.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess

from .broadcast import MIB, Echo, payload
from .common import Row, scratch, timed_run
from .gym_sim import N_ENVS, SEED, StepperHost
from .programs import LF_BENCH, build_program, load_average
from .raysession import compiled, rate


class _Pong:
    def ping(self, k: int) -> int:
        return k + 1


def _round_trips(ray, address: str, n: int, reps: int, calls: int) -> dict[str, list[float]]:
    """µs per message of ours (PingPong), per call of a Ray actor on the other node and per
    execution of a Ray Compiled Graph: ``reps`` turns of the three, one after the other."""
    from ray.dag import InputNode

    big = build_program("PingPong", {"count": n}, scratch())
    one = build_program("PingPong", {"count": 1}, scratch())
    args = ["-w", "2", "--cluster", f"ray={address}"]
    pong = ray.remote(num_cpus=0, resources={"other": 0.01})(_Pong).remote()
    got: dict[str, list[float]] = {"ours": [], "call": [], "cgraph": []}
    for _ in range(reps):
        t_big, t_one = timed_run([str(big), *args]), timed_run([str(one), *args])
        got["ours"].append((t_big - t_one) / n * 1e6)
        got["call"].append(rate(calls, 50, lambda k: ray.get(pong.ping.remote(k))) * 1e6)
        with InputNode() as inp:  # a graph compiles once; each turn binds its own
            dag = pong.ping.bind(inp)
        with compiled(dag) as graph:  # torn down at once: a compiled graph holds its actor
            got["cgraph"].append(rate(calls, 50, lambda k: graph.execute(k).get()) * 1e6)
    return got


def _paired(peer: list[float], ours: list[float]) -> float:
    """The median over turns of the peer's figure over ours (times per message)."""
    return statistics.median(p / o for p, o in zip(peer, ours) if o > 0)


def _ours_gym(address: str, rounds: int) -> float:
    """Env steps/s of GymSim CartPole on the cluster's two nodes (its RESULT)."""
    defines = {"env_id": "CartPole-v1", "n": N_ENVS, "rounds": rounds, "seed": SEED}
    return float(_result(build_program("GymSim", defines, scratch()), address)["steps_per_s"])


def _ours_broadcast(address: str, receivers: int, rounds: int) -> float:
    """ms per round of Broadcast16 (``receivers`` echo reactors) on the cluster's nodes."""
    defines = {"n": receivers, "mib": MIB, "rounds": rounds}
    return float(_result(build_program("Broadcast16", defines, scratch()), address)["ms_per_round"])


def _result(launcher, address: str) -> dict:
    """The RESULT of a built bench program run with ``-w 2`` on the cluster at ``address``."""
    cmd = [str(launcher), "-w", "2", "--cluster", f"ray={address}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{launcher.name} --cluster exited {r.returncode}: {r.stderr[-400:]}")
    line = next(x for x in reversed(r.stdout.splitlines()) if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _ray_broadcast(ray, receivers: int, rounds: int) -> float:
    """ms per round of ``ray.put`` and one echo call to each of the actors on the other node."""
    actors = [
        ray.remote(num_cpus=0, resources={"other": 0.01})(Echo).remote() for _ in range(receivers)
    ]
    data = payload()

    def one_round(_):
        ref = ray.put(data)
        got = ray.get([a.echo.remote(ref) for a in actors])
        assert all(g.shape == data.shape for g in got)

    return rate(rounds, 3, one_round) * 1e3


def _ray_gym(ray, rounds: int, warmup: int) -> float:
    """Env steps/s of 15 Ray actors (one CartPole each) spread over the nodes."""
    host = ray.remote(num_cpus=0, scheduling_strategy="SPREAD")(StepperHost)
    hosts = [host.remote() for _ in range(N_ENVS)]
    ray.get([h.make.remote("CartPole-v1", SEED, i) for i, h in enumerate(hosts)])
    per_round = rate(rounds, warmup, lambda i: ray.get([h.step.remote(i) for h in hosts]))
    return N_ENVS / per_round


def run(quick: bool) -> list[Row]:
    import ray
    from ray.cluster_utils import Cluster

    n, reps, calls = (5_000, 1, 500) if quick else (20_000, 5, 3_000)
    gym_rounds, ray_rounds = (1_000, 50) if quick else (10_000, 500)
    cast_rounds, ray_cast_rounds = (30, 10) if quick else (300, 50)
    cast_title = f"Broadcast/gather {MIB} MiB to 4 reactors over 2 Ray nodes of this host"
    title = f"Round trip between 2 workers on 2 Ray nodes of this host, {n:,} tags"
    gym_title = f"GymSim CartPole, {N_ENVS} envs over 2 Ray nodes of this host"
    load = load_average()
    os.environ["PYTHONPATH"] = os.pathsep.join(  # for the actors' imports (bench, stepper)
        p for p in (str(LF_BENCH), os.getcwd(), os.environ.get("PYTHONPATH")) if p
    )
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        cluster.add_node(num_cpus=1, resources={"other": 1})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level=logging.ERROR, log_to_driver=False)
        try:
            trips = _round_trips(ray, cluster.address, n, reps, calls)
            gym = _ours_gym(cluster.address, gym_rounds)
            cast = _ours_broadcast(cluster.address, 4, cast_rounds)
            gym_ray = _ray_gym(ray, ray_rounds, 10)
            cast_ray = _ray_broadcast(ray, 4, ray_cast_rounds)
        finally:
            ray.shutdown()
    finally:
        cluster.shutdown()
    ours, call, cgraph = (statistics.median(trips[k]) for k in ("ours", "call", "cgraph"))
    call_ratio, cgraph_ratio = (
        _paired(trips["call"], trips["ours"]),
        _paired(trips["cgraph"], trips["ours"]),
    )
    met = "MET" if call_ratio >= 5 else "MISSED"
    turns = f"median of {reps} turns"
    return [
        Row(
            title,
            "ours (PingPong, --cluster ray -w 2)",
            ours,
            "µs/tag",
            note=f"workers are Ray actors; TCP between the nodes; {turns}; load {load:.2f} before",
        ),
        Row(
            title,
            "Ray actor call (other node)",
            call,
            "µs/call",
            ratio=call_ratio,
            note=f"ray.get(actor.ping.remote(k)); {turns}, ratio of the same turn; "
            f"target ours <= 1/5 of it: {met}",
        ),
        Row(
            title,
            "Ray Compiled Graph (other node)",
            cgraph,
            "µs/call",
            ratio=cgraph_ratio,
            note=f"execute(k).get(); {turns}, ratio of the same turn",
        ),
        Row(
            gym_title,
            "ours (GymSim, --cluster ray -w 2)",
            gym,
            "env steps/s",
            note=f"{gym_rounds:,} rounds; the bank over the 2 nodes' workers",
        ),
        Row(
            gym_title,
            "Ray actors (one per env, SPREAD)",
            gym_ray,
            "env steps/s",
            ratio=gym / gym_ray if gym_ray > 0 else None,
            note=f"{ray_rounds} rounds; target ours >= 10x: {'MET' if gym >= 10 * gym_ray else 'MISSED'}",
        ),
        Row(
            cast_title,
            "ours (Broadcast16, --cluster ray -w 2)",
            cast,
            "ms/round",
            note=f"{cast_rounds} rounds; the 4 receivers dealt over the 2 nodes' workers",
        ),
        Row(
            cast_title,
            "Ray (put + 4 actors on the other node)",
            cast_ray,
            "ms/round",
            ratio=cast_ray / cast if cast > 0 else None,
            note=f"{ray_cast_rounds} rounds; no target",
        ),
    ]
