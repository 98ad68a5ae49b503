"""``--cluster ray``: workers as actors of a Ray cluster (reactors.cluster.ray_transport).

The cluster is a local one of three nodes (``ray.cluster_utils.Cluster``: three raylets with
distinct node ids on this machine, one CPU each, so that a run's workers land on distinct
nodes). Skipped with a message when Ray is not installed (``pip install -e '.[cluster]'``;
``make`` installs it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import build, run_digest, run_program

from reactors.cluster.ray_actor import alive
from reactors.parallel.shm import unlink_prefix

FIXTURES = Path(__file__).parent / "cluster_fixtures"
FAULTS = Path(__file__).parent / "fault_fixtures"
LF_BENCH = Path(__file__).parent.parent / "lf_src" / "bench"
WORKER_LINE = re.compile(r"---- Worker (\d+) on Ray node (\w+) \(.*\), process (\d+)")

needs_ray = pytest.mark.skipif(  # a test on the module's cluster
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed (pip install -e '.[cluster]')",
)


# every test of the module on one xdist worker, one after the other (make test runs
# ``--dist loadgroup``): one cluster serves them, and it is gone when the module ends
pytestmark = pytest.mark.xdist_group("ray-cluster")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of three nodes of one CPU each (``ray.cluster_utils.Cluster``)."""
    from ray.cluster_utils import Cluster

    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    try:
        c.add_node(num_cpus=1)
        c.sink_node = c.add_node(num_cpus=1, resources={"sink": 1})  # Relay.lf's @node("sink")
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()


@pytest.fixture
def cluster(ray_cluster):
    """The address of the module's cluster."""
    return ray_cluster.address


def _leftovers(pid: int) -> list[str]:
    """What the run supervised by process ``pid`` left in /dev/shm (segments, FIFOs)."""
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"lf{pid}x")]


