"""``lf-rl``: commands on the runs of the RL programs.

``lf-rl eval RUN_DIR [--episodes N] [--seed S] [--video [FILE]] [--env ENV_ID]`` loads the
run's checkpoint, plays N greedy episodes with its own seeds and prints the mean and standard
deviation of the returns (also added to the list in ``RUN_DIR/eval.json``, which keeps every
evaluation); ``--video`` writes the first episode as a GIF (``RUN_DIR/episode.gif`` unless a
file is named; a ``.mp4`` file is an MP4). An environment id ``module:Name-v0`` has its module
imported from the current directory or PYTHONPATH. An error (no such run, no model yet, an
environment of other spaces) is one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gymnasium import error as gym_error

from .evaluate import EVAL_SEED, evaluate, find_model


def parser() -> argparse.ArgumentParser:
    """The ``lf-rl`` argument parser."""
    p = argparse.ArgumentParser(prog="lf-rl", description="Commands on RL training runs.")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval", help="evaluate a run's trained policy")
    e.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (or runs/<program>)")
    e.add_argument("--episodes", type=int, default=10, help="episodes to play (default 10)")
    e.add_argument("--seed", type=int, default=EVAL_SEED, help="seed of the first episode")
    e.add_argument(
        "--video",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="record the first episode as an MP4 (FILE.mp4) or a GIF (default RUN_DIR/episode.gif)",
    )
    e.add_argument(
        "--env",
        default=None,
        help="environment id (default: the run's); module:Name-v0 imports module first, from "
        "the current directory or PYTHONPATH",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lf-rl``; returns the exit status (1 with a one-line message on an error)."""
    args = parser().parse_args(argv)
    try:
        video = args.video
        if video == "":
            video = os.path.join(os.path.dirname(find_model(args.run_dir)), "episode.gif")
        result = evaluate(args.run_dir, args.episodes, args.seed, video, args.env)
    except (OSError, ValueError, KeyError, ImportError, gym_error.Error) as e:
        print(f"lf-rl eval: error: {e}", file=sys.stderr)
        return 1
    print(result.summary())
    if result.video:
        print(f"video: {result.video}")
    print(f"saved: {result.saved} (evaluation {result.number} in it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
