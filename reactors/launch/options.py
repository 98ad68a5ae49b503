"""A generated program's command line: the options and parameters it takes (``--help``:
:func:`reactors.launch.usage.usage`), parsed into :class:`Options` over the target's
properties (spec §5.3). A parameter is the main reactor's (``--seed 3``) or that of a reactor
inside it (``--learner.device cpu``, :mod:`reactors.model.forwarding`). Used by
:mod:`reactors.launch.main` and, before the module loads, by
:mod:`reactors.launch.before_import`."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..core.context import new_run_id
from ..core.errors import LaunchError
from ..core.units import is_unit, parse_duration
from ..model.arguments import Argument, argument, close_match
from ..model.program import ContainedParameter, MainParameter, Program
from ..model.target import DEFAULTS, TargetSettings
from .usage import USAGE, usage, where

__all__ = ["Options", "command_line_error", "parse_options", "program_args", "usage"]

#: The options of :data:`USAGE`, for the close match of an unknown one.
_OPTION_NAMES = tuple(re.findall(r"--([a-z][\w-]*)", USAGE))


def command_line_error(program: Program, module_file: str | None, error: Exception) -> str:
    """What a program prints on stderr for an error in its command line: ``Name: error:
    <error>`` and how to see the options (``module_file``, the generated module, locates the
    program's launcher, ``OUT/bin/Name`` beside ``OUT/src-gen/Name/``); two lines."""
    name = program.name or "program"
    launcher = name
    if module_file:
        out = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(module_file))))
        path = os.path.join(out, "bin", name)
        if os.path.exists(path):
            rel = os.path.relpath(path)
            launcher = path if rel.startswith("..") else os.path.join(".", rel)
    return f"{name}: error: {error}\nrun {launcher} --help for the options\n"


@dataclass
class Options:
    """Run options: target properties overridden by the command line (times in ns)."""

    fast: bool = DEFAULTS.fast
    keepalive: bool = DEFAULTS.keepalive
    timeout: int | None = DEFAULTS.timeout
    workers: int = DEFAULTS.workers
    start_multiple: int = 0
    help: bool = False
    backend: str | None = None  # None: processes on a GIL build, threads without GIL
    oversubscribe: bool = False  # one process per worker even beyond the usable cores
    cluster: str | None = None  # the Ray cluster's address ("auto": the running one), or None
    digest: str | None = None  # path of the port-value digest file (reactors.records.trace)
    trace_file: str | None = None  # path of the timing trace (target property `tracing`)
    run_id: str = field(default_factory=new_run_id)  # one per run, shared by its workers
    owner: str = ""  # the supervising process (reactors.parallel.shm_owner.owner_tag)
    verbose: bool = False  # explain choices on stderr
    profile: str | None = None  # where a -w 0 run on one worker saves what it measured
    placement: tuple[int, ...] | None = None  # -w 0's placement (worker of each reactor id)
    # parameters given as --NAME VALUE (main reactor) or --PATH.NAME VALUE (one inside it)
    arguments: tuple[Argument, ...] = ()
    # snapshots (reactors.records.checkpoint): every so many ns of logical time or tags, where, how
    # many kept; the snapshot (file or directory) to resume from
    checkpoint_every: int | None = None
    checkpoint_every_tags: int | None = None
    checkpoint_dir: str = field(default_factory=lambda: os.path.abspath("checkpoints"))
    checkpoint_dir_given: bool = False  # else the program's own directory may win
    checkpoint_keep: int = 3
    resume: str | None = None
    # reactors.records.replay: where to record the inputs from outside logical time, the recording
    # to replay, and (set when it is read) its start time (ns) and stop tag (elapsed ns, m)
    record: str | None = None
    record_every_tag: bool = False
    replay: str | None = None
    replay_bounds: tuple[int, tuple[int, int] | None] | None = None
    trust: bool = False  # load a snapshot or recording the user's key does not authenticate