def _run(launcher: Path, *args: str, timeout: float = 180) -> tuple[subprocess.Popen, str, str]:
    """Run a built program in its build folder; the finished process, stdout and stderr."""
    p = subprocess.Popen(
        [str(launcher), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        cwd=launcher.parent.parent,
    )
    out, err = p.communicate(timeout=timeout)
    return p, out, err


class _Chatter:
    """``Chatter -w 2`` on the cluster at ``address`` in real time, with ``--verbose``, read
    until its 100th line: ``p`` the process (the supervisor: the launcher execs it), ``err``
    its stderr lines so far (read on), ``placed`` :func:`_placements`."""

    def __init__(self, tmp_path: Path, address: str):
        launcher = build(FAULTS / "Chatter.lf", tmp_path, "--timeout", "60 sec")
        args = ["-w", "2", "--fast", "false", "--cluster", f"ray={address}", "--verbose"]
        self.p = subprocess.Popen(
            [str(launcher), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
            cwd=tmp_path,
        )
        self.err: list[str] = []
        self.reader = threading.Thread(target=lambda: self.err.extend(self.p.stderr), daemon=True)
        self.reader.start()
        for line in self.p.stdout:  # type: ignore[union-attr]
            if "got 100" in line:
                break
        self.placed = _placements("".join(self.err))

    def end(self, timeout: float = 30) -> tuple[int, float, str]:
        """Wait for the exit (killed after ``timeout`` s): its status, the seconds waited and
        the whole stderr."""
        t0 = time.monotonic()
        try:
            rc = self.p.wait(timeout)
        finally:
            if self.p.poll() is None:
                self.p.kill()
        waited = time.monotonic() - t0
        self.reader.join(5)
        return rc, waited, "".join(self.err)


def _placements(stderr: str) -> dict[int, tuple[str, int]]:
    """Worker -> (node id, actor process id), from the ``--verbose`` lines."""
    return {int(w): (node, int(pid)) for w, node, pid in WORKER_LINE.findall(stderr)}


def test_each_federate_is_a_worker_of_its_own(tmp_path):
    from reactors.model.program import Program
    from reactors.parallel.placement import federates

    build(FIXTURES / "Relay.lf", tmp_path)
    graph = Program.from_json(json.loads((tmp_path / "src-gen/Relay/graph.json").read_text()))
    assert graph.federated
    fed = federates(graph)
    by_name = {r.name: fed[r.id] for r in graph.reactors if not r.synthetic}
    assert by_name == {"Relay": 0, "Relay.s": 0, "Relay.r": 1, "Relay.k": 2}
    # the `after` delay lfc adds shares a worker with its writer (placement.groups)
    delays = [fed[r.id] for r in graph.reactors if r.synthetic]
    assert delays == [0]


def test_bad_cluster_options_are_refused(tmp_path):
    launcher = build(FAULTS / "Chatter.lf", tmp_path)  # not federated: -w counts
    for args, message in [
        (["--cluster", "spark"], "--cluster expects 'ray' or 'ray=<address>'"),
        (["--cluster=ray="], "--cluster expects 'ray' or 'ray=<address>'"),
        (["--cluster", "ray", "--backend", "threads"], "drop --backend threads"),
        (["--cluster", "ray", "-w", "1"], "--cluster needs two workers or more"),
    ]:
        r = run_program(launcher, *args)
        assert r.returncode != 0, args
        assert message in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr


def test_no_cluster_at_the_address_is_a_message(tmp_path):
    launcher = build(FIXTURES / "Relay.lf", tmp_path)
    t0 = time.monotonic()
    p, _, err = _run(launcher, "--cluster", "ray=127.0.0.1:1", timeout=60)
    assert p.returncode == 1, err
    assert "no Ray cluster answers at 127.0.0.1:1" in err
    assert "ray start --head" in err
    assert "Traceback" not in err
    assert time.monotonic() - t0 < 30
    assert not _leftovers(p.pid)


def test_ray_is_imported_only_with_the_flag(tmp_path):
    launcher = build(FIXTURES / "Relay.lf", tmp_path)
    module = next((tmp_path / "src-gen").rglob("Relay.py"))
    r = subprocess.run(
        [sys.executable, "-X", "importtime", str(module), "-w", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=launcher.parent.parent,
    )
    assert r.returncode == 0, r.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines()}
    assert "reactors.parallel.processes" in imported  # the parallel path ran
    assert not {m for m in imported if m == "ray" or m.startswith("ray.")}


@needs_ray
def test_a_federated_program_on_three_nodes_equals_one_worker(tmp_path, cluster, ray_cluster):
    launcher = build(FIXTURES / "Relay.lf", tmp_path)
    ref, ref_digest = run_digest(launcher, "Relay")
    assert ref.returncode == 0, ref.stderr
    assert "final total" in ref.stdout
    digest = tmp_path / "cluster.digest"
    p, out, err = _run(
        launcher, "--cluster", f"ray={cluster}", "--verbose", "--digest", str(digest)
    )
    assert p.returncode == 0, err
    assert "3 federates, one worker each" in err
    placed = _placements(err)
    assert sorted(placed) == [0, 1, 2], err
    assert len({node for node, _ in placed.values()}) == 3  # one worker per node
    assert ray_cluster.sink_node.node_id.startswith(
        placed[2][0]
    )  # federate 2, Relay.k, is @node("sink")
    assert out == ref.stdout
    assert digest.read_text() == ref_digest
    assert not _leftovers(p.pid)
    for w in range(3):  # each worker's node is its own: all that crossed went by network
        assert re.search(rf"---- Worker {w} on .* \((shared memory|network, node copy \d)\)", err)
    # graph.json says where the workers ran, and the viewer shows it
    from codegen.viewer import Diagram
    from reactors.model.program import Program
    from reactors.parallel.placement import federates

    graph = Program.load(str(tmp_path / "src-gen/Relay/graph.json"))
    run = graph.cluster_run
    assert run is not None and run.placement == tuple(federates(graph))
    assert len(run.sent_bytes) == 3 and min(run.sent_bytes) > 0  # the network transport's
    assert [n.node_id[:12] for n in run.nodes] == [placed[w][0] for w in range(3)]
    drawn = Diagram(graph).to_dict()
    assert f"worker 2 on node {placed[2][0]}" in drawn["workers_text"]
    sink = next(b for b in drawn["root"]["children"] if b.get("full") == "Relay.k")
    assert sink["workers"] == [2] and sink["nodes"] == [placed[2][0]]
    time.sleep(0.5)
    assert not any(os.path.exists(f"/proc/{pid}") for _, pid in placed.values())


# the bench programs with small compile-time parameters, one of each kind of traffic (small
# numpy observations and tuples, 1 MiB arrays through slot segments, a multiport hub, a
# round trip per tag, a bank of tiny reactions, physical time), and whether their tags are
# physical (Telemetry's sensor: then only the values and their order are compared); the
# bench programs that import torch or ale-py are left to test_determinism.py (on one host)
#: make test runs GymSim and PingPong (a bank with a hub, a round trip); the others are slow
BENCH_RUNS = [
    pytest.param("Broadcast16", {"n": 4, "mib": 1, "rounds": 6}, False, marks=pytest.mark.slow),
    ("GymSim", {"n": 6, "rounds": 50}, False),
    pytest.param("Junction", {"n": 4, "steps": 60}, False, marks=pytest.mark.slow),
    ("PingPong", {"count": 300}, False),
    pytest.param("Telemetry", {"readings": 20}, True, marks=pytest.mark.slow),
    pytest.param("TinyBank", {"rounds": 50}, False, marks=pytest.mark.slow),
]


def _values(digest: str | None, physical: bool) -> list[str]:
    """A digest's lines without the ports whose values differ per process (an environment's
    process id); without their tags when the tags are physical."""
    from conftest import _without

    lines = (_without(digest, r"\.pid$") or "").splitlines()
    return [line.split(" ", 2)[2] for line in lines] if physical else lines


@needs_ray
@pytest.mark.parametrize(
    "name, defines, physical",
    BENCH_RUNS,
    ids=["Broadcast16", "GymSim", "Junction", "PingPong", "Telemetry", "TinyBank"],
)
def test_bench_programs_on_three_nodes_equal_one_worker(tmp_path, cluster, name, defines, physical):
    from reactors.model.program import Program

    launcher = build(
        LF_BENCH / f"{name}.lf",
        tmp_path,
        *(a for k, v in defines.items() for a in ("-D", f"{k}={v}")),
    )
    ref, ref_digest = run_digest(launcher, "one")
    assert ref.returncode == 0, ref.stderr
    r, digest = run_digest(launcher, "three", "-w", "3", "--cluster", f"ray={cluster}")
    assert r.returncode == 0, r.stderr
    assert _values(digest, physical) == _values(ref_digest, physical)
    assert [line for line in r.stdout.splitlines() if not line.startswith("RESULT")] == [
        line for line in ref.stdout.splitlines() if not line.startswith("RESULT")
    ]
    run = Program.load(str(next(tmp_path.glob("src-gen/*/graph.json")))).cluster_run
    assert run is not None and len(run.nodes) == min(3, len(set(run.placement)))
    assert len({n.node_id for n in run.nodes}) == len(run.nodes)  # a node per worker
    assert len(run.sent_bytes) == len(run.nodes) and min(run.sent_bytes) > 0


@needs_ray
def test_output_and_messages_to_one_file_are_both_whole(tmp_path, cluster):
    launcher = build(FAULTS / "Chatter.lf", tmp_path, "--timeout", "60 sec")
    log = tmp_path / "all.txt"
    args = ["-w", "2", "--fast", "false", "--cluster", f"ray={cluster}", "--verbose"]
    with open(log, "w") as f:  # not opened for appending: one offset, shared with the actors
        p = subprocess.Popen([str(launcher), *args], stdout=f, stderr=subprocess.STDOUT)
        end = time.monotonic() + 120
        while "got 30" not in log.read_text() and time.monotonic() < end:
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)  # the supervisor writes after the actors did
        assert p.wait(30) == 130
    lines = log.read_text().splitlines()
    assert len(WORKER_LINE.findall("\n".join(lines))) == 2
    assert "---- Interrupted (Ctrl-C); stopping." in lines
    got = [line for line in lines if re.fullmatch(r"[01] got \d+", line)]
    assert got[:60] == [f"{b} got {k}" for k in range(1, 31) for b in (0, 1)]  # none lost


def test_at_and_node_name_the_ray_resource_of_a_federate(tmp_path):
    from reactors.model.program import Program

    build(FIXTURES / "Placed.lf", tmp_path)
    graph = Program.load(str(tmp_path / "src-gen/Placed/graph.json"))
    wanted = {r.name: r.node for r in graph.reactors}
    assert wanted == {
        "Placed": None,
        "Placed.a": "node:10.255.255.1",  # every Ray node has "node:<its address>"
        "Placed.b": "gpu-box",
        "Placed.c": "nowhere",
    }


@needs_ray
def test_a_node_that_no_node_of_the_cluster_matches_is_a_message(tmp_path, cluster):
    launcher = build(FIXTURES / "Placed.lf", tmp_path)
    p, _, err = _run(launcher, "--cluster", f"ray={cluster}", timeout=60)
    assert p.returncode == 1, err
    assert "Placed.b needs a node with the Ray resource 'gpu-box'" in err
    assert "Traceback" not in err
    assert not _leftovers(p.pid)


@needs_ray
def test_a_killed_actor_stops_the_run_with_its_node_and_reactors(tmp_path, cluster):
    run = _Chatter(tmp_path, cluster)
    node, pid = run.placed[1]
    os.kill(pid, signal.SIGKILL)
    rc, out_s, stderr = run.end()
    assert rc == 1, stderr
    assert out_s < 2.0, out_s
    assert f"worker 1 on Ray node {node[:12]}" in stderr, stderr
    assert "(it ran Chatter.n[1])" in stderr
    assert "Traceback" not in stderr
    assert not _leftovers(run.p.pid)
    assert not alive(run.placed[0][1])  # the other actor is gone too


@needs_ray
def test_a_node_that_dies_stops_the_run_within_two_seconds(tmp_path, ray_cluster):
    run = _Chatter(tmp_path, ray_cluster.address)
    # a node other than the head (whose loss would end the cluster) that runs a worker
    victim, w = next(
        (n, w)
        for w in (1, 0)
        for n in ray_cluster.worker_nodes
        if n.node_id.startswith(run.placed[w][0])
    )
    try:
        ray_cluster.remove_node(victim, allow_graceful=False)
        rc, out_s, stderr = run.end()
    finally:  # three nodes again for any later test
        if victim is ray_cluster.sink_node:
            ray_cluster.sink_node = ray_cluster.add_node(num_cpus=1, resources={"sink": 1})
        else:
            ray_cluster.add_node(num_cpus=1)
    assert rc == 1, stderr
    assert out_s < 2.0, out_s
    assert f"worker {w} on Ray node {run.placed[w][0]}" in stderr, stderr
    assert f"(it ran Chatter.n[{w}])" in stderr
    assert not _leftovers(run.p.pid)


@needs_ray
def test_a_killed_supervisor_leaves_no_actor_segment_or_placement_group(tmp_path, cluster):
    import ray

    run = _Chatter(tmp_path, cluster)
    actors = [pid for _, pid in run.placed.values()]
    assert len(actors) == 2
    run.p.kill()
    run.end()
    p = run.p
    end = time.monotonic() + 5
    while any(alive(pid) for pid in actors) and time.monotonic() < end:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in actors)
    # a supervisor killed outright cannot unlink its segments, and Ray may kill the actors
    # (their owner died) before they notice and unlink them: not checked here, removed
    unlink_prefix(f"lf{p.pid}x")
    ray.init(address=cluster, logging_level="ERROR", log_to_driver=False)
    try:
        end = time.monotonic() + 10
        while time.monotonic() < end:
            states = {v["state"] for v in ray.util.placement_group_table().values()}
            if states <= {"REMOVED"}:
                break
            time.sleep(0.2)
        assert states <= {"REMOVED"}, states
    finally:
        ray.shutdown()
