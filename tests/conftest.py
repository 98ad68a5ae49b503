"""Shared helpers for the test suite: building and running .lf programs with the real lfc."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LF_TESTS = ROOT / "tests" / "lf"


def has_main(path: Path) -> bool:
    """True when the file declares a main (or federated) reactor, i.e. is a program."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return any(line.lstrip().startswith(("main reactor", "federated reactor"))
               or " main reactor" in line.split("//")[0]
               for line in text.splitlines())


def lfc(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real `lfc` command line in a subprocess."""
    return subprocess.run([sys.executable, "-m", "codegen.cli", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=120)


def build(lf_file: Path, out: Path, *extra: str) -> Path:
    """Build ``lf_file`` into ``out`` with lfc's own entry point, in this process (the command
    line itself is tested in test_cli.py); return the launcher. Fails the test on an error."""
    from codegen import cli
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = cli.main(["-q", "-o", str(out), *extra, str(lf_file)])
    assert status == 0, f"lfc failed on {lf_file}:\n{err.getvalue()}"
    launchers = sorted((out / "bin").iterdir())
    assert launchers, f"lfc wrote no launcher for {lf_file}"
    name = lf_file.stem
    return out / "bin" / name if (out / "bin" / name).exists() else launchers[0]


def run_program(launcher: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a built program; returns the completed process (stdout/stderr as text)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # Run in the build folder, so that files a program writes (traces, runs/) stay out of the tree.
    return subprocess.run([str(launcher), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=launcher.parent.parent)


@pytest.fixture
def build_and_run(tmp_path):
    def go(lf_file: Path, *args: str, timeout: float = 60):
        return run_program(build(lf_file, tmp_path), *args, timeout=timeout)
    return go
