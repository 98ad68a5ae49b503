"""``lf-rl new NAME``: a new RL program, written from a template of the library reactors.

``lf-rl new NAME [--algo ppo|dqn|sac] [--env ENV_ID] [--dir lf_src]`` writes ``DIR/NAME.lf``:
a complete program (a bank of GymEnv reactors, a BatchedPolicy, the algorithm's learner, a
Replay buffer for the off-policy ones, an EpisodeLogger) whose parameters carry their doc
comments, with a header that says how to build and run it. The templates are jinja2 files
kept with the package (``rl_algos/templates/<algo>.lf.j2``).

The environment is made once to choose the template's variant and defaults: DQN needs a
discrete action space and SAC a continuous one; PPO takes either (a continuous one adds the
Normalize reactor, as lf_src/PendulumPPO.lf has). The target return is the one gymnasium
registers for the environment (``reward_threshold``), else one of :data:`KNOWN_TARGETS`.
"""

from __future__ import annotations

import argparse
import keyword
import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

#: The algorithms a program can be made for, and the environment each starts with.
DEFAULT_ENVS = {"ppo": "CartPole-v1", "dqn": "CartPole-v1", "sac": "Pendulum-v1"}
#: Environment steps before a run stops, per algorithm (those of the programs in lf_src/).
MAX_STEPS = {"ppo": 300000, "dqn": 100000, "sac": 30000}
#: Target returns of environments gymnasium registers none for (lf_src/PendulumPPO.lf's).
KNOWN_TARGETS = {"Pendulum-v1": -250.0}
#: A target no run reaches, for an environment with no known target: the run uses max_steps.
NO_TARGET = 1e9
#: Names a program cannot take: the reactors it imports, and words of LF's grammar.
RESERVED = {
    "GymEnv", "Normalize", "BatchedPolicy", "PPOLearner", "DQNLearner", "SACLearner",
    "OffPolicyLearner", "Replay", "EpisodeLogger", "reactor", "main", "federated", "target",
    "import", "preamble", "input", "output", "state", "timer", "action", "reaction", "method",
    "mode", "new", "after", "startup", "shutdown", "extends", "true", "false",
}  # fmt: skip
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WIRING = {
    "ppo": "A bank of `members` environment reactors, each stepping `envs_per_member` "
    "environments, feeds a batched policy reactor{norm}; the PPO learner (Schulman et al. "
    "2017) collects each rollout and sends the policy new weights after each update.",
    "dqn": "A bank of `members` environment reactors feeds an epsilon-greedy policy reactor "
    "and a replay buffer reactor, which sends a sampled batch to the DQN learner (Mnih et al. "
    "2015) every `train_frequency` steps; the learner sends its network back to the policy.",
    "sac": "A bank of `members` environment reactors feeds a policy reactor acting with a "
    "squashed Gaussian (uniformly random actions for the first `learning_starts` steps) and a "
    "replay buffer reactor, which sends sampled batches to the SAC learner (Haarnoja et al. "
    "2018); the learner sends the policy's weights back after each update.",
}
_ALGORITHMS = {"ppo": "PPO", "dqn": "DQN", "sac": "Soft Actor-Critic"}


@dataclass(frozen=True)
class EnvFacts:
    """What a template needs of an environment: ``continuous`` (a Box action space) and its
    target return (None when none is known)."""

    continuous: bool
    target: float | None


def add_parser(sub: Any) -> None:
    """Register ``lf-rl new`` in the subparsers ``sub``."""
    p = sub.add_parser("new", help="write a new RL program from the library reactors")
    p.add_argument("name", metavar="NAME", help="the program's (main reactor's) name")
    p.add_argument("--algo", default="ppo", help="ppo (default), dqn or sac")
    p.add_argument("--env", default=None, help="gymnasium environment id (default: per algo)")
    p.add_argument("--dir", default="lf_src", help="folder to write NAME.lf in (default lf_src)")


def run(args: argparse.Namespace) -> int:
    """``lf-rl new``: write the program and say how to build and run it."""
    path = scaffold(args.name, args.algo, args.env, args.dir)
    root = project_root(path)
    where = "" if os.path.samefile(root, ".") else f"   (from {os.path.relpath(root)})"
    also = " (or make build)" if builds_with_make(args.dir) else ""
    print(f"wrote {os.path.relpath(path)}")
    print(f"build it: .venv/bin/lfc {os.path.relpath(path, root)}{also}{where}")
    print(f"run it:   bin/{args.name} --help   (its parameters), bin/{args.name} to train")
    return 0


def builds_with_make(folder: str) -> bool:
    """Whether ``make build`` builds a program in ``folder``: it is the ``lf_src`` folder of
    a project with a Makefile."""
    here = Path(folder).resolve()
    return here.name == "lf_src" and (here.parent / "Makefile").is_file()


def scaffold(name: str, algo: str, env_id: str | None, folder: str) -> str:
    """Write ``folder/name.lf``, a program training ``algo`` on ``env_id`` (the algorithm's
    default environment when None); ``folder`` is made if missing. Returns the file's path.

    Raises:
        ValueError: ``name`` is not a valid reactor name or is reserved, ``algo`` is unknown,
            the environment cannot be made or does not suit the algorithm, or the library
            reactors (lf_src/lib/) cannot be found.
        FileExistsError: the file exists already.
    """
    check_name(name)
    if algo not in DEFAULT_ENVS:
        raise ValueError(f"unknown algorithm {algo!r}: choose ppo, dqn or sac")
    env_id = env_id or DEFAULT_ENVS[algo]
    path = os.path.join(folder, f"{name}.lf")
    if os.path.exists(path):
        raise FileExistsError(f"{path} exists already: choose another name, or move it away")
    facts = env_facts(env_id, algo)
    os.makedirs(folder, exist_ok=True)
    text = render(name, algo, env_id, facts, folder)
    with open(path, "x", encoding="utf-8") as f:
        f.write(text)
    return path


