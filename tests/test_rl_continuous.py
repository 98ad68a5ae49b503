"""Continuous control: the Gaussian policy of PPO, running observation/reward normalisation,
``GymEnv``'s ``gym.make`` keyword arguments and wrappers, and the PendulumPPO program (a short
run, the same on one and two workers, evaluated by ``lf-rl eval``)."""

from __future__ import annotations

import json
import math
import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, build, lf_rl_eval, run_in_folder, run_program

torch = pytest.importorskip("torch")
gym = pytest.importorskip("gymnasium")

from rl_algos.envs import EnvGroup, EnvStep, make_env, wrap, wrapper_names  # noqa: E402
from rl_algos.evaluate import load_policy  # noqa: E402
from rl_algos.networks import (  # noqa: E402
    ActorCritic,
    GaussianActorCritic,
    actor_critic,
    export_weights,
    load_weights,
)
from rl_algos.normalize import ObsStats, RunningMeanStd, StepNormalizer  # noqa: E402
from rl_algos.ppo import (  # noqa: E402
    PPOActor,
    PPOConfig,
    PPOLearner,
    gaussian_logp_entropy,
    sample_gaussian,
)

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)  # 0.9189385...


# --------------------------------------------------------------------------- Gaussian policy


def test_gaussian_logp_and_entropy_by_hand_and_against_torch():
    mean = torch.tensor([[0.0, 1.0]])
    log_std = torch.tensor([[0.0, math.log(2.0)]])
    action = torch.tensor([[1.0, 0.0]])
    logp, entropy = gaussian_logp_entropy(mean, log_std, action)
    # N(0, 1) at 1: -1/2 - log sqrt(2 pi); N(1, 2^2) at 0: -(1/2)^2/2 - log 2 - log sqrt(2 pi)
    by_hand = (-0.5 - LOG_SQRT_2PI) + (-0.125 - math.log(2.0) - LOG_SQRT_2PI)
    assert logp.item() == pytest.approx(by_hand, abs=1e-6)  # -3.1560242
    # entropy of N(m, s^2) is 1/2 + log sqrt(2 pi) + log s, per dimension
    assert entropy.item() == pytest.approx(2 * (0.5 + LOG_SQRT_2PI) + math.log(2.0), abs=1e-6)
    dist = torch.distributions.Normal(mean, log_std.exp())
    assert logp.item() == pytest.approx(dist.log_prob(action).sum().item(), abs=1e-6)
    assert entropy.item() == pytest.approx(dist.entropy().sum().item(), abs=1e-6)


def test_gaussian_log_std_broadcasts_over_the_batch():
    g = torch.Generator().manual_seed(0)
    mean, actions = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    log_std = torch.tensor([[-0.5, 0.0, 0.3]])
    logp, entropy = gaussian_logp_entropy(mean, log_std, actions)
    dist = torch.distributions.Normal(mean, log_std.exp().expand(5, 3))
    assert torch.allclose(logp, dist.log_prob(actions).sum(-1), atol=1e-5)
    assert torch.allclose(entropy, dist.entropy().sum(-1), atol=1e-6) and entropy.shape == (5,)


def test_sampling_is_seeded_and_scaled_by_the_std():
    mean, log_std = torch.zeros(20000, 1), torch.full((1, 1), math.log(0.5))
    a1, logp1 = sample_gaussian(mean, log_std, np.random.default_rng(3))
    a2, logp2 = sample_gaussian(mean, log_std, np.random.default_rng(3))
    assert a1.dtype == np.float32 and a1.shape == (20000, 1) and logp1.shape == (20000,)
    assert np.array_equal(a1, a2) and np.array_equal(logp1, logp2)
    assert a1.std() == pytest.approx(0.5, rel=0.03)
    ref = torch.distributions.Normal(0.0, 0.5).log_prob(torch.from_numpy(a1[:, 0]))
    assert np.allclose(logp1, ref.numpy(), atol=1e-5)


