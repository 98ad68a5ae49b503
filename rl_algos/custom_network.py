"""A user's torch module as a learner's network: built by a factory named ``"module:function"``,
checked against the interface its learner needs, and rebuilt from plain data wherever the
network travels (a policy reactor in another worker, ``model.pt``, ``lf-rl eval``).

The factory is called as ``function(observation_space, action_space, **network_kwargs)``
with the environment's gymnasium spaces and returns an ``nn.Module`` built on the CPU. Its
module is imported from the import path (``PYTHONPATH``) or the current directory (added at
the end of ``sys.path``), in every process that builds or unpickles the network, as
:func:`rl_algos.envs.import_env_module` imports an environment's module (both through
:func:`rl_algos.envs.import_user_module`). What the module must provide depends on its role:

- ``"actor_critic"`` (PPO): ``forward(obs)`` takes a (B, *obs_shape) tensor of the observation
  space's dtype (float32 for a float Box, uint8 for frames) and returns ``(policy, value)``:
  ``policy`` the (B, n) float32 logits of a Discrete(n) action space, or the (B, A) float32
  mean of a Gaussian for a Box of A elements; ``value`` (B,) float32, V(s). For a Box the
  module also has ``log_std``, a (1, A) or (A,) float32 tensor (a parameter, to be learned):
  the log standard deviation, the same for every state (Schulman et al. 2017, section 6.1).
  The library's :class:`rl_algos.networks.ActorCritic` and
  :class:`rl_algos.networks.GaussianActorCritic` meet the same interface.
- ``"q"`` (DQN): ``forward(obs)`` as above returns the (B, n) float32 action values
  Q(s, .), as :class:`rl_algos.networks.QNetwork` does.
- ``"sac_actor"`` (SAC's policy, a Box action space of A elements): ``forward(obs)`` returns
  ``(mean, log_std)``, each (B, A) float32, of a Gaussian per action dimension *before* the
  tanh squash; the library squashes and scales samples into the Box's bounds as for its
  :class:`rl_algos.networks.SquashedGaussianActor`
  (:func:`rl_algos.distributions.squashed_gaussian_sample`, through
  :class:`rl_algos.custom_sac.CustomSACActor`). ``log_std`` is used as returned: the
  built-in bounds it to [LOG_STD_MIN, LOG_STD_MAX] = [-5, 2] with a tanh, and a custom one
  should bound it too.
- ``"sac_critic"`` (SAC's twin critics): ``forward(obs, action)`` takes the observations as
  above and (B, A) float32 actions and returns Q(s, a), (B,) float32, as
  :class:`rl_algos.networks.SoftQNetwork` does. The learner calls the factory twice (two
  critics, each with initial weights of its own) and copies each as its target.

Every parameter and buffer the network computes with must be in its ``state_dict`` (that is
what travels to the policy and into ``model.pt``), and ``forward`` draws no random numbers.
Initial weights are deterministic: the factory runs with torch's CPU generator seeded from
the learner's (see :func:`build_module`), so torch's default initialisation and the
``nn.init`` functions give the same weights for the same program seed on any worker count.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from .config import ConfigError
from .envs import import_user_module

#: The roles of a network (which learner uses it), and what its forward pass computes.
ROLES = {
    "actor_critic": "forward(obs) -> (logits or Gaussian mean, value)",
    "q": "forward(obs) -> Q values",
    "sac_actor": "forward(obs) -> (Gaussian mean, log_std) before the tanh squash",
    "sac_critic": "forward(obs, action) -> Q(s, a)",
}
#: The roles that need a Box action space (SAC acts in continuous spaces only).
BOX_ROLES = ("sac_actor", "sac_critic")
#: The rows of the batch a network is checked with.
CHECK_ROWS = 2
#: Held while a factory runs with torch's global CPU generator seeded (threads share it).
_GLOBAL_GENERATOR = threading.Lock()


def import_factory(factory: str) -> Callable[..., Any]:
    """The function named by ``factory`` (``"module:function"``), its module imported with the
    current directory added at the end of ``sys.path``.

    Raises:
        ConfigError: ``factory`` is not of that form, its module cannot be imported (the
            message says where it was looked for) or has no such function.
    """
    module_name, colon, name = factory.partition(":")
    if not (colon and module_name and name):
        raise ConfigError(
            f"network {factory!r} is not 'module:function' (e.g. 'custom_policy:make')"
        )
    try:
        module = import_user_module(module_name, f"network {factory}")
    except ImportError as e:
        raise ConfigError(str(e)) from e
    make = getattr(module, name, None)
    if not callable(make):
        raise ConfigError(f"network {factory}: module {module_name!r} has no function {name!r}")
    return make


def space_spec(space: gym.Space) -> dict[str, Any]:
    """``space`` (a Discrete or a Box) as plain data (what :func:`space_of` rebuilds it from):
    a Box's bounds are a number when every element has the same, else nested lists.

    Raises:
        ConfigError: another kind of space.
    """
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "shape": tuple(int(x) for x in space.shape),
            "dtype": str(space.dtype),
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    raise ConfigError(f"a custom network takes Discrete or Box spaces, not {type(space).__name__}")


def _bound(values: np.ndarray) -> float | list:
    flat = values.reshape(-1)
    same = len(flat) > 0 and bool(np.all(flat == flat[0]))
    return float(flat[0]) if same else values.astype(np.float64).tolist()


def space_of(spec: dict[str, Any]) -> gym.Space:
    """The gymnasium space described by ``spec`` (from :func:`space_spec`)."""
    if spec["type"] == "Discrete":
        return gym.spaces.Discrete(spec["n"], start=spec["start"])
    dtype = np.dtype(spec["dtype"])
    low, high = (np.asarray(spec[k], np.float64) for k in ("low", "high"))
    shape = tuple(spec["shape"])
    return gym.spaces.Box(
        np.broadcast_to(low, shape).astype(dtype), np.broadcast_to(high, shape).astype(dtype)
    )


def build_module(
    factory: str,
    kwargs: dict[str, Any],
    spaces: tuple[gym.Space, gym.Space],
    generator: torch.Generator,
) -> nn.Module:
    """``function(observation_space, action_space, **kwargs)`` of ``factory``, run with
    torch's CPU generator seeded by one draw from ``generator`` (and restored after, under a
    lock: reactors on worker threads build one at a time), so that its initial weights depend
    on ``generator`` only.

    Raises:
        ConfigError: the factory cannot be imported (:func:`import_factory`), does not take
            these arguments, or returns something other than an ``nn.Module``.
    """
    make = import_factory(factory)
    try:
        inspect.signature(make).bind(*spaces, **kwargs)
    except TypeError as e:
        raise ConfigError(
            f"network {factory} cannot be called as {make.__name__}(observation_space, "
            f"action_space, **{kwargs!r}): {e}"
        ) from None
    seed = int(torch.randint(2**62, (1,), generator=generator))
    with _GLOBAL_GENERATOR, torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        module = make(*spaces, **kwargs)
    if not isinstance(module, nn.Module):
        raise ConfigError(
            f"network {factory} returned {type(module).__name__}, not a torch.nn.Module"
        )
    return module


def check_network(
    module: nn.Module, role: str, spaces: tuple[gym.Space, gym.Space], name: str
) -> None:
    """Run ``module`` on a batch of :data:`CHECK_ROWS` observations and check what it returns
    against the interface of ``role`` (a key of :data:`ROLES`) for ``spaces``.

    A ``"sac_critic"`` is also given :data:`CHECK_ROWS` actions (:func:`sample_actions`).

    Raises:
        ConfigError: an action space the role cannot act in (:func:`check_action_space`), a
            method or attribute missing, forward failing on the batch, or an output of
            another shape or dtype; the message names ``name`` (the factory), what is wrong
            and what is expected.
    """
    obs_space, action_space = spaces
    check_action_space(name, role, action_space)
    call = _call(role)
    if type(module).forward is nn.Module.forward:
        raise ConfigError(f"network {name}: {type(module).__name__} has no {call} method")
    inputs = [torch.as_tensor(sample_observations(obs_space, CHECK_ROWS))]
    if role == "sac_critic":
        box = cast(gym.spaces.Box, action_space)  # checked above
        inputs.append(torch.as_tensor(sample_actions(box, CHECK_ROWS)))
    try:
        with torch.no_grad():
            out = module(*inputs)
    except Exception as e:  # the user's code: its message, with what it was given
        given = " and ".join(f"{_describe(x)} {w}" for x, w in zip(inputs, _INPUTS))
        raise ConfigError(
            f"network {name}: {call} failed on {given}: {type(e).__name__}: {e}"
        ) from e
    shapes, what = _outputs(role, action_space)
    _expect(name, role, out, shapes, what)
    if role == "actor_critic" and isinstance(action_space, gym.spaces.Box):
        _check_log_std(module, name, shapes[0][1])


#: What the inputs of a forward pass are, in order (in messages).
_INPUTS = ("observations", "actions")


def _call(role: str) -> str:
    """``forward(obs)``, or ``forward(obs, action)`` for a critic of state and action."""
    return "forward(obs, action)" if role == "sac_critic" else "forward(obs)"


def _outputs(role: str, action_space: gym.Space) -> tuple[list[tuple[int, ...]], str]:
    """The shapes of the float32 tensors a network of ``role`` returns for :data:`CHECK_ROWS`
    inputs, and what they are called."""
    n, size = CHECK_ROWS, _action_size(action_space)
    if role == "q":
        return [(n, size)], "Q values"
    if role == "sac_actor":
        return [(n, size), (n, size)], "(Gaussian mean, log_std)"
    if role == "sac_critic":
        return [(n,)], "Q(s, a)"
    policy = "logits" if isinstance(action_space, gym.spaces.Discrete) else "Gaussian mean"
    return [(n, size), (n,)], f"({policy}, value)"


def sample_observations(space: gym.Space, rows: int) -> np.ndarray:
    """(rows, *shape) observations of ``space`` in its dtype, with no random draw: zeros
    clipped into a Box's bounds, the first value of a Discrete space."""
    if not isinstance(space, gym.spaces.Box):
        return np.full(rows, getattr(space, "start", 0), np.int64)
    zero = np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
    return np.broadcast_to(zero, (rows, *space.shape)).copy()


