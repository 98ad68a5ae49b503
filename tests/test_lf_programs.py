"""Every self-checking program under tests/lf/ is built with the real lfc and run: on one
worker, then on 2 and 4 workers with each backend.

A program passes when it exits with status 0 (spec §4: the test harness's only criterion);
each program checks its own values and exits non-zero on a wrong one. Files without a main
reactor are libraries and are not run.

On several workers a program must exit alike, print byte-identical stdout and compute the same
value on every port at every tag (``--digest``, reactors/records/trace.py). Programs whose results
may legitimately differ carry a line ``// determinism: skip (<reason>)`` (they depend on physical
time, or share objects through module globals, which are per process); they still run on two
worker threads and must exit alike.
"""

from __future__ import annotations

import pytest
from conftest import LF_TESTS, build, determinism_skip, has_main, run_digest, same_on_any_workers

PROGRAMS = sorted(p for p in LF_TESTS.rglob("*.lf") if has_main(p))


@pytest.mark.parametrize("program", PROGRAMS, ids=[str(p.relative_to(LF_TESTS)) for p in PROGRAMS])
def test_program(program, tmp_path):
    launcher = build(program, tmp_path)
    result, digest = run_digest(launcher, "w1")
    assert result.returncode == 0, (
        f"{program.name} exited with {result.returncode}\n--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{result.stderr[-3000:]}"
    )
    same_on_any_workers(launcher, result, digest, determinism_skip(program))


def test_suite_is_large():
    """The conformance suite covers the categories of spec §4 (150 or more programs)."""
    assert len(PROGRAMS) >= 150, len(PROGRAMS)


def test_few_programs_are_exempt_from_determinism():
    """Exemptions are the exception, and each one says why."""
    reasons = {p.name: determinism_skip(p) for p in PROGRAMS if determinism_skip(p)}
    assert all(r.strip() for r in reasons.values()), reasons
    assert len(reasons) <= len(PROGRAMS) // 10, sorted(reasons)