def test_the_action_space_picks_the_head():
    obs = (3,)
    box = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
    net = actor_critic(obs, box, (64, 64), "tanh", torch.Generator().manual_seed(1))
    assert isinstance(net, GaussianActorCritic) and net.spec["action_dim"] == 2
    assert torch.equal(net.log_std, torch.zeros(1, 2))  # std 1 at the start
    mean, value = net(torch.zeros(4, 3))
    assert mean.shape == (4, 2) and value.shape == (4,)
    disc = actor_critic(
        obs, gym.spaces.Discrete(2), (64, 64), "tanh", torch.Generator().manual_seed(1)
    )
    same = ActorCritic(obs, 2, (64, 64), "tanh", generator=torch.Generator().manual_seed(1))
    assert all(
        torch.equal(a, b) for a, b in zip(disc.state_dict().values(), same.state_dict().values())
    )
    with pytest.raises(TypeError, match="MultiBinary"):
        actor_critic(obs, gym.spaces.MultiBinary(2), (64,), "tanh", torch.Generator())
    w = export_weights(net, "gaussian_actor_critic")
    copy = load_weights(w)
    assert isinstance(copy, GaussianActorCritic) and torch.equal(
        copy(torch.ones(1, 3))[0], net(torch.ones(1, 3))[0]
    )


def test_continuous_learner_updates_and_saves_its_scaling():
    """A few tags of Pendulum through the actor and the learner: float actions stored, an
    update made, the checkpoint names the Gaussian kind and keeps the observation scaling."""
    group = EnvGroup("Pendulum-v1", 2, np.random.default_rng(0))
    cfg = PPOConfig(num_steps=4, minibatch_size=4, update_epochs=2, device="cpu")
    learner = PPOLearner(
        cfg, group.observation_space, group.action_space, np.random.default_rng(1), 7
    )
    actor = PPOActor(np.random.default_rng(2))
    actor.load(learner.weights())
    norm = StepNormalizer(gamma=cfg.gamma)
    raw, record, new = [group.reset()], None, None
    for _ in range(cfg.num_steps + 1):
        steps = norm(raw)
        learner.obs_stats = norm.obs_stats()
        new = learner.observe(steps, record) or new
        record = actor.act(steps[0].obs)
        assert record.actions.shape == (2, 1) and record.actions.dtype == np.float32
        raw = [group.step(record.actions)]
    assert new is not None and new.kind == "gaussian_actor_critic" and learner.updates == 1
    assert set(learner.stats) == {"pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac"}
    ckpt = learner.checkpoint()
    assert ckpt["kind"] == "gaussian_actor_critic"
    assert ObsStats.from_dict(ckpt["obs_norm"]).count == pytest.approx(2 * 5, abs=1e-3)


# --------------------------------------------------------------------------- normalisation


def test_running_moments_merge_batches_like_one_pass():
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(1000, 2))
    rms = RunningMeanStd((2,))
    for part in np.array_split(data, 7):
        rms.update(part)
    # the prior is 1e-4 of a value at mean 0, variance 1: negligible against 1000 values
    assert np.allclose(rms.mean, data.mean(0), rtol=1e-6)
    assert np.allclose(rms.var, data.var(0), rtol=1e-6)
    assert rms.count == pytest.approx(1000 + 1e-4)
    rms.update(np.zeros((0, 2)))  # an empty batch changes nothing
    assert rms.count == pytest.approx(1000 + 1e-4)


def test_observation_scaling_is_shifted_scaled_and_clipped():
    stats = ObsStats(np.array([1.0, -2.0]), np.array([4.0, 0.25]), 10.0, clip=5.0, epsilon=0.0)
    out = stats.apply(np.array([[3.0, -2.0], [1.0, 100.0]], np.float32))
    assert out.dtype == np.float32
    assert np.allclose(out, [[1.0, 0.0], [0.0, 5.0]])  # (3-1)/2; (-2+2)/0.5; clipped at 5


def test_scaling_survives_torch_load_with_weights_only(tmp_path):
    stats = ObsStats(np.array([0.5, 1.5]), np.array([2.0, 3.0]), 42.0)
    torch.save({"obs_norm": stats.to_dict()}, tmp_path / "m.pt")
    back = ObsStats.from_dict(torch.load(tmp_path / "m.pt", weights_only=True)["obs_norm"])
    assert np.array_equal(back.mean, stats.mean) and back.count == 42.0 and back.clip == 10.0


