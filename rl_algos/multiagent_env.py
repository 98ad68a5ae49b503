"""Multi-agent environments: K PettingZoo parallel environments inside one reactor.

A PettingZoo ``ParallelEnv`` steps every live agent at once, with observations, actions and
rewards in dicts keyed by agent name; agents may leave (terminated or truncated) and join
during an episode (``env.agents`` is the live ones, ``env.possible_agents`` all of them). A
:class:`ParallelEnvGroup` turns that into fixed-shape arrays a reactor can send over a port:
each agent of ``possible_agents`` owns a **slot** (its index there), and every array has
one row per slot, ``(K, N, ...)`` for K environments of N agents, with a **mask** saying which
slots are live. An absent slot (an agent not yet in the episode, or one that left) has a
zero observation, a zero reward and False in the mask; its action is not sent to the
environment. Observations are flattened to float32 and zero-padded to the largest agent's
size, so that agents with different observation spaces share one array (and one network, if
asked). Every agent's action space must be the same ``Discrete(n)``.

The group resets an environment when its episode ends (no live agent left) and reports the
finished episode with the **team return**: the sum of every agent's rewards over the episode
(an :class:`rl_algos.envs.Episode`). The first reset of each environment is seeded from the
owning reactor's generator; later resets continue the environment's own generator, as
:class:`rl_algos.envs.EnvGroup` does.

An environment is named by a module path: ``mpe2.simple_spread_v3`` calls that module's
``parallel_env(**kwargs)`` (PettingZoo's convention); ``package.module:function`` calls
``function(**kwargs)`` of the module instead (:func:`make_parallel_env`).
"""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from .config import ConfigError
from .envs import Episode


@dataclass(frozen=True)
class AgentSpaces:
    """What the agents of a multi-agent environment look like, as plain data.

    ``agents``: the names of ``possible_agents`` in slot order; ``obs_dim``: the length of
    an observation row (the largest flattened observation); ``state_dim``: the length of the
    global state; ``n_actions``: the size of every agent's ``Discrete`` action space;
    ``has_state``: whether the state is the environment's own ``state()`` (else it is every
    slot's observation and the mask, joined).
    """

    agents: tuple[str, ...]
    obs_dim: int
    state_dim: int
    n_actions: int
    has_state: bool

    @property
    def n_agents(self) -> int:
        """N, the number of agent slots."""
        return len(self.agents)


@dataclass
class MultiAgentStep:
    """What a :class:`ParallelEnvGroup` reports after a reset or a step of its K environments
    of N agent slots (the fields the episode logger reads, ``obs``, ``episodes`` and
    ``steps``, mean what they mean in :class:`rl_algos.envs.EnvStep`).

    - ``obs``: (K, N, obs_dim) float32, each slot's observation now (zeros where absent);
    - ``state``: (K, state_dim) float32, the global state now;
    - ``mask``: (K, N) bool, the slot's agent is live now: it acts at the next step;
    - ``reward``: (K, N) float32, each agent's reward for the step just taken (0 for a slot
      that did not act);
    - ``terminated``, ``truncated``: (K, N) bool, how the step just taken ended the slot's
      agent (it left, or the episode ended); False for a slot that did not act;
    - ``final_obs``: (K, N, obs_dim) float32 or None; where ``terminated | truncated``, the
      agent's last observation; ``final_state``: (K, state_dim) float32 or None, the state
      after the step, before a reset (given with ``final_obs``);
    - ``episodes``: the episodes finished by this step (env index, team return, length in
      steps), in env order; ``steps``: environment steps taken by the group so far (K each).
    """

    obs: np.ndarray
    state: np.ndarray
    mask: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray | None = None
    final_state: np.ndarray | None = None
    episodes: list = field(default_factory=list)
    steps: int = 0

    @property
    def done(self) -> np.ndarray:
        """(K, N) bool: the step just taken ended the slot's agent."""
        return self.terminated | self.truncated


