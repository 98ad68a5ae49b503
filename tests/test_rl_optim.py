"""rl_algos.optim: Adam and the gradient-norm clip give torch's numbers bit for bit
(``torch.optim.Adam(fused=True)``, ``torch.nn.utils.clip_grad_norm_``), and building the
optimiser does not import ``torch._dynamo``."""

import subprocess
import sys

import pytest
import torch
from conftest import ROOT

from rl_algos.optim import Adam, clip_grad_norm


def _nets(seed: int = 0) -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(seed)
    a = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    b = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    b.load_state_dict(a.state_dict())
    return a, b


def _loss(net: torch.nn.Module, x: torch.Tensor, step: int) -> torch.Tensor:
    out = net(x)
    if step == 0:  # the last layer's bias gets no gradient at the first step
        return (net[0](x).tanh() @ net[2].weight.T).square().mean()
    if step == 5:  # the first layer's bias skips a step that the others take
        return ((x @ net[0].weight.T).tanh() @ net[2].weight.T + net[2].bias).square().mean()
    return out.square().mean() + out[:, 0].exp().mean()


def test_adam_and_clip_equal_torch_bit_for_bit():
    ours_net, torch_net = _nets()
    ours = Adam(ours_net.parameters(), lr=3e-3, eps=1e-5)
    ref = torch.optim.Adam(torch_net.parameters(), lr=3e-3, eps=1e-5, fused=True)
    g = torch.Generator().manual_seed(1)
    for step in range(12):
        x = torch.randn(32, 5, generator=g) * (1 + step)
        lr = 3e-3 * (1 - step / 12)  # annealed, as PPO does
        ours.lr = lr
        ref.param_groups[0]["lr"] = lr
        for net, opt in ((ours_net, ours), (torch_net, ref)):
            opt.zero_grad()
            _loss(net, x, step).backward()
        if step == 0:
            assert ours_net[2].bias.grad is None
        mine = clip_grad_norm(ours_net.parameters(), 0.5)
        theirs = torch.nn.utils.clip_grad_norm_(torch_net.parameters(), 0.5, foreach=True)
        assert torch.equal(mine, theirs)
        ours.step()
        ref.step()
        for p, q in zip(ours_net.parameters(), torch_net.parameters()):
            assert torch.equal(p, q), f"step {step}"
    # the moments and step counts too; each bias (one started late, one skipped a step)
    # counts one fewer than the weights, which share one count
    for p, state in zip(ref.param_groups[0]["params"], ours.state):
        assert state is not None
        avg, sq, count = state
        s = ref.state[p]
        assert torch.equal(avg, s["exp_avg"]) and torch.equal(sq, s["exp_avg_sq"])
        assert torch.equal(count, s["step"])
    counts = [state[2] for state in ours.state if state is not None]
    assert [c.item() for c in counts] == [12, 11, 12, 11]
    assert counts[0] is counts[2] and counts[1] is not counts[3]


def test_adam_refuses_bad_settings_and_clip_without_gradients():
    w = torch.zeros(3, requires_grad=True)
    for bad in (dict(lr=-1.0), dict(eps=-1e-8), dict(betas=(0.9, 1.0))):
        with pytest.raises(ValueError):
            Adam([w], **bad)
    with pytest.raises(ValueError, match="empty"):
        Adam([])
    assert clip_grad_norm([w], 1.0).item() == 0.0  # no gradient: nothing to clip
    Adam([w]).step()  # no gradient: nothing moves
    assert torch.equal(w, torch.zeros(3))


def test_building_a_learner_imports_neither_dynamo_nor_sympy():
    """torch.optim's optimisers import torch._dynamo (~0.7 s) and Module.to_empty imports
    sympy (~0.3 s): a learner's start-up does neither."""
    code = (
        "import sys, numpy as np, gymnasium as gym\n"
        "from rl_algos.ppo import PPOConfig, PPOLearner\n"
        "env = gym.make('CartPole-v1')\n"
        "PPOLearner(PPOConfig(), env.observation_space, env.action_space,"
        " np.random.default_rng(0), 1)\n"
        "print(sorted(m for m in ('torch._dynamo', 'sympy') if m in sys.modules))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