def step(obs, reward, done=(False,), steps=1, episodes=()):
    z = np.zeros(len(obs), bool)
    return EnvStep(
        np.asarray(obs, np.float32),
        np.asarray(reward, np.float32),
        np.asarray(done, bool),
        z,
        None,
        list(episodes),
        steps,
    )


def test_rewards_are_divided_by_the_spread_of_the_discounted_return():
    norm = StepNormalizer(obs=False, gamma=0.5, clip_reward=1e6, epsilon=0.0)
    first = norm([step([[0.0]], [0.0], steps=0)])[0]  # the reset report: not counted
    assert norm.ret_rms.count == pytest.approx(1e-4) and first.reward[0] == 0.0
    r1 = norm([step([[0.0]], [2.0], done=[True])])[0].reward[0]
    r2 = norm([step([[0.0]], [4.0])])[0].reward[0]
    # returns seen: 2, then 4 (the episode ended, so 2 was not carried over)
    rms = RunningMeanStd()
    rms.update(np.array([2.0]))
    assert r1 == pytest.approx(2.0 / math.sqrt(rms.var))
    rms.update(np.array([4.0]))
    assert r2 == pytest.approx(4.0 / math.sqrt(rms.var))
    carry = StepNormalizer(obs=False, gamma=0.5, epsilon=0.0)
    carry([step([[0.0]], [2.0])])
    carry([step([[0.0]], [4.0])])
    assert carry.returns[0] == pytest.approx(0.5 * 2.0 + 4.0)


def test_one_set_of_statistics_for_the_whole_bank():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 3))
    ep = [object()]
    bank = StepNormalizer(reward=False)
    out = bank([step(a, [1.0, 1.0], [False] * 2, episodes=ep), step(b, [0.0] * 3, [False] * 3)])
    whole = StepNormalizer(reward=False)
    joined = whole([step(np.concatenate([a, b]), [1.0, 1.0, 0, 0, 0], [False] * 5)])[0]
    assert np.array_equal(np.concatenate([o.obs for o in out]), joined.obs)
    assert out[0].episodes == ep and [len(o.obs) for o in out] == [2, 3]
    assert np.array_equal(out[0].reward, [1.0, 1.0])  # rewards left alone
    again = pickle.loads(pickle.dumps(bank))  # a snapshot keeps the statistics
    assert np.array_equal(again.obs_rms.mean, bank.obs_rms.mean)


# --------------------------------------------------------------------------- GymEnv options


def test_make_kwargs_reach_the_environment():
    assert make_env("Pendulum-v1", g=9.81).unwrapped.g == 9.81
    with pytest.raises(ValueError, match="gymnasium.make\\('Pendulum-v1'.*'gravity'"):
        make_env("Pendulum-v1", gravity=1.0)


def test_wrappers_by_name_and_with_arguments():
    wrappers = [
        "ClipAction",
        ("TimeLimit", {"max_episode_steps": 5}),
        ["ClipReward", {"min_reward": -0.25, "max_reward": 0.0}],
    ]
    group = EnvGroup("Pendulum-v1", 2, np.random.default_rng(0), wrappers)
    group.reset()
    steps = [group.step(np.full((2, 1), 2.0, np.float32)) for _ in range(5)]
    assert [e.length for e in steps[-1].episodes] == [5, 5]
    assert not any(s.episodes for s in steps[:-1])
    rewards = np.concatenate([s.reward for s in steps])
    assert rewards.min() == -0.25 and rewards.max() <= 0.0  # Pendulum's go down to -16


def test_unknown_or_malformed_wrappers_are_clear_errors():
    env = make_env("Pendulum-v1")
    with pytest.raises(ValueError, match="unknown wrapper 'NoSuchWrapper'.*valid: .*ClipAction"):
        wrap(env, ["NoSuchWrapper"])
    with pytest.raises(ValueError, match="unknown wrapper 'EnvGroup'"):
        wrap(env, ["EnvGroup"])  # not in gymnasium.wrappers
    with pytest.raises(ValueError, match="a wrapper is a name or a \\(name, kwargs\\) pair"):
        wrap(env, [("TimeLimit", 5)])
    with pytest.raises(ValueError, match="wrapper TimeLimit.*steps"):
        wrap(env, [("TimeLimit", {"steps": 5})])
    assert "NormalizeObservation" in wrapper_names() and "vector" not in wrapper_names()


