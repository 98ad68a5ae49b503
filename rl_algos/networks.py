"""Torch networks: MLP, the Nature-DQN CNN, actor-critics for discrete and for continuous
actions, a Q-network, and SAC's squashed Gaussian policy and soft Q-network; and weights as
numpy arrays, the form in which a learner broadcasts them to actor reactors over ports.

Sources: the CNN is that of Mnih et al. (2015), "Human-level control through deep
reinforcement learning", Nature 518 (3 conv layers 32x8x8/4, 64x4x4/2, 64x3x3/1, then 512
units). Orthogonal initialisation with gain sqrt(2) for hidden layers, 0.01 for the policy
head and 1 for the value head follows Andrychowicz et al. (2021), "What matters in on-policy
RL? A large-scale empirical study", ICLR. The Gaussian policy for continuous actions (a mean
from an MLP, a state-independent log standard deviation starting at 0) is the one of Schulman
et al. (2017), "Proximal Policy Optimization Algorithms", section 6.1.

Every random draw of a network's initialisation comes from the ``torch.Generator`` passed to
its constructor, never from torch's process-wide generator: layers are created on the
``meta`` device (no draw at all) and then initialised from the generator, so two reactors
building networks at once in one process (worker threads) get the same weights as on their
own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .custom_network import CustomNetwork
from .custom_sac import CustomSACActor
from .distributions import squashed_gaussian_sample

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def linear(n_in: int, n_out: int) -> nn.Linear:
    """An uninitialised (B, n_in) -> (B, n_out) linear layer, on the ``meta`` device until
    :func:`layer_init` or :func:`default_init` gives it weights."""
    return nn.Linear(n_in, n_out, device="meta")


def conv(n_in: int, n_out: int, kernel: int, stride: int) -> nn.Conv2d:
    """An uninitialised 2-D convolution, on the ``meta`` device (see :func:`linear`)."""
    return nn.Conv2d(n_in, n_out, kernel, stride=stride, device="meta")


def _allocate(layer: nn.Module) -> None:
    """Replace the parameters of ``layer`` (on ``meta``) by uninitialised CPU tensors of their
    shapes and dtypes. (``Module.to_empty`` does the same through torch's reference
    implementations, whose first use imports sympy: a third of a second of start-up.)"""
    for name, p in list(layer.named_parameters(recurse=False)):
        setattr(layer, name, nn.Parameter(torch.empty(p.shape, dtype=p.dtype), p.requires_grad))


def layer_init(
    layer: nn.Linear | nn.Conv2d,
    generator: torch.Generator,
    gain: float = math.sqrt(2),
    bias: float = 0.0,
) -> nn.Module:
    """Give ``layer`` CPU storage, orthogonal weights scaled by ``gain`` (drawn from
    ``generator``) and a constant bias; returns ``layer``."""
    _allocate(layer)
    nn.init.orthogonal_(layer.weight, gain, generator=generator)
    if layer.bias is not None:
        nn.init.constant_(layer.bias, bias)
    return layer


def default_init(layer: nn.Linear | nn.Conv2d, generator: torch.Generator) -> nn.Module:
    """Give ``layer`` CPU storage and torch's default initialisation (Kaiming-uniform
    weights, bias uniform in +-1/sqrt(fan_in)), drawn from ``generator``; returns ``layer``."""
    _allocate(layer)
    nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
    if layer.bias is not None:
        bound = 1.0 / math.sqrt(layer.weight[0].numel())
        nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return layer


class MLP(nn.Sequential):
    """An ``nn.Sequential`` of linear layers and activations (see :func:`mlp`) whose
    forward pass calls ``F.linear`` and the activations itself: the same kernels on the same
    tensors, so the same numbers, without a module call per layer (hooks, which no network
    here has, are not run). At RL's batch sizes that call is a fair share of the layer's
    cost: a CartPole actor-critic's act on 8 observations took 87 us this way, 101 us with
    the module calls."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self._modules.values():
            if type(layer) is nn.Linear:
                x = F.linear(x, layer.weight, layer.bias)
            else:
                x = layer.forward(x)
        return x


