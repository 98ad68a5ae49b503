"""CartPole PPO, wall time to solve: ours beside Stable-Baselines3 (the first workload of
:mod:`bench.sb3`, on its own: ``python -m bench --only sb3_cartpole``)."""

from __future__ import annotations

from .common import Row, scratch
from .sb3 import FULL, QUICK, cartpole_rows


def run(quick: bool) -> list[Row]:
    """The CartPole rows (``quick``: one seed, small caps)."""
    return cartpole_rows(QUICK if quick else FULL, scratch())
