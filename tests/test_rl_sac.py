"""Soft Actor-Critic (rl_algos/sac.py, lf_src/lib/SAC.lf, lf_src/PendulumSAC.lf): the squashed
Gaussian's log-probabilities against torch's distributions, the actor's warm-up and bounds,
the learner's updates (seeded, soft targets, the temperature), and a short PendulumSAC run:
the same on one and two workers, its model evaluated by ``lf-rl eval``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT, build, lf_rl_eval, run_in_folder

torch = pytest.importorskip("torch")
gym = pytest.importorskip("gymnasium")

from torch.distributions import Normal, TransformedDistribution  # noqa: E402
from torch.distributions.transforms import AffineTransform, TanhTransform  # noqa: E402

from rl_algos.evaluate import load_policy  # noqa: E402
from rl_algos.metrics import SAC_TAGS  # noqa: E402
from rl_algos.networks import SquashedGaussianActor, export_weights  # noqa: E402
from rl_algos.sac import SACActor, SACConfig, SACLearner  # noqa: E402

OBS = gym.spaces.Box(-8.0, 8.0, (3,), np.float32)
ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


def actor(seed: int = 0) -> SquashedGaussianActor:
    return SquashedGaussianActor(
        (3,), [-2.0, 0.0], [2.0, 1.0], (16,), generator=torch.Generator().manual_seed(seed)
    )


def test_squashed_samples_and_log_probabilities_match_torch():
    net = actor()
    obs, noise = torch.randn(5, 3), torch.randn(5, 2)
    a, logp = net.sample(obs, noise)
    mean, log_std = net(obs)
    dist = TransformedDistribution(
        Normal(mean, log_std.exp()), [TanhTransform(), AffineTransform(net.bias, net.scale)]
    )
    u = mean + log_std.exp() * noise
    assert torch.allclose(a, torch.tanh(u) * net.scale + net.bias)
    # ours adds 1e-6 inside the log of the Jacobian (as the paper's code), hence the tolerance
    assert torch.allclose(logp, dist.log_prob(a).sum(-1), atol=1e-3)
    assert ((a[:, 0] >= -2) & (a[:, 0] <= 2) & (a[:, 1] >= 0) & (a[:, 1] <= 1)).all()
    assert (log_std >= -5).all() and (log_std <= 2).all()


def test_the_actor_acts_uniformly_until_learning_starts_then_from_the_policy():
    weights = export_weights(actor(), "sac_actor")
    a = SACActor(np.random.default_rng(1), learning_starts=8, batch_size=99)  # others ignored
    with pytest.raises(RuntimeError, match="before any weights"):
        a.act(np.zeros((4, 3), np.float32))
    a.load(weights)
    warm = np.concatenate([a.act(np.zeros((4, 3), np.float32)).actions for _ in range(2)])
    expected = np.random.default_rng(1).uniform([-2, 0], [2, 1], size=(4, 2)).astype(np.float32)
    assert np.array_equal(warm[:4], expected)  # the reactor's generator, nothing else
    later = a.act(np.ones((4, 3), np.float32)).actions
    assert later.shape == (4, 2) and later.dtype == np.float32
    assert (np.abs(later[:, 0]) <= 2).all() and ((later[:, 1] >= 0) & (later[:, 1] <= 1)).all()
    b = SACActor(np.random.default_rng(1), learning_starts=8)
    b.load(weights)
    for _ in range(2):
        b.act(np.zeros((4, 3), np.float32))
    assert np.array_equal(b.act(np.ones((4, 3), np.float32)).actions, later)


def batch(rng: np.random.Generator, n: int = 32) -> dict:
    return {
        "obs": rng.standard_normal((n, 3)).astype(np.float32),
        "actions": rng.uniform([-2, 0], [2, 1], (n, 2)).astype(np.float32),
        "rewards": rng.standard_normal(n).astype(np.float32),
        "next_obs": rng.standard_normal((n, 3)).astype(np.float32),
        "dones": (rng.random(n) < 0.1).astype(np.float32),
    }


def test_learner_updates_are_seeded_and_move_targets_softly():
    cfg = SACConfig(hidden=(16, 16), device="cpu", tau=0.1)
    runs = []
    for _ in range(2):
        learner = SACLearner(cfg, OBS, ACT, torch_seed=7)
        rng = np.random.default_rng(3)
        before = [t.clone() for t in learner.targets[0].parameters()]
        online0 = [p.clone() for p in learner.qf[0].parameters()]
        stats = learner.update(batch(rng))
        after = list(learner.targets[0].parameters())
        for b0, a0, o0, o1 in zip(before, after, online0, learner.qf[0].parameters()):
            assert torch.allclose(a0, 0.9 * b0 + 0.1 * o1.detach())  # tau after the step
            assert not torch.equal(o0, o1.detach())
        for _ in range(3):
            stats = learner.update(batch(rng))
        runs.append((learner.weights(), stats, learner.alpha))
    (w1, s1, a1), (w2, s2, a2) = runs
    assert all(np.array_equal(w1.state[k], w2.state[k]) for k in w1.state)
    assert s1 == s2 and a1 == a2 != 0.2  # the temperature was tuned
    assert set(s1) == {
        "qf1_values", "qf2_values", "qf1_loss", "qf2_loss", "qf_loss", "actor_loss", "alpha",
        "alpha_loss",
    }  # fmt: skip
    with pytest.raises(TypeError, match="Box"):
        SACLearner(cfg, OBS, gym.spaces.Discrete(2), torch_seed=1)


def test_pendulum_sac_learns_logs_and_evaluates(tmp_path):
    """Two Pendulums of 25-step episodes (20 episodes in 500 steps), learning from step 100
    with small networks, on two workers: CleanRL's losses in losses.csv, the model's policy
    played by lf-rl eval (its mean action). The same port values on any worker count and
    backend: tests/test_determinism.py."""
    launcher = build(ROOT / "lf_src" / "PendulumSAC.lf", tmp_path / "out")
    args = ("--envs_per_member", "2", "--target_return", "-100000.0", "--max_steps", "600")
    args += ("--learning_starts", "100", "--batch_size", "32", "--hidden", "[16, 16]")
    args += ("--make_kwargs", '{= {"max_episode_steps": 25} =}')
    p1, d1 = run_in_folder(launcher, tmp_path / "w2", "-w", "2", *args)
    assert p1.returncode == 0, p1.stdout + p1.stderr[-3000:]
    assert "reached mean return -100000 over the last 20 episodes" in p1.stdout
    losses = (d1 / "losses.csv").read_text().splitlines()
    assert losses[0] == "step,tag,value" and len(losses) == 1 + 2 * 8  # at 100 and 200 updates
    assert {line.split(",")[1] for line in losses[1:]} == set(SAC_TAGS.values())
    net, env_id, _ = load_policy(str(d1 / "model.pt"))
    assert isinstance(net, SquashedGaussianActor) and env_id == "Pendulum-v1"
    r = lf_rl_eval(d1, "--episodes", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Pendulum-v1: mean return ") and "over 2 episodes" in r.stdout
    result = json.loads((d1 / "eval.json").read_text())[-1]  # the newest evaluation
    assert result["lengths"] == [25, 25]
