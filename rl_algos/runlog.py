"""What a training run leaves on disk: ``runs/<program>/<program>__<env>__<seed>__<time>-<short
id>/`` (CleanRL's ``{env_id}__{exp_name}__{seed}__{time}`` with the program's name first)
holding ``returns.csv``, ``learning_curve.png``, the model checkpoint and a copy of
``graph.json``.

The environment and seed are the main reactor's ``env_id`` (or ``env``) and ``seed``
parameters (``lf.main_parameters()``), the time the program's logical start time
(``lf.time.start()``) and the short id the first characters of the run id (``lf.run_id()``),
all of which every reactor of a run sees alike, so a logger and a learner find the same
directory without exchanging it, while two runs never share one: the directory records the
full run id in a ``.run_id`` file, and a directory already holding another run's id is an
error. Code that looks for a run finds it by that file (or ``config.json``), never by
parsing the name. ``returns.csv`` holds only logical quantities (episode, environment steps,
return, length, environment index): the same seed gives the same bytes. Wall-clock figures
go to the terminal only.

A run's checkpoints go to ``checkpoints/`` inside its run directory
(:func:`checkpoint_directory`), with the lock the runtime holds while a process writes the
run (``reactors.records.run_lock``: a second resume of the run is refused). A resumed run keeps its
run id, so it finds its directory again, even when it starts later than the run it continues
did. An :class:`EpisodeLog` saved in a checkpoint remembers how many bytes of ``returns.csv``
it had written; restored in a resumed run, it cuts the file back to them and goes on
appending, so the file ends as the uninterrupted run's would.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import IO, Any

from .plotter import Curve, draw
from .record import CONFIG_FILE

CSV_HEADER = "episode,step,return,length,env\n"


#: File in a run directory holding the full id of the run that made it.
RUN_ID_FILE = ".run_id"
#: How many characters of the run id the directory name carries.
SHORT_ID = 8
#: The folder of a run directory holding the run's checkpoints.
CHECKPOINTS = "checkpoints"
#: What may not appear in a part of a run's name.
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def run_directory(
    program: str,
    start_ns: int,
    run_id: str,
    root: str = "runs",
    parameters: Mapping[str, Any] | None = None,
) -> str:
    """``root/program/<run name>`` (see :func:`run_name`: the program, the environment and
    seed of the main reactor's ``parameters``, the local time of ``start_ns``, ns since the
    epoch, and ``run_id[:8]``), created if missing; ``root`` is relative to the current
    directory unless absolute. Every caller with the same ``run_id`` gets the same directory
    (the one the run made first, whatever ``start_ns`` and ``parameters`` are now: a resumed
    run keeps its run id); a different run never does.

    Raises FileExistsError when the directory belongs to another run (same short id), and
    ValueError for an empty ``run_id``.
    """
    if not run_id:
        raise ValueError("run_directory needs a run id (lf.run_id())")
    found = _directory_of(os.path.join(root, program), run_id)
    if found is not None:
        return found
    path = os.path.join(root, program, run_name(program, start_ns, run_id, parameters))
    if not os.path.isdir(path):
        _claim(path, run_id)
    owner = run_id_of(path)
    if owner != run_id:
        raise FileExistsError(f"run directory {path} belongs to run {owner!r}, not {run_id!r}")
    return path


def run_name(
    program: str, start_ns: int, run_id: str, parameters: Mapping[str, Any] | None = None
) -> str:
    """``<program>__<env>__<seed>__<YYYYmmdd-HHMMSS-mmm>-<run_id[:8]>``, the name of a run's
    directory and of its Weights & Biases run: ``<env>`` is the ``env_id`` (else ``env``)
    of ``parameters`` and ``<seed>`` their ``seed``, each left out (with its ``__``) when
    missing or empty; characters other than letters, digits, ``.``, ``_`` and ``-`` become
    ``-`` (``ALE/Pong-v5`` -> ``ALE-Pong-v5``). The time is the local time of ``start_ns``
    (ns since the epoch), to the millisecond."""
    given = parameters or {}
    env = given.get("env_id") or given.get("env")
    parts = [program, _safe(env), _safe(given.get("seed"))]
    secs, ns = divmod(int(start_ns), 1_000_000_000)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(secs)) + f"-{ns // 1_000_000:03d}"
    return "__".join(p for p in parts if p) + f"__{stamp}-{run_id[:SHORT_ID]}"


def _safe(value: object, limit: int = 64) -> str:
    """``value`` as a part of a file name: "" for None or "", else its text with every
    character unsafe in a file name replaced by ``-``, at most ``limit`` characters."""
    if value is None:
        return ""
    return _UNSAFE.sub("-", str(value))[:limit]


def checkpoint_directory(
    program: str,
    start_ns: int,
    run_id: str,
    root: str = "runs",
    parameters: Mapping[str, Any] | None = None,
) -> str:
    """``<run directory>/checkpoints`` (see :func:`run_directory`, same arguments and errors),
    not made here: the runtime makes it when it takes a snapshot there."""
    return os.path.join(run_directory(program, start_ns, run_id, root, parameters), CHECKPOINTS)


def _directory_of(folder: str, run_id: str) -> str | None:
    """The run directory in ``folder`` that run ``run_id`` made, whatever its start time (a
    resumed run that waits for physical time starts later than the run it continues), or
    None."""
    for path in glob.glob(os.path.join(glob.escape(folder), f"*-{run_id[:SHORT_ID]}")):
        if os.path.isdir(path) and run_id_of(path) == run_id:
            return path
    return None


def _claim(path: str, run_id: str) -> None:
    """Create ``path`` already holding its ``.run_id`` file: the directory is filled under a
    private name and renamed into place, which fails if ``path`` appeared meanwhile (another
    reactor of the same run, or another run), so a directory is never seen without its id."""
    parent = os.path.dirname(path) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident():x}-{time.monotonic_ns()}"
    os.mkdir(tmp)
    try:
        with open(os.path.join(tmp, RUN_ID_FILE), "w", encoding="utf-8") as f:
            f.write(run_id + "\n")
        os.rename(tmp, path)
    except OSError as e:
        if e.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not os.path.isdir(path):
            raise
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def run_id_of(path: str) -> str:
    """The run id recorded in run directory ``path`` ("" when it has none)."""
    try:
        with open(os.path.join(path, RUN_ID_FILE), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def is_run_directory(folder: str) -> bool:
    """Whether ``folder`` is a run directory: it holds ``config.json`` or ``.run_id`` (and is
    not one being made: ``<name>.tmp-...``, see :func:`run_directory`)."""
    if ".tmp-" in os.path.basename(folder) or not os.path.isdir(folder):
        return False
    return any(os.path.isfile(os.path.join(folder, f)) for f in (CONFIG_FILE, RUN_ID_FILE))


def run_started(run_dir: str) -> float | None:
    """When the run of ``run_dir`` started (seconds since the epoch): its ``.run_id`` file is
    written as the run makes its directory (a resumed run keeps it), else when config.json
    was written; None when it has neither."""
    for name in (RUN_ID_FILE, CONFIG_FILE):
        try:
            return os.path.getmtime(os.path.join(run_dir, name))
        except OSError:
            continue
    return None


def program_name(instance_name: str) -> str:
    """The program (main reactor) name from a full instance name: ``Main.envs[1]`` -> ``Main``."""
    return instance_name.split(".", 1)[0].split("[", 1)[0]


def graph_json_of(obj: object) -> str:
    """Path of the ``graph.json`` beside the generated module that defines ``obj``'s class."""
    module_file = sys.modules[type(obj).__module__].__file__ or ""
    return os.path.join(os.path.dirname(os.path.abspath(module_file)), "graph.json")


