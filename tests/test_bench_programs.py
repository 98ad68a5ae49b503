"""The paper's workloads in lf_src/bench/ build, run at a tiny size, and compute
what the same work computes without the framework.

Each program is built with small main-reactor defaults (``lfc -D``, as bench/ builds them),
run on one worker, and its ``RESULT {json}`` line is checked: the
server gathered every answer of every round (the programs exit non-zero otherwise) and the
checksum equals a plain loop over the same shared code (lf_src/bench/*.py) with the same seeds.
Tests needing packages outside the rl/test extras (ale-py) are skipped when they are absent.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, build, run_program

LF_BENCH = ROOT / "lf_src" / "bench"


def run_bench(name: str, tmp_path, workers: int = 1, timeout: float = 120, **defaults) -> dict:
    """Build ``lf_src/bench/<name>.lf`` with ``lfc -D name=value`` for each of ``defaults``
    (strings are quoted as LF strings), run it on ``workers`` workers, return its RESULT."""
    defines = [
        a
        for k, v in defaults.items()
        for a in ("-D", f'{k}="{v}"' if isinstance(v, str) else f"{k}={v}")
    ]
    out = tmp_path / f"w{workers}"
    r = run_program(
        build(LF_BENCH / f"{name}.lf", out, *defines), "-w", str(workers), timeout=timeout
    )
    assert r.returncode == 0, (
        f"{name} exited {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, r.stdout[-2000:]
    return json.loads(lines[0][len("RESULT ") :])


def shared(module: str):
    """A module of lf_src/bench/ (the code the programs and the bench peers share)."""
    if str(LF_BENCH) not in sys.path:
        sys.path.insert(0, str(LF_BENCH))
    return importlib.import_module(module)


def test_gym_sim_gathers_every_step_and_matches_a_plain_loop(tmp_path):
    pytest.importorskip("gymnasium")
    res = run_bench("GymSim", tmp_path, env_id="Pendulum-v1", rounds=30, seed=3)
    assert (res["rounds"], res["envs"], res["processes"]) == (30, 15, 1)
    assert res["obs_shape"] == [[3]] * 15
    steppers = [shared("stepper").Stepper("Pendulum-v1", 3, i) for i in range(15)]
    for s in steppers:
        s.step()  # the warm-up round
    reward = 0.0
    for _ in range(30):
        for s in steppers:
            reward += s.step()[1]
    assert res["reward"] == reward
    assert res["steps_per_s"] > 0


def test_atari_sim_moves_full_frames(tmp_path):
    pytest.importorskip("ale_py")
    res = run_bench("AtariSim", tmp_path, n=3, rounds=5)
    assert (res["rounds"], res["envs"]) == (5, 3)
    assert res["obs_shape"] == [[210, 160, 3]] * 3


def test_qlearn_learns_the_same_weights_as_a_plain_loop(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    res = run_bench("QLearn", tmp_path, n=3, steps=10, batch=16, rounds=4, seed=2)
    assert (res["rounds"], res["processes"]) == (4, 1)
    q = shared("qlearn")
    rollouts = [q.Rollout(2, i, 10, 0.1) for i in range(3)]
    replay, learner = q.Replay(2, 16), q.Learner(2)
    weights = learner.weights()
    for _ in range(5):  # the warm-up round and 4 timed rounds
        for t in [r.run(weights) for r in rollouts]:
            replay.add(t)
        learner.update(replay.sample())
        weights = learner.weights()
    assert res["checksum"] == q.checksum(weights)
    assert res["loss"] == learner.loss


def test_junction_steps_with_every_agents_action(tmp_path):
    import numpy as np

    res = run_bench("Junction", tmp_path, n=4, steps=200, seed=5)
    assert (res["steps"], res["agents"], res["processes"]) == (200, 4, 1)
    j = shared("junction")
    env, policies = j.Junction(4, 5), [j.Policy(5, i) for i in range(4)]
    obs, reward = env.reset(), 0.0
    for s in range(201):
        obs, r, _ = env.step(np.array([p.act(obs[i]) for i, p in enumerate(policies)]))
        reward = 0.0 if s == 0 else reward + float(r.sum())
    assert res["reward"] == reward


def test_junction_environment_rules():
    import numpy as np

    j = shared("junction")
    brake = np.zeros(4, dtype=int)
    env = j.Junction(4, 0, size=6, p_arrive=1.0, max_steps=3)
    env.reset()
    obs, rewards, truncated = env.step(brake)
    assert env.active.all() and (rewards == 0).all() and not truncated  # all arrived, apart
    assert obs.shape == (4, j.OBS_DIM) and obs.dtype == np.float32
    assert (obs[:, 0] == 1).all() and (obs[:, 3:7] == np.eye(4)).all()  # active, one-hot route
    before = env.pos.copy()
    _, rewards, _ = env.step(brake)
    assert (env.pos == before).all() and np.allclose(rewards, -0.01)  # braking: stay, pay time
    _, _, truncated = env.step(brake)
    assert truncated and not env.active.any()  # episode over, reset
    crowded = j.Junction(5, 0, size=6, p_arrive=1.0)  # cars 0 and 4 share route 0's entry
    _, rewards, _ = crowded.step(np.zeros(5, dtype=int))
    assert rewards[0] == rewards[4] == -10.0 and crowded.collisions == 2


def test_broadcast_gathers_every_copy(tmp_path):
    res = run_bench("Broadcast16", tmp_path, n=3, mib=1, rounds=5)
    assert (res["rounds"], res["receivers"], res["mib"]) == (5, 3, 1)


@pytest.mark.parametrize(
    "name, defaults, same",
    [
        ("Junction", {"n": 4, "steps": 100}, ("reward", "collisions")),
        ("QLearn", {"n": 3, "steps": 10, "batch": 16, "rounds": 3}, ("checksum", "loss")),
        ("Broadcast16", {"n": 3, "mib": 1, "rounds": 3}, ("rounds",)),
    ],
)
def test_two_workers_compute_what_one_computes(name, defaults, same, tmp_path):
    """Bank members are dealt across worker processes; the results do not change."""
    if name == "QLearn":
        pytest.importorskip("torch")
        pytest.importorskip("gymnasium")
    one = run_bench(name, tmp_path, 1, **defaults)
    two = run_bench(name, tmp_path, 2, **defaults)
    assert two["processes"] == 2
    assert {k: two[k] for k in same} == {k: one[k] for k in same}


@pytest.mark.parametrize("workers", [1, 2])
def test_envbank_checksum_is_a_plain_loops(tmp_path, workers):
    np = pytest.importorskip("numpy")
    n, iters, rounds, seed = 4, 3, 12, 1
    got = run_bench("EnvBank", tmp_path, workers, n=n, iters=iters, rounds=rounds, seed=seed)
    states = [np.random.default_rng([seed, i]).standard_normal(8) for i in range(n)]
    checksum = 0.0
    for rnd in range(rounds + 1):  # round 0 is the warm-up
        total = 0.0
        for i in range(n):
            s, a = states[i], 0.05 * (i % 5) + 0.01 * (rnd % 7)
            for _ in range(iters):
                s = np.sin(s) * 0.9 + a
            states[i] = s
            total += float(s.sum()) + float(s.astype(np.float32)[1]) + bool(s[0] > 0.5)
        checksum = (checksum * 0.5 + total) % 1e6
    assert got["checksum"] == checksum and got["envs"] == n and got["rounds"] == rounds


@pytest.mark.parametrize("workers", [1, 2])
def test_tinybank_checksum_is_a_plain_loops(tmp_path, workers):
    n, rounds = 5, 30
    got = run_bench("TinyBank", tmp_path, workers, n=n, rounds=rounds)
    checksum = 0
    for rnd in range(rounds + 1):
        for i in range(n):
            checksum = (checksum * 7 + (rnd * 31 + i) % 1000003) % 1000003
    assert got["checksum"] == checksum


def test_a_benchmarks_scratch_folder_goes_with_its_process():
    """bench.common.scratch() folders (builds and runs of a benchmark) are removed when the
    process that made them exits: a `make bench` leaves nothing in the temporary folder."""
    code = "from bench.common import scratch; p = scratch(); (p / 'f').write_text('x'); print(p)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    folder = out.stdout.strip()
    assert folder and not os.path.exists(folder), folder
