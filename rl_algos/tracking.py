"""Experiment tracking with Weights & Biases: a run's config and scalars sent to one W&B run
beside its TensorBoard event files, as CleanRL's ``--track`` does (the episode logger's
``track = true``; docs/tracking.md).

One W&B run per program run, opened by the episode logger's process: its name is the run
directory's (``<program>__<env>__<seed>__<time>-<short id>``), its id the run id
(``lf.run_id()``, so a resumed run continues the same W&B run), its config the contents of
``config.json``, its files under ``<run directory>/wandb/``. The run is offline (written to
disk, uploaded later with ``wandb sync``) unless the environment variable ``WANDB_MODE``
says otherwise.

The scalars come from the files every :class:`rl_algos.metrics.ScalarLog` of the run writes
(``metrics.csv`` of the logger, ``losses.csv`` of the learners, in whatever worker or
process they run): the tracker reads the rows added to them every :data:`POLL_S` seconds of
the logger's reactions and logs each as ``{tag: value, "global_step": step}``, with
``global_step`` (environment steps) the x-axis of every chart. Files are the one channel that
every backend, worker count and a stopped run share: a learner needs to know nothing of the
tracking, and one W&B run sees every writer's rows whichever process wrote them. The run is
finished when the logger's process exits (an ``atexit`` function, also after Ctrl-C or a
failure, registered after W&B's own so that it runs first): it waits for the writers of
other processes to close their files (their locks, :func:`rl_algos.metrics.wait_closed`),
logs the last rows and closes the W&B run.

Nothing here imports ``wandb`` until a tracker starts, so a run without tracking does not
pay for it.
"""

from __future__ import annotations

import atexit
import glob
import os
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from .config import ConfigError
from .metrics import CSV_HEADER, wait_closed

#: How often (seconds of wall-clock time) the tracker reads new rows while the run goes on.
POLL_S = 2.0
#: How long the tracker waits at the end for other processes' writers after the logger's
#: shutdown reaction ran (the run ended), and after a stop without it (a failure).
WAIT_ENDED_S, WAIT_STOPPED_S = 60.0, 0.5
#: The x-axis of every chart: environment steps.
STEP_KEY = "global_step"
#: The modes ``WANDB_MODE`` may name (those of ``wandb.Settings.mode``).
MODES = ("offline", "online", "disabled", "shared", "dryrun", "run")


class ScalarTail:
    """The rows added to one ScalarLog CSV file (``step,tag,value``) since the last read.

    ``offset``: the bytes already read (a file cut back below it, by a resumed run, is read
    from its new end).
    """

    def __init__(self, path: str, offset: int = len(CSV_HEADER)) -> None:
        self.path, self.offset = path, offset

    def rows(self) -> list[tuple[int, str, float]]:
        """The complete rows added since the last call, as (step, tag, value); a row still
        being written is left for the next call, a malformed one skipped."""
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                self.offset = min(self.offset, size)
                f.seek(self.offset)
                data = f.read(size - self.offset)
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        return [row for line in data[:end].splitlines() if (row := _row(line)) is not None]


def _row(line: bytes) -> tuple[int, str, float] | None:
    """``step,tag,value`` as (step, tag, value), or None when malformed."""
    try:
        step, tag, value = line.decode("utf-8").split(",")
        return int(step), tag, float(value)
    except ValueError:
        return None


def history_rows(rows: list[tuple[int, str, float]]) -> Iterator[dict[str, float | int]]:
    """``rows`` (step, tag, value) as W&B history rows ``{tag: value, ..., "global_step":
    step}``: consecutive rows of one step in one row, unless a tag comes twice (two episodes
    ending at the same step stay two rows)."""
    current: dict[str, float | int] = {}
    for step, tag, value in rows:
        if current and (current[STEP_KEY] != step or tag in current):
            yield current
            current = {}
        current[STEP_KEY] = step
        current[tag] = value
    if current:
        yield current