def make_parallel_env(env_id: str, **kwargs: Any) -> Any:
    """A PettingZoo ``ParallelEnv`` named by ``env_id``: ``module.path`` calls
    ``module.path.parallel_env(**kwargs)``, ``module.path:function`` calls
    ``function(**kwargs)`` of that module.

    Raises:
        ConfigError: the module cannot be imported, has no such function, the function refuses
            the keyword arguments, or what it returns is not a parallel environment (no
            ``possible_agents``, ``reset`` and ``step``).
    """
    module_name, _, function = env_id.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(
            f"environment {env_id!r}: cannot import module {module_name!r}: {e}"
        ) from e
    make = getattr(module, function or "parallel_env", None)
    if not callable(make):
        raise ConfigError(
            f"environment {env_id!r}: module {module_name} has no function "
            f"{function or 'parallel_env'}() (a PettingZoo environment module has parallel_env)"
        )
    try:
        env = make(**kwargs)
    except TypeError as e:
        raise ConfigError(f"environment {env_id!r} refused its arguments {kwargs!r}: {e}") from e
    if not all(hasattr(env, a) for a in ("possible_agents", "reset", "step")):
        raise ConfigError(f"environment {env_id!r} gave {type(env).__name__}, not a ParallelEnv")
    return env


def _flat_size(space: gym.Space) -> int:
    return int(gym.spaces.flatdim(space))


def agent_spaces(env: Any) -> AgentSpaces:
    """The :class:`AgentSpaces` of a parallel environment (reset or not).

    Raises:
        ConfigError: an agent's action space is not ``Discrete``, or the agents' action spaces
            differ in size (the message names the agents and their spaces).
    """
    agents = tuple(env.possible_agents)
    actions = {a: env.action_space(a) for a in agents}
    sizes = {a: int(s.n) for a, s in actions.items() if isinstance(s, gym.spaces.Discrete)}
    if len(sizes) != len(agents) or len(set(sizes.values())) != 1:
        raise ConfigError(
            "multi-agent PPO needs every agent's action space to be the same Discrete(n); "
            f"got {', '.join(f'{a}: {s}' for a, s in actions.items())}"
        )
    obs_dim = max(_flat_size(env.observation_space(a)) for a in agents)
    state = _env_state(env)
    has_state = state is not None
    state_dim = state.size if state is not None else len(agents) * (obs_dim + 1)
    return AgentSpaces(agents, obs_dim, int(state_dim), sizes[agents[0]], has_state)


def _env_state(env: Any) -> np.ndarray | None:
    """``env.state()`` flattened to float32, or None when the environment has none (or has
    not been reset yet, for an environment that needs it)."""
    try:
        return np.asarray(env.state(), np.float32).reshape(-1)
    except (NotImplementedError, AttributeError, TypeError, IndexError):
        return None


