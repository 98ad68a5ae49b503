"""Engines: what steps the K environments of an :class:`rl_algos.envs.EnvGroup`.

Every engine steps K environments of one id, resets an environment as soon as its episode
ends (terminated or truncated) and keeps the last observation of the finished episode: the
"same step" autoreset of gymnasium's vector environments (``AutoresetMode.SAME_STEP``). The
group does the episode bookkeeping (returns, lengths) on what an engine reports, so an
:class:`rl_algos.envs.EnvStep` means the same whatever the engine.

===================  ============================================  ============================
engine               how                                           same results as ``loop``
===================  ============================================  ============================
``loop``             K ``gymnasium`` environments stepped in turn  (the reference)
``gymnasium-sync``   ``gymnasium.vector.SyncVectorEnv``            yes, bit for bit
``gymnasium-async``  ``gymnasium.vector.AsyncVectorEnv``, one      yes, bit for bit
                     process per environment (shared memory)
``envpool``          ``envpool.make(..., env_type="gymnasium")``,  no: its own C++ games, own
                     C++ threads                                   generators (see below)
``ale-vector``       ale-py's ``AtariVectorEnv``, C++ threads      no: own generators, frame
                     (Atari only)                                  stack padding (see below)
===================  ============================================  ============================

The gymnasium engines build their environments with :func:`rl_algos.envs.make_env` (the same
wrappers and Atari preprocessing) and seed them alike. EnvPool's CartPole has gymnasium's
dynamics (observations agree to float32 rounding) but draws its initial states from its own
generator; its Atari games and ale-py's vector env are set to the preprocessing of
:func:`rl_algos.envs.make_atari` (84x84 grey, 4 frames skipped and the last two max-pooled,
``frame_stack`` stacked, up to ``noop_max`` no-op starts, sticky actions 0.25 for ``-v5``,
108,000 frames at most, no fire reset, no reward clipping, no life-loss ends) but draw no-op
starts and sticky actions from their own generators, and ale-py pads the stack of an episode's
first observation with black frames where gymnasium repeats the first frame. The C++ engines
take no ``wrappers`` and cannot be saved in a checkpoint; nor can ``gymnasium-async``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import ConfigError
from .base import RENDERING, SAVABLE, Batch, Engine, Maker
from .gymnasium_engines import AsyncEngine, LoopEngine, SyncEngine
from .pools import AleVectorEngine, EnvPoolEngine

#: The engines, in the order the docs and error messages give them.
ENGINES = ("loop", "gymnasium-sync", "gymnasium-async", "envpool", "ale-vector")

__all__ = ["ENGINES", "RENDERING", "SAVABLE", "Batch", "Engine", "check_engine", "make_engine"]


def check_engine(name: str) -> str:
    """``name`` if it is one of :data:`ENGINES`. Raises ConfigError naming the valid ones."""
    if name not in ENGINES:
        raise ConfigError(f"unknown engine {name!r}; valid: {', '.join(ENGINES)}")
    return name


def make_engine(
    name: str,
    env_id: str,
    makers: Sequence[Maker],
    seeds: Sequence[int],
    kwargs: dict[str, Any],
    custom: Sequence[str] = (),
) -> Engine:
    """The engine ``name`` over one environment per maker (``makers[i]()`` makes
    environment i, for the gymnasium engines) or, for the C++ engines, over as many
    environments of ``env_id`` built with ``make_kwargs`` ``kwargs``; ``seeds``: one per
    environment (EnvPool takes them when it is built); ``custom``: the names of what the
    makers add that the C++ engines cannot (``wrappers``, ``capture_video``).

    Raises:
        ConfigError: an unknown engine, ``custom`` not empty for a C++ engine, a package or
            an environment the engine lacks.
    """
    check_engine(name)
    if name == "loop":
        return LoopEngine(makers)
    if name == "gymnasium-sync":
        return SyncEngine(makers)
    if name == "gymnasium-async":
        return AsyncEngine(makers)
    if custom:
        raise ConfigError(
            f"engine {name!r} steps C++ environments: it cannot take {' or '.join(custom)}; "
            f"engines that can: {', '.join(RENDERING)}"
        )
    if name == "envpool":
        return EnvPoolEngine(env_id, len(makers), seeds, kwargs)
    return AleVectorEngine(env_id, len(makers), kwargs)
