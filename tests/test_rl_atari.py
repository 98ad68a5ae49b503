"""AtariPPO (lf_src/AtariPPO.lf) built with the real lfc and run for a few hundred steps, and
where the PPO learner keeps its tensors.

The program runs on 1 and on 2 workers with the same seed: every port value at every tag
(`--digest`), returns.csv, losses.csv and the model's weights must be identical. Pong's
episodes last about 900 steps, too long for a test, so the runs play Breakout (run-time
`--env_id`), whose random episodes end within 130 to 280 steps. These tests need ale-py and
OpenCV (`pip install -e '.[atari]'`) and are skipped without them.

The learner tests feed synthetic 84x84 frames straight to rl_algos.ppo.PPOLearner: its
network, optimiser state and rollout batch live on the device it chose (the CUDA case runs
only where `torch.cuda.is_available()`), and the rollout reaches the device in one
host-to-device copy per update, frames still uint8.
"""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import ROOT, build, run_in_folder

from rl_algos import ppo
from rl_algos.envs import EnvGroup, EnvStep
from rl_algos.ppo import ActRecord, PPOConfig, PPOLearner

PROGRAM = ROOT / "lf_src" / "AtariPPO.lf"
#: a few hundred steps of two Breakout games, an update every 16 steps of each
TINY = (
    "--env_id", "ALE/Breakout-v5", "--envs_per_member", "1", "--max_steps", "400",
    "--num_steps", "16", "--minibatch_size", "16", "--update_epochs", "2",
)  # fmt: skip


