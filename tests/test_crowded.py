"""Runs that ask for more workers than cores (reactors.launch.backends.crowded): they run one
worker per usable core, with the same results; ``--oversubscribe`` runs every worker asked for;
either way stderr says so once."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from conftest import ROOT, build

CROWDED = ROOT / "tests" / "parallel_fixtures" / "Crowded.lf"


def _on_two_cores():
    """Run the child on two of this machine's cores (its CPU affinity), as on a 2-core one."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])


def _run(launcher, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(launcher), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=launcher.parent.parent,
        preexec_fn=_on_two_cores,
    )


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_more_workers_than_cores_run_one_per_core_with_the_same_results(tmp_path):
    launcher = build(CROWDED, tmp_path)
    one = _run(launcher, "-w", "1")
    assert one.returncode == 0 and one.stdout == "total 120666\n", one.stderr
    for workers in (3, 6):
        r = _run(launcher, "-w", str(workers))
        assert r.returncode == 0 and r.stdout == one.stdout, r.stderr
        assert len(set(re.findall(r"ran in (\d+)", r.stderr))) == 2, r.stderr
        said = [ln for ln in r.stderr.splitlines() if "core(s)" in ln]
        assert said == [
            f"WARNING: -w {workers} on 2 core(s): running 2 workers, one per core "
            f"(--oversubscribe runs {workers}); -w 0 chooses at most 2"
        ], r.stderr
    own = _run(launcher, "-w", "3", "--oversubscribe")
    assert own.returncode == 0 and own.stdout == one.stdout, own.stderr
    assert len(set(re.findall(r"ran in (\d+)", own.stderr))) == 3, own.stderr
    said = [ln for ln in own.stderr.splitlines() if "core(s)" in ln]
    assert said == [
        "WARNING: 3 workers on 2 core(s), --oversubscribe: more workers than cores take turns "
        "on them at every tag, which is slower than -w 2"
    ], own.stderr
    fits = _run(launcher, "-w", "2")
    assert fits.returncode == 0 and fits.stdout == one.stdout and "core(s)" not in fits.stderr
    assert len(set(re.findall(r"ran in (\d+)", fits.stderr))) == 2, fits.stderr