def parse_options(
    argv: Sequence[str],
    target: TargetSettings = DEFAULTS,
    parameters: Sequence[MainParameter] = (),
    contained: Sequence[ContainedParameter] = (),
) -> Options:
    """Parse program options over the program's target properties ``target``; ``--NAME
    VALUE`` (or ``--NAME=VALUE``) sets the main-reactor parameter NAME of ``parameters``,
    ``--PATH.NAME VALUE`` the parameter NAME of the instances at PATH (``contained``).

    Raises LaunchError for an unknown option, instance or parameter (naming what is likely
    meant), a malformed value, and a parameter that is fixed at compile time (the message
    says to use ``lfc -D``).
    """
    o = Options(
        fast=target.fast, keepalive=target.keepalive, timeout=target.timeout, workers=target.workers
    )
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("-h", "--help"):
            o.help = True
        elif a in ("-f", "--fast"):
            o.fast = _flag(args, a)
        elif a in ("-k", "--keepalive"):
            o.keepalive = _flag(args, a)
        elif a in ("-o", "--timeout"):
            o.timeout = _duration(args, a)
        elif a in ("-m", "--start-time-multiple"):
            o.start_multiple = _duration(args, a)
        elif a in ("-w", "--workers"):
            if not args or not args[0].isdigit():
                raise LaunchError(f"{a} expects a non-negative integer")
            o.workers = int(args.pop(0))
        elif a == "--verbose":
            o.verbose = True
        elif a == "--backend":
            if not args or args[0] not in ("processes", "threads"):
                raise LaunchError(f"{a} expects 'processes' or 'threads'")
            o.backend = args.pop(0)
        elif a == "--oversubscribe":
            o.oversubscribe = True
        elif a == "--cluster" or a.startswith("--cluster="):
            o.cluster = _cluster(a, args)
        elif a == "--digest":
            o.digest = _path(args, a)
        elif a in ("--record", "--replay"):
            setattr(o, a[2:], _path(args, a))
        elif a == "--record-every-tag":
            o.record_every_tag = True
        elif a == "--trust":
            o.trust = True
        elif a in _CHECKPOINT_OPTIONS:
            _checkpoint_option(o, a, args)
        elif a.startswith("--") and "." in _option_name(a):
            o.arguments += (_argument(_contained(a, contained), a, args),)
        elif a.startswith("--") and (p := _parameter(a, parameters)) is not None:
            o.arguments += (_argument(p, a, args),)
        else:
            raise LaunchError(_unknown(a, parameters, contained))
    if o.cluster and o.backend == "threads":
        raise LaunchError("--cluster runs the workers as processes; drop --backend threads")
    return o


def _cluster(opt: str, args: list) -> str:
    """The Ray address of ``--cluster ray[=ADDRESS]`` (or ``--cluster=ray...``): ``auto``
    (the cluster running on this machine) without one. Raises LaunchError otherwise."""
    value = opt.partition("=")[2] if "=" in opt else (args.pop(0) if args else "")
    engine, _, address = value.partition("=")
    if engine != "ray" or ("=" in value and not address):
        raise LaunchError("--cluster expects 'ray' or 'ray=<address>' (e.g. ray=10.0.0.1:6379)")
    return address or "auto"


_CHECKPOINT_OPTIONS = (
    "--checkpoint-every",
    "--checkpoint-every-tags",
    "--checkpoint-dir",
    "--checkpoint-keep",
    "--resume",
)


def _checkpoint_option(o: Options, opt: str, args: list) -> None:
    """Parse one of :data:`_CHECKPOINT_OPTIONS` into ``o`` (LaunchError if malformed)."""
    if opt == "--checkpoint-every":
        o.checkpoint_every = _duration(args, opt)
        if not o.checkpoint_every:
            raise LaunchError(f"{opt} expects a positive duration")
    elif opt == "--checkpoint-every-tags":
        o.checkpoint_every_tags = _positive(args, opt)
    elif opt == "--checkpoint-keep":
        o.checkpoint_keep = _positive(args, opt)
    elif opt == "--checkpoint-dir":
        o.checkpoint_dir, o.checkpoint_dir_given = _path(args, opt), True
    else:
        o.resume = _path(args, opt)


def _positive(args: list, opt: str) -> int:
    if not args or not args[0].isdigit() or int(args[0]) == 0:
        raise LaunchError(f"{opt} expects a positive integer")
    return int(args.pop(0))


def _path(args: list, opt: str) -> str:
    if not args:
        raise LaunchError(f"{opt} expects a path")
    return os.path.abspath(args.pop(0))


def _option_name(opt: str) -> str:
    """The name of ``--NAME`` or ``--NAME=VALUE``, with ``_`` for the dashes that may stand
    for underscores."""
    return opt[2:].split("=", 1)[0].replace("-", "_")


def _parameter(opt: str, parameters: Sequence[MainParameter]) -> MainParameter | None:
    """The main parameter that ``--NAME`` or ``--NAME=VALUE`` sets, or None."""
    name = _option_name(opt)
    return next((p for p in parameters if p.name == name), None)


