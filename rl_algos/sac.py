"""Soft Actor-Critic for continuous actions: twin soft Q-networks with target copies, a
squashed Gaussian policy and an automatically tuned entropy temperature.

Source: Haarnoja et al. (2018), "Soft Actor-Critic Algorithms and Applications",
arXiv:1812.05905 (Algorithm 1: the soft Bellman target with the smaller of two target
critics, the reparameterised policy loss alpha * log pi(a|s) - min Q(s, a), and the
temperature loss -alpha * (log pi(a|s) + target entropy) with target entropy -|A|).
The defaults of :class:`SACConfig` are those CleanRL's ``sac_continuous_action.py`` uses
(critic learning rate 1e-3, policy 3e-4, tau 0.005, batch 256, the policy updated twice
every second step as in TD3, uniformly random actions for the first 5,000 steps).

Split for reactors like DQN: :class:`SACActor` acts for a batch of observations in a policy
reactor (its noise from the reactor's numpy generator); :class:`rl_algos.replay.ReplayBuffer`
lives in a replay reactor; :class:`SACLearner` takes sampled batches and returns the policy's
new weights to broadcast. Every random draw of the learner comes from its own
``torch.Generator``, so results depend on the seed only. A user's modules may replace the
built-in policy and critics, each on its own (``SACConfig.network`` and
``critic_network``, :mod:`rl_algos.custom_network`, :mod:`rl_algos.custom_sac`).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .config import ConfigError
from .custom_network import custom_network
from .custom_sac import CustomSACActor, custom_sac_actor
from .device import batch_to_device, choose_device
from .networks import (
    SoftQNetwork,
    SquashedGaussianActor,
    Weights,
    export_weights,
    kind_of,
    load_weights,
)
from .optim import Adam
from .seeding import torch_generator


@dataclass
class SACConfig:
    """Hyperparameters (CleanRL's ``sac_continuous_action.py`` defaults). The replay
    reactor reads ``buffer_size``, ``batch_size``, ``learning_starts``, ``train_frequency``
    and ``gradient_steps`` (the names :class:`rl_algos.dqn.DQNConfig` gives them)."""

    buffer_size: int = 1_000_000  # replay memory size (transitions)
    batch_size: int = 256  # minibatch size
    gamma: float = 0.99  # discount
    tau: float = 0.005  # target smoothing: target <- tau * online + (1 - tau) * target
    policy_lr: float = 3e-4  # policy step size
    q_lr: float = 1e-3  # critics' (and the temperature's) step size
    learning_starts: int = 5_000  # transitions before learning; acting is uniform until then
    train_frequency: int = 1  # environment steps (per env) between updates
    gradient_steps: int = 1  # updates each time
    policy_frequency: int = 2  # the policy is updated this many times every this many steps
    target_network_frequency: int = 1  # updates between target refreshes
    alpha: float = 0.2  # entropy temperature (its start when autotuned)
    autotune: bool = True  # tune alpha towards the target entropy -action_dim
    hidden: tuple = (256, 256)  # MLP widths of the policy and the critics
    # a user's policy, "module:function" (rl_algos.custom_sac); "": the built-in one
    network: str = ""
    network_kwargs: dict = field(default_factory=dict)  # keyword arguments of that function
    # a user's critic, "module:function" (called twice: twin critics); "": the built-in one
    critic_network: str = ""
    critic_network_kwargs: dict = field(default_factory=dict)  # its keyword arguments
    total_steps: int = 1_000_000  # environment steps of the whole run (unused by SAC)
    device: str = "auto"  # learner device: cuda if available, else cpu


@dataclass
class ActRecord:
    """What a policy reactor reports after acting on B observations: ``actions``
    (B, action_dim) float32, within the action space's bounds."""

    actions: np.ndarray


@runtime_checkable
class SquashedPolicy(Protocol):
    """What SAC's policy offers the policy reactor, the learner and ``lf-rl eval``: the
    built-in :class:`rl_algos.networks.SquashedGaussianActor` and a user's
    :class:`rl_algos.custom_sac.CustomSACActor` alike."""

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The action space's bounds ``low`` and ``high``, each (A,) float32."""
        ...

    def sample(self, obs: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions (B, A) float32 within the bounds for (B, *obs_shape) observations and
        standard normal ``noise`` (B, A) float32, and their log-probabilities (B,) float32."""
        ...


def mean_action(policy: SquashedPolicy, obs: torch.Tensor) -> torch.Tensor:
    """The action of ``policy`` at its Gaussian's mean (zero noise), squashed into the
    bounds: (B, A) float32 for (B, *obs_shape) observations."""
    dim = len(policy.action_bounds()[0])
    return policy.sample(obs, torch.zeros((len(obs), dim), device=obs.device))[0]


def sac_policy(
    cfg: SACConfig, spaces: tuple[gym.spaces.Box, gym.spaces.Box], generator: torch.Generator
) -> SquashedGaussianActor | CustomSACActor:
    """The policy of ``cfg``: the user's module of ``cfg.network``
    (:class:`rl_algos.custom_sac.CustomSACActor`) or else the built-in
    :class:`rl_algos.networks.SquashedGaussianActor`; initial weights from ``generator``.

    Raises:
        ConfigError: a custom network that cannot be built or misses the interface.
    """
    if cfg.network:
        return custom_sac_actor(cfg.network, cfg.network_kwargs, spaces, generator)
    obs_space, action_space = spaces
    low, high = action_space.low.reshape(-1).tolist(), action_space.high.reshape(-1).tolist()
    return SquashedGaussianActor(obs_space.shape, low, high, cfg.hidden, generator=generator)


def sac_critic(
    cfg: SACConfig, spaces: tuple[gym.spaces.Box, gym.spaces.Box], generator: torch.Generator
) -> nn.Module:
    """One critic of ``cfg``: the user's module of ``cfg.critic_network`` (role
    ``"sac_critic"``, :mod:`rl_algos.custom_network`) or else the built-in
    :class:`rl_algos.networks.SoftQNetwork`; initial weights from ``generator``.

    Raises:
        ConfigError: a ``critic_network_kwargs`` that is not a dict, or a custom network
            that cannot be built or misses the interface.
    """
    if cfg.critic_network:
        kwargs = cfg.critic_network_kwargs
        if not isinstance(kwargs, dict):
            raise ConfigError(f"critic_network_kwargs must be a dict, not {kwargs!r}")
        return custom_network(cfg.critic_network, kwargs, spaces, "sac_critic", generator)
    obs_space, action_space = spaces
    dim = int(np.prod(action_space.shape))
    return SoftQNetwork(obs_space.shape, dim, cfg.hidden, generator=generator)


class SACActor:
    """Acting with a CPU copy of the policy (a :class:`SquashedPolicy`): uniformly random
    actions within the bounds for the first ``learning_starts`` environment steps, then
    samples of the squashed Gaussian (noise from ``rng``). ``act(obs)`` takes (B, obs_dim)
    observations and returns an :class:`ActRecord`; RuntimeError before the first
    :meth:`load`. Other keyword arguments (the rest of :class:`SACConfig`) are ignored.
    """

    def __init__(self, rng: np.random.Generator, learning_starts: int = 0, **_config: Any):
        self.rng = rng
        self.learning_starts = int(learning_starts)
        self.net: SquashedPolicy | None = None
        self.steps = 0

    def load(self, weights: Weights) -> None:
        """Replace the policy's parameters with ``weights`` (a Weights of a SAC policy; a
        TypeError for another network)."""
        net = load_weights(weights, cast(nn.Module | None, self.net))
        if not isinstance(net, SquashedPolicy):
            raise TypeError(f"SACActor acts with a SAC policy, not a {type(net).__name__}")
        self.net = net

    def act(self, obs: np.ndarray) -> ActRecord:
        net = self.net
        if net is None:
            raise RuntimeError("SACActor.act() before any weights were received")
        b = len(obs)
        lo, hi = net.action_bounds()
        if self.steps < self.learning_starts:
            actions = self.rng.uniform(lo, hi, size=(b, len(lo))).astype(np.float32)
        else:
            noise = self.rng.standard_normal((b, len(lo))).astype(np.float32)
            with torch.inference_mode():
                a, _ = net.sample(
                    torch.as_tensor(obs, dtype=torch.float32), torch.from_numpy(noise)
                )
            actions = a.numpy()
        self.steps += b
        return ActRecord(actions)


class SACLearner:
    """The policy, the twin critics and their targets, the temperature and their Adam
    optimisers.

    ``obs_space``/``action_space``: gymnasium Box spaces (TypeError for other action spaces;
    ConfigError for a user's ``cfg.network`` or ``cfg.critic_network`` that does not fit, see
    :func:`sac_policy` and :func:`sac_critic`); ``torch_seed``: int for the networks'
    initialisation (the policy's first, then each critic's) and the learner's sampling noise.
    """

    def __init__(
        self, cfg: SACConfig, obs_space: gym.spaces.Box, action_space: gym.Space, torch_seed: int
    ) -> None:
        if not isinstance(action_space, gym.spaces.Box):
            raise TypeError("SACLearner supports Box (continuous) action spaces only")
        self.cfg = cfg
        self.device = dev = choose_device(cfg.device)
        g = torch_generator(torch_seed)
        spaces = (obs_space, action_space)
        self.actor = sac_policy(cfg, spaces, g).to(dev)  # drawn first, then the critics
        self.action_dim = int(np.prod(action_space.shape))
        self.qf = [sac_critic(cfg, spaces, g).to(dev) for _ in range(2)]
        self.targets = [copy.deepcopy(q).requires_grad_(False) for q in self.qf]
        self.q_opt = Adam([p for q in self.qf for p in q.parameters()], lr=cfg.q_lr)
        self.pi_opt = Adam(self.actor.parameters(), lr=cfg.policy_lr)
        self.target_entropy = -float(self.action_dim)
        self.log_alpha = torch.zeros(1, device=dev, requires_grad=True)
        with torch.no_grad():
            self.log_alpha.fill_(float(np.log(cfg.alpha)))
        self.a_opt = Adam([self.log_alpha], lr=cfg.q_lr)
        self.alpha = cfg.alpha
        # the noise of the learner's samples: its own generator, on its device
        self.gen = torch.Generator(device=dev)
        self.gen.manual_seed(int(torch.randint(2**62, (1,), generator=g)))
        self.updates = 0
        self.stats: dict[str, float] = {}

    def weights(self) -> Weights:
        """The policy as :class:`rl_algos.networks.Weights` (kind ``sac_actor``, or
        ``custom_sac_actor`` for a user's module)."""
        return export_weights(self.actor, kind_of(self.actor), self.updates)

    def checkpoint(self) -> dict:
        """What ``model.pt`` holds: ``algo``, ``kind`` and ``spec`` of the policy (to rebuild
        it), its ``state_dict`` (CPU tensors), the ``config`` (a dict) and ``updates``."""
        state = {k: v.cpu() for k, v in self.actor.state_dict().items()}
        return {
            "algo": "sac",
            "kind": kind_of(self.actor),
            "spec": self.actor.spec,
            "state_dict": state,
            "config": asdict(self.cfg),
            "updates": self.updates,
        }

    def _noise(self, n: int) -> torch.Tensor:
        return torch.randn(
            (n, self.action_dim), generator=self.gen, device=self.device, dtype=torch.float32
        )

    def update(self, batch: dict) -> dict:
        """One critic step on a sampled batch (the dict of
        :meth:`rl_algos.replay.ReplayBuffer.sample`, actions (B, action_dim) float32), moved
        to the device in one transfer; every ``policy_frequency`` steps that many policy (and
        temperature) steps; the targets follow every ``target_network_frequency`` steps.
        Returns statistics (CleanRL's names without their ``losses/`` prefix)."""
        cfg, d = self.cfg, batch_to_device(batch, self.device)
        obs, actions, n = d["obs"].float(), d["actions"].float(), len(d["rewards"])
        with torch.no_grad():
            next_a, next_logp = self.actor.sample(d["next_obs"].float(), self._noise(n))
            next_q = torch.min(*(t(d["next_obs"].float(), next_a) for t in self.targets))
            soft = next_q - self.alpha * next_logp
            y = d["rewards"] + cfg.gamma * (1.0 - d["dones"]) * soft
        q1, q2 = (q(obs, actions) for q in self.qf)
        l1, l2 = F.mse_loss(q1, y), F.mse_loss(q2, y)
        self.q_opt.zero_grad()
        (l1 + l2).backward()
        self.q_opt.step()
        stats = {"qf1_values": q1.mean().item(), "qf2_values": q2.mean().item()}
        stats |= {"qf1_loss": l1.item(), "qf2_loss": l2.item(), "qf_loss": (l1 + l2).item() / 2}
        if self.updates % cfg.policy_frequency == 0:
            for _ in range(cfg.policy_frequency):
                stats |= self._policy_step(obs, n)
        elif self.stats:
            stats |= {
                k: self.stats[k] for k in ("actor_loss", "alpha", "alpha_loss") if k in self.stats
            }
        self.updates += 1
        if self.updates % cfg.target_network_frequency == 0:
            with torch.no_grad():
                for q, t in zip(self.qf, self.targets):
                    for p, tp in zip(q.parameters(), t.parameters()):
                        tp.mul_(1.0 - cfg.tau).add_(p, alpha=cfg.tau)
        self.stats = stats
        return stats

    def _policy_step(self, obs: torch.Tensor, n: int) -> dict[str, float]:
        a, logp = self.actor.sample(obs, self._noise(n))
        q = torch.min(*(qf(obs, a) for qf in self.qf))
        loss = (self.alpha * logp - q).mean()
        self.pi_opt.zero_grad()
        loss.backward()
        self.pi_opt.step()
        out = {"actor_loss": loss.item(), "alpha": self.alpha}
        if self.cfg.autotune:
            with torch.no_grad():
                _, logp = self.actor.sample(obs, self._noise(n))
            a_loss = (-self.log_alpha.exp() * (logp + self.target_entropy)).mean()
            self.a_opt.zero_grad()
            a_loss.backward()
            self.a_opt.step()
            self.alpha = float(self.log_alpha.exp().item())
            out |= {"alpha": self.alpha, "alpha_loss": a_loss.item()}
        return out
