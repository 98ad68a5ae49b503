"""A round trip between two workers on two Ray nodes of this machine, beside Ray's own.

The cluster is ``ray.cluster_utils.Cluster``: a head node and one more node, one CPU each, so
that the two workers of a run (and Ray's actor) land on different nodes of this host. Ours:
``lf_src/bench/PingPong.lf`` with ``--cluster ray=ADDRESS -w 2`` (its workers are Ray actors;
values cross in shared memory, as between the nodes of one host they can), per message: a
run of ``n`` messages minus a run of 1. Ray: a call of an actor on the other node that returns
its argument plus one (``ray.get(actor.ping.remote(k))``), and the same call through a Ray
Compiled Graph (``execute(k).get()``). Target (issue "Beyond one machine"): ours <= 1/5 of a
Ray actor call. Across hosts nothing is measured: values between hosts need a network
transport, which the runtime does not have yet.
"""

from __future__ import annotations

import statistics

from .common import Row, scratch, timed_run
from .programs import build_program, load_average
from .raysession import compiled, rate


class _Pong:
    def ping(self, k: int) -> int:
        return k + 1


def _ours_us(address: str, n: int, reps: int) -> float:
    big = build_program("PingPong", {"count": n}, scratch())
    one = build_program("PingPong", {"count": 1}, scratch())
    args = ["-w", "2", "--cluster", f"ray={address}"]
    t_big = statistics.median(timed_run([str(big), *args]) for _ in range(reps))
    t_one = statistics.median(timed_run([str(one), *args]) for _ in range(reps))
    return (t_big - t_one) / n * 1e6


def run(quick: bool) -> list[Row]:
    import ray
    from ray.cluster_utils import Cluster
    from ray.dag import InputNode

    n, reps, calls = (5_000, 1, 500) if quick else (50_000, 3, 3_000)
    title = f"Round trip between 2 workers on 2 Ray nodes of this host, {n:,} tags"
    load = load_average()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        cluster.add_node(num_cpus=1, resources={"other": 1})
        cluster.wait_for_nodes()
        ours = _ours_us(cluster.address, n, reps)
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        try:
            pong = ray.remote(num_cpus=0, resources={"other": 1})(_Pong).remote()
            call = rate(calls, 50, lambda k: ray.get(pong.ping.remote(k))) * 1e6
            with InputNode() as inp:
                dag = pong.ping.bind(inp)
            with compiled(dag) as graph:
                cgraph = rate(calls, 50, lambda k: graph.execute(k).get()) * 1e6
        finally:
            ray.shutdown()
    finally:
        cluster.shutdown()
    met = "MET" if ours <= call / 5 else "MISSED"
    return [
        Row(
            title,
            "ours (PingPong, --cluster ray -w 2)",
            ours,
            "µs/tag",
            note=f"workers are Ray actors; shared memory between them; load {load:.2f} before",
        ),
        Row(
            title,
            "Ray actor call (other node)",
            call,
            "µs/call",
            ratio=call / ours if ours > 0 else None,
            note=f"ray.get(actor.ping.remote(k)); target ours <= 1/5 of it: {met}",
        ),
        Row(
            title,
            "Ray Compiled Graph (other node)",
            cgraph,
            "µs/call",
            ratio=cgraph / ours if ours > 0 else None,
            note="execute(k).get()",
        ),
    ]