class ParallelEnvGroup:
    """K parallel environments of one id, stepped together, with automatic reset.

    ``rng`` is the owning reactor's generator: it draws one seed per environment for the
    first reset. ``kwargs`` go to :func:`make_parallel_env`. Raises
    :class:`~rl_algos.config.ConfigError` (a ValueError, reported on one line when a program
    starts) for ``k`` < 1, a bad id or bad arguments (see also :func:`agent_spaces`).
    """

    def __init__(self, env_id: str, k: int, rng: np.random.Generator, **kwargs: Any) -> None:
        if k < 1:
            raise ConfigError(f"ParallelEnvGroup needs k >= 1 environments, got {k}")
        self.env_id, self.kwargs, self.k = env_id, dict(kwargs), k
        self.envs = [make_parallel_env(env_id, **kwargs) for _ in range(k)]
        self.seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=k)]
        for env, seed in zip(self.envs, self.seeds):
            env.reset(seed=seed)
        self.spaces = agent_spaces(self.envs[0])
        self.slot = {a: i for i, a in enumerate(self.spaces.agents)}
        self.steps = 0
        self._ret = np.zeros(k, np.float64)
        self._len = np.zeros(k, np.int64)

    def reset(self) -> MultiAgentStep:
        """Reset every environment with its seed; the step has zero rewards."""
        n, d = self.spaces.n_agents, self.spaces.obs_dim
        obs, mask = np.zeros((self.k, n, d), np.float32), np.zeros((self.k, n), bool)
        for i, (env, seed) in enumerate(zip(self.envs, self.seeds)):
            self._fill(env, env.reset(seed=seed)[0], obs[i], mask[i])
        z = np.zeros((self.k, n), bool)
        state = np.stack([self._state(env, o, m) for env, o, m in zip(self.envs, obs, mask)])
        return MultiAgentStep(obs, state, mask, np.zeros((self.k, n), np.float32), z, z.copy())

    def _fill(self, env: Any, obs: dict, rows: np.ndarray, mask: np.ndarray) -> None:
        """Write the observations of ``env``'s live agents into their slots of ``rows``
        (N, obs_dim) and set their ``mask`` entries."""
        for agent in env.agents:
            i = self.slot[agent]
            flat = np.asarray(obs[agent], np.float32).reshape(-1)
            rows[i, : flat.size] = flat
            mask[i] = True

    def _state(self, env: Any, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The global state of ``env``: its ``state()``, or its (N, obs_dim) observations
        and (N,) mask joined when it has none."""
        if self.spaces.has_state:
            return np.asarray(env.state(), np.float32).reshape(-1)
        return np.concatenate([obs.reshape(-1), mask.astype(np.float32)])

    def step(self, actions: np.ndarray) -> MultiAgentStep:
        """Step every environment with ``actions`` ((K, N) ints, one per slot; those of
        absent slots are not sent). Environments whose episode ended are reset and their
        episodes reported. An agent that leaves the live agents without being terminated or
        truncated counts as terminated."""
        actions = np.asarray(actions).reshape(self.k, self.spaces.n_agents)
        n, d = self.spaces.n_agents, self.spaces.obs_dim
        out = MultiAgentStep(
            np.zeros((self.k, n, d), np.float32),
            np.zeros((self.k, self.spaces.state_dim), np.float32),
            np.zeros((self.k, n), bool),
            np.zeros((self.k, n), np.float32),
            np.zeros((self.k, n), bool),
            np.zeros((self.k, n), bool),
        )
        for i, env in enumerate(self.envs):
            self._step_one(i, env, actions[i], out)
        self.steps += self.k
        out.steps = self.steps
        return out

    def _step_one(self, i: int, env: Any, actions: np.ndarray, out: MultiAgentStep) -> None:
        """Step environment ``i`` and write its rows of ``out``."""
        live = list(env.agents)
        obs, rew, term, trunc, _ = env.step({a: int(actions[self.slot[a]]) for a in live})
        for agent in live:
            s = self.slot[agent]
            out.reward[i, s] = rew.get(agent, 0.0)
            left = agent not in env.agents
            out.terminated[i, s] = bool(term.get(agent, False)) or (
                left and not trunc.get(agent, False)
            )
            out.truncated[i, s] = bool(trunc.get(agent, False)) and not out.terminated[i, s]
        self._ret[i] += float(out.reward[i].sum())
        self._len[i] += 1
        self._fill(env, obs, out.obs[i], out.mask[i])
        out.state[i] = self._state(env, out.obs[i], out.mask[i])
        if out.done[i].any():
            self._keep_final(i, obs, out)
        if not env.agents:
            out.episodes.append(Episode(i, float(self._ret[i]), int(self._len[i])))
            self._ret[i], self._len[i] = 0.0, 0
            out.obs[i], out.mask[i] = 0.0, False
            self._fill(env, env.reset()[0], out.obs[i], out.mask[i])
            out.state[i] = self._state(env, out.obs[i], out.mask[i])

    def _keep_final(self, i: int, obs: dict, out: MultiAgentStep) -> None:
        """Record the last observations of the agents of environment ``i`` that the step
        ended, and the state after the step."""
        if out.final_obs is None:
            out.final_obs = np.zeros_like(out.obs)
            out.final_state = np.zeros_like(out.state)
        assert out.final_state is not None
        for s in np.flatnonzero(out.done[i]):
            flat = np.asarray(obs.get(self.spaces.agents[s], 0.0), np.float32).reshape(-1)
            out.final_obs[i, s, : flat.size] = flat
        out.final_state[i] = out.state[i]

    def __getstate__(self) -> dict[str, Any]:
        """The group's state for a snapshot, each environment as :func:`env_state`."""
        state = dict(vars(self))
        state["envs"] = [env_state(env) for env in self.envs]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a snapshot: each environment made anew and given its saved state."""
        saved = state.pop("envs")
        vars(self).update(state)
        self.envs = [make_parallel_env(self.env_id, **self.kwargs) for _ in saved]
        for env, layers in zip(self.envs, saved):
            restore_env(env, layers)

    def close(self) -> None:
        """Close every environment."""
        for env in self.envs:
            env.close()


def concat_agent_steps(steps: Sequence[MultiAgentStep]) -> MultiAgentStep:
    """One MultiAgentStep for several groups (a bank of environment reactors), their
    environments joined in the given order (``episodes`` are not re-indexed: the learner does
    not read them); a single step is returned as is."""
    if len(steps) == 1:
        return steps[0]

    def join(name: str) -> np.ndarray:
        return np.concatenate([getattr(s, name) for s in steps])

    def join_final(name: str, like: str) -> np.ndarray | None:
        if all(getattr(s, name) is None for s in steps):
            return None
        parts = [getattr(s, name) for s in steps]
        return np.concatenate(
            [p if p is not None else np.zeros_like(getattr(s, like)) for p, s in zip(parts, steps)]
        )

    return MultiAgentStep(
        join("obs"), join("state"), join("mask"), join("reward"), join("terminated"),
        join("truncated"), join_final("final_obs", "obs"), join_final("final_state", "state"),
        [], sum(s.steps for s in steps),
    )  # fmt: skip


#: The attributes by which a wrapper holds the environment it wraps.
_INNER = ("env", "aec_env", "par_env")


def _layers(env: Any) -> list[Any]:
    """``env`` and every environment it wraps, outermost first."""
    out = [env]
    while True:
        inner = next((vars(out[-1]).get(a) for a in _INNER if a in vars(out[-1])), None)
        if inner is None or not hasattr(inner, "__dict__"):
            return out
        out.append(inner)


def env_state(env: Any) -> list[bytes]:
    """The state of a parallel environment as one pickle per layer of its wrappers (each
    layer's attributes, without the wrapped environment). Many PettingZoo environments
    pickle as their constructor's arguments only (gymnasium's ``EzPickle``): this keeps
    their world, agents and generator, which :func:`restore_env` puts back. An attribute
    that cannot be pickled (a rendering surface) is left out: the restored environment
    keeps the one its constructor made."""
    return [pickle.dumps(_picklable(layer)) for layer in _layers(env)]


def _picklable(layer: Any) -> dict[str, Any]:
    """The attributes of ``layer`` but the wrapped environment, those pickle can save."""
    out = {}
    for k, v in vars(layer).items():
        if k in _INNER:
            continue
        try:
            pickle.dumps(v)
        except Exception:  # noqa: BLE001 - any failure to pickle means: not saved
            continue
        out[k] = v
    return out


def restore_env(env: Any, layers: Sequence[bytes]) -> None:
    """Give ``env`` (made with the same id and arguments) the state of :func:`env_state`.
    ValueError when its wrappers are not the ones the state was taken from."""
    mine = _layers(env)
    if len(mine) != len(layers):
        raise ValueError(f"environment has {len(mine)} layers, the state {len(layers)}")
    for layer, saved in zip(mine, layers):
        vars(layer).update(pickle.loads(saved))


def random_returns(
    env_id: str, steps: int, seed: int = 0, k: int = 8, **kwargs: Any
) -> list[float]:
    """The team returns of the episodes that uniformly random actions finish in ``steps``
    environment steps of ``k`` environments of ``env_id`` (``kwargs`` as for
    :func:`make_parallel_env`), seeded with ``seed``: the baseline a learner must beat."""
    rng = np.random.default_rng(seed)
    group = ParallelEnvGroup(env_id, k, rng, **kwargs)
    group.reset()
    shape, returns = (k, group.spaces.n_agents), []
    while group.steps < steps:
        returns += [
            e.ret for e in group.step(rng.integers(0, group.spaces.n_actions, shape)).episodes
        ]
    group.close()
    return returns
