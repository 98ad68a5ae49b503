"""Shared helpers for the test suite: building and running .lf programs with the real lfc."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LF_TESTS = ROOT / "tests" / "lf"


def has_main(path: Path) -> bool:
    """True when the file declares a main (or federated) reactor, i.e. is a program."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return any(
        line.lstrip().startswith(("main reactor", "federated reactor"))
        or " main reactor" in line.split("//")[0]
        for line in text.splitlines()
    )


def lfc(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real `lfc` command line in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "codegen.cli", *args],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


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
    return subprocess.run(
        [str(launcher), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=launcher.parent.parent,
    )


def run_in_folder(
    launcher: Path, cwd: Path, *args: str, timeout: float = 300
) -> tuple[subprocess.CompletedProcess, Path]:
    """Run an RL program's ``launcher`` with ``args`` in the new folder ``cwd``; returns the
    completed process and the run directory it wrote (``runs/<program>/<run>``: exactly one,
    else the test fails with the program's stderr)."""
    cwd.mkdir()
    proc = subprocess.run(
        [str(launcher), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    runs = sorted((cwd / "runs" / launcher.name).iterdir()) if (cwd / "runs").exists() else []
    assert len(runs) == 1, (runs, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc, runs[0]


def child_pids(pid: int) -> set[int]:
    """The process ids of the children of process ``pid`` (empty once it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return {int(x) for x in f.read().split()}
    except OSError:
        return set()


def lf_rl_eval(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """``lf-rl eval RUN_DIR ARGS`` of this checkout, as a user runs it (text output)."""
    cmd = [sys.executable, "-m", "rl_algos.cli", "eval", str(run_dir), *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(autouse=True, scope="session")
def user_key_of_the_tests(tmp_path_factory) -> Path:
    """The key that authenticates the snapshots and recordings of every program the tests
    run (``LF_RL_KEY``, :mod:`reactors.records.user_key`): the session's own, never the user's."""
    key = tmp_path_factory.mktemp("user-key") / "key"
    os.environ["LF_RL_KEY"] = str(key)
    return key


@pytest.fixture
def build_and_run(tmp_path):
    def go(lf_file: Path, *args: str, timeout: float = 60):
        return run_program(build(lf_file, tmp_path), *args, timeout=timeout)

    return go


# --------------------------------------------------------------------------- determinism

#: The multi-worker runs every program is compared with its one-worker run: each backend once,
#: the threads on two workers (the flat next-tag exchange), the processes on four (the combining
#: tree, reactors.parallel.agreement), so that every transport and both agreements are met. They
#: run with ``--oversubscribe``: four workers on fewer cores would otherwise share a process per
#: core (tests/test_crowded.py) and meet the tree only where there are four cores.
VARIANTS = [("2", "threads"), ("4", "processes")]
_SKIP = re.compile(r"^\s*//\s*determinism:\s*skip\s*\((.*)\)\s*$", re.M)


def determinism_skip(program: Path) -> str | None:
    """The reason of a ``// determinism: skip (reason)`` line in the program, or None."""
    m = _SKIP.search(program.read_text(encoding="utf-8"))
    return m.group(1) if m else None


def run_digest(launcher: Path, name: str, *args: str, timeout: float = 120):
    """Run with ``--digest``; returns (completed process, the digest text or None)."""
    digest = launcher.parent.parent / f"{name}.digest"
    r = run_program(launcher, "--digest", str(digest), *args, timeout=timeout)
    return r, (digest.read_text() if digest.exists() else None)


def same_on_any_workers(
    launcher: Path,
    ref,
    ref_digest,
    skip: str | None,
    compare_stdout: bool = True,
    timeout: float = 120,
    ignore: str | None = None,
    variants=VARIANTS,
) -> None:
    """Assert that the program gives ``ref`` (its one-worker run) on every variant: the same
    exit status, stdout and port-value digest (without the ports whose names match the
    regular expression ``ignore``). A program marked ``skip`` only runs on two worker threads
    and must exit alike."""
    ref_digest = _without(ref_digest, ignore)
    for workers, backend in _distinct([("2", "threads")] if skip else variants, launcher):
        r, digest = run_digest(
            launcher,
            f"w{workers}{backend}",
            *("-w", workers, "--backend", backend, "--oversubscribe"),
            timeout=timeout,
        )
        where = f"{launcher.name} on {workers} workers ({backend})"
        assert r.returncode == ref.returncode, f"{where}: exit {r.returncode}\n{r.stderr[-3000:]}"
        if skip:
            continue
        if compare_stdout:
            assert r.stdout == ref.stdout, f"{where}: stdout differs\n{r.stderr[-2000:]}"
        assert _without(digest, ignore) == ref_digest, f"{where}: port values differ"
    left = [n for n in os.listdir("/dev/shm") if _dead_run_segment(n)]
    assert not left, f"shared memory left behind: {left[:5]}"


def _distinct(variants, launcher: Path) -> list:
    """The variants that run differently: ``-w N`` resolves to at most the number of reactor
    groups (reactors.parallel.placement), so ``-w 4`` is often the same run as ``-w 2``, and a
    variant that resolves to one worker is the one-worker run already done."""
    from reactors.model.program import load
    from reactors.parallel.plan import workers_for

    graph_file = next((launcher.parent.parent / "src-gen").glob("*/graph.json"))
    graph = load(str(graph_file))
    seen, out = set(), []
    for workers, backend in variants:
        key = (workers_for(graph, int(workers)), backend)
        if key[0] > 1 and key not in seen:
            seen.add(key)
            out.append((workers, backend))
    return out


def _without(digest: str | None, ignore: str | None) -> str | None:
    """The digest lines whose port (third field) does not match ``ignore``."""
    if digest is None or ignore is None:
        return digest
    pattern = re.compile(ignore)
    return "".join(
        line
        for line in digest.splitlines(keepends=True)
        if not pattern.search(line.split(" ", 3)[2])
    )


def _dead_run_segment(name: str) -> bool:
    """A segment of a parallel run (``lf<pid>x...``) whose coordinating process is gone."""
    m = re.match(r"lf(\d+)x", name)
    return bool(m) and not os.path.exists(f"/proc/{m.group(1)}")