def mlp(
    n_in: int,
    n_out: int,
    generator: torch.Generator,
    hidden: Sequence[int] = (64, 64),
    activation: str = "tanh",
    out_gain: float = 1.0,
) -> nn.Sequential:
    """A fully connected network (B, n_in) float32 -> (B, n_out) float32 with ``activation``
    (``"tanh"`` or ``"relu"``; KeyError otherwise) between layers and a linear output layer
    initialised with ``out_gain``; weights drawn from ``generator``."""
    layers, width = [], n_in
    for h in hidden:
        layers += [layer_init(linear(width, h), generator), _ACTIVATIONS[activation]()]
        width = h
    layers.append(layer_init(linear(width, n_out), generator, gain=out_gain))
    return MLP(*layers)


class NatureCNN(nn.Module):
    """The Nature-DQN torso: (B, C, 84, 84) uint8 frames -> (B, 512) float32 features.

    Frames are scaled to [0, 1] inside the network (folded into the first convolution's
    weights), so batches travel as uint8. Weights are drawn from ``generator``. The
    convolutions run in the channels-last layout (weights and frames stored as (B, H, W, C)),
    where torch's CPU kernels (oneDNN) compute a 256-frame forward and backward pass about
    1.5x faster than in the default layout on this machine; the layout is the network's own,
    so results do not depend on where it runs.
    """

    def __init__(self, generator: torch.Generator, in_channels: int = 4) -> None:
        super().__init__()
        g = generator
        self.net = nn.Sequential(  # type: ignore[call-overload]  # Module.to(memory_format=) is untyped
            layer_init(conv(in_channels, 32, 8, 4), g),
            nn.ReLU(),
            layer_init(conv(32, 64, 4, 2), g),
            nn.ReLU(),
            layer_init(conv(64, 64, 3, 1), g),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(linear(64 * 7 * 7, 512), g),
            nn.ReLU(),
        ).to(memory_format=torch.channels_last)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # conv(x / 255, W) computed as conv(x, W / 255): one pass over the frames (the cast)
        # instead of two, and a division of the first layer's 8,192 weights
        x = x.contiguous(memory_format=torch.channels_last).float()
        layers = iter(self.net)
        first = next(layers)
        x = F.conv2d(x, first.weight * (1.0 / 255.0), first.bias, first.stride)
        for layer in layers:
            x = layer(x)
        return x


class ActorCritic(nn.Module):
    """Separate policy and value networks for a discrete action space (PPO).

    ``forward(obs)`` takes (B, *obs_shape) and returns ``(logits (B, n_actions), value (B,))``,
    both float32. Vector observations get two MLPs; image observations share a NatureCNN.
    Initial weights are drawn from ``generator`` (keyword-only, required).
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_actions: int,
        hidden: Sequence[int] = (64, 64),
        activation: str = "tanh",
        *,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.spec = dict(
            obs_shape=tuple(obs_shape),
            n_actions=int(n_actions),
            hidden=tuple(hidden),
            activation=activation,
        )
        g = generator
        if len(obs_shape) == 3:
            self.torso: nn.Module = NatureCNN(g, obs_shape[0])
            self.actor = layer_init(linear(512, n_actions), g, gain=0.01)
            self.critic = layer_init(linear(512, 1), g, gain=1.0)
        else:
            n_in = int(np.prod(obs_shape))
            self.torso = nn.Flatten()
            self.actor = mlp(n_in, n_actions, g, hidden, activation, out_gain=0.01)
            self.critic = mlp(n_in, 1, g, hidden, activation, out_gain=1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.torso(obs)
        return self.actor(x), self.critic(x).squeeze(-1)


class GaussianActorCritic(nn.Module):
    """Separate policy and value MLPs for a continuous (Box) action space (PPO).

    ``forward(obs)`` takes (B, *obs_shape) float32 and returns ``(mean (B, action_dim),
    value (B,))``, both float32; the policy is N(mean, exp(log_std)^2) per action dimension,
    ``log_std`` a (1, action_dim) parameter that does not depend on the state (initially 0).
    Initial weights are drawn from ``generator`` (keyword-only, required). Image observations
    are not supported (ValueError).
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        action_dim: int,
        hidden: Sequence[int] = (64, 64),
        activation: str = "tanh",
        *,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        if len(obs_shape) == 3:
            raise ValueError("GaussianActorCritic takes vector observations, not images")
        self.spec = dict(
            obs_shape=tuple(obs_shape),
            action_dim=int(action_dim),
            hidden=tuple(hidden),
            activation=activation,
        )
        n_in = int(np.prod(obs_shape))
        self.torso = nn.Flatten()
        self.actor = mlp(n_in, action_dim, generator, hidden, activation, out_gain=0.01)
        self.critic = mlp(n_in, 1, generator, hidden, activation, out_gain=1.0)
        self.log_std = nn.Parameter(torch.zeros(1, action_dim))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.torso(obs)
        return self.actor(x), self.critic(x).squeeze(-1)