def test_box_actions_are_clipped_when_sent_to_the_environment():
    group = EnvGroup("Pendulum-v1", 2, np.random.default_rng(0))
    group.reset()
    sent = []
    for env in group.envs:
        inner = env.step
        env.step = lambda a, inner=inner: (sent.append(np.array(a)), inner(a))[1]
    group.step(np.array([[5.0], [-0.5]], np.float32))
    assert [float(a[0]) for a in sent] == [2.0, -0.5]


# --------------------------------------------------------------------------- the program


def run_in(launcher: Path, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    proc, run_dir = run_in_folder(launcher, cwd, "--digest", "run.digest", *args, timeout=150)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc, run_dir


def test_pendulum_ppo_is_deterministic_and_evaluates(tmp_path):
    """4 Pendulums of 25-step episodes (a gym.make argument) for 500 steps, 3 updates: the
    same digest and returns on 1 and 2 workers; the model keeps the observation scaling;
    lf-rl eval plays it in the environment the run was made with."""
    launcher = build(ROOT / "lf_src" / "PendulumPPO.lf", tmp_path / "out")
    args = ("--envs_per_member", "2", "--target_return", "-100000.0", "--num_steps", "32")
    args += ("--make_kwargs", '{= {"max_episode_steps": 25} =}')
    (p1, d1), (p2, d2) = (run_in(launcher, tmp_path / f"w{w}", "-w", str(w), *args) for w in (1, 2))
    assert "reached mean return -100000 over the last 20 episodes" in p1.stdout
    assert "500 environment steps" in p1.stdout
    digests = [(tmp_path / f"w{w}" / "run.digest").read_text() for w in (1, 2)]
    assert digests[0] == digests[1] and "weights" in digests[0]
    assert (d1 / "returns.csv").read_bytes() == (d2 / "returns.csv").read_bytes()
    config = json.loads((d1 / "config.json").read_text())
    assert config["parameters"]["make_kwargs"] == {"max_episode_steps": 25}
    net, env_id, scaling = load_policy(str(d1 / "model.pt"))
    assert isinstance(net, GaussianActorCritic) and env_id == "Pendulum-v1"
    assert scaling is not None and scaling.count == pytest.approx(500 + 4, abs=1e-3)
    r = lf_rl_eval(d1, "--episodes", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Pendulum-v1: mean return ") and "over 2 episodes" in r.stdout
    result = json.loads((d1 / "eval.json").read_text())[-1]  # the newest evaluation
    assert result["lengths"] == [25, 25] and all(-500 < x <= 0 for x in result["returns"])


def test_normalisation_statistics_survive_a_resume(tmp_path):
    """NormalizedPendulum (tests/rl_fixtures): a run resumed on two workers from a snapshot
    taken on one continues the normalised steps and the scaling bit for bit."""
    launcher = build(ROOT / "tests" / "rl_fixtures" / "NormalizedPendulum.lf", tmp_path)
    full = tmp_path / "full.digest"
    snaps = tmp_path / "snaps"
    args = ("--checkpoint-every-tags", "20", "--checkpoint-dir", str(snaps))
    r = run_program(launcher, "--digest", str(full), "-w", "1", *args)
    assert r.returncode == 0, r.stderr[-3000:]
    first = sorted(snaps.glob("*.lfsnap"))[0]
    resumed = tmp_path / "resumed.digest"
    r = run_program(launcher, "--digest", str(resumed), "--resume", str(first), "-w", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    after = resumed.read_text().splitlines()
    start = tuple(map(int, after[0].split()[:2]))
    assert start[0] >= 20_000_000  # the snapshot's tag (ms of logical time), not the start
    expected = [
        ln for ln in full.read_text().splitlines() if tuple(map(int, ln.split()[:2])) >= start
    ]
    assert after == expected and any(".norm.stats " in ln for ln in after)
