"""The engines running C++ environment pools: EnvPool (``envpool.make(...,
env_type="gymnasium")``) and ale-py's ``AtariVectorEnv``. Their games are their own (EnvPool's
CartPole, ALE's preprocessing in C++), set to what :func:`rl_algos.envs.make_atari` does; they
draw random starts and sticky actions from their own generators (docs/environments.md)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from ..config import ConfigError
from .base import RENDERING, Batch, Engine, Unsavable, atari_game, fresh, is_atari, vector_batch

#: ``make_kwargs`` the C++ Atari engines understand (as :func:`rl_algos.envs.make_atari` does).
ATARI_KWARGS = (
    "frame_stack",
    "noop_max",
    "repeat_action_probability",
    "full_action_space",
    "max_num_frames_per_episode",
    "num_threads",
)
#: C++ threads of one pool unless ``make_kwargs`` says ``num_threads``: one, as the bank of
#: environment reactors spreads over workers (each pool's idle threads spin, waiting for
#: actions, and cores shared by more threads than they can run slow everything down).
THREADS = 1


class EnvPoolEngine(Unsavable, Engine):
    """EnvPool's synchronous pool (``batch_size = K``), gymnasium flavour. EnvPool resets an
    ended environment at its next step, ignoring the action; this engine resets it at once
    instead (a reset of the ended ones only), so the observations are the loop's kind."""

    name = "envpool"

    def __init__(self, env_id: str, k: int, seeds: Sequence[int], kwargs: dict[str, Any]) -> None:
        try:
            import envpool
        except ImportError:
            raise ConfigError(
                "engine 'envpool' needs the envpool package (pip install envpool); "
                f"engines that need nothing more: {', '.join(RENDERING)}"
            ) from None
        task, options = envpool_task(env_id, kwargs, envpool.list_all_envs())
        with warnings.catch_warnings():  # its spaces' bounds are float64, cast to float32
            warnings.simplefilter("ignore")
            try:
                self.pool = envpool.make(
                    task, env_type="gymnasium", num_envs=k, env_seed=list(seeds), **options
                )
            except (TypeError, ValueError, RuntimeError) as e:
                raise ConfigError(f"envpool.make({task!r}, **{options!r}): {e}") from None
            self.observation_space = self.pool.observation_space
            self.action_space = self.pool.action_space
        self.observation_space.seed(0)  # the same value in every process, over a port

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        self.action_space.seed(seeds[0])
        return fresh(self.pool.reset()[0])

    def step(self, actions: np.ndarray) -> Batch:
        obs, reward, terminated, truncated, _ = self.pool.step(np.asarray(actions))
        obs = fresh(obs)
        ended = np.flatnonzero(np.logical_or(terminated, truncated))
        final = None
        if len(ended):
            final = np.zeros_like(obs)
            final[ended] = obs[ended]
            obs[ended] = self.pool.reset(ended.astype(np.int32))[0]
        return Batch(
            obs,
            np.asarray(reward, np.float64),
            fresh(np.asarray(terminated, bool)),
            fresh(np.asarray(truncated, bool)),
            final,
        )

    def close(self) -> None:
        self.pool.close()


def envpool_task(env_id: str, kwargs: dict[str, Any], known: Sequence[str]) -> tuple[str, dict]:
    """EnvPool's task id and ``envpool.make`` options for ``env_id`` and ``make_kwargs``:
    an Atari id becomes ``<Game>-v5`` set to :func:`rl_algos.envs.make_atari`'s
    preprocessing; another id is EnvPool's own, its ``make_kwargs`` passed on.

    Raises:
        ConfigError: EnvPool has no such environment, an Atari keyword it cannot take, or
            ``noop_max`` 0.
    """
    if is_atari(env_id):
        game, sticky = atari_game(env_id)
        a = atari_settings(env_id, kwargs, sticky)
        if a["noop_max"] < 1:  # envpool 1.2.5 crashes (segmentation fault) on 0
            raise ConfigError(f"engine 'envpool' needs noop_max >= 1, not {a['noop_max']}")
        task = f"{game}-v5"
        options = dict(
            stack_num=a["frame_stack"],
            noop_max=a["noop_max"],
            repeat_action_probability=a["repeat_action_probability"],
            full_action_space=a["full_action_space"],
            max_episode_steps=a["max_num_frames_per_episode"] // 4,
            num_threads=a["num_threads"],
            frame_skip=4,
            img_height=84,
            img_width=84,
            gray_scale=True,
            episodic_life=False,
            reward_clip=False,
            use_fire_reset=False,
        )
    else:
        task, options = env_id, {"num_threads": THREADS, **kwargs}
    if task not in known:
        raise ConfigError(
            f"envpool has no environment {task!r} (for {env_id}); envpool.list_all_envs() "
            f"lists its {len(known)} ids, e.g. CartPole-v1, Pendulum-v1, Pong-v5"
        )
    return task, options


