"""CartPole PPO with TorchRL (through its public API): the TorchRL side of the CartPole
workload of :mod:`bench.sb3`, run as a child process:
``python -m bench.torchrl_ppo SEED CAP_STEPS`` prints one ``RESULT {"solved": ..., "steps": ...}``
line.

The same settings as the Stable-Baselines3 row with rl-zoo3's CartPole values: 8 CartPole-v1
environments stepped in turn (``SerialEnv``, as SB3's DummyVecEnv), rollouts of 32 steps each
(256 transitions), 20 epochs of one 256-transition minibatch, gamma 0.98, GAE lambda 0.8,
learning rate and clip range annealed linearly from 1e-3 and 0.2 to 0 over ``CAP_STEPS``,
value loss the mean squared error with coefficient 0.5, no entropy bonus, advantages
normalised per minibatch, gradient norm clipped at 0.5, Adam (eps 1e-8 as SB3's), separate
64-64 tanh policy and value networks; one torch thread. Advantages are computed once per
rollout, as SB3 and our learner do. The run stops once the last 20 finished episodes average
475, checked after each rollout (every 32 vector steps, where SB3's callback and our logger
check every step).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque

ENV_ID = "CartPole-v1"
N_ENVS, N_STEPS, EPOCHS = 8, 32, 20
GAMMA, GAE_LAMBDA, LR, CLIP = 0.98, 0.8, 1e-3, 0.2
TARGET_RETURN, WINDOW = 475.0, 20


def train(seed: int, cap_steps: int) -> dict:
    """Train until the target or ``cap_steps`` environment steps; ``{"solved", "steps"}``."""
    import torch
    from tensordict.nn import TensorDictModule
    from torchrl.collectors import Collector
    from torchrl.envs import GymEnv, RewardSum, SerialEnv, TransformedEnv
    from torchrl.modules import MLP, ProbabilisticActor, ValueOperator
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    torch.manual_seed(seed)
    env = TransformedEnv(
        SerialEnv(N_ENVS, lambda: GymEnv(ENV_ID, categorical_action_encoding=True)),
        RewardSum(),
    )
    env.set_seed(seed)
    n_obs = env.observation_spec["observation"].shape[-1]
    n_actions = int(env.action_spec.space.n)

    def mlp(n_out: int) -> torch.nn.Module:
        return MLP(
            in_features=n_obs,
            out_features=n_out,
            num_cells=[64, 64],
            activation_class=torch.nn.Tanh,
        )

    policy = ProbabilisticActor(
        TensorDictModule(mlp(n_actions), in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        distribution_class=torch.distributions.Categorical,
        return_log_prob=True,
        spec=env.action_spec,
    )
    value = ValueOperator(mlp(1), in_keys=["observation"])
    gae = GAE(gamma=GAMMA, lmbda=GAE_LAMBDA, value_network=value)
    loss = ClipPPOLoss(
        policy,
        value,
        clip_epsilon=CLIP,
        entropy_bonus=False,
        critic_coeff=0.5,
        loss_critic_type="l2",
        normalize_advantage=True,
    )
    opt = torch.optim.Adam(loss.parameters(), lr=LR, eps=1e-8)
    batch = N_ENVS * N_STEPS
    collector = Collector(
        env,
        policy,
        frames_per_batch=batch,
        total_frames=-(-cap_steps // batch) * batch,  # whole rollouts, the cap rounded up
        auto_register_policy_transforms=False,  # an MLP policy needs none
    )
    recent: deque[float] = deque(maxlen=WINDOW)
    steps = 0
    for data in collector:
        ended = data["next", "done"].squeeze(-1)
        recent.extend(data["next", "episode_reward"].squeeze(-1)[ended].tolist())
        if len(recent) == WINDOW and sum(recent) / WINDOW >= TARGET_RETURN:
            collector.shutdown()
            return {"solved": True, "steps": steps + data.numel()}
        remaining = 1.0 - steps / cap_steps  # SB3's progress_remaining at this rollout
        steps += data.numel()
        for group in opt.param_groups:
            group["lr"] = LR * remaining
        loss.clip_epsilon.fill_(CLIP * remaining)
        with torch.no_grad():
            gae(data)
        flat = data.reshape(-1)
        for _ in range(EPOCHS):
            out = loss(flat[torch.randperm(batch)])
            total = out["loss_objective"] + out["loss_critic"]
            opt.zero_grad()
            total.backward()
            torch.nn.utils.clip_grad_norm_(loss.parameters(), 0.5)
            opt.step()
        collector.update_policy_weights_()
    collector.shutdown()
    return {"solved": False, "steps": steps}


def main(argv: list[str] | None = None) -> int:
    """Child-process entry (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m bench.torchrl_ppo")
    ap.add_argument("seed", type=int)
    ap.add_argument("cap_steps", type=int)
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    print("RESULT " + json.dumps(train(a.seed, a.cap_steps)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
