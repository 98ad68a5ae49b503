"""Training scalars under CleanRL's tag names, written to TensorBoard event files in the run
directory and, row by row, to a CSV file beside them (``step,tag,value``).

Tags: ``charts/episodic_return``, ``charts/episodic_length`` and ``charts/SPS`` (written by
the episode logger), ``losses/value_loss``, ``losses/policy_loss``, ``losses/entropy``,
``losses/approx_kl``, ``losses/clipfrac`` and ``charts/learning_rate`` (PPO learner, in its
own ``losses.csv``). The step of a row is the number of environment steps taken so far.

Logging is a side effect: nothing here is sent through a port, so a program's digests do not
depend on it; ``charts/SPS`` reads the wall clock and differs from run to run.

A :class:`ScalarLog` saved in a checkpoint remembers how far its files were written; restored
in a resumed run it cuts them back there and goes on (the CSV file in place; TensorBoard
events in a new event file beside the first, which TensorBoard reads as one run).

While a ScalarLog is open it holds a shared ``flock`` on its CSV file, which the kernel
releases when the log is closed or its process ends, however: a reader in another process
(:class:`rl_algos.tracking.Tracker`, which sends every writer's rows to Weights & Biases)
learns from it when a writer's rows are complete (:func:`wait_closed`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from typing import IO, Any

from .runlog import reopen, written

try:
    import fcntl
except ImportError:  # not a POSIX system: writers hold no locks, readers do not wait
    fcntl = None  # type: ignore[assignment]

#: PPO learner statistic (``PPOLearner.stats``) -> CleanRL tag.
PPO_TAGS = {
    "v_loss": "losses/value_loss",
    "pg_loss": "losses/policy_loss",
    "entropy": "losses/entropy",
    "approx_kl": "losses/approx_kl",
    "clipfrac": "losses/clipfrac",
}

#: DQN learner statistic (``DQNLearner.stats``) -> CleanRL tag, logged every
#: :data:`DQN_LOG_EVERY` gradient steps (CleanRL's dqn.py: every 100 steps).
DQN_TAGS = {"loss": "losses/td_loss", "q": "losses/q_values"}
DQN_LOG_EVERY = 100

#: SAC learner statistic (``SACLearner.stats``) -> CleanRL tag, logged every
#: :data:`DQN_LOG_EVERY` gradient steps (CleanRL's sac_continuous_action.py: every 100).
SAC_TAGS = {
    k: f"losses/{k}"
    for k in (
        "qf1_values", "qf2_values", "qf1_loss", "qf2_loss", "qf_loss", "actor_loss", "alpha",
        "alpha_loss",
    )
}  # fmt: skip

CSV_HEADER = "step,tag,value\n"

#: The CSV files of the ScalarLogs open in this process (absolute paths).
_OPEN_HERE: set[str] = set()


class ScalarLog:
    """Scalars of one writer (a logger or a learner) in ``run_dir``: a TensorBoard event file
    (``events.out.tfevents.*``) and the CSV file ``run_dir/csv_name``.

    ``tensorboard``: False writes the CSV only (also when the ``tensorboard`` package is
    missing). Rows reach the CSV file line by line, so a killed run keeps them.
    """

    def __init__(self, run_dir: str, csv_name: str, tensorboard: bool = True) -> None:
        self.run_dir, self.csv_name = os.path.abspath(run_dir), csv_name
        self.csv: IO[str] = open(  # noqa: SIM115 - closed by close()
            self.path, "w", encoding="utf-8", newline="", buffering=1
        )
        _hold(self.csv, self.path)
        self.csv.write(CSV_HEADER)
        self.events: Any = _event_writer(run_dir, csv_name) if tensorboard else None

    @property
    def path(self) -> str:
        """The CSV file's absolute path."""
        return os.path.join(self.run_dir, self.csv_name)

    def __getstate__(self) -> dict[str, Any]:
        """Where the files are and how many bytes of each are written (flushed now)."""
        events = None
        if self.events is not None:
            self.events.flush()
            name = self.events._file_name  # noqa: SLF001 - the writer names its file itself
            events = (name, os.path.getsize(name))
        return {
            "run_dir": self.run_dir,
            "csv_name": self.csv_name,
            "csv": written(self.csv),
            "events": events,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Reopen the files cut back to the saved sizes; new events go to a new event file."""
        self.run_dir, self.csv_name = state["run_dir"], state["csv_name"]
        self.csv = reopen(self.path, state["csv"])
        if not self.csv.closed:
            _hold(self.csv, self.path)
        self.events = None
        if state["events"] is not None:
            name, size = state["events"]
            with open(name, "ab") as f:
                f.truncate(size)
            self.events = _event_writer(self.run_dir, self.csv_name)

    def add(self, tag: str, value: float, step: int) -> None:
        """One scalar ``value`` of ``tag`` at ``step`` environment steps."""
        value, step = float(value), int(step)
        self.csv.write(f"{step},{tag},{value:.9g}\n")
        if self.events is not None:
            self.events.add_event(_scalar_event(tag, value, step))

    def add_all(self, scalars: Mapping[str, float], step: int) -> None:
        """Every ``tag -> value`` of ``scalars`` at ``step``."""
        for tag, value in scalars.items():
            self.add(tag, value, step)

    def close(self) -> None:
        """Flush and close both files (idempotent); other processes then see the CSV file
        complete (:func:`wait_closed`)."""
        if not self.csv.closed:
            self.csv.close()
            _OPEN_HERE.discard(self.path)
        if self.events is not None:
            self.events.close()
            self.events = None


def _hold(csv: IO[str], path: str) -> None:
    """Take the shared lock that says ``csv`` (at ``path``) is being written, for as long as
    it is open (none where ``fcntl`` is missing)."""
    _OPEN_HERE.add(path)
    if fcntl is not None:
        fcntl.flock(csv.fileno(), fcntl.LOCK_SH)


def open_here(path: str) -> bool:
    """Whether a ScalarLog of this process has the CSV file ``path`` open."""
    return os.path.abspath(path) in _OPEN_HERE


def wait_closed(paths: Iterable[str], timeout: float, poll: float = 0.05) -> list[str]:
    """Wait until no process holds any of the ScalarLog CSV files ``paths`` open (each
    writer closed it or ended), at most ``timeout`` seconds; files open in this process are
    not waited for (this process cannot write them while it waits). Returns the paths still
    open elsewhere at the end (empty when all are complete, and always without ``fcntl``)."""
    waiting = [p for p in paths if not open_here(p)]
    deadline = time.monotonic() + timeout
    while True:
        waiting = [p for p in waiting if _written_elsewhere(p)]
        if not waiting or time.monotonic() >= deadline:
            return waiting
        time.sleep(poll)


def _written_elsewhere(path: str) -> bool:
    """Whether another process holds ScalarLog CSV file ``path`` open (its shared lock)."""
    if fcntl is None:
        return False
    try:
        with open(path, "rb") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    except OSError:  # gone, or a file system without locks: nothing to wait for
        return False
    return False


def tagged(stats: Mapping[str, float], tags: Mapping[str, str]) -> dict[str, float]:
    """``stats`` renamed by ``tags`` (statistics without a tag are left out)."""
    return {tags[k]: float(v) for k, v in stats.items() if k in tags}


class Throughput:
    """Environment steps per second of wall-clock time, reported at most every ``interval``
    seconds (``charts/SPS``)."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.t0 = self.last = time.monotonic()
        self.base = 0  # steps taken before t0 (by the run a resumed run continues)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restored in a resumed run: the clock starts again now (its first ``due`` call
        takes its step count as the base)."""
        vars(self).update(state)
        self.t0 = self.last = time.monotonic()
        self.base = -1

    def due(self, steps: int) -> float | None:
        """Steps per second since the start when ``interval`` has passed, else None."""
        if self.base < 0:
            self.base = steps
        now = time.monotonic()
        if now - self.last < self.interval:
            return None
        self.last = now
        return (steps - self.base) / max(1e-9, now - self.t0)


def _event_writer(run_dir: str, csv_name: str) -> Any:
    """A TensorBoard ``EventFileWriter`` in ``run_dir`` (None without the tensorboard
    package); its file name ends with ``csv_name``'s stem, which tells the writers apart."""
    try:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError:
        return None
    suffix = "." + os.path.splitext(csv_name)[0]  # which writer made the file
    return EventFileWriter(run_dir, filename_suffix=suffix)


def _scalar_event(tag: str, value: float, step: int) -> Any:
    """A TensorBoard ``Event`` holding one scalar summary."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
    return event_pb2.Event(wall_time=time.time(), step=step, summary=summary)