def actor_critic(
    obs_shape: Sequence[int],
    action_space: gym.Space,
    hidden: Sequence[int],
    activation: str,
    generator: torch.Generator,
) -> ActorCritic | GaussianActorCritic:
    """The actor-critic for ``action_space``: :class:`ActorCritic` for a Discrete space,
    :class:`GaussianActorCritic` for a Box (one output per element of its flattened shape).
    Raises TypeError for any other space."""
    if isinstance(action_space, gym.spaces.Discrete):
        return ActorCritic(obs_shape, int(action_space.n), hidden, activation, generator=generator)
    if isinstance(action_space, gym.spaces.Box):
        dim = int(np.prod(action_space.shape))
        return GaussianActorCritic(obs_shape, dim, hidden, activation, generator=generator)
    raise TypeError(
        f"no actor-critic for a {type(action_space).__name__} action space (Discrete or Box)"
    )


def kind_of(net: nn.Module) -> str:
    """The :data:`KINDS` key of ``net``'s class (KeyError for a class not in it)."""
    for kind, cls in KINDS.items():
        if type(net) is cls:
            return kind
    raise KeyError(f"{type(net).__name__} is not a network kind ({', '.join(KINDS)})")


class QNetwork(nn.Module):
    """Action values for a discrete action space (DQN): (B, *obs_shape) -> (B, n_actions)
    float32. MLP for vector observations, NatureCNN + 512-unit head for frames. Initial
    weights are drawn from ``generator`` (keyword-only, required)."""

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_actions: int,
        hidden: Sequence[int] = (120, 84),
        activation: str = "relu",
        *,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.spec = dict(
            obs_shape=tuple(obs_shape),
            n_actions=int(n_actions),
            hidden=tuple(hidden),
            activation=activation,
        )
        g = generator
        if len(obs_shape) == 3:
            head = default_init(linear(512, n_actions), g)
            self.net = nn.Sequential(NatureCNN(g, obs_shape[0]), head)
        else:
            n_in = int(np.prod(obs_shape))
            self.net = nn.Sequential(nn.Flatten(), mlp(n_in, n_actions, g, hidden, activation))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


