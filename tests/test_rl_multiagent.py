"""Multi-agent RL: PettingZoo parallel environments as reactors (lf_src/lib/MultiAgent.lf,
rl_algos/multiagent_env.py), MAPPO and independent PPO (rl_algos/mappo.py), and the programs
lf_src/SpreadMAPPO.lf and lf_src/JunctionPPO.lf.

The adapter is tested on a tiny fake environment whose agents come and go
(tests/multiagent_fixtures/fake_agents.py); the programs run on short budgets: the same
returns.csv on one worker, two worker processes and two worker threads, a learning run that
must beat random actions by a stated margin, and a run killed after a checkpoint that ends,
resumed, as the uninterrupted run.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT, build, run_in_folder
from test_rl_resume import finish, kill_after, run_dir_in, start

from rl_algos.config import ConfigError, make_config
from rl_algos.mappo import (
    MAPPOActor,
    MAPPOConfig,
    MAPPOLearner,
    MultiAgentActorCritic,
    agent_rows,
)
from rl_algos.multiagent_env import ParallelEnvGroup, make_parallel_env, random_returns

LF_SRC = ROOT / "lf_src"
FIXTURES = ROOT / "tests" / "multiagent_fixtures"
#: Team return of uniformly random actions, 3 agents, 25 steps: -79.3 (4,000 episodes, standard
#: error 0.4; random_returns("mpe2.simple_spread_v3", 100000, N=3, max_cycles=25))
SPREAD_RANDOM = -79.3
#: The same for the junction's 10 cars, 40 steps: -824 (5,000 episodes, standard error 3)
JUNCTION_RANDOM = -824.0


@pytest.fixture
def fake(monkeypatch) -> None:
    """The fake environment's module importable as ``fake_agents``."""
    monkeypatch.syspath_prepend(str(FIXTURES))


def group_of_fakes(k: int = 2) -> ParallelEnvGroup:
    return ParallelEnvGroup("fake_agents", k, np.random.default_rng(0))


# ------------------------------------------------------------------------ the adapter


def test_slots_observations_and_mask_after_reset(fake):
    group = group_of_fakes()
    assert group.spaces.agents == ("a", "b", "c")
    assert (group.spaces.obs_dim, group.spaces.n_actions) == (2, 3)
    first = group.reset()
    assert first.obs.shape == (2, 3, 2) and first.mask.shape == (2, 3)
    assert first.mask[0].tolist() == [True, True, False]  # c joins later
    assert first.obs[0].tolist() == [[0, 0], [10, 0], [0, 0]]  # b's one value padded
    # no state() of its own: every slot's observation and the mask
    assert first.state[0].tolist() == [0, 0, 10, 0, 0, 0, 1, 1, 0]


def test_agents_come_and_go_as_masked_rows(fake):
    group = group_of_fakes()
    group.reset()
    joined = group.step(np.full((2, 3), 1))
    assert joined.mask[0].tolist() == [True, True, True]
    assert joined.reward[0].tolist() == [1, 2, 0]  # c did not act yet
    left = group.step(np.full((2, 3), 2))
    assert left.terminated[0].tolist() == [False, True, False]
    assert left.mask[0].tolist() == [True, False, True]
    assert left.obs[0, 1].tolist() == [0, 0]  # an absent slot's observation is zero
    assert left.final_obs is not None and left.final_obs[0, 1].tolist() == [12, 0]
    after = group.step(np.full((2, 3), 3))
    assert after.reward[0].tolist() == [1, 0, 3] and not after.done[0].any()
    received = [sorted(actions) for actions in group.envs[0].received]
    assert received == [["a", "b"], ["a", "b", "c"], ["a", "c"]]  # absent slots' are not sent


def test_episode_ends_with_the_team_return_and_a_reset(fake):
    group = group_of_fakes()
    group.reset()
    steps = [group.step(np.zeros((2, 3), int)) for _ in range(4)]
    last = steps[-1]
    assert last.truncated[0].tolist() == [True, False, True]
    assert last.final_obs is not None and last.final_obs[0, 2].tolist() == [24, 4]
    # every agent's rewards summed: 1+2, 1+2+3, 1+3, 1+3
    assert [(e.env, e.ret, e.length) for e in last.episodes] == [(0, 17.0, 4), (1, 17.0, 4)]
    assert last.mask[0].tolist() == [True, True, False]  # the new episode's agents
    assert last.steps == 8 and all(not s.episodes for s in steps[:-1])