class Tracker:
    """The W&B run of the program run whose directory is ``run_dir``: ``record`` (the
    contents of ``config.json``) as its config, the ScalarLog files of ``run_dir`` as its
    history; ``project``: the W&B project; ``run_id``: the run's id (``lf.run_id()``).

    Raises ConfigError when ``project`` is empty, or as :func:`open_run` does.
    """

    def __init__(self, run_dir: str, record: Mapping[str, Any], project: str, run_id: str):
        if not project:
            raise ConfigError("wandb_project must name a W&B project (it is empty)")
        self.run_dir, self.record = os.path.abspath(run_dir), dict(record)
        self.project, self.run_id = project, run_id
        self.tails: dict[str, ScalarTail] = {}
        self.ended = False
        self._start()

    def _start(self) -> None:
        """Open (or, with the same run id, continue) the W&B run, and make it finish at the
        exit of this process."""
        self.run: Any = open_run(self.run_dir, self.record, self.project, self.run_id)
        self.due = time.monotonic() + POLL_S
        atexit.register(self.finish)

    @property
    def name(self) -> str:
        """The W&B run's name: the run directory's."""
        return os.path.basename(self.run_dir)

    def __getstate__(self) -> dict[str, Any]:
        """Plain data: where the run is and how far each file was read (a snapshot)."""
        offsets = {path: tail.offset for path, tail in self.tails.items()}
        keep = ("run_dir", "record", "project", "run_id")
        return {**{k: getattr(self, k) for k in keep}, "offsets": offsets}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restored in a resumed run: continue the W&B run and each file from its offset."""
        state = dict(state)
        offsets = state.pop("offsets")
        vars(self).update(state)
        self.tails = {path: ScalarTail(path, offset) for path, offset in offsets.items()}
        self.ended = False
        self._start()

    def poll(self, force: bool = False) -> int:
        """Send the rows added since the last poll, if :data:`POLL_S` seconds have passed
        (``force``: now); returns how many history rows were logged."""
        if self.run is None or (not force and time.monotonic() < self.due):
            return 0
        self.due = time.monotonic() + POLL_S
        self._find_files()
        logged = 0
        for tail in self.tails.values():
            for row in history_rows(tail.rows()):
                self.run.log(row)
                logged += 1
        return logged

    def _find_files(self) -> None:
        """Start following the ScalarLog files of the run directory not yet followed (those
        whose first line is :data:`rl_algos.metrics.CSV_HEADER`)."""
        for path in sorted(glob.glob(os.path.join(glob.escape(self.run_dir), "*.csv"))):
            if path not in self.tails and _first_line(path) == CSV_HEADER:
                self.tails[path] = ScalarTail(path)

    def end(self) -> None:
        """The logger's shutdown: the run ended, so at the exit the tracker waits up to
        :data:`WAIT_ENDED_S` for the writers of other processes (their last rows); sends
        what is there now."""
        self.ended = True
        self.poll(force=True)

    def finish(self) -> None:
        """Send the last rows of every writer and close the W&B run (idempotent; what runs
        at the exit). Failures are said on stderr in one line, never raised."""
        if self.run is None:
            return
        try:
            self._find_files()
            timeout = WAIT_ENDED_S if self.ended else WAIT_STOPPED_S
            late = wait_closed(list(self.tails), timeout)
            if late:
                names = ", ".join(os.path.basename(p) for p in late)
                sys.stderr.write(f"wandb: {names} still being written; sending its rows so far\n")
            self.poll(force=True)
            run, self.run = self.run, None
            run.finish(exit_code=0 if self.ended else 1)  # 1: stopped by a failure
        except Exception as e:  # at the exit: say it, let the other exit functions run
            self.run = None
            sys.stderr.write(f"wandb: could not finish the W&B run {self.name}: {e!r}\n")


def _first_line(path: str) -> str:
    """The first line of ``path`` with its newline ("" if unreadable or not complete)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            line = f.readline()
    except (OSError, UnicodeDecodeError):
        return ""
    return line if line.endswith("\n") else ""


def open_run(run_dir: str, record: Mapping[str, Any], project: str, run_id: str) -> Any:
    """``wandb.init`` of the run in ``run_dir`` (see :class:`Tracker`): offline unless
    ``WANDB_MODE`` is set, W&B's console capture off (the runtime owns the program's output).

    Raises ConfigError when ``WANDB_MODE`` is not a mode of W&B, the ``wandb`` package is
    missing, or W&B refuses to start the run (not logged in for an online run...).
    """
    mode = offline_unless_told()
    try:
        import wandb
    except ImportError:
        raise ConfigError(
            "track = true needs the wandb package (pip install wandb); "
            "run without --track, or install it"
        ) from None
    try:
        run = wandb.init(
            project=project,
            name=os.path.basename(run_dir),
            id=run_id,
            dir=run_dir,
            config=dict(record),
            resume="allow",
            mode=mode,
            settings=wandb.Settings(console="off"),
        )
    except wandb.errors.Error as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"W&B could not start the run: {first}") from None
    run.define_metric(STEP_KEY)
    run.define_metric("*", step_metric=STEP_KEY)
    return run


def offline_unless_told() -> Literal["offline"] | None:
    """The mode to give ``wandb.init``: "offline" when ``WANDB_MODE`` is unset or empty,
    else None (W&B reads the variable itself).

    Raises ConfigError when ``WANDB_MODE`` is not one of :data:`MODES`.
    """
    given = os.environ.get("WANDB_MODE", "")
    if not given:
        return "offline"
    if given not in MODES:
        raise ConfigError(f"WANDB_MODE={given!r} is not a W&B mode; valid: {', '.join(MODES)}")
    return None