def sample_actions(space: gym.spaces.Box, rows: int) -> np.ndarray:
    """(rows, A) float32 actions of the Box ``space`` of A elements, with no random draw:
    zeros clipped into its bounds."""
    zero = np.clip(np.zeros(space.shape), space.low, space.high).reshape(-1)
    return np.broadcast_to(zero.astype(np.float32), (rows, zero.size)).copy()


def _action_size(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    return int(np.prod(space.shape or ()))


def _expect(name: str, role: str, out: Any, shapes: list[tuple[int, ...]], what: str) -> None:
    """Refuse ``out`` of a network of ``role`` unless it is float32 tensors of ``shapes`` (one
    tensor, or a tuple of them when several)."""
    got = list(out) if isinstance(out, tuple | list) else [out]
    ok = len(got) == len(shapes) and all(
        isinstance(t, torch.Tensor) and tuple(t.shape) == s and t.dtype == torch.float32
        for t, s in zip(got, shapes)
    )
    if ok:
        return
    want = ", ".join(f"{_shape(s)} float32" for s in shapes)
    want = f"({want})" if len(shapes) > 1 else want
    given = " and ".join(_INPUTS[: 2 if role == "sac_critic" else 1])
    raise ConfigError(
        f"network {name}: {_call(role)} on {CHECK_ROWS} {given} must return {what}: "
        f"{want}; it returned {_describe(out)}"
    )


def _check_log_std(module: nn.Module, name: str, dim: int) -> None:
    log_std = getattr(module, "log_std", None)
    shape = None if not isinstance(log_std, torch.Tensor) else tuple(log_std.shape)
    if shape in ((dim,), (1, dim)) and log_std is not None and log_std.dtype == torch.float32:
        return
    raise ConfigError(
        f"network {name}: a policy for a Box action space needs a log_std attribute, a "
        f"(1, {dim}) float32 tensor (nn.Parameter); {type(module).__name__} has "
        f"{_describe(log_std) if log_std is not None else 'none'}"
    )


def _shape(shape: tuple[int, ...]) -> str:
    return f"({shape[0]},)" if len(shape) == 1 else str(tuple(shape))


def _describe(value: Any) -> str:
    """``a (2, 3) float32 tensor``, ``(a ..., a ...)``, or the type of anything else."""
    if isinstance(value, torch.Tensor):
        return f"a {_shape(tuple(value.shape))} {str(value.dtype).removeprefix('torch.')} tensor"
    if isinstance(value, tuple | list):
        return f"({', '.join(_describe(v) for v in value)})"
    return f"a {type(value).__name__}"


class CustomNetwork(nn.Module):
    """A user's module (``self.module``) built by ``factory`` with ``kwargs`` for the spaces
    ``observation_space`` and ``action_space`` (as :func:`space_spec` gives them), checked
    for ``role`` (:data:`ROLES`); ``forward`` is the module's, on observations of the
    observation space's dtype (cast to it: SAC's learner and policy hold float32 ones).
    ``spec`` holds these five arguments: :class:`rl_algos.networks.Weights` and ``model.pt``
    carry it, and ``CustomNetwork(**spec, generator=g)`` rebuilds the network anywhere (its
    state dict holds the module's under ``module.``). Initial weights are drawn as
    :func:`build_module` says, from ``generator`` (keyword-only, required). A pickled
    network (of this class or a subclass) imports the factory's module first when it is
    unpickled (a resumed run).

    Raises:
        ConfigError: see :func:`build_module` and :func:`check_network`; also an unknown
            role, or a PPO policy for an action space that is neither Discrete nor Box.
    """

    def __init__(
        self,
        factory: str,
        kwargs: dict[str, Any],
        observation_space: dict[str, Any],
        action_space: dict[str, Any],
        role: str,
        *,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        if role not in ROLES:
            raise ConfigError(f"unknown network role {role!r} ({', '.join(ROLES)})")
        if not isinstance(kwargs, dict):
            raise ConfigError(f"network_kwargs must be a dict, not {kwargs!r}")
        self.spec: dict[str, Any] = dict(
            factory=factory,
            kwargs=dict(kwargs),
            observation_space=observation_space,
            action_space=action_space,
            role=role,
        )
        spaces = (space_of(observation_space), space_of(action_space))
        self.module = build_module(factory, kwargs, spaces, generator)
        check_network(self.module, role, spaces, factory)
        #: a PPO policy for a Box action space: its output is a Gaussian's mean
        self.continuous = role == "actor_critic" and isinstance(spaces[1], gym.spaces.Box)

    def forward(self, obs: torch.Tensor, *actions: torch.Tensor) -> Any:
        """The user's module on (B, *obs_shape) observations (and, for a ``"sac_critic"``,
        (B, A) float32 actions): what its role's interface says (``ROLES``)."""
        return self.module(obs.to(_torch_dtype(self.spec["observation_space"])), *actions)

    @property
    def log_std(self) -> torch.Tensor:
        """The module's ``log_std`` (a PPO policy for a Box action space)."""
        return cast(torch.Tensor, self.module.log_std)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickled_network, (self.spec["factory"], type(self)), self.__getstate__())


def _unpickled_network(factory: str, cls: type[CustomNetwork] = CustomNetwork) -> CustomNetwork:
    """An empty ``cls`` (:class:`CustomNetwork` or a subclass) for pickle to fill, once
    ``factory``'s module is imported (its classes are in the state that follows)."""
    import_factory(factory)
    return cls.__new__(cls)


@functools.cache
def _dtype_of(name: str) -> torch.dtype:
    return torch.from_numpy(np.empty(0, np.dtype(name))).dtype


def _torch_dtype(space: dict[str, Any]) -> torch.dtype:
    """The torch dtype of the observations of ``space`` (from :func:`space_spec`)."""
    return _dtype_of(space.get("dtype", "int64"))  # a Discrete space: int64 indices


def custom_network(
    factory: str,
    kwargs: dict[str, Any],
    spaces: tuple[gym.Space, gym.Space],
    role: str,
    generator: torch.Generator,
    cls: type[CustomNetwork] = CustomNetwork,
) -> CustomNetwork:
    """A :class:`CustomNetwork` of ``role`` for gymnasium ``spaces`` (observation, action);
    ``cls``: the class to build, :class:`CustomNetwork` or a subclass that gives a role's
    users more than ``forward`` (:class:`rl_algos.custom_sac.CustomSACActor` for
    ``"sac_actor"``).

    Raises:
        ConfigError: see :class:`CustomNetwork`; also an action space the role cannot act in
            (PPO: Discrete or Box; DQN: Discrete; SAC: Box).
    """
    obs_space, action_space = spaces
    check_action_space(factory, role, action_space)
    return cls(
        factory,
        kwargs,
        space_spec(obs_space),
        space_spec(action_space),
        role,
        generator=generator,
    )


def check_action_space(name: str, role: str, space: gym.Space) -> None:
    """Refuse an action space a network of ``role`` cannot act in (PPO: Discrete or Box;
    DQN: Discrete; SAC: Box) with a ConfigError naming ``name`` (the factory)."""
    kind = type(space).__name__
    if role == "actor_critic" and not isinstance(space, gym.spaces.Discrete | gym.spaces.Box):
        raise ConfigError(f"network {name}: PPO acts in Discrete or Box action spaces, not {kind}")
    if role == "q" and not isinstance(space, gym.spaces.Discrete):
        raise ConfigError(f"network {name}: a Q-network needs a Discrete action space")
    if role in BOX_ROLES and not isinstance(space, gym.spaces.Box):
        raise ConfigError(
            f"network {name}: SAC's {role.removeprefix('sac_')} needs a Box (continuous) "
            f"action space, not {kind}"
        )


def network_spaces(spec: dict[str, Any]) -> tuple[tuple[int, ...], int | tuple[int, ...]]:
    """The (observation shape, actions) of a :class:`CustomNetwork`'s ``spec``: actions are a
    count for a Discrete action space, a shape (A,) for a Box (as
    :func:`rl_algos.evaluate.network_spaces` gives them)."""
    obs, action = spec["observation_space"], spec["action_space"]
    shape = tuple(int(x) for x in obs["shape"])
    if action["type"] == "Discrete":
        return shape, int(action["n"])
    return shape, (int(np.prod(action["shape"])),)
