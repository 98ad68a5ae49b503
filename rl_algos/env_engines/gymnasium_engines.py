"""The engines running gymnasium environments in Python: the loop (the reference), and
gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` with same-step autoreset, which give the
loop's results bit for bit (tests/test_rl_env_engines.py)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import gymnasium as gym
import numpy as np

from .base import Batch, Engine, InProcess, Maker, Unsavable, fresh, vector_batch


class LoopEngine(InProcess, Engine):
    """K gymnasium environments stepped in turn in this process (the reference engine)."""

    name = "loop"

    def __init__(self, makers: Sequence[Maker]) -> None:
        self.envs = [make() for make in makers]
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self._obs: np.ndarray | None = None

    def environments(self) -> list[gym.Env]:
        return self.envs

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        obs = []
        for env, seed in zip(self.envs, seeds):
            env.action_space.seed(seed)
            obs.append(env.reset(seed=seed)[0])
        self._obs = np.stack(obs)
        return self._obs

    def step(self, actions: np.ndarray) -> Batch:
        assert self._obs is not None
        k = len(self.envs)
        # The dtype by its name: after a resume, self._obs is unpickled and its dtype a copy of
        # numpy's, which would pickle (and digest) differently from the uninterrupted run's.
        obs = np.empty(self._obs.shape, np.dtype(self._obs.dtype.str))
        rew = np.zeros(k, np.float64)  # the rewards as the environments give them: summed
        # into the episodes' returns exactly (Pendulum's are float64)
        term, trunc = np.zeros(k, bool), np.zeros(k, bool)
        final = None
        for i, (env, a) in enumerate(zip(self.envs, actions)):
            o, r, te, tr, _ = env.step(a.item() if isinstance(a, np.generic) else a)
            rew[i], term[i], trunc[i] = r, te, tr
            if te or tr:
                if final is None:
                    final = np.zeros_like(self._obs)
                final[i] = o
                o = env.reset()[0]
            obs[i] = o
        self._obs = obs  # a new array each step: receivers may keep the one they got
        return Batch(obs, rew, term, trunc, final)

    def close(self) -> None:
        for env in self.envs:
            env.close()


class SyncEngine(InProcess, Engine):
    """gymnasium's ``SyncVectorEnv`` with same-step autoreset: the loop's work through
    gymnasium's class, bit for bit the loop's results."""

    name = "gymnasium-sync"

    def __init__(self, makers: Sequence[Maker]) -> None:
        self.vec = gym.vector.SyncVectorEnv(
            list(makers), copy=False, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
        )
        self.observation_space = self.vec.single_observation_space
        self.action_space = self.vec.single_action_space

    def environments(self) -> list[gym.Env]:
        return self.vec.envs

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        for env, seed in zip(self.vec.envs, seeds):
            env.action_space.seed(seed)
        return fresh(self.vec.reset(seed=list(seeds))[0])

    def step(self, actions: np.ndarray) -> Batch:
        return vector_batch(self.vec.step(actions))

    def close(self) -> None:
        self.vec.close()


@contextmanager
def children_allowed() -> Iterator[None]:
    """Let this process start child processes while inside the block, even when it is a
    daemon (the runtime's workers are; multiprocessing refuses children to a daemon, whose
    children a sudden end would orphan: the environment processes, daemons themselves, end
    with their worker, or at the end of their pipe when it dies)."""
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]
    daemon = config.pop("daemon", None)
    try:
        yield
    finally:
        if daemon is not None:
            config["daemon"] = daemon


class AsyncEngine(Unsavable, Engine):
    """gymnasium's ``AsyncVectorEnv`` with same-step autoreset: one forked process per
    environment, observations through shared memory; bit for bit the loop's results."""

    name = "gymnasium-async"
    lives_in = "other processes"

    def __init__(self, makers: Sequence[Maker]) -> None:
        with children_allowed():
            self.vec = gym.vector.AsyncVectorEnv(
                list(makers),
                copy=False,
                context="fork",
                autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
            )
        self.observation_space = self.vec.single_observation_space
        self.action_space = self.vec.single_action_space

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        self.action_space.seed(seeds[0])  # as the loop seeds the space it reports
        return fresh(self.vec.reset(seed=list(seeds))[0])

    def step(self, actions: np.ndarray) -> Batch:
        return vector_batch(self.vec.step(actions))

    def close(self) -> None:
        self.vec.close()