def check_name(name: str) -> None:
    """Refuse a program name that is no reactor name.

    Raises:
        ValueError: names what is wrong and what a valid name is.
    """
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a reactor name: use letters, digits and _, starting with a "
            "letter (e.g. CartPoleA2)"
        )
    if keyword.iskeyword(name) or name in RESERVED:
        raise ValueError(f"{name!r} is a reserved word or a library reactor: choose another name")


def env_facts(env_id: str, algo: str) -> EnvFacts:
    """Make ``env_id`` once and check that ``algo`` can learn it.

    Raises:
        ValueError: the environment cannot be made, has image observations, or an action
            space the algorithm does not take (DQN: discrete; SAC: continuous).
    """
    import gymnasium as gym

    from .envs import import_env_module, is_atari

    if is_atari(env_id):
        raise ValueError(f"{env_id} has image observations: start from lf_src/AtariPPO.lf")
    try:
        import_env_module(env_id)
        env = gym.make(env_id)
    except (gym.error.Error, ImportError) as e:
        raise ValueError(f"cannot make environment {env_id}: {e}") from None
    try:
        continuous = isinstance(env.action_space, gym.spaces.Box)
        if not continuous and not isinstance(env.action_space, gym.spaces.Discrete):
            raise ValueError(f"{env_id} has a {type(env.action_space).__name__} action space")
        threshold = env.spec.reward_threshold if env.spec is not None else None
    finally:
        env.close()
    if algo == "dqn" and continuous:
        raise ValueError(
            f"DQN needs discrete actions and {env_id}'s are continuous: use --algo sac or ppo"
        )
    if algo == "sac" and not continuous:
        raise ValueError(
            f"SAC needs continuous actions and {env_id}'s are discrete: use --algo dqn or ppo"
        )
    target = threshold if threshold is not None else KNOWN_TARGETS.get(env_id)
    return EnvFacts(continuous, None if target is None else float(target))


def render(name: str, algo: str, env_id: str, facts: EnvFacts, folder: str) -> str:
    """The text of the program ``name`` (see :func:`scaffold`) to be written in ``folder``."""
    root = project_root(os.path.join(folder, f"{name}.lf"))
    lf_path = os.path.relpath(os.path.join(folder, f"{name}.lf"), root)
    wiring = _WIRING[algo].format(
        norm=" through a Normalize reactor (observations and rewards scaled)"
        if facts.continuous
        else ""
    )
    values = dict(
        name=name,
        algo=algo,
        algorithm=_ALGORITHMS[algo],
        env_id=env_id,
        continuous=facts.continuous,
        target=_target_text(facts.target),
        max_steps=MAX_STEPS[algo] if not (algo == "ppo" and facts.continuous) else 200000,
        lib=library_import(folder),
        wiring="\n * ".join(textwrap.wrap(wiring, 90)),
        lf_path=lf_path,
        bin_path=f"bin/{name}",
        make_build=builds_with_make(folder),
    )
    text = _templates().get_template(f"{algo}.lf.j2").render(**values)
    return align_comments(text)


def _target_text(target: float | None) -> str:
    """An LF float literal of the target return (:data:`NO_TARGET` when none is known)."""
    value = NO_TARGET if target is None else target
    return repr(float(value))


def _templates() -> jinja2.Environment:
    """The jinja2 environment of ``rl_algos/templates`` (blocks trimmed, undefined names
    refused)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates")),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def align_comments(text: str) -> str:
    """``text`` with the ``//`` comments at the ends of consecutive code lines started in one
    column (two spaces after the longest code of the run of lines)."""
    lines = text.split("\n")
    out: list[str] = []
    run: list[tuple[str, str]] = []
    for line in [*lines, None]:
        split = _trailing_comment(line) if line is not None else None
        if split is not None:
            run.append(split)
            continue
        width = max((len(code) for code, _ in run), default=0) + 2
        out += [f"{code.ljust(width)}{comment}" for code, comment in run]
        run = []
        if line is not None:
            out.append(line)
    return "\n".join(out)


def _trailing_comment(line: str) -> tuple[str, str] | None:
    """(code, ``// comment``) of a line of code ending with a comment, else None."""
    code, sep, comment = line.partition(" // ")
    if not sep or not code.strip() or '"' in comment:
        return None
    return code.rstrip(), f"// {comment.strip()}"


def library_import(folder: str) -> str:
    """The import path of the library reactors (lf_src/lib) as seen from ``folder``: that of
    the project holding ``folder`` or the current directory, else of this checkout; relative
    when ``folder`` is in the library's project, else absolute.

    Raises:
        ValueError: none of them has lf_src/lib/Env.lf.
    """
    here = Path(folder).resolve()
    starts = [here, Path.cwd().resolve(), Path(__file__).resolve().parent.parent]
    for start in starts:
        for d in (start, *start.parents):
            for lib in (d, d / "lf_src" / "lib"):
                if lib.name == "lib" and (lib / "Env.lf").is_file():
                    inside = here.is_relative_to(lib.parent.parent)
                    return os.path.relpath(lib, here) if inside else str(lib)
    raise ValueError("cannot find the library reactors (lf_src/lib/Env.lf) above the folder")


def project_root(file: str) -> str:
    """Where ``lfc`` puts ``bin/`` for ``file``: the parent of the nearest folder named
    ``src`` or ``lf_src`` above it, else its own folder (as ``lfc``'s default ``-o``)."""
    d = Path(file).resolve().parent
    for p in (d, *d.parents):
        if p.name in ("src", "lf_src"):
            return str(p.parent)
    return str(d)
