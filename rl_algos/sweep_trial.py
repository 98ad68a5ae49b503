"""One trial of ``lf-rl sweep``: a run of the built program with the trial's parameter values
(``bin/Foo EXTRA... --NAME VALUE ...``, deterministic for those values and its seed), in its
own process, and the objective read back from the run directory it prints at its end
(``run directory: PATH``).

Objectives: ``return``, the mean return of the last 20 episodes (:data:`WINDOW`) of ``returns.csv`` (to
maximise), and ``steps_to_target``, the environment steps at which that mean first reached the
run's ``target_return`` (to minimise; infinity when it never did). The program's exit status 1
(its budget spent before the target) is an outcome like any other; a run that prints no run
directory, or whose returns.csv has no episode, fails the trial.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

from .record import read_record
from .run_summary import WINDOW, read_returns

OBJECTIVES = {"return": "maximize", "steps_to_target": "minimize"}
_RUN_DIR = re.compile(r"^run directory: (.+)$", re.M)
#: Seconds a program stopped with the sweep gets to save its files before it is terminated.
STOP_GRACE_S = 20.0
_PR_SET_PDEATHSIG = 1
#: Exit statuses of a program stopped by SIGINT or SIGTERM (128 + the signal).
INTERRUPTED_STATUS = (128 + signal.SIGINT, 128 + signal.SIGTERM)


@dataclass(frozen=True)
class Outcome:
    """How a trial's run went: its ``run_dir`` (None when it printed none), the ``value`` of
    the objective (None when it failed) and, for a failure, its ``error`` (one line) and
    whether the program was ``interrupted`` (ended by a signal: Ctrl-C, SIGTERM, killed)."""

    run_dir: str | None
    value: float | None
    error: str = ""
    interrupted: bool = False


class TrialProcess:
    """The program of one trial, started with ``command`` in the current directory; its
    standard output and error go to temporary files (read once it ends)."""

    def __init__(self, command: Sequence[str]) -> None:
        self.command = list(command)
        self.out: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")
        self.err: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self.out,
            stderr=self.err,
            env=env,
            preexec_fn=_end_with_parent,
        )

    def done(self) -> bool:
        """Whether the program has ended."""
        return self.proc.poll() is not None

    def stop(self) -> None:
        """End the program as Ctrl-C would (SIGINT: it saves its files), then SIGTERM and
        SIGKILL for one that does not end within :data:`STOP_GRACE_S` seconds each."""
        for send in (lambda: self.proc.send_signal(signal.SIGINT), self.proc.terminate):
            if self.done():
                return
            send()
            try:
                self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                continue
        if not self.done():
            self.proc.kill()
            self.proc.wait()

    def outcome(self, objective: str) -> Outcome:
        """The trial's outcome (see :class:`Outcome`) once the program ended; closes the
        temporary files."""
        stdout, stderr = _read(self.out), _read(self.err)
        found = _RUN_DIR.findall(stdout)
        run_dir = found[-1].strip() if found else None
        status = self.proc.returncode
        if status < 0 or status in INTERRUPTED_STATUS:
            return Outcome(run_dir, None, f"stopped by a signal (exit status {status})", True)
        if run_dir is None or status not in (0, 1):
            why = _last_line(stderr) or f"exit status {status}"
            return Outcome(run_dir, None, f"{self.command[0]} failed (exit status {status}): {why}")
        try:
            return Outcome(run_dir, objective_value(run_dir, objective))
        except ValueError as e:
            said = _last_line(stderr)
            return Outcome(run_dir, None, f"{e} (its last words: {said})" if said else str(e))


def _end_with_parent() -> None:
    """In the child, before the program starts: have the kernel send it SIGTERM when the sweep
    dies (Linux's PR_SET_PDEATHSIG; the program then saves its files and ends), so that a
    killed sweep leaves no run going that no one will read."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the run goes on to its end
        pass


def _read(f: IO[str]) -> str:
    f.seek(0)
    text = f.read()
    f.close()
    return text


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def objective_value(run_dir: str, objective: str) -> float:
    """The ``objective`` of the run in ``run_dir`` (see the module docstring).

    Raises:
        ValueError: an unknown objective, a run without an episode, or (steps_to_target) a
            run whose config.json records no ``target_return``.
    """
    rets = read_returns(run_dir)
    if not len(rets.returns):
        raise ValueError(f"no episode ended in {run_dir}: give the program a larger budget")
    if objective == "return":
        return float(rets.final_mean(WINDOW) or 0.0)
    if objective == "steps_to_target":
        target = read_record(run_dir).get("parameters", {}).get("target_return")
        if not isinstance(target, (int, float)):
            raise ValueError(f"{run_dir}/config.json records no target_return")
        steps = rets.steps_to_target(float(target))
        return math.inf if steps is None else float(steps)
    raise ValueError(f"unknown objective {objective!r}: give {' or '.join(OBJECTIVES)}")
