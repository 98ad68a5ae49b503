"""Environment helpers: one gymnasium environment, or a group of K inside one reactor.

An environment reactor owns an :class:`EnvGroup` of K environments and steps them together,
so a bank of such reactors spreads N*K environments over workers. The group resets an
environment as soon as its episode ends (terminated or truncated) and reports the finished
episode; the first reset of each environment is seeded from the owning reactor's generator,
later resets continue the environment's own seeded generator, so the streams depend only on
the program seed and the reactor's name. Actions for a Box space are clipped to its bounds
when sent to the environment (a Gaussian policy samples outside them). What steps the K
environments is the group's engine (:mod:`rl_algos.env_engines`: the Python loop by default,
gymnasium's vector envs, or a C++ pool); the group counts the episodes' returns and lengths
from what the engine reports, so an :class:`EnvStep` means the same whatever the engine.
Environment 0 can be recorded on video (:mod:`rl_algos.video`).

An environment is built by ``gymnasium.make(env_id, **make_kwargs)`` and then wrapped by the
named classes of ``gymnasium.wrappers``, in the order given (:func:`wrap`). An id
``module:Name-v0`` names an environment that ``module`` registers when imported (gymnasium's
rule): the module is looked for in the current directory, then on the import path
(``PYTHONPATH``), in every process that makes or unpickles the environment
(:func:`import_env_module`).

Atari games come through ale-py (an optional extra: ``pip install -e '.[atari]'``), imported
only when an Atari environment is asked for, with the preprocessing of Mnih et al. (2015),
"Human-level control through deep reinforcement learning", Nature 518: up to 30 no-op starts,
a frame skip of 4 with max-pooling over the last two frames, 84x84 grey frames, 4 stacked.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np

from .env_engines import Engine, check_engine, make_engine
from .env_engines.base import InProcess, is_atari
from .video import VideoCapture


@dataclass(frozen=True)
class Episode:
    """One finished episode: ``env`` is the index inside its group, ``ret`` the undiscounted
    sum of rewards (float), ``length`` the number of steps (int)."""

    env: int
    ret: float
    length: int


@dataclass
class EnvStep:
    """What a group reports after a reset or a step of its K environments.

    - ``obs``: (K, *obs_shape) array, the observation each environment is in now (after an
      automatic reset, the new episode's first observation); dtype as the space's.
    - ``reward``: (K,) float32, reward of the step just taken (zeros after the first reset).
    - ``terminated``, ``truncated``: (K,) bool, how the step just taken ended the episode.
    - ``final_obs``: (K, *obs_shape) array or None; where ``terminated | truncated``, the last
      observation of the finished episode (the one ``obs`` replaced); None if none ended.
    - ``episodes``: the :class:`Episode` records finished by this step, in env order.
    - ``steps``: total steps taken by this group so far (K per step).
    """

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray | None = None
    episodes: list = field(default_factory=list)
    steps: int = 0

    @property
    def done(self) -> np.ndarray:
        """(K,) bool: the step just taken ended the episode (terminated or truncated)."""
        return self.terminated | self.truncated


#: A wrapper as given to :func:`wrap`: a class name, or a (name, keyword arguments) pair.
WrapperSpec = str | tuple[str, dict] | list


def import_env_module(env_id: str) -> None:
    """Import the module of an id ``module:Name-v0`` (nothing for an id without one), with
    the current directory added at the end of ``sys.path`` (as ``python -m`` adds it, but
    after the installed packages): the user's module beside them, in each worker process too.

    Raises:
        ImportError: the module cannot be imported; the message says where it was looked for.
    """
    module, colon, _ = env_id.partition(":")
    if colon:
        import_user_module(module, f"environment {env_id}")


def import_user_module(name: str, of: str) -> ModuleType:
    """Import the user's module ``name`` (an environment's, a network factory's), with the
    current directory added at the end of ``sys.path``; ``of``: what it is the module of, for
    the error message ("environment corridor:Corridor-v0").

    Raises:
        ImportError: the module cannot be imported; the message says where it was looked for.
    """
    here = os.getcwd()
    if here not in sys.path:
        sys.path.append(here)
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ImportError(
            f"cannot import module {name!r} of {of}: {e} (looked for in the current directory, "
            f"{here}, and on PYTHONPATH)"
        ) from e


def make_env(env_id: str, wrappers: Sequence[WrapperSpec] = (), **kwargs: Any) -> gym.Env:
    """A gymnasium environment for ``env_id`` wrapped by ``wrappers`` (see :func:`wrap`);
    Atari ids go to :func:`make_atari`; the module of an id ``module:Name-v0`` is imported
    first (:func:`import_env_module`).

    ``kwargs`` are passed to ``gymnasium.make``. Raises gymnasium's errors for unknown ids,
    ImportError for a module that cannot be imported, ValueError for keyword arguments the
    environment does not take or a wrapper that is not a class of ``gymnasium.wrappers``.
    """
    if is_atari(env_id):
        return wrap(make_atari(env_id, **kwargs), wrappers)
    import_env_module(env_id)
    try:
        env = gym.make(env_id, disable_env_checker=True, **kwargs)
    except TypeError as e:  # the environment's constructor refused a keyword
        raise ValueError(f"gymnasium.make({env_id!r}, **{kwargs!r}): {e}") from e
    return wrap(env, wrappers)


def wrapper_names() -> list[str]:
    """The classes of ``gymnasium.wrappers`` that wrap one environment, sorted."""
    return sorted(n for n in dir(gym.wrappers) if _wrapper_class(n) is not None)


def _wrapper_class(name: str) -> type | None:
    cls = getattr(gym.wrappers, name, None) if name[:1].isupper() else None
    return cls if isinstance(cls, type) and issubclass(cls, gym.Wrapper) else None


def wrap(env: gym.Env, wrappers: Sequence[WrapperSpec]) -> gym.Env:
    """``env`` wrapped by each of ``wrappers`` in turn (the first is innermost).

    A wrapper is the name of a class of ``gymnasium.wrappers`` (``"ClipAction"``) or a pair
    ``(name, kwargs)`` (``("TimeLimit", {"max_episode_steps": 100})``; a two-item list too).

    Raises:
        ValueError: an unknown name (the message lists the valid ones), a malformed entry, or
            keyword arguments the wrapper does not take.
    """
    for spec in wrappers:
        name, kwargs = _wrapper_spec(spec)
        cls = _wrapper_class(name)
        if cls is None:
            raise ValueError(
                f"unknown wrapper {name!r}: not a class of gymnasium.wrappers; "
                f"valid: {', '.join(wrapper_names())}"
            )
        try:
            env = cls(env, **kwargs)
        except TypeError as e:
            raise ValueError(f"wrapper {name}(**{kwargs!r}): {e}") from e
    return env


def _wrapper_spec(spec: WrapperSpec) -> tuple[str, dict]:
    if isinstance(spec, str):
        return spec, {}
    if (
        isinstance(spec, (tuple, list))
        and len(spec) == 2
        and isinstance(spec[0], str)
        and isinstance(spec[1], dict)
    ):
        return spec[0], dict(spec[1])
    raise ValueError(f"a wrapper is a name or a (name, kwargs) pair, not {spec!r}")


def make_atari(env_id: str, frame_stack: int = 4, noop_max: int = 30, **kwargs: Any) -> gym.Env:
    """An Atari game with the usual DQN preprocessing (Mnih et al. 2015).

    Observations are uint8 arrays (frame_stack, 84, 84). The emulator's own frame skip is
    turned off (``frameskip=1``) because ``AtariPreprocessing`` skips 4 frames and max-pools
    the last two, which it reads from the emulator's screen in grey. Rewards are NOT clipped
    here (episode returns stay the game's score); a learner clips them. Raises ImportError
    with the install command if ale-py is missing.
    """
    try:
        import ale_py
    except ImportError as e:
        raise ImportError("Atari environments need ale-py: pip install -e '.[atari]'") from e
    gym.register_envs(ale_py)
    kwargs.setdefault("frameskip", 1)
    # the wrapper reads the screen itself: the game's own observation of every frame is
    # thrown away, and in grey it is a third of the RGB copy (same observations, ~11% less
    # time per step here)
    kwargs.setdefault("obs_type", "grayscale")
    env = gym.make(env_id, disable_env_checker=True, **kwargs)
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=noop_max,
        frame_skip=4,
        screen_size=84,
        terminal_on_life_loss=False,
        grayscale_obs=True,
    )
    stacked = gym.wrappers.FrameStackObservation(env, frame_stack)
    # The stacked space's generator comes from OS entropy (gymnasium's batch_space): a fixed
    # seed makes the space, sent over a port, the same value in every process.
    stacked.observation_space.seed(0)
    return stacked


@dataclass(frozen=True)
class EnvMaker:
    """A picklable maker of one environment of a group: :func:`make_env` of ``env_id`` with
    ``wrappers`` and ``kwargs``; with ``video``, rendering RGB frames and recorded by it
    (outermost)."""

    env_id: str
    wrappers: tuple = ()
    kwargs: dict = field(default_factory=dict)
    video: VideoCapture | None = None

    def __call__(self) -> gym.Env:
        if self.video is None:
            return make_env(self.env_id, self.wrappers, **self.kwargs)
        env = make_env(self.env_id, self.wrappers, **{**self.kwargs, "render_mode": "rgb_array"})
        return self.video.wrap(env)


class EnvGroup:
    """K environments of one id stepped together, with automatic reset.

    ``rng`` is the owning reactor's generator: it draws one seed per environment for the
    first reset (and for the action space). ``wrappers`` and ``kwargs`` go to
    :func:`make_env`. ``engine`` names what steps them (:mod:`rl_algos.env_engines`:
    ``loop``, ``gymnasium-sync``, ``gymnasium-async``, ``envpool``, ``ale-vector``);
    ``video`` records episodes of environment 0 (:mod:`rl_algos.video`).

    Raises:
        ValueError: ``k`` < 1; ConfigError (a ValueError): an unknown engine, or one that
            cannot take the environment, its ``wrappers`` or ``video``.
    """

    def __init__(
        self,
        env_id: str,
        k: int,
        rng: np.random.Generator,
        wrappers: Sequence[WrapperSpec] = (),
        *,
        engine: str = "loop",
        video: VideoCapture | None = None,
        **kwargs: Any,
    ) -> None:
        if k < 1:
            raise ValueError(f"EnvGroup needs k >= 1, got {k}")
        check_engine(engine)
        self.env_id = env_id
        makers = [
            EnvMaker(env_id, tuple(wrappers), kwargs, video if i == 0 else None) for i in range(k)
        ]
        self.seeds = [int(s) for s in rng.integers(0, 2**31 - 1, size=k)]
        custom = [n for n, given in (("wrappers", wrappers), ("capture_video", video)) if given]
        self.engine: Engine = make_engine(engine, env_id, makers, self.seeds, kwargs, custom)
        self.observation_space = self.engine.observation_space
        self.action_space = self.engine.action_space
        space = self.action_space
        self._bounds = (space.low, space.high) if isinstance(space, gym.spaces.Box) else None
        self.k = k
        self.steps = 0
        self._ret = np.zeros(k, np.float64)
        self._len = np.zeros(k, np.int64)
        self._started = False

    @property
    def envs(self) -> list[gym.Env]:
        """The environments of a group stepped in this process (engines ``loop`` and
        ``gymnasium-sync``). AttributeError for the other engines."""
        if not isinstance(self.engine, InProcess):
            raise AttributeError(f"engine {self.engine.name!r} keeps no environments here")
        return self.engine.environments()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as :func:`_unpickled_group` of the environment id, then its attributes
        (the engine pickles its environments, or refuses to: rl_algos.env_engines): the id's
        module is imported before the environments are unpickled, also in a process that has
        made none yet (a resumed run)."""
        return (_unpickled_group, (self.env_id,), self.__dict__.copy())

    def reset(self) -> EnvStep:
        """Reset every environment with its seed; the EnvStep has zero rewards."""
        first = self.engine.reset(self.seeds)
        self._started = True
        z = np.zeros(self.k, bool)
        return EnvStep(first, np.zeros(self.k, np.float32), z, z.copy(), steps=self.steps)

    def step(self, actions: np.ndarray) -> EnvStep:
        """Take one step in each environment; ``actions`` has one entry per environment
        ((K,) ints for a discrete space, (K, *shape) floats for a box, clipped to its
        bounds, or (K, prod(shape)) flattened). Finished episodes are reset and reported.
        RuntimeError if called before :meth:`reset`."""
        if not self._started:
            raise RuntimeError("EnvGroup.step() before reset()")
        if self._bounds is not None:
            low, high = self._bounds
            actions = np.clip(np.reshape(actions, (self.k, *low.shape)), low, high)
        b = self.engine.step(actions)
        self._ret += b.reward
        self._len += 1
        episodes = []
        for i in np.flatnonzero(b.terminated | b.truncated):
            episodes.append(Episode(int(i), float(self._ret[i]), int(self._len[i])))
            self._ret[i], self._len[i] = 0.0, 0
        self.steps += self.k
        reward = b.reward.astype(np.float32)
        return EnvStep(b.obs, reward, b.terminated, b.truncated, b.final_obs, episodes, self.steps)

    def close(self) -> None:
        """Close every environment."""
        self.engine.close()


def _unpickled_group(env_id: str) -> EnvGroup:
    """An empty :class:`EnvGroup` for pickle to fill, once the module of ``env_id`` (if it
    names one) is imported."""
    import_env_module(env_id)
    return EnvGroup.__new__(EnvGroup)


def concat_steps(steps: Iterable[EnvStep]) -> EnvStep:
    """One EnvStep for several groups (a bank of environment reactors), concatenated in the
    given order: arrays of K1 + K2 + ... rows, ``episodes`` re-indexed to the joined env
    index, ``steps`` summed. A single step is returned as is."""
    steps = list(steps)
    if len(steps) == 1:
        return steps[0]
    obs = np.concatenate([s.obs for s in steps])
    final, episodes, base = None, [], 0
    for s in steps:
        if s.final_obs is not None:
            if final is None:
                final = np.zeros_like(obs)
            final[base : base + len(s.obs)] = s.final_obs
        episodes += [Episode(base + e.env, e.ret, e.length) for e in s.episodes]
        base += len(s.obs)
    return EnvStep(
        obs,
        np.concatenate([s.reward for s in steps]),
        np.concatenate([s.terminated for s in steps]),
        np.concatenate([s.truncated for s in steps]),
        final,
        episodes,
        sum(s.steps for s in steps),
    )


def next_obs(step: EnvStep) -> np.ndarray:
    """The observation each step led to: ``final_obs`` where an episode ended, else ``obs``
    (what a replay buffer stores as s')."""
    if step.final_obs is None:
        return step.obs
    return np.where(step.done.reshape(-1, *([1] * (step.obs.ndim - 1))), step.final_obs, step.obs)