def needs_atari() -> None:
    missing = [m for m in ("ale_py", "cv2") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed: pip install -e '.[atari]'")


def run_atari(launcher: Path, cwd: Path, workers: int) -> tuple[subprocess.CompletedProcess, Path]:
    """Run the tiny configuration on ``workers`` workers in ``cwd``; (process, run dir)."""
    return run_in_folder(launcher, cwd, "-w", str(workers), "--digest", "digest.txt", *TINY)


def weights_of(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(run_dir / "model.pt", weights_only=True)["state_dict"]


def test_atari_ppo_is_the_same_on_one_and_two_workers(tmp_path):
    needs_atari()
    launcher = build(PROGRAM, tmp_path / "out")
    (p1, d1), (p2, d2) = (run_atari(launcher, tmp_path / f"w{w}", w) for w in (1, 2))
    for p in (p1, p2):
        # the budget runs out long before Breakout's target: status 1, said in one line
        assert p.returncode == 1, f"exit {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
        assert "stopped at its step budget (max_steps)" in p.stderr, p.stderr[-3000:]
        assert "400 environment steps" in p.stdout
    digests = [(d.parent.parent.parent / "digest.txt").read_text() for d in (d1, d2)]
    assert digests[0] and digests[0] == digests[1], "-w 2 computed other port values"
    returns = (d1 / "returns.csv").read_text()
    assert len(returns.splitlines()) > 1, "no episode finished: the test compares nothing"
    assert returns == (d2 / "returns.csv").read_text()
    losses = (d1 / "losses.csv").read_text()
    assert "losses/policy_loss" in losses and losses == (d2 / "losses.csv").read_text()
    w1, w2 = weights_of(d1), weights_of(d2)
    assert w1.keys() == w2.keys() and all(torch.equal(w1[k], w2[k]) for k in w1)


def frames(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 256, size=(n, 4, 84, 84), dtype=np.uint8)


def fill_one_rollout(learner: PPOLearner, n_envs: int, rng: np.random.Generator):
    """Observe ``num_steps`` + 1 tags of synthetic frames; returns the new weights."""
    new, record = None, None
    for _ in range(learner.cfg.num_steps + 1):
        z = np.zeros(n_envs, bool)
        step = EnvStep(frames(rng, n_envs), rng.standard_normal(n_envs).astype(np.float32), z, z)
        new = learner.observe([step], record)
        record = ActRecord(
            rng.integers(0, 6, n_envs),
            np.full(n_envs, -np.log(6), np.float32),
            np.zeros(n_envs, np.float32),
        )
    return new


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_learner_tensors_live_on_its_device(device, monkeypatch):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("CUDA is not available on this machine")
    copies: list[dict] = []

    def counted(arrays: dict, dev: torch.device) -> dict:
        out = ppo_batch_to_device(arrays, dev)
        copies.append(out)
        return out

    ppo_batch_to_device = ppo.batch_to_device
    monkeypatch.setattr(ppo, "batch_to_device", counted)
    n_envs = 4
    # "auto" must pick CUDA where there is one (and the CPU where there is none)
    auto = device == ("cuda" if torch.cuda.is_available() else "cpu")
    cfg = PPOConfig(
        num_steps=4, minibatch_size=8, update_epochs=2, device="auto" if auto else device
    )
    obs_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    learner = PPOLearner(cfg, obs_space, gym.spaces.Discrete(6), np.random.default_rng(1), 7)
    assert learner.device.type == device
    new = fill_one_rollout(learner, n_envs, np.random.default_rng(2))
    assert new is not None and learner.updates == 1
    assert all(p.device.type == device for p in learner.net.parameters())
    moments = [t for s in learner.opt.state if s is not None for t in s]
    assert moments and all(t.device.type == device for t in moments)
    rollouts = [c for c in copies if "actions" in c]  # the others: V(s) of single steps
    assert len(rollouts) == 1, "the rollout must reach the device in one copy per update"
    batch = rollouts[0]
    assert batch["obs"].dtype == torch.uint8 and batch["obs"].shape == (16, 4, 84, 84)
    assert all(t.device.type == device for t in batch.values())
    # what is broadcast to the policy reactors is CPU numpy, whatever the learner's device
    assert all(isinstance(a, np.ndarray) for a in new.state.values())
    # an actor on the same device acts from them: numpy results, its network on the device
    actor = ppo.PPOActor(np.random.default_rng(3), device=device)
    actor.load(new)
    assert all(p.device.type == device for p in actor.net.parameters())
    rec = actor.act(frames(np.random.default_rng(4), n_envs))
    assert rec.actions.shape == (n_envs,) and rec.actions.dtype == np.int64
    assert rec.logp.dtype == np.float32 and rec.values.shape == (n_envs,)
    assert isinstance(rec.values, np.ndarray)


def test_a_snapshot_keeps_the_games_emulator_state():
    """Pickling an ALE environment rebuilds it from its arguments (a fresh game); the
    environment group keeps each emulator's state, so a resumed run plays on the same."""
    needs_atari()
    group = EnvGroup("ALE/Breakout-v5", 2, np.random.default_rng(1))
    group.reset()
    for i in range(40):
        group.step(np.array([1, i % 4]))
    copy = pickle.loads(pickle.dumps(group))
    for i in range(80):
        actions = np.array([i % 4, (3 * i) % 4])
        a, b = group.step(actions), copy.step(actions)
        assert np.array_equal(a.obs, b.obs) and np.array_equal(a.reward, b.reward), i
        assert np.array_equal(a.terminated, b.terminated), i


def test_the_cnn_runs_channels_last_and_computes_the_same_function():
    """The Nature CNN keeps its convolutions in the channels-last layout (torch's faster CPU
    kernels); the same weights in the default layout give the same outputs (to float32
    rounding), so the layout changes how fast, not what, the network computes."""
    from rl_algos.networks import ActorCritic

    net = ActorCritic((4, 84, 84), 6, generator=torch.Generator().manual_seed(3))
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 3
    assert all(c.weight.is_contiguous(memory_format=torch.channels_last) for c in convs)
    frames = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    logits, value = net(frames)
    plain = ActorCritic((4, 84, 84), 6, generator=torch.Generator().manual_seed(0))
    plain.load_state_dict(net.state_dict())
    plain.to(memory_format=torch.contiguous_format)
    assert all(m.weight.is_contiguous() for m in plain.modules() if isinstance(m, torch.nn.Conv2d))
    with torch.no_grad():
        x = frames.float() / 255.0
        for layer in plain.torso.net:
            x = layer(x)
        ref_logits, ref_value = plain.actor(x), plain.critic(x).squeeze(-1)
    assert torch.allclose(logits, ref_logits, atol=1e-5)
    assert torch.allclose(value, ref_value, atol=1e-5)
