"""Shared pieces of the benchmarks: result rows, timing, building .lf programs."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Row:
    """One line of the results table.

    ``figure`` is in ``unit``; ``ratio`` compares ours with this row's peer (>1: ours better),
    None on our own rows; ``status`` is "ok" or the reason a run failed (never dropped).
    """

    workload: str
    peer: str
    figure: float | None
    unit: str
    ratio: float | None = None
    status: str = "ok"
    note: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def build(lf_file: Path, out: Path) -> Path:
    """Compile with our lfc; return the launcher. Raises RuntimeError with lfc's messages."""
    r = subprocess.run(
        [sys.executable, "-m", "codegen.cli", "-q", "-o", str(out), str(lf_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return out / "bin" / lf_file.stem


def timed_run(cmd: list[str], timeout: float = 600) -> float:
    """Wall-clock seconds of one process run. Raises RuntimeError if it exits non-zero."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {r.returncode}: {r.stderr[-500:]}")
    return dt


def median_of(n: int, fn) -> float:
    """Median of ``n`` calls of ``fn()`` (each returning seconds)."""
    return statistics.median(fn() for _ in range(n))


def variant(lf_file: Path, replace: dict[str, str], tmp: Path) -> Path:
    """A copy of ``lf_file`` (same name) with text substitutions, e.g. a smaller default."""
    text = lf_file.read_text()
    for old, new in replace.items():
        if old not in text:
            raise ValueError(f"{old!r} not found in {lf_file}")
        text = text.replace(old, new)
    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / lf_file.name
    out.write_text(text)
    return out


def scratch() -> Path:
    """A new folder for a benchmark's builds and runs, removed when this process exits."""
    path = tempfile.mkdtemp(prefix="lfbench-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return Path(path)


def cores() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Process:
    """A finished child process: exit ``code`` (None: killed at its time limit), its
    ``stdout`` and ``stderr``, and ``seconds`` of wall time from launch to exit."""

    code: int | None
    stdout: str
    stderr: str
    seconds: float

    def result(self) -> dict:
        """The json of its last ``RESULT`` line; RuntimeError when it printed none."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT ") :])
        raise RuntimeError(f"no RESULT line (exit {self.code}): {last_lines(self.stderr)}")


def launch(cmd: list[str], cwd: Path | None, limit_s: float, env: dict) -> Process:
    """Run ``cmd`` in ``cwd`` in a session of its own; past ``limit_s`` seconds the whole
    session is killed and ``code`` is None."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=limit_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    return Process(code, out, err, time.perf_counter() - t0)


def last_lines(text: str, n: int = 3) -> str:
    """The last ``n`` non-empty lines, joined (where an error says what went wrong)."""
    return " | ".join([ln.strip() for ln in text.splitlines() if ln.strip()][-n:])
