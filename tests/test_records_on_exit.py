"""A run's digest (``--digest``) and timing trace (``tracing: true``) are written however the
run ends: a reaction raising, a non-zero ``exit()`` at shutdown, SIGINT or SIGTERM; on one
worker and on two (processes and threads). A run cut short records every tag before the one
it was in, so a failing run's digest is the same on any worker count.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, build, run_digest

CUT = ROOT / "tests" / "records_fixtures" / "Cut.lf"
VARIANTS = [("1", "processes"), ("2", "processes"), ("2", "threads")]


def trace_events(launcher: Path) -> list:
    """The events of the timing trace the run wrote (removed, for the next run)."""
    path = launcher.parent.parent / "Cut.trace.json"
    assert path.exists(), "no timing trace written"
    events = json.loads(path.read_text())["traceEvents"]
    path.unlink()
    return events


def same_records_on_every_variant(launcher: Path, status: int) -> str:
    """Run on every variant: exit ``status``, a trace, and one digest; returns it."""
    digests = set()
    for workers, backend in VARIANTS:
        r, digest = run_digest(
            launcher, f"w{workers}{backend}", "-w", workers, "--backend", backend
        )
        where = f"{workers} workers ({backend})"
        assert r.returncode == status, f"{where}: exit {r.returncode}\n{r.stderr[-2000:]}"
        assert digest is not None, f"{where}: no digest written"
        assert trace_events(launcher), f"{where}: empty timing trace"
        digests.add(digest)
    assert len(digests) == 1, "the digests of the failed run differ between worker counts"
    return digests.pop()


def counts(digest: str) -> set[int]:
    """The elapsed times (ms) of the tags in a digest."""
    return {int(line.split()[0]) // 1_000_000 for line in digest.splitlines()}


def test_a_failing_reaction_keeps_the_tags_before_it(tmp_path):
    launcher = build(CUT, tmp_path, "-D", "fail_at=5")
    digest = same_records_on_every_variant(launcher, 1)
    assert counts(digest) == {0, 10, 20, 30}  # counts 1..4; the tag of count 5 was cut


def test_a_non_zero_exit_at_shutdown_keeps_every_value(tmp_path):
    launcher = build(CUT, tmp_path, "-D", "stop_at=3", "-D", "exit_code=3")
    digest = same_records_on_every_variant(launcher, 3)
    assert counts(digest) == {0, 10, 20}


@pytest.mark.parametrize(
    "sig,workers,backend",
    [
        (signal.SIGINT, "1", "processes"),
        (signal.SIGINT, "2", "processes"),
        (signal.SIGTERM, "1", "processes"),
        (signal.SIGTERM, "2", "threads"),
    ],
)
def test_a_signalled_run_writes_its_records(tmp_path, sig, workers, backend):
    launcher = build(CUT, tmp_path)
    digest = tmp_path / "cut.digest"
    proc = subprocess.Popen(
        [str(launcher), "--digest", str(digest), "-w", workers, "--backend", backend],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        # a background job may inherit SIGINT ignored, and Python then keeps ignoring it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "running\n"
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 128 + sig
    finally:
        proc.kill()
        proc.wait()
    assert digest.exists(), "no digest written"
    assert 0 in counts(digest.read_text())  # the tag that printed may be the one cut
    assert trace_events(launcher)
