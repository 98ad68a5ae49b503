"""Launching generated programs: options, exit status, error reports with .lf lines,
Ctrl-C (spec §2.9, §5.3). Uses the programs in tests/runtime_fixtures/, built by lfc."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, build

from reactors.core.errors import LaunchError
from reactors.core.tag import MSEC, SEC
from reactors.launch.options import parse_options
from reactors.model.target import TargetSettings

FIX = Path(__file__).resolve().parent / "runtime_fixtures"
FAILING_LF = str(FIX / "Failing" / "Failing.lf")


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory) -> Path:
    """OUT holding ``src-gen/<Name>/<Name>.py`` of every program in tests/runtime_fixtures/."""
    out = tmp_path_factory.mktemp("runtime_fixtures")
    for name in ("Failing", "PingPong", "LeftOpen"):
        build(FIX / name / f"{name}.lf", out)
    return out


@pytest.fixture(scope="module")
def failing(fixtures: Path) -> str:
    """The generated module of Failing.lf (run as a script, like its launcher does)."""
    return str(fixtures / "src-gen" / "Failing" / "Failing.py")


def run_fixture(path, *args, mode="ok", timeout=60):
    env = dict(os.environ, FAIL_MODE=mode)
    return subprocess.run(
        [sys.executable, path, *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def test_parse_options():
    o = parse_options(
        ["-o", "5", "msec", "-f", "false", "-k", "true", "-w", "2"],
        TargetSettings(fast=True, timeout=SEC(1)),
    )
    assert (o.timeout, o.fast, o.keepalive, o.workers) == (MSEC(5), False, True, 2)
    o = parse_options(["--fast", "--timeout", "0", "-m", "1", "sec"])
    assert (o.fast, o.timeout, o.start_multiple) == (True, 0, SEC(1))
    assert parse_options(["-h"]).help
    for bad in (["--bogus"], ["-o", "5"], ["-o", "5", "parsecs"], ["-w", "x"], ["-f", "maybe"]):
        with pytest.raises(LaunchError):
            parse_options(bad)


def test_normal_run_and_timeout_option(failing):
    r = run_fixture(failing, "-o", "250", "msec")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n").count("tick") == 3 and "shutdown ran" in r.stdout
    assert r.stderr == ""


def test_help_and_bad_option(failing):
    r = run_fixture(failing, "--help")
    assert r.returncode == 0 and "--timeout" in r.stdout
    r = run_fixture(failing, "--nonsense")
    assert r.returncode == 1 and "unknown option" in r.stderr


def test_exception_reports_lf_lines_and_stops(failing):
    r = run_fixture(failing, mode="raise")
    assert r.returncode == 1
    assert r.stdout.split("\n").count("tick") == 1 and "shutdown ran" not in r.stdout
    err = r.stderr
    assert f"reaction 1 of Failing failed at {FAILING_LF}:12" in err
    assert f'File "{FAILING_LF}", line 18, in reaction 1' in err  # numbered as the header
    assert "print(self.divide(1))" in err and "return x / self.n" in err
    assert "ZeroDivisionError: division by zero" in err
    assert "reactors" + os.sep not in err and "Failing.py" not in err  # no runtime frames


def test_exit_n_keeps_status_and_stops(failing):
    r = run_fixture(failing, mode="exit")
    assert r.returncode == 3
    assert "shutdown ran" not in r.stdout
    assert f"exited with status 3 at {FAILING_LF}:20" in r.stderr


def test_exit_zero_stops_quietly(failing):
    r = run_fixture(failing, mode="exit0")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.split("\n").count("tick") == 1 and "shutdown ran" not in r.stdout


@pytest.mark.parametrize("mode", ["sleep", "ok"])
def test_ctrl_c_stops_cleanly(failing, mode):
    env = dict(os.environ, FAIL_MODE=mode)
    p = subprocess.Popen(
        [sys.executable, failing, "-o", "1", "hour"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert p.stdout.readline() == "tick\n"
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 130
    assert "Traceback" not in err and "Interrupted" in err


def test_pingpong_fixture_runs(fixtures):
    r = run_fixture(str(fixtures / "src-gen" / "PingPong" / "PingPong.py"), timeout=120)
    assert r.returncode == 0, r.stderr


def test_bench_script_small_run():
    r = subprocess.run(
        [sys.executable, "-m", "bench.pingpong", "2000", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    assert "us/reaction" in r.stdout


@pytest.mark.parametrize("workers", ["1", "2"])
def test_files_left_open_are_complete_after_the_exit(fixtures, tmp_path, workers):
    """The process ends without the interpreter's tear-down, but a text file, a gzip
    stream and a binary file that reactions left open hold every byte written, and a thread
    that is not a daemon finishes first; the collector is on while reactions run (the
    generated module turns it off only while its imports load)."""
    import gzip

    program = str(fixtures / "src-gen" / "LeftOpen" / "LeftOpen.py")
    env = dict(os.environ, LEFT_OPEN_DIR=str(tmp_path))
    r = subprocess.run(
        [sys.executable, program, "-w", workers],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "collector on: True" in r.stdout
    lines = "".join(f"line {i}\n" for i in range(1000))
    assert (tmp_path / "text.txt").read_text() == lines
    assert gzip.decompress((tmp_path / "packed.gz").read_bytes()).decode() == lines
    assert (tmp_path / "raw.bin").read_bytes() == b"".join(
        i.to_bytes(4, "little") for i in range(1000)
    )
    assert (tmp_path / "late.txt").read_text() == "written after the last tag\n"