def atari_settings(env_id: str, kwargs: dict[str, Any], sticky: float) -> dict[str, Any]:
    """The Atari ``make_kwargs`` of :data:`ATARI_KWARGS` with their defaults (those of
    :func:`rl_algos.envs.make_atari` and ale-py's ``ALE/...-v5``).

    Raises:
        ConfigError: a keyword outside :data:`ATARI_KWARGS`.
    """
    unknown = sorted(set(kwargs) - set(ATARI_KWARGS))
    if unknown:
        raise ConfigError(
            f"make_kwargs {unknown} are not taken by the C++ Atari engines for {env_id}; "
            f"valid: {', '.join(ATARI_KWARGS)} (engines loop, gymnasium-sync and "
            "gymnasium-async take any keyword of gymnasium.make)"
        )
    defaults = dict(
        frame_stack=4,
        noop_max=30,
        repeat_action_probability=sticky,
        full_action_space=False,
        max_num_frames_per_episode=108_000,
        num_threads=THREADS,
    )
    return {**defaults, **kwargs}


class AleVectorEngine(Unsavable, Engine):
    """ale-py's ``AtariVectorEnv`` (C++ threads), same-step autoreset, set to the
    preprocessing of :func:`rl_algos.envs.make_atari`; Atari games only."""

    name = "ale-vector"

    def __init__(self, env_id: str, k: int, kwargs: dict[str, Any]) -> None:
        if not is_atari(env_id):
            raise ConfigError(
                f"engine 'ale-vector' steps Atari games only (ALE/<Game>-v5, "
                f"<Game>NoFrameskip-v4), not {env_id!r}; other engines: loop, gymnasium-sync, "
                "gymnasium-async, envpool"
            )
        from ale_py import roms
        from ale_py.vector_env import AtariVectorEnv

        game, sticky = atari_game(env_id)
        rom = "".join("_" + c.lower() if c.isupper() else c for c in game).lstrip("_")
        if rom not in roms.get_all_rom_ids():
            raise ConfigError(f"ale-py has no game {rom!r} (from {env_id})")
        a = atari_settings(env_id, kwargs, sticky)
        self.vec = AtariVectorEnv(
            rom,
            k,
            stack_num=a["frame_stack"],
            noop_max=a["noop_max"],
            repeat_action_probability=a["repeat_action_probability"],
            full_action_space=a["full_action_space"],
            max_num_frames_per_episode=a["max_num_frames_per_episode"],
            num_threads=a["num_threads"],
            frameskip=4,
            img_height=84,
            img_width=84,
            grayscale=True,
            maxpool=True,
            episodic_life=False,
            reward_clipping=False,
            use_fire_reset=False,
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
        self.observation_space = self.vec.single_observation_space
        self.action_space = self.vec.single_action_space
        self.observation_space.seed(0)  # the same value in every process, over a port

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        self.action_space.seed(seeds[0])
        return fresh(self.vec.reset(seed=np.asarray(seeds, np.int64))[0])

    def step(self, actions: np.ndarray) -> Batch:
        return vector_batch(self.vec.step(np.asarray(actions, np.int64)))

    def close(self) -> None:
        self.vec.close()
