"""Pipelined sampling (environment groups, rl_algos.groups): CartPolePPO's `env_groups`.

With G groups the policy acts for group g at the tags j ms with j % G == g and group g's
environments step one millisecond later, so at each tag one group steps while the policy acts
for another; the learner joins whole steps of every environment. The programs run on tiny
budgets; the schedule is read from the port-value digest of a real run.
"""

from __future__ import annotations

import csv
import os
import pickle
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT, _dead_run_segment, build, run_in_folder, run_program

from rl_algos.config import ConfigError
from rl_algos.device_weights import DeviceWeights, export_device_weights
from rl_algos.envs import EnvStep, Episode
from rl_algos.groups import RolloutJoin, check_env_groups, turn_delay
from rl_algos.networks import Weights, actor_critic
from rl_algos.ppo import ActRecord, PPOActor

MSEC = 1_000_000
FIXTURES = ROOT / "tests" / "pipelined_fixtures"
#: a budget of a few seconds: 8 environments, updates of 8 steps (64 transitions)
TINY = ("--max_steps", "1600", "--num_steps", "8", "--minibatch_size", "32", "--update_epochs", "2")


@pytest.fixture(scope="module")
def cartpole(tmp_path_factory) -> Path:
    """CartPolePPO built with 4 members of 2 environments."""
    out = tmp_path_factory.mktemp("cartpole")
    defines = ("-D", "members=4", "-D", "envs_per_member=2")
    return build(ROOT / "lf_src" / "CartPolePPO.lf", out, *defines)


def run(launcher: Path, cwd: Path, *args: str) -> Path:
    """The run directory of ``launcher`` run in ``cwd`` with ``args`` (it stops at its budget)."""
    proc, run_dir = run_in_folder(launcher, cwd, *TINY, *args, timeout=120)
    assert proc.returncode == 1 and "stopped at its step budget" in proc.stderr, proc.stderr[-2000:]
    return run_dir


def update_steps(run_dir: Path) -> list[int]:
    """The environment steps at which the learner updated (losses.csv)."""
    with open(run_dir / "losses.csv", newline="") as f:
        return sorted({int(r["step"]) for r in csv.DictReader(f)})