def test_bad_environments_are_one_line_errors(fake):
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'"):
        make_parallel_env("no_such_module")
    with pytest.raises(ValueError, match=r"has no function parallel_env\(\)"):
        make_parallel_env("rl_algos.gae")
    with pytest.raises(ValueError, match="refused its arguments"):
        make_parallel_env("fake_agents", speed=3)
    with pytest.raises(ValueError, match="needs k >= 1"):
        ParallelEnvGroup("fake_agents", 0, np.random.default_rng(0))


def test_random_baseline_of_the_fake_environment(fake):
    assert random_returns("fake_agents", 80, k=2) == [17.0] * 20


def test_a_snapshot_of_the_group_steps_on_alike():
    """PettingZoo's particle environments pickle as their constructor's arguments only; the
    group saves their world and generators itself."""
    import pickle

    kwargs = dict(N=3, max_cycles=25, continuous_actions=False)
    group = ParallelEnvGroup("mpe2.simple_spread_v3", 2, np.random.default_rng(0), **kwargs)
    group.reset()
    rng = np.random.default_rng(1)
    for _ in range(30):
        group.step(rng.integers(0, 5, (2, 3)))
    copy = pickle.loads(pickle.dumps(group))
    for _ in range(30):
        actions = rng.integers(0, 5, (2, 3))
        ours, theirs = group.step(actions), copy.step(actions)
        assert np.array_equal(ours.obs, theirs.obs) and ours.episodes == theirs.episodes


# ------------------------------------------------------------------------ the networks

D, N, S = 4, 3, 7  # observation, agents, state


