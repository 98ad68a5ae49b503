"""Atari Pong PPO, training steps per second: ours beside Stable-Baselines3 (the second
workload of :mod:`bench.sb3`, on its own: ``python -m bench --only sb3_atari``)."""

from __future__ import annotations

from .common import Row, scratch
from .sb3 import FULL, QUICK, atari_rows


def run(quick: bool) -> list[Row]:
    """The Atari rows (``quick``: a one-update budget)."""
    return atari_rows(QUICK if quick else FULL, scratch())