#: Bounds of the squashed Gaussian's log standard deviation (Haarnoja et al. 2018's code).
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class SquashedGaussianActor(nn.Module):
    """The SAC policy for a Box action space: an MLP gives the mean and the log standard
    deviation of a Gaussian per action dimension (the log-std squashed into
    [:data:`LOG_STD_MIN`, :data:`LOG_STD_MAX`]); a sample goes through tanh and is scaled
    to the space's bounds, ``low`` and ``high`` (kept as buffers, so they travel with the
    weights). Source: Haarnoja et al. (2018), "Soft Actor-Critic Algorithms and
    Applications", arXiv:1812.05905, appendix C (the tanh change of variables).

    ``forward(obs)`` takes (B, obs_dim) float32 and returns ``(mean, log_std)``, each
    (B, action_dim) float32, before squashing; ``action_bounds`` and ``sample`` are the
    interface a user's policy shares (:class:`rl_algos.sac.SquashedPolicy`). Initial weights
    are torch's default initialisation drawn from ``generator`` (keyword-only, required);
    image observations are not supported (ValueError).
    """

    scale: torch.Tensor  # (action_dim,) float32 buffers: (high - low) / 2 and (high + low) / 2
    bias: torch.Tensor

    def __init__(
        self,
        obs_shape: Sequence[int],
        low: Sequence[float],
        high: Sequence[float],
        hidden: Sequence[int] = (256, 256),
        *,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        if len(obs_shape) == 3:
            raise ValueError("SquashedGaussianActor takes vector observations, not images")
        lo, hi = np.asarray(low, np.float32), np.asarray(high, np.float32)
        self.spec = dict(
            obs_shape=tuple(obs_shape),
            low=tuple(float(x) for x in lo),
            high=tuple(float(x) for x in hi),
            hidden=tuple(hidden),
        )
        n_in, n_act, layers = int(np.prod(obs_shape)), len(lo), []
        for h in hidden:
            layers += [default_init(linear(n_in, h), generator), nn.ReLU()]
            n_in = h
        self.trunk = nn.Sequential(nn.Flatten(), *layers)
        self.mean = default_init(linear(n_in, n_act), generator)
        self.log_std = default_init(linear(n_in, n_act), generator)
        self.register_buffer("scale", torch.from_numpy((hi - lo) / 2))
        self.register_buffer("bias", torch.from_numpy((hi + lo) / 2))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.trunk(obs)
        log_std = torch.tanh(self.log_std(x))
        return self.mean(x), LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)

    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The action space's bounds ``low`` and ``high``, each (action_dim,) float32."""
        return np.asarray(self.spec["low"], np.float32), np.asarray(self.spec["high"], np.float32)

    def sample(self, obs: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised actions for ``obs`` from standard normal ``noise`` (B, action_dim),
        and their log-probabilities (B,) under the squashed Gaussian
        (:func:`rl_algos.distributions.squashed_gaussian_sample`)."""
        mean, log_std = self(obs)
        return squashed_gaussian_sample(mean, log_std, noise, self.scale, self.bias)


class SoftQNetwork(nn.Module):
    """Q(s, a) for continuous actions (SAC's critics): (B, obs_dim) and (B, action_dim)
    float32 -> (B,) float32, an MLP on their concatenation; torch's default initialisation
    drawn from ``generator`` (keyword-only, required)."""

    def __init__(
        self,
        obs_shape: Sequence[int],
        action_dim: int,
        hidden: Sequence[int] = (256, 256),
        *,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.spec = dict(
            obs_shape=tuple(obs_shape), action_dim=int(action_dim), hidden=tuple(hidden)
        )
        n_in, layers = int(np.prod(obs_shape)) + int(action_dim), []
        for h in hidden:
            layers += [default_init(linear(n_in, h), generator), nn.ReLU()]
            n_in = h
        layers.append(default_init(linear(n_in, 1), generator))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs.flatten(1), actions], dim=1)).squeeze(-1)


#: Network kind (as in :class:`Weights`) -> its class, built with ``(**spec, generator=g)``.
KINDS: dict[str, Callable[..., nn.Module]] = {
    "actor_critic": ActorCritic,
    "gaussian_actor_critic": GaussianActorCritic,
    "q": QNetwork,
    "sac_actor": SquashedGaussianActor,
    "soft_q": SoftQNetwork,
    "custom": CustomNetwork,  # a user's module (rl_algos.custom_network)
    "custom_sac_actor": CustomSACActor,  # a user's SAC policy (rl_algos.custom_sac)
}


@dataclass(frozen=True)
class Weights:
    """A network as plain data, what a learner sends to actors over a port.

    ``kind`` is a key of :data:`KINDS`, ``spec`` the constructor's keyword arguments,
    ``state`` the state dict as CPU numpy arrays (copies, never views of live parameters),
    ``version`` the number of updates the learner had made.
    """

    kind: str
    spec: dict
    state: dict
    version: int = 0


def export_weights(net: nn.Module, kind: str, version: int = 0) -> Weights:
    """Snapshot ``net`` (any device) as :class:`Weights` with numpy copies of its state."""
    state = {k: v.detach().to("cpu", copy=True).numpy() for k, v in net.state_dict().items()}
    spec = cast(dict, net.spec)  # set by every class of KINDS
    return Weights(kind, dict(spec), state, version)


def _np_tanh(x: np.ndarray) -> None:
    np.tanh(x, out=x)


def _np_relu(x: np.ndarray) -> None:
    np.maximum(x, 0.0, out=x)


#: the activations of :data:`_ACTIVATIONS` in numpy, in place on a float32 array
_NP_ACTIVATIONS: dict[str, Callable[[np.ndarray], None]] = {"tanh": _np_tanh, "relu": _np_relu}


class NumpyActorCritic:
    """The forward pass of an :class:`ActorCritic` on vector observations (two MLPs) in
    numpy, from its :class:`Weights`: what a policy acting on the CPU runs.

    At RL's act sizes a torch forward pass is mostly torch's per-operation dispatch: on 8
    CartPole observations ~45 us alone, ~150 us when environment steps run between calls
    (its long code path falls out of the CPU's caches), against ~20-40 us here. The function
    is the same (``x @ W.T + b`` and the activation per layer); the float32 rounding may
    differ from torch's in the last bits, so acting this way is deterministic but not bit
    for bit the torch network's outputs.
    """

    def __init__(self, w: Weights) -> None:
        self.activation = _NP_ACTIVATIONS[w.spec["activation"]]
        self.actor = _np_layers(w.state, "actor")
        self.critic = _np_layers(w.state, "critic")

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(B, *obs_shape) observations -> logits (B, n_actions) and values (B,), float32."""
        x = np.asarray(obs, np.float32).reshape(len(obs), -1)
        return self._mlp(x, self.actor), self._mlp(x, self.critic)[:, 0]

    def _mlp(self, x: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        for i, (weight_t, bias) in enumerate(layers):
            x = x @ weight_t + bias
            if i < len(layers) - 1:
                self.activation(x)
        return x


def _np_layers(state: dict, prefix: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (transposed weight (n_in, n_out), bias) float32 pairs of the linear layers of the
    MLP ``prefix`` in a state dict, in order."""
    indices = sorted(
        int(k.split(".")[1]) for k in state if k.startswith(f"{prefix}.") and k.endswith(".weight")
    )
    return [
        (
            np.ascontiguousarray(state[f"{prefix}.{i}.weight"].T, np.float32),
            np.asarray(state[f"{prefix}.{i}.bias"], np.float32),
        )
        for i in indices
    ]


def numpy_actor_critic(w: Weights) -> NumpyActorCritic | None:
    """:class:`NumpyActorCritic` of ``w`` when it is an :class:`ActorCritic` on vector
    observations, else None (a CNN, a Gaussian policy: those act in torch)."""
    if w.kind != "actor_critic" or len(w.spec["obs_shape"]) == 3:
        return None
    return NumpyActorCritic(w)


def load_weights(w: Weights, net: nn.Module | None = None) -> nn.Module:
    """Copy ``w`` into ``net`` (built from ``w.spec`` when None) and return it. Raises
    KeyError for an unknown kind and RuntimeError when shapes do not match ``net``."""
    if net is None:  # its initial weights are overwritten: any generator will do
        net = KINDS[w.kind](**w.spec, generator=torch.Generator())
    net.load_state_dict({k: torch.from_numpy(v) for k, v in w.state.items()})
    return net
