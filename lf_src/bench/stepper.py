"""One gymnasium environment stepped with random actions from its own RNG.

The unit of work of the simulation-throughput workloads (benchmark workloads 1 and 2). Our
programs (``GymSim.lf``, ``AtariSim.lf``), the Ray actors and the plain loop of ``bench/`` all
step environments through :class:`Stepper`, so they do the same work and, given the same seed,
visit the same states: the summed rewards of two runs must agree exactly.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

#: random actions drawn from the RNG in one call, then handed out one per step
ACTION_BATCH = 1024


def env_seed(seed: int, index: int) -> int:
    """The reset seed of environment ``index`` (a 32-bit int derived from both numbers)."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def make_env(env_id: str, **kwargs):
    """``gymnasium.make(env_id)``; registers ale-py's environments first for ``ALE/...`` ids."""
    if env_id.startswith("ALE/"):
        import ale_py

        gym.register_envs(ale_py)
    return gym.make(env_id, **kwargs)


class Stepper:
    """Environment ``index`` of a bank: ``gym.make(env_id)`` reset with :func:`env_seed`.

    Actions come from ``numpy.random.default_rng([seed, index])``: uniform over a Discrete
    space, uniform in ``[low, high]`` for a Box. An episode that ends is reset at once.
    """

    def __init__(self, env_id: str, seed: int = 0, index: int = 0):
        self.env = make_env(env_id)
        self.rng = np.random.default_rng([seed, index])
        self.obs, _ = self.env.reset(seed=env_seed(seed, index))
        self._draw = self._sampler(self.env.action_space)
        self._actions: list = []
        self.episodes = 0

    def _sampler(self, space):
        rng = self.rng
        if isinstance(space, gym.spaces.Discrete):
            n, start = int(space.n), int(space.start)
            return lambda: (rng.integers(n, size=ACTION_BATCH) + start).tolist()
        if isinstance(space, gym.spaces.Box):
            low, high, dtype = space.low, space.high, space.dtype
            return lambda: list(
                rng.uniform(low, high, size=(ACTION_BATCH, *low.shape)).astype(dtype)
            )
        raise TypeError(f"no random actions for {space}")

    def step(self):
        """One step: returns ``(obs, reward, terminated, truncated)``; reward a float."""
        if not self._actions:
            self._actions = self._draw()
            self._actions.reverse()
        obs, reward, terminated, truncated, _ = self.env.step(self._actions.pop())
        if terminated or truncated:
            obs, _ = self.env.reset()
            self.episodes += 1
        self.obs = obs
        return obs, float(reward), bool(terminated), bool(truncated)

    def close(self) -> None:
        self.env.close()