def rows_of(e: int = 2, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((e, N, D)).astype(np.float32)
    return agent_rows(obs, rng.standard_normal((e, S)).astype(np.float32))


def net_of(**kwargs) -> MultiAgentActorCritic:
    return MultiAgentActorCritic(
        D, N, S, 5, (16,), generator=torch.Generator().manual_seed(1), **kwargs
    )


def test_rows_hold_observation_id_and_state():
    obs = np.arange(2 * N * D, dtype=np.float32).reshape(2, N, D)
    state = -np.arange(2 * S, dtype=np.float32).reshape(2, S)
    rows = agent_rows(obs, state)
    assert rows.shape == (2 * N, D + N + S) and rows.dtype == np.float32
    assert rows[4].tolist() == [*obs[1, 1], 0, 1, 0, *state[1]]  # env 1, slot 1


def test_centralised_critic_reads_the_global_state_and_ids():
    net = net_of(centralised=True)
    assert net.actors[0][0].weight.shape == (16, D + N)  # own observation and id
    assert net.critics[0][0].weight.shape == (16, N + S)  # id and global state
    rows = torch.from_numpy(rows_of())
    other = rows.clone()
    other[:, D + N :] += 1.0  # another state
    (logits, values), (logits2, values2) = net(rows), net(other)
    assert values.shape == (2 * N,) and logits.shape == (2 * N, 5)
    assert torch.equal(logits, logits2) and not torch.allclose(values, values2)


def test_local_critic_reads_only_the_agents_own_input():
    net = net_of(centralised=False)
    assert net.critics[0][0].weight.shape == (16, D + N)
    rows = torch.from_numpy(rows_of())
    other = rows.clone()
    other[:, D + N :] += 1.0
    assert torch.equal(net(rows)[1], net(other)[1])


def test_unshared_networks_route_each_row_to_its_agents():
    net = net_of(share=False)
    assert len(net.actors) == N and len(net.critics) == N
    rows = torch.from_numpy(rows_of())
    logits, values = net(rows)
    for r in range(len(rows)):
        agent = r % N
        own = net.actors[agent](rows[r : r + 1, : D + N])
        assert torch.allclose(logits[r], own[0], atol=1e-6)
        assert torch.allclose(values[r], net.critics[agent](rows[r : r + 1, D:])[0, 0], atol=1e-6)


def test_config_refuses_unknown_critics_and_a_policy_lag(fake):
    spaces = group_of_fakes().spaces
    for bad, message in ((dict(critic="global"), "critic must be one of"),
                         (dict(policy_lag=1), "policy_lag must be 0")):  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            MAPPOLearner(make_config(MAPPOConfig, bad), spaces, np.random.default_rng(0), 1)


def test_learner_updates_on_live_rows_only(fake):
    group = group_of_fakes()
    cfg = make_config(MAPPOConfig, dict(num_steps=4, hidden=(8,)))
    learner = MAPPOLearner(cfg, group.spaces, np.random.default_rng(0), 1)
    actor = MAPPOActor(np.random.default_rng(1))
    actor.load(learner.weights())
    sizes = []
    update_on = learner.ppo.update_on
    learner.ppo.update_on = lambda b, adv, *rest: sizes.append(len(adv)) or update_on(b, adv, *rest)
    step, record = group.reset(), None
    for _ in range(5):
        if learner.observe([step], record) is not None:
            break
        record = actor.act(step)
        step = group.step(record.actions.reshape(2, 3))
    # live slots at the 4 steps of each environment: a b, a b c, a c, a c
    assert sizes == [2 * 9] and learner.updates == 1
    dones = learner.buf["dones"].reshape(4, 2, 3)[:, 0]
    assert dones.tolist() == [
        [False, False, True],  # c absent: padding
        [False, True, False],  # b terminated
        [False, True, False],  # b gone
        [True, True, True],  # a and c truncated at the episode's end
    ]


# ------------------------------------------------------------------------ the programs


def launcher_of(tmp_path_factory, name: str) -> Path:
    return build(LF_SRC / f"{name}.lf", tmp_path_factory.mktemp(name))


@pytest.fixture(scope="module")
def spread(tmp_path_factory) -> Path:
    return launcher_of(tmp_path_factory, "SpreadMAPPO")


def mean_of_last(run_dir: Path, n: int = 100) -> float:
    with open(run_dir / "returns.csv", newline="") as f:
        returns = [float(r["return"]) for r in csv.DictReader(f)]
    assert len(returns) >= n
    return sum(returns[-n:]) / n


SHORT = ("--max_steps", "1600", "--num_steps", "10")


@pytest.mark.slow  # make test compares SpreadMAPPO's port values on any workers (test_determinism)
def test_spread_gives_the_same_files_on_any_workers(spread, tmp_path):
    files = []
    for i, workers in enumerate((("-w", "1"), ("-w", "2"), ("-w", "2", "--backend", "threads"))):
        proc, run_dir = run_in_folder(spread, tmp_path / f"run{i}", *SHORT, *workers, timeout=120)
        assert proc.returncode == 1, proc.stderr[-2000:]  # the budget, not the target
        files.append(
            [(run_dir / f).read_bytes() for f in ("returns.csv", "losses.csv", "model.pt")]
        )
    assert files[0] == files[1] == files[2]


def test_spread_learns_beyond_random_actions(spread, tmp_path):
    """10,000 steps (~7 s): the mean team return of the last 100 episodes beats random
    actions' by 8 or more (seed 1 reaches -67.6, against -79.3)."""
    proc, run_dir = run_in_folder(spread, tmp_path / "run", "--max_steps", "10000", timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert mean_of_last(run_dir) >= SPREAD_RANDOM + 8
    assert {"config.json", "model.pt", "learning_curve.png"} <= {p.name for p in run_dir.iterdir()}
    assert torch.load(run_dir / "model.pt")["algo"] == "mappo"


@pytest.mark.slow
def test_spread_reaches_its_target(spread, tmp_path):
    proc, run_dir = run_in_folder(spread, tmp_path / "run", timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert mean_of_last(run_dir) >= -60


def test_junction_cars_learn_beyond_random_actions(tmp_path_factory, tmp_path):
    """8,000 steps (~6 s): 10 cars' mean team return beats random actions' by 200 or more
    (seed 1 reaches -529, against -824)."""
    launcher = launcher_of(tmp_path_factory, "JunctionPPO")
    proc, run_dir = run_in_folder(launcher, tmp_path / "run", "--max_steps", "8000", timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert mean_of_last(run_dir) >= JUNCTION_RANDOM + 200


def test_killed_spread_run_resumes_as_the_whole_run(spread, tmp_path):
    """Killed on two workers after its 2nd snapshot (every 20 tags), resumed on one: the
    same returns.csv, losses.csv and model.pt as the run that was not stopped."""
    args = (*SHORT, "--checkpoint_every", "2")
    whole_cwd = tmp_path / "whole"
    finish(start(spread, whole_cwd, *args, "-w", "1"), whole_cwd)
    whole = run_dir_in(whole_cwd, "SpreadMAPPO")
    cwd = tmp_path / "killed"
    kill_after(start(spread, cwd, *args, "-w", "2"), cwd, "SpreadMAPPO", 40, 0.01)
    run_dir = run_dir_in(cwd, "SpreadMAPPO")
    again = tmp_path / "resumed"
    finish(start(spread, again, "--resume", str(run_dir), "-w", "1"), again)
    for f in ("returns.csv", "losses.csv", "model.pt"):
        assert (run_dir / f).read_bytes() == (whole / f).read_bytes(), f
