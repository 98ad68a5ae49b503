"""Compiler speed: lfc on a program with a bank of 1,000 reactors (target: under 2 s)."""

from __future__ import annotations

import sys

from .common import ROOT, Row, median_of, scratch, timed_run

PROGRAM = ROOT / "lf_src" / "bench" / "BigBank.lf"


def run(quick: bool) -> list[Row]:
    out = scratch()
    cmd = [sys.executable, "-m", "codegen.cli", "-q", "-o", str(out), str(PROGRAM)]
    t = median_of(1 if quick else 3, lambda: timed_run(cmd))
    return [
        Row(
            "lfc on a bank of 1,000 reactors",
            "ours (lfc)",
            t,
            "s",
            note="whole process, interpreter start included; target < 2 s",
        )
    ]