def copy_graph(obj: object, run_dir: str) -> str | None:
    """Copy the program's graph.json into ``run_dir``; returns the copy's path, or None when
    there is no graph.json beside the module."""
    src = graph_json_of(obj)
    if not os.path.exists(src):
        return None
    dst = os.path.join(run_dir, "graph.json")
    shutil.copyfile(src, dst)
    return dst


def atomic_save(obj: object, path: str) -> str:
    """``torch.save(obj, path)`` through a temporary file in the same directory and
    ``os.replace``, so a reader never sees a half-written checkpoint. Returns ``path``.

    Raises OSError with errno ENOSPC and a message naming ENOSPC and ``path`` when the disk
    is full (torch's own OSError, or the RuntimeError its C++ writer raises on a failed write
    while the disk has no room left); other errors pass through unchanged.
    """
    import torch

    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise _disk_full(path) from e
        raise
    except RuntimeError as e:
        if "write failed" in str(e) and _no_room(path):
            raise _disk_full(path) from e
        raise
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def _disk_full(path: str) -> OSError:
    return OSError(errno.ENOSPC, f"ENOSPC: no space left on device while saving {path}")


def _no_room(path: str, min_free: int = 1 << 20) -> bool:
    """Whether the file system holding ``path`` has less than ``min_free`` bytes free."""
    try:
        return shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free < min_free
    except OSError:
        return False


