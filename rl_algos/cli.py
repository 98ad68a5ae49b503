"""``lf-rl``: the user's commands for RL programs and their runs; each subcommand but ``eval``
lives in a module of its own, which this one dispatches to:

- ``lf-rl new NAME``: a new program from the library reactors (:mod:`rl_algos.scaffold`);
- ``lf-rl runs [DIR ...]``: the runs as a table (:mod:`rl_algos.runs_table`);
- ``lf-rl plot RUN_DIR...``: their learning curves in one figure
  (:mod:`rl_algos.learning_curves`);
- ``lf-rl sweep PROGRAM ...``: a hyperparameter search with Optuna (:mod:`rl_algos.sweep`);
- ``lf-rl eval``, below.

``lf-rl eval RUN_DIR [--episodes N] [--seed S] [--video [FILE]] [--env ENV_ID]`` loads the
run's checkpoint, plays N greedy episodes with its own seeds and prints the mean and standard
deviation of the returns (also added to the list in ``RUN_DIR/eval.json``, which keeps every
evaluation); ``--video`` writes the first episode as a GIF (``RUN_DIR/episode.gif`` unless a
file is named; a ``.mp4`` file is an MP4). An environment id ``module:Name-v0`` has its module
imported from the current directory or PYTHONPATH. An error (no such run, no model yet, an
environment of other spaces) is one line on stderr, exit status 1, as for every subcommand.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gymnasium import error as gym_error

from . import learning_curves, runs_table, scaffold, sweep

#: The subcommands of their own modules: name -> module (``add_parser``, ``run``).
COMMANDS = {"new": scaffold, "runs": runs_table, "plot": learning_curves, "sweep": sweep}
#: What a subcommand raises for a user's mistake: said in one line, exit status 1.
USER_ERRORS = (OSError, ValueError, KeyError, ImportError, gym_error.Error)


def parser() -> argparse.ArgumentParser:
    """The ``lf-rl`` argument parser."""
    p = argparse.ArgumentParser(
        prog="lf-rl", description="Commands for RL programs and their runs."
    )
    sub = p.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    e = sub.add_parser("eval", help="evaluate a run's trained policy")
    e.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (or runs/<program>)")
    e.add_argument("--episodes", type=int, default=10, help="episodes to play (default 10)")
    e.add_argument("--seed", type=int, default=None, help="seed of the first episode")
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
    """Run ``lf-rl``; returns the exit status (1 with a one-line message on an error, 130
    after a Ctrl-C). Arguments after ``--`` go to the programs a sweep runs."""
    given = list(sys.argv[1:] if argv is None else argv)
    extra = given[given.index("--") + 1 :] if "--" in given else []
    args = parser().parse_args(given[: len(given) - len(extra) - (1 if "--" in given else 0)])
    if extra and args.command != "sweep":
        print(f"lf-rl {args.command}: error: only sweep takes arguments after --", file=sys.stderr)
        return 1
    args.extra = extra
    if args.command in COMMANDS:
        return _dispatch(args)
    return _eval(args)


def _dispatch(args: argparse.Namespace) -> int:
    """Run the subcommand of its own module, with a user's mistake on one line."""
    try:
        return int(COMMANDS[args.command].run(args))
    except BrokenPipeError:  # the reader went away (``lf-rl runs | head``): nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except USER_ERRORS as e:
        print(f"lf-rl {args.command}: error: {_message(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"lf-rl {args.command}: interrupted", file=sys.stderr)
        return 130


def _message(e: BaseException) -> str:
    """The one line of an error (a KeyError's key without its quotes)."""
    text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(text.split())


def _eval(args: argparse.Namespace) -> int:
    """``lf-rl eval`` (torch imported only here: the other subcommands start without it)."""
    from .evaluate import EVAL_SEED, evaluate, find_model

    seed = EVAL_SEED if args.seed is None else args.seed
    try:
        video = args.video
        if video == "":
            video = os.path.join(os.path.dirname(find_model(args.run_dir)), "episode.gif")
        result = evaluate(args.run_dir, args.episodes, seed, video, args.env)
    except USER_ERRORS as e:
        print(f"lf-rl eval: error: {e}", file=sys.stderr)
        return 1
    print(result.summary())
    if result.video:
        print(f"video: {result.video}")
    print(f"saved: {result.saved} (evaluation {result.number} in it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
