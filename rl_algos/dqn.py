"""Deep Q-Network with a target network, Huber loss and an epsilon-greedy schedule.

Source: Mnih et al. (2015), "Human-level control through deep reinforcement learning",
Nature 518, 529-533 (Algorithm 1, Methods, Extended Data Table 1). Targets
y = r + gamma * max_a' Q_target(s', a') (no bootstrap at a terminal s'); the error is clipped
to [-1, 1], i.e. the Huber (smooth L1) loss; the target network is a copy refreshed every C
updates; epsilon falls linearly from 1 to 0.1 over the first million frames. The defaults of
:class:`DQNConfig` are the paper's, except the optimiser: Adam instead of the paper's
RMSProp (lr 2.5e-4, momentum 0.95), as in later reproductions.

Split for reactors: :class:`DQNActor` picks epsilon-greedy actions for a batch (in a policy
reactor); :class:`rl_algos.replay.ReplayBuffer` lives in a replay reactor; :class:`DQNLearner`
takes sampled batches and returns new weights to broadcast. A user's module may replace the
built-in Q-network (``DQNConfig.network``, :mod:`rl_algos.custom_network`).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .custom_network import custom_network
from .device import batch_to_device, choose_device
from .networks import QNetwork, Weights, export_weights, kind_of, load_weights
from .optim import Adam, clip_grad_norm
from .seeding import torch_generator


@dataclass
class DQNConfig:
    """Hyperparameters (paper defaults: Mnih et al. 2015, Extended Data Table 1)."""

    buffer_size: int = 1_000_000  # replay memory size (transitions)
    batch_size: int = 32  # minibatch size
    gamma: float = 0.99  # discount
    learning_rate: float = 2.5e-4  # step size
    target_update: int = 10_000  # C: updates between target-network refreshes
    train_frequency: int = 4  # environment steps (per env) between updates
    gradient_steps: int = 1  # updates each time (later replay-ratio tuning; paper: 1)
    learning_starts: int = 50_000  # replay start size (transitions) before learning
    start_e: float = 1.0  # initial exploration
    end_e: float = 0.1  # final exploration
    exploration_fraction: float = 0.02  # of total_steps to reach end_e (1M of 50M frames)
    total_steps: int = 50_000_000  # environment steps of the whole run
    max_grad_norm: float = 10.0  # global gradient-norm clip (not in the paper)
    double_q: bool = False  # Double DQN targets (van Hasselt et al. 2016), not Mnih's
    hidden: tuple = (120, 84)  # MLP widths (vector observations)
    activation: str = "relu"
    # a user's Q-network, "module:function" (rl_algos.custom_network); "": the built-in one
    network: str = ""
    network_kwargs: dict = field(default_factory=dict)  # keyword arguments of that function
    device: str = "auto"  # learner device: cuda if available, else cpu


def epsilon(cfg: DQNConfig, step: int) -> float:
    """Exploration rate after ``step`` environment steps: linear from ``start_e`` to
    ``end_e`` over ``exploration_fraction * total_steps`` steps, then constant."""
    span = max(1.0, cfg.exploration_fraction * cfg.total_steps)
    return cfg.end_e + (cfg.start_e - cfg.end_e) * max(0.0, 1.0 - step / span)


@dataclass
class ActRecord:
    """What a policy reactor reports after acting on B observations: ``actions`` (B,)
    int64 and the ``epsilon`` used (float)."""

    actions: np.ndarray
    epsilon: float


def q_network(
    cfg: DQNConfig,
    obs_space: gym.spaces.Box,
    action_space: gym.spaces.Discrete,
    generator: torch.Generator,
) -> nn.Module:
    """The Q-network of ``cfg``: the user's module of ``cfg.network`` (role ``"q"``,
    :mod:`rl_algos.custom_network`) or else :class:`rl_algos.networks.QNetwork`; initial
    weights from ``generator``. Raises ConfigError for a custom network that cannot be built
    or misses the interface."""
    if cfg.network:
        spaces = (obs_space, action_space)
        return custom_network(cfg.network, cfg.network_kwargs, spaces, "q", generator)
    n = int(action_space.n)
    return QNetwork(obs_space.shape, n, cfg.hidden, cfg.activation, generator=generator)


class DQNActor:
    """Epsilon-greedy acting with a CPU copy of the Q-network.

    Keyword arguments are :class:`DQNConfig` fields (the schedule's). ``act(obs)`` takes
    (B, *obs_shape) and returns an :class:`ActRecord`; it counts B environment steps for the
    schedule and always draws 2B numbers from ``rng`` (so the stream does not depend on
    epsilon). RuntimeError before the first :meth:`load`.
    """

    def __init__(self, rng: np.random.Generator, **config: Any) -> None:
        self.rng = rng
        self.cfg = DQNConfig(**config)
        self.net: nn.Module | None = None
        self.steps = 0

    def load(self, weights: Weights) -> None:
        """Replace the network's parameters with ``weights`` (a Weights)."""
        self.net = load_weights(weights, self.net)

    def act(self, obs: np.ndarray) -> ActRecord:
        if self.net is None:
            raise RuntimeError("DQNActor.act() before any weights were received")
        eps = epsilon(self.cfg, self.steps)
        with torch.inference_mode():
            q = self.net(torch.as_tensor(obs)).numpy()
        b, n = q.shape
        explore = self.rng.random(b) < eps
        random_actions = self.rng.integers(0, n, size=b)
        actions = np.where(explore, random_actions, q.argmax(axis=1)).astype(np.int64)
        self.steps += b
        return ActRecord(actions, eps)


class DQNLearner:
    """The Q-network, its target copy and the Adam optimiser.

    ``obs_space``/``action_space``: gymnasium spaces (Discrete actions; TypeError otherwise;
    ConfigError for a user's ``cfg.network`` that does not fit, see :func:`q_network`);
    ``torch_seed``: int for the network's initialisation.
    """

    def __init__(
        self, cfg: DQNConfig, obs_space: gym.spaces.Box, action_space: gym.Space, torch_seed: int
    ) -> None:
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError("DQNLearner supports Discrete action spaces only")
        self.cfg = cfg
        self.device = choose_device(cfg.device)
        net = q_network(cfg, obs_space, action_space, torch_generator(torch_seed))
        self.net = net.to(self.device)
        self.target = copy.deepcopy(self.net).requires_grad_(False)
        self.opt = Adam(self.net.parameters(), lr=cfg.learning_rate)
        self.updates = 0
        self.stats: dict[str, float] = {}

    def weights(self) -> Weights:
        """The online network as :class:`rl_algos.networks.Weights`."""
        return export_weights(self.net, kind_of(self.net), self.updates)

    def checkpoint(self) -> dict:
        """What ``model.pt`` holds: ``algo``, ``kind`` and ``spec`` of the online network (to
        rebuild it), its ``state_dict`` (CPU tensors), the ``config`` (a dict) and
        ``updates``."""
        state = {k: v.cpu() for k, v in self.net.state_dict().items()}
        return {
            "algo": "dqn",
            "kind": kind_of(self.net),
            "spec": self.net.spec,
            "state_dict": state,
            "config": asdict(self.cfg),
            "updates": self.updates,
        }

    def update(self, batch: dict) -> dict:
        """One gradient step on a sampled batch (the dict of
        :meth:`rl_algos.replay.ReplayBuffer.sample`), moved to the device in one transfer;
        refreshes the target network every ``target_update`` steps. Returns statistics."""
        d = batch_to_device(batch, self.device)
        with torch.no_grad():
            if self.cfg.double_q:  # online net picks a', target net values it
                best = self.net(d["next_obs"]).argmax(dim=1, keepdim=True)
                next_q = self.target(d["next_obs"]).gather(1, best).squeeze(1)
            else:
                next_q = self.target(d["next_obs"]).max(dim=1).values
            y = d["rewards"] + self.cfg.gamma * next_q * (1.0 - d["dones"])
        q = self.net(d["obs"]).gather(1, d["actions"].long()[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, y)
        self.opt.zero_grad()
        loss.backward()
        clip_grad_norm(self.opt.params, self.cfg.max_grad_norm)
        self.opt.step()
        self.updates += 1
        if self.updates % self.cfg.target_update == 0:
            self.target.load_state_dict(self.net.state_dict())
        self.stats = {"loss": loss.item(), "q": q.mean().item()}
        return self.stats