class EpisodeLog:
    """Finished episodes, written to ``returns.csv`` as they come (line-buffered file).

    ``window``: how many recent returns :meth:`mean_recent` averages.
    """

    def __init__(self, csv_path: str, window: int = 20):
        self.path = os.path.abspath(csv_path)
        self.file = _line_file(csv_path, "w")
        self.file.write(CSV_HEADER)
        self.recent: deque[float] = deque(maxlen=window)
        self.window = window
        self.steps: list[int] = []
        self.returns: list[float] = []

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the open file, and how many bytes of it were written."""
        state = {k: v for k, v in vars(self).items() if k != "file"}
        state["written"] = written(self.file)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Reopen the CSV file cut back to the bytes written when the state was saved."""
        state = dict(state)
        self.file = reopen(state["path"], state.pop("written"))
        vars(self).update(state)

    def add(self, step: int, ret: float, length: int, env: int) -> None:
        """Record one episode that ended when the run had taken ``step`` environment steps."""
        self.returns.append(float(ret))
        self.steps.append(int(step))
        self.recent.append(float(ret))
        self.file.write(
            f"{len(self.returns)},{int(step)},{float(ret):.6g},{int(length)},{int(env)}\n"
        )

    def mean_recent(self) -> float:
        """Mean return of the last ``window`` episodes (nan before the first one)."""
        return sum(self.recent) / len(self.recent) if self.recent else float("nan")

    def solved(self, target: float) -> bool:
        """Whether ``window`` episodes are in and their mean return is at least ``target``."""
        return len(self.recent) == self.window and self.mean_recent() >= target

    def close(self) -> None:
        """Flush and close the CSV file (idempotent)."""
        if not self.file.closed:
            self.file.close()

    def plot(self, png_path: str, title: str = "", target: float | None = None) -> str:
        """Write the learning curve (return per episode and its moving mean over ``window``,
        against environment steps) as a PNG (:func:`rl_algos.plotter.draw`)."""
        return draw(Curve(self.steps, self.returns, self.window, png_path, title, target))


def _line_file(path: str, mode: str) -> IO[str]:
    """``path`` opened for text, line-buffered: each line reaches the OS at once, so a killed
    run keeps it."""
    return open(path, mode, encoding="utf-8", newline="", buffering=1)  # noqa: SIM115


def written(file: IO[str]) -> int | None:
    """How many bytes of ``file`` are written (flushed to the OS now); None once closed."""
    if file.closed:
        return None
    file.flush()
    return file.tell()


def reopen(path: str, size: int | None) -> IO[str]:
    """``path`` cut back to ``size`` bytes and opened to append (line-buffered); a closed
    file (``size`` None) stays closed (a closed file object is returned)."""
    if size is None:
        f = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        f.close()
        return f
    with open(path, "a", encoding="utf-8") as f:
        f.truncate(size)
    return _line_file(path, "a")


def save_curve(log: EpisodeLog, png_path: str, title: str, target: float | None) -> str:
    """Close ``log`` and draw its learning curve into ``png_path`` (see
    :meth:`EpisodeLog.plot`); what a logger does at shutdown, or on a stop
    (:class:`rl_algos.salvage.Salvage`)."""
    log.close()
    return log.plot(png_path, title, target)