def _contained(opt: str, contained: Sequence[ContainedParameter]) -> ContainedParameter:
    """The parameter of a contained instance that ``--PATH.NAME`` (or ``=VALUE``) sets.

    Raises:
        LaunchError: no instance at PATH has parameters, or none called NAME: the message
            names what is likely meant and what there is.
    """
    path, _, name = _option_name(opt).rpartition(".")
    found = [p for p in contained if p.path == path]
    p = next((p for p in found if p.name == name), None)
    if p is not None:
        return p
    if not found:
        paths = list(dict.fromkeys(p.path for p in contained))
        near = close_match(path, paths)
        hint = f"; did you mean '--{near}.{name}'?" if near else ""
        listed = f" (those with parameters: {', '.join(paths)})" if paths else ""
        raise LaunchError(
            f"unknown option '{opt}': no reactor inside is called '{path}'{hint}{listed}"
        )
    names = [q.name for q in found]
    near = close_match(name, names)
    hint = f"; did you mean '--{path}.{near}'?" if near else ""
    raise LaunchError(
        f"unknown option '{opt}': {found[0].class_name} '{path}' has no parameter '{name}'"
        f"{hint} (its parameters are {', '.join(names)})"
    )


def _argument(p: MainParameter | ContainedParameter, opt: str, args: list) -> Argument:
    """``--NAME VALUE`` or ``--PATH.NAME VALUE`` (``opt``, then the value from ``args``) for
    parameter ``p``, checked against the kind of its default (a contained one's: the default
    its class declares); a time may come as two words (``--period 10 msec``)."""
    if "=" in opt:
        text = opt.split("=", 1)[1]
    elif args:
        text = args.pop(0)
        if args and text.isdigit() and is_unit(args[0]):
            text += " " + args.pop(0)
    else:
        raise LaunchError(f"{opt} expects a value (an LF expression)")
    name, kind = (
        (p.option, p.declared) if isinstance(p, ContainedParameter) else (p.name, p.default)
    )
    if p.fixed:
        raise LaunchError(
            f"--{name} {text}: '{name}' is fixed at compile time ({p.fixed}); "
            f"rebuild the program with lfc -D {name}={text}"
        )
    try:
        return argument(name, text, kind, p.type, where(p))
    except ValueError as e:
        raise LaunchError(str(e)) from None


def _unknown(
    opt: str, parameters: Sequence[MainParameter], contained: Sequence[ContainedParameter]
) -> str:
    """The error for the unknown option ``opt``: the option or parameter it is likely a
    misspelling of (or the parameters of the reactors inside that have its name: ``--hidden``
    may be ``--learner.hidden``), and the main parameters that can be set."""
    names = [p.name for p in parameters if not p.fixed]
    given = _option_name(opt)
    inside = [f"--{p.option}" for p in contained if p.name == given and not p.fixed]
    near = close_match(opt.split("=", 1)[0].lstrip("-"), [*_OPTION_NAMES, *names])
    if inside:
        quoted = [f"'{o}'" for o in inside[:3]]
        hint = f"; did you mean {' or '.join(quoted)}?"
    else:
        hint = f"; did you mean '--{near}'?" if near else ""
    text = f"unknown option '{opt}'{hint}"
    return text + (f" (the main reactor's parameters are {', '.join(names)})" if names else "")


def _flag(args: list, opt: str) -> bool:
    if args and args[0].lower() in ("true", "false"):
        return args.pop(0).lower() == "true"
    if args and not args[0].startswith("-"):
        raise LaunchError(f"{opt} expects true or false, got '{args[0]}'")
    return True


def _duration(args: list, opt: str) -> int:
    if len(args) >= 1 and args[0] == "0" and (len(args) == 1 or args[1].startswith("-")):
        args.pop(0)
        return 0
    if len(args) < 2:
        raise LaunchError(f"{opt} expects '<integer> <unit>'")
    mag, unit = args.pop(0), args.pop(0)
    try:
        value = parse_duration(mag, unit)
    except ValueError as e:
        raise LaunchError(f"{opt}: {e}") from None
    if value < 0:
        raise LaunchError(f"{opt}: negative duration")
    return value


def program_args(argv: Sequence[str] | None) -> list[str]:
    """The options in ``argv``: ``sys.argv[1:]`` when None; ``argv`` less its first item when
    that names the program (``sys.argv`` style), else all of it."""
    if argv is None:
        return list(sys.argv[1:])
    args = list(argv)
    first = args[0] if args else "-"
    if not first.startswith("-") and (first.endswith(".py") or os.path.exists(first)):
        return args[1:]  # args[0] is the program (sys.argv style)
    return args