def present_at(digest: str, pattern: str) -> dict[int, set[int]]:
    """Tag (ms) -> the indices ``i`` of the ports matching ``pattern`` (with a group ``(\\d+)``)
    present at that tag, from a digest's ``time microstep port hash`` lines."""
    out: dict[int, set[int]] = defaultdict(set)
    for line in digest.splitlines():
        time, _micro, port, _hash = line.split(" ", 3)
        m = re.fullmatch(pattern, port)
        if m:
            out[int(time) // MSEC].add(int(m.group(1)))
    return out


# ---------------------------------------------------------------------------- the schedule


@pytest.mark.parametrize("groups", [2, 4])
def test_groups_step_in_turn(cartpole, tmp_path, groups):
    digest = tmp_path / "run.digest"
    proc = run_program(
        cartpole, "--env_groups", str(groups), *TINY[2:], "--max_steps", "400",
        "--digest", str(digest), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    text = digest.read_text()
    steps = present_at(text, r"CartPolePPO\.envs\[(\d+)\]\.out")
    acts = present_at(text, r"CartPolePPO\.policy\.action\[(\d+)\]")
    members = range(4)
    assert steps[0] == set(members)  # every environment's reset
    last = max(steps)
    assert last >= 4 * groups
    for j in range(1, last + 1):
        assert steps[j] == {m for m in members if m % groups == (j - 1) % groups}, j
    for j in range(last):
        assert acts[j] == {m for m in members if m % groups == j % groups}, j


def test_turn_delay():
    # group g acts at the tags j ms with j % groups == g
    assert [turn_delay(g, 2, 0, MSEC) for g in (0, 1)] == [0, MSEC]
    assert [turn_delay(g, 3, 0, MSEC) for g in (0, 1, 2)] == [0, MSEC, 2 * MSEC]
    assert turn_delay(0, 2, 3 * MSEC, MSEC) == MSEC
    assert turn_delay(1, 2, 3 * MSEC, MSEC) == 0
    assert turn_delay(2, 3, 3 * MSEC, MSEC) == 2 * MSEC
    assert turn_delay(0, 1, 7 * MSEC, MSEC) == 0
    with pytest.raises(ValueError, match="not a multiple of the step period"):
        turn_delay(0, 2, MSEC // 2, MSEC)


def step_of(member: int, k: int, envs: int = 2) -> EnvStep:
    """The k-th EnvStep of ``member``: observations (envs, 3) telling both apart."""
    obs = np.full((envs, 3), 10 * member + k, np.float32)
    z = np.zeros(envs, bool)
    eps = [Episode(1, float(k), k)] if k else []
    return EnvStep(obs, np.full(envs, k, np.float32), z, z.copy(), None, eps, k * envs)


def record_of(members: list[int], k: int, envs: int = 2) -> ActRecord:
    """The policy's record of its actions for ``members`` (rows in member order) before step k."""
    ids = np.repeat(np.array(members, np.int64) * 100 + k, envs)
    return ActRecord(ids, ids.astype(np.float32), -ids.astype(np.float32))


def test_join_gives_whole_steps_in_member_order():
    join = RolloutJoin(4)
    assert len(join.add(range(4), [step_of(m, 0) for m in range(4)], None)) == 1
    for k in (1, 2):
        first = join.add([0, 2], [step_of(0, k), step_of(2, k)], record_of([0, 2], k))
        assert first == []  # group 1 has not stepped yet
        (whole,) = join.add([1, 3], [step_of(1, k), step_of(3, k)], record_of([1, 3], k))
        steps, rec = whole
        assert [s.obs[0, 0] for s in steps] == [10 * m + k for m in range(4)]
        assert rec.actions.tolist() == [100 * m + k for m in range(4) for _ in range(2)]
        assert rec.logp.tolist() == rec.actions.tolist()
        assert rec.values.tolist() == (-rec.actions).tolist()
    assert join.waiting == 0
    with pytest.raises(RuntimeError, match="3 actions for 4 environments"):
        three = ActRecord(np.zeros(3, np.int64), np.zeros(3, np.float32), np.zeros(3, np.float32))
        join.add([0, 2], [step_of(0, 3), step_of(2, 3)], three)


def test_one_group_passes_steps_through():
    join = RolloutJoin(2)
    steps, rec = [step_of(0, 1), step_of(1, 1)], record_of([0, 1], 1)
    ((got_steps, got_rec),) = join.add([0, 1], steps, rec)
    assert got_steps == steps and got_rec is rec


def test_bad_env_groups_values():
    assert check_env_groups(2, 4) == 2
    for value, why in ((0, "positive integer"), (-1, "positive"), (3, r"divide members \(4\)")):
        with pytest.raises(ConfigError, match=rf"env_groups = {value}: must .*{why}"):
            check_env_groups(value, 4)
    with pytest.raises(ConfigError, match="env_groups = True"):
        check_env_groups(True, 4)


@pytest.mark.parametrize("value, why", [("0", "a positive integer"), ("3", "divide members (4)")])
def test_bad_env_groups_refused_at_start(cartpole, tmp_path, value, why):
    r = run_program(cartpole, "--env_groups", value, "-w", "2", timeout=60)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert f"env_groups = {value}: must" in lines[0] and why in lines[0]
    assert "CartPolePPO.lf:" in lines[0] and "Traceback" not in r.stderr
    assert not [n for n in os.listdir("/dev/shm") if _dead_run_segment(n)]


# ---------------------------------------------------------------------------- whole runs


def test_pipelined_run_is_the_same_on_any_workers_and_backend(cartpole, tmp_path):
    dirs = [
        run(cartpole, tmp_path / name, "--env_groups", "2", *opts)
        for name, opts in (
            ("w1", ("-w", "1")),
            ("w2", ("-w", "2")),
            ("threads", ("-w", "2", "--backend", "threads")),
        )
    ]
    returns = [(d / "returns.csv").read_bytes() for d in dirs]
    assert returns[0].count(b"\n") > 20  # episodes were logged
    assert returns[1] == returns[0] and returns[2] == returns[0]
    losses = [(d / "losses.csv").read_bytes() for d in dirs]
    assert losses[1] == losses[0] and losses[2] == losses[0]
    # each episode logged once, when it ends: no environment has more episode steps than steps
    with open(dirs[0] / "returns.csv", newline="") as f:
        lengths = defaultdict(int)
        for row in csv.DictReader(f):
            lengths[int(row["env"])] += int(row["length"])
    assert sorted(lengths) == list(range(8)) and max(lengths.values()) <= 1600 // 8
    # complete rollouts: every update after 8 steps of all 8 environments
    assert update_steps(dirs[0]) == [64 * i for i in range(1, 1600 // 64 + 1)]
    sync = run(cartpole, tmp_path / "sync", "--env_groups", "1")
    assert (sync / "returns.csv").read_bytes() != returns[0]  # a different run


def test_one_group_is_the_program_without_groups(tmp_path):
    args = ("-D", "members=4", "-D", "envs_per_member=2")
    plain = build(FIXTURES / "SyncCartPolePPO.lf", tmp_path / "plain", *args)
    groups = build(ROOT / "lf_src" / "CartPolePPO.lf", tmp_path / "groups", *args)
    a = run(plain, tmp_path / "a", "--seed", "2")
    b = run(groups, tmp_path / "b", "--seed", "2", "--env_groups", "1")
    assert (a / "returns.csv").read_bytes() == (b / "returns.csv").read_bytes()
    assert (a / "losses.csv").read_bytes() == (b / "losses.csv").read_bytes()


# ---------------------------------------------------------------------------- weights


def gaussian_net(seed: int) -> torch.nn.Module:
    """A small Gaussian actor-critic (it acts in torch, not numpy, on the CPU)."""
    import gymnasium as gym

    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    g = torch.Generator().manual_seed(seed)
    return actor_critic((3,), space, (8,), "tanh", g)


def test_device_weights_reach_the_policy_without_the_host():
    learner_net = gaussian_net(1)
    actor = PPOActor(np.random.default_rng(0), device="cpu")
    actor.load(export_device_weights(gaussian_net(2), 0))  # builds the actor's network
    w = export_device_weights(learner_net, 1)
    actor.load(w)
    assert "state" not in w.__dict__  # no host copy was made
    for name, value in learner_net.state_dict().items():
        assert torch.equal(actor.net.state_dict()[name], value), name
    with torch.no_grad():  # the weights are a copy: the learner's next step leaves them
        next(learner_net.parameters()).add_(1.0)
    assert not torch.equal(next(actor.net.parameters()), next(learner_net.parameters()))
    # to another worker, into a snapshot: plain Weights with numpy state
    plain = pickle.loads(pickle.dumps(w))
    assert type(plain) is Weights and plain.version == 1
    assert isinstance(w, DeviceWeights) and plain.state.keys() == w.tensors.keys()
    for name, t in w.tensors.items():
        assert np.array_equal(plain.state[name], t.numpy()), name


@pytest.mark.slow  # a resume of a run with groups; make test resumes runs without (test_rl_resume)
def test_killed_pipelined_run_resumes(tmp_path):
    # the policy's held observations (pending turns) and the learner's joined steps are saved
    from test_rl_resume import PPO, TWO, assert_killed_run_resumes

    assert_killed_run_resumes("CartPolePPO", (*PPO, "--env_groups", "2"), TWO, 5, tmp_path)
