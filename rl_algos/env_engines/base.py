"""The interface every engine offers :class:`rl_algos.envs.EnvGroup` (:class:`Engine`, the
:class:`Batch` it reports), what the engines share (fresh arrays, the final observations of a
gymnasium vector env's info) and the facts about Atari ids and emulators they need."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

#: A maker of one environment (picklable for the process-based and saved engines).
Maker = Callable[[], gym.Env]
#: Engines whose state can be saved in a checkpoint.
SAVABLE = ("loop", "gymnasium-sync")
#: Engines that can render (``capture_video``): those running gymnasium environments.
RENDERING = ("loop", "gymnasium-sync", "gymnasium-async")


def is_atari(env_id: str) -> bool:
    """Whether ``env_id`` names an ALE game (``ALE/Pong-v5``, ``PongNoFrameskip-v4``)."""
    return env_id.startswith("ALE/") or "NoFrameskip" in env_id


def atari_game(env_id: str) -> tuple[str, float]:
    """The game of an Atari id and its sticky-action probability: ``ALE/MsPacman-v5`` ->
    ("MsPacman", 0.25), ``PongNoFrameskip-v4`` -> ("Pong", 0.0) (ale-py's registrations)."""
    if env_id.startswith("ALE/"):
        return env_id[4:].rsplit("-", 1)[0], 0.25
    return env_id.split("NoFrameskip", 1)[0], 0.0


def emulator_state(env: gym.Env) -> tuple[Any, Any] | None:
    """The state of an Atari game's emulator (ale-py's ``clone_state``, its RNG of sticky
    actions included) and the environment's own generator, or None for an environment that is
    not an ALE game (its pickle keeps its state)."""
    game = env.unwrapped
    clone = getattr(game, "clone_state", None)
    if clone is None:
        return None
    return clone(include_rng=True), game.__dict__.get("_np_random")


def restore_emulator(env: gym.Env, state: tuple[Any, Any]) -> None:
    """Put an Atari game's emulator back to ``state`` (from :func:`emulator_state`)."""
    game: Any = env.unwrapped  # an ale_py AtariEnv (gymnasium's Env has no restore_state)
    emulator, generator = state
    game.restore_state(emulator)
    if generator is not None:
        game._np_random = generator


@dataclass
class Batch:
    """One step of K environments as an engine reports it.

    ``obs``: (K, *obs_shape), a new array each step, after the automatic reset of those that
    ended; ``reward``: (K,) float64; ``terminated``, ``truncated``: (K,) bool; ``final_obs``:
    (K, *obs_shape) with the last observation of each finished episode in its row (zeros
    elsewhere), or None when no episode ended.
    """

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray | None = None


class Engine:
    """What an engine offers the group: the spaces of one environment, :meth:`reset` with
    one seed per environment, :meth:`step` and :meth:`close`."""

    name = ""
    observation_space: gym.Space
    action_space: gym.Space

    def reset(self, seeds: Sequence[int]) -> np.ndarray:
        """Reset environment i with ``seeds[i]``; (K, *obs_shape) first observations."""
        raise NotImplementedError

    def step(self, actions: np.ndarray) -> Batch:
        """One step of every environment with one row of ``actions`` each."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the environments (processes, threads)."""


class Unsavable:
    """Mixed into an engine whose state lives outside Python (C++ pools, child processes):
    pickling it raises TypeError saying which engines a checkpoint needs."""

    name = ""
    #: where the environments' state is, for the message
    lives_in = "C++ threads"

    def __reduce__(self) -> Any:
        raise TypeError(
            f"engine {self.name!r} keeps its environments in {self.lives_in}; checkpoints "
            f"need engine {' or '.join(map(repr, SAVABLE))}, or none taken (checkpoint_every = 0)"
        )


class InProcess:
    """Mixed into an engine whose gymnasium environments live in this process: they pickle
    with it (a snapshot), each Atari game with its emulator's state, which pickling an ALE
    environment drops (it is rebuilt from its constructor's arguments)."""

    def environments(self) -> list[gym.Env]:
        """The K environments, in order."""
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        """The engine's attributes plus the emulator state of each Atari game."""
        return {**self.__dict__, "_emulators": [emulator_state(e) for e in self.environments()]}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore :meth:`__getstate__`'s state, the emulators included."""
        emulators = state.pop("_emulators", [])
        self.__dict__.update(state)
        for env, emulator in zip(self.environments(), emulators):
            if emulator is not None:
                restore_emulator(env, emulator)


def fresh(array: np.ndarray) -> np.ndarray:
    """A new array with ``array``'s values and numpy's own dtype object (an unpickled
    array's dtype is a copy, which would pickle, and digest, differently)."""
    out = np.empty(array.shape, np.dtype(array.dtype.str))
    out[...] = array
    return out


def final_rows(obs: np.ndarray, info: dict[str, Any], done: np.ndarray) -> np.ndarray | None:
    """(K, *obs_shape) last observations of the episodes ended (``done``, (K,) bool), zeros
    elsewhere; None when none ended. They are the ``final_obs`` info of a vector env with
    same-step autoreset: gymnasium's is an object array with an entry where its mask
    ``_final_obs`` is set, ale-py's a batch with a row for every environment."""
    if not done.any():
        return None
    final = np.zeros_like(obs)
    for i in np.flatnonzero(done):
        final[i] = info["final_obs"][i]
    return final


def vector_batch(out: tuple[Any, ...]) -> Batch:
    """A :class:`Batch` of what a gymnasium vector env's ``step`` returned."""
    obs, reward, terminated, truncated, info = out
    obs = fresh(obs)
    terminated, truncated = fresh(np.asarray(terminated, bool)), fresh(np.asarray(truncated, bool))
    final = final_rows(obs, info, terminated | truncated)
    return Batch(obs, np.asarray(reward, np.float64).copy(), terminated, truncated, final)
