"""The runtime under faults: a closed standard output, a dead parent, signals on every
backend, a small /dev/shm, unwritable output paths. Every test bounds its time and kills
what it starts."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import build

HERE = Path(__file__).resolve().parent
CHATTER = HERE / "fault_fixtures" / "Chatter.lf"


@pytest.fixture(scope="module")
def chatter(tmp_path_factory):
    return build(CHATTER, tmp_path_factory.mktemp("chatter"))


def _segments(pid: int) -> list[str]:
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"lf{pid}x")]


def _start(launcher: Path, *args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [str(launcher), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kw,
    )


def _wait(p: subprocess.Popen, timeout: float = 30) -> tuple[int, str]:
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise
    return p.returncode, err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_closed_stdout_gives_one_message_and_cleans_up(chatter, workers):
    p = _start(chatter, "-w", workers)
    assert p.stdout.readline() and p.stdout.readline()
    p.stdout.close()  # as `| head -2` does
    code, err = _wait(p)
    assert code == 1, err
    assert "internal error" not in err and "Exception ignored" not in err, err
    if workers == "2":
        assert err.count("cannot write the program's output: Broken pipe") == 1, err
        assert "Traceback" not in err, err
    assert not _segments(p.pid)
