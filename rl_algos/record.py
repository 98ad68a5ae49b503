"""``config.json``, the record of a training run in its run directory: every main-reactor
parameter value, the parameters of reactors inside it given on the command line, the seed and environment id, the worker count and backend, the command line,
the versions of the packages that shape the result, the Python version and the git revision
of the program's source when it is in a git repository.

It is written once, when the run starts, by the episode logger; :mod:`rl_algos.evaluate`
reads it back to rebuild the environment of a saved model.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

CONFIG_FILE = "config.json"
#: Distributions whose versions a run records.
PACKAGES = ("lf-rl", "torch", "gymnasium", "numpy", "tensorboard")


def run_record(
    program: str,
    parameters: Mapping[str, Any],
    run_id: str,
    argv: Sequence[str],
    source_dir: str,
    default_workers: int = 1,
    forwarded: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The record of a run of ``program`` (the main reactor's name) whose main reactor has the
    values ``parameters``; ``argv``: the program's options (``sys.argv[1:]``), from which the
    worker count and backend are read (``default_workers`` when not given); ``forwarded``: the
    parameters of reactors inside the main one given on the command line, ``"PATH.NAME"`` ->
    the LF expression (``lf.forwarded_parameters()``), kept under ``forwarded``."""
    return {
        "program": program,
        "run_id": run_id,
        "env_id": parameters.get("env_id"),
        "seed": parameters.get("seed"),
        "workers": workers_of(argv, default_workers),
        "backend": option_value(argv, ("--backend",)),
        "command_line": list(argv),
        "parameters": {k: _jsonable(v) for k, v in parameters.items()},
        "forwarded": dict(forwarded or {}),
        "packages": package_versions(),
        "python": platform.python_version(),
        "git_revision": git_revision(source_dir),
    }


def write_record(run_dir: str, record: Mapping[str, Any]) -> str:
    """Write ``record`` as ``run_dir/config.json`` (through a temporary file); returns the path."""
    path = os.path.join(run_dir, CONFIG_FILE)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return path


def read_record(run_dir: str) -> dict[str, Any]:
    """The ``config.json`` of ``run_dir`` (an empty dict when there is none).

    Raises:
        ValueError: the file is not JSON.
    """
    path = os.path.join(run_dir, CONFIG_FILE)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def option_value(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The value after the last of the options ``names`` in ``argv`` (``-w 2`` or
    ``--workers=2``), or None."""
    found = None
    for i, a in enumerate(argv):
        if a in names and i + 1 < len(argv):
            found = argv[i + 1]
        elif "=" in a and a.split("=", 1)[0] in names:
            found = a.split("=", 1)[1]
    return found


def workers_of(argv: Sequence[str], default: int = 1) -> int:
    """The worker count asked for on the command line (``-w N``; 0 means one per core),
    else ``default``."""
    given = option_value(argv, ("-w", "--workers"))
    if given is None or not given.isdigit():
        return default
    n = int(given)
    return n if n > 0 else (os.cpu_count() or 1)


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution (None when it is not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_revision(path: str) -> str | None:
    """The commit checked out in the git repository holding ``path``, with ``-dirty`` when
    files differ from it; None outside a repository or without git."""
    try:
        head = _git(path, "rev-parse", "HEAD")
        dirty = _git(path, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    if head is None:
        return None
    return head + ("-dirty" if dirty else "")


def _git(path: str, *args: str) -> str | None:
    r = subprocess.run(
        ["git", "-C", path or ".", *args], capture_output=True, text=True, timeout=10
    )
    return r.stdout.strip() if r.returncode == 0 else None


def _jsonable(value: Any) -> Any:
    """``value`` as JSON: containers element-wise, other objects by ``repr``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def target_workers(graph_json: str | None) -> int:
    """The ``workers`` target property recorded in a program's graph.json (1 when absent)."""
    if not graph_json or not os.path.exists(graph_json):
        return 1
    with open(graph_json, encoding="utf-8") as f:
        return int(json.load(f).get("target", {}).get("workers", 1) or 1)
