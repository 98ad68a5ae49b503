"""The runtime with its standard error unwritable (``2>/dev/full``, a closed pipe): a failing
reaction still ends the run with its status, and the first Ctrl-C, SIGTERM or SIGHUP still
stops it, on every backend. Nothing on those paths depends on a write to stderr succeeding."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import build

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fault_fixtures"
BACKENDS = [("1", "processes"), ("2", "processes"), ("2", "threads")]
SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
BOUND_S = 1.0  # signal to exit (0.05-0.2 s on an idle machine; room for a loaded one)

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")


@pytest.fixture(scope="module")
def raises(tmp_path_factory):
    return build(FIXTURES / "Raises.lf", tmp_path_factory.mktemp("raises"))


@pytest.fixture(scope="module")
def chatter(tmp_path_factory):
    return build(FIXTURES / "Chatter.lf", tmp_path_factory.mktemp("chatter"))


def _segments(pid: int) -> list[str]:
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"lf{pid}x")]


def _start(launcher: Path, *args: str) -> subprocess.Popen:
    """``launcher`` with its stderr on ``/dev/full`` (every write fails with ENOSPC)."""
    with open("/dev/full", "w") as full:
        return subprocess.Popen(
            [str(launcher), *args],
            stdout=subprocess.PIPE,
            stderr=full,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )


def _ended(p: subprocess.Popen, within_s: float) -> float | None:
    """Seconds until ``p`` exited (its stdout read meanwhile), or None when it had not within
    ``within_s`` (it is killed then)."""
    t0 = time.monotonic()
    try:
        p.communicate(timeout=within_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None
    return time.monotonic() - t0


@pytest.mark.parametrize("workers,backend", BACKENDS)
def test_a_failing_reaction_ends_the_run_when_stderr_is_unwritable(raises, workers, backend):
    p = _start(raises, "-w", workers, "--backend", backend)
    took = _ended(p, 10)
    assert took is not None, "the run did not end"
    assert p.returncode == 1
    assert not _segments(p.pid)


@pytest.mark.parametrize("workers,backend", BACKENDS)
@pytest.mark.parametrize("sig,status", SIGNALS)
def test_the_first_signal_stops_the_run_when_stderr_is_unwritable(
    chatter, workers, backend, sig, status
):
    p = _start(chatter, "-w", workers, "--backend", backend, "-o", "60", "sec")
    try:
        assert p.stdout.readline()
        time.sleep(0.3)
        p.send_signal(sig)
        took = _ended(p, 5)
    finally:
        p.kill()
    assert took is not None, "the first signal did not stop the run"
    assert p.returncode == status and took < BOUND_S, (p.returncode, took)
    assert not _segments(p.pid)
