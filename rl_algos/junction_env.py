"""The traffic junction of the benchmark's multi-agent workload as a PettingZoo parallel
environment, so that the multi-agent reactors (``lf_src/lib/MultiAgent.lf``) can train its
cars.

The junction's rules stay where the benchmark keeps them, ``lf_src/bench/junction.py`` (its
:class:`Junction`: cars on four routes across a grid, gas or brake, -0.01 per step on the road
times the car's age, -10 per collision); this module is only its PettingZoo face. ``core``
names the module that holds the ``Junction`` class: a program copies
``lf_src/bench/junction.py`` beside itself with the ``files`` target property
(``lf_src/JunctionPPO.lf``), a test puts ``lf_src/bench`` on the import path.

Every car is an agent for the whole episode, ``car_0`` .. ``car_{n-1}``: a car that is not on
the road (not yet arrived, or through the junction) is still live, with its observation's
active flag 0, no reward, and actions that do nothing. The episode ends after ``max_cycles``
steps (every car truncated; the junction's own limit is set past it, so the last
observations are the episode's, not a new one's). ``state()`` is every car's observation,
joined.
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo.utils.env import ParallelEnv  # type: ignore[import-untyped]

from .config import ConfigError


def _core(module: str) -> Any:
    """The module holding the junction's ``Junction`` class. ConfigError when it cannot be
    imported, saying how to make it importable."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(
            f"cannot import the junction's module {module!r} ({e}): copy lf_src/bench/"
            f'junction.py beside the program (target property files: ["bench/junction.py"]) '
            f"or put lf_src/bench on PYTHONPATH"
        ) from e


class JunctionEnv(ParallelEnv):
    """``n`` cars at a ``size`` x ``size`` junction where a car arrives with probability
    ``p_arrive`` per step, for episodes of ``max_cycles`` steps. Observations are float32
    (OBS_DIM,) per car, actions Discrete(2) (0 brake, 1 gas). ConfigError for ``n`` < 1 or
    ``max_cycles`` < 1."""

    metadata = {"name": "junction_v0", "render_modes": []}

    def __init__(
        self,
        n: int = 4,
        size: int = 14,
        p_arrive: float = 0.3,
        max_cycles: int = 40,
        core: str = "junction",
    ) -> None:
        if n < 1 or max_cycles < 1:
            raise ConfigError(
                f"junction needs n >= 1 cars and max_cycles >= 1, got {n}, {max_cycles}"
            )
        self.core_module = core  # a name: the environment's state pickles without the module
        self.n, self.size, self.p_arrive, self.max_cycles = n, size, p_arrive, max_cycles
        self.possible_agents = [f"car_{i}" for i in range(n)]
        self.agents: list[str] = []
        box = gym.spaces.Box(-np.inf, np.inf, (self.core.OBS_DIM,), np.float32)
        self.observation_spaces = {a: box for a in self.possible_agents}
        self.action_spaces = {
            a: gym.spaces.Discrete(self.core.N_ACTIONS) for a in self.possible_agents
        }
        self.junction: Any = None
        self.t = 0
        self._obs = np.zeros((n, self.core.OBS_DIM), np.float32)

    @property
    def core(self) -> Any:
        """The module holding the ``Junction`` class (imported once, then from sys.modules)."""
        return _core(self.core_module)

    def observation_space(self, agent: str) -> gym.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.Space:
        return self.action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        """A new episode; a ``seed`` (or the first reset) makes a new junction seeded with it
        (0 when None), later resets continue the junction's generator."""
        if seed is not None or self.junction is None:
            self.junction = self.core.Junction(
                self.n, seed or 0, self.size, self.p_arrive, self.max_cycles + 1
            )
        self._obs = self.junction.reset()
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._by_agent(self._obs), {a: {} for a in self.agents}

    def step(self, actions: dict[str, int]) -> tuple[dict, dict, dict, dict, dict]:
        """Move every car by its action (a car without one brakes); the step's observations,
        rewards, terminations (never), truncations (all at ``max_cycles``) and infos."""
        joint = np.array([int(actions.get(a, 0)) for a in self.possible_agents], np.int64)
        self._obs, rewards, _ = self.junction.step(joint)
        self.t += 1
        over = self.t >= self.max_cycles
        agents, self.agents = self.agents, [] if over else self.agents
        return (
            self._by_agent(self._obs),
            {a: float(r) for a, r in zip(self.possible_agents, rewards)},
            {a: False for a in agents},
            {a: over for a in agents},
            {a: {} for a in agents},
        )

    def state(self) -> np.ndarray:
        """Every car's observation joined: (n * OBS_DIM,) float32."""
        return self._obs.reshape(-1).copy()

    def _by_agent(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        return {a: obs[i] for i, a in enumerate(self.possible_agents)}


def parallel_env(**kwargs: Any) -> JunctionEnv:
    """A :class:`JunctionEnv` (PettingZoo's module convention: ``rl_algos.junction_env``
    names it for :func:`rl_algos.multiagent_env.make_parallel_env`)."""
    return JunctionEnv(**kwargs)
