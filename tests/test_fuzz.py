"""Malformed input never crashes lfc: mutated .lf text gives success or located errors.

Hypothesis mutates real programs (delete, insert, duplicate, swap) for a fixed number of
examples, derandomized so that CI is repeatable; every outcome must be exit status 0, or exit
status 1 with `file.lf:LINE:COL: error:` lines, and never a Python traceback. The slow test
(`pytest -m slow tests/test_fuzz.py`, not part of `make test`) does the same for 10,000
inputs, each within 10 s.
"""

from __future__ import annotations

import contextlib
import io
import re
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codegen import cli

SEEDS = [
    """target Python { fast: true, timeout: 1 sec }
reactor Src(step = 2) {
  output[2] out
  logical action tick(10 msec)
  state n = 0
  reaction(startup, tick) -> out, tick {=
    out[0].set(self.n)
    tick.schedule(MSEC(1), self.n)
  =} deadline(5 msec) {= print("late") =}
}
reactor Sink { input[2] inp  reaction(inp) {= print(inp[0].value) =} }
main reactor Fuzz {
  s = new[2] Src(step = {= bank_index =})
  k = new[2] Sink()
  s.out -> k.inp after 1 msec
}
""",
    """target Python
reactor M {
  input inp
  output out
  initial mode A {
    timer t(0, 1 sec)
    reaction(t) -> out, reset(B) {= out.set(1); B.set() =}
  }
  mode B { reaction(inp) -> history(A) {= A.set() =} }
}
main reactor Fuzz { m = new M()  (m.out)+ -> m.inp }
""",
]
TOKENS = [
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "->",
    "~>",
    "=",
    "{=",
    "=}",
    ";",
    ",",
    ".",
    "@label",
    "reactor",
    "main",
    "input",
    "output",
    "new",
    "after",
    "reaction",
    "mode",
    "state",
    "timer",
    "action",
    "logical",
    "physical",
    "startup",
    "msec",
    "0",
    "-1",
    '"',
    "'",
    "import",
    "from",
    "extends",
    "interleaved(",
    ")+",
    "deadline",
    "reset",
    "\n",
    "x",
]
LOCATED = re.compile(
    r"^\S+\.lf:\d+:\d+: error: |^lfc: error: |^lfc: \d+ errors?; nothing was built"
)


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 2))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "swap", "rename", "rename"]))
        if op == "rename":  # a name or number replaced by another from the program: semantic errors
            words = re.findall(r"[A-Za-z_]\w*|\d+", text)
            old, new = draw(st.sampled_from(words)), draw(st.sampled_from(words))
            text = re.sub(rf"\b{re.escape(old)}\b", new, text, count=draw(st.integers(1, 3)))
        elif op == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 6)) :]
        elif op == "insert":
            text = text[:i] + " " + draw(st.sampled_from(TOKENS)) + " " + text[i:]
        else:
            lines = text.splitlines(keepends=True)
            a, b = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if op == "duplicate":
                lines.insert(b, lines[a])
            else:
                lines[a], lines[b] = lines[b], lines[a]
            text = "".join(lines)
    return text


@settings(
    max_examples=250,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=mutated())
def test_mutated_programs_get_success_or_located_errors(tmp_path: Path, text: str):
    _check_compiles_or_says_where(tmp_path, text)


@pytest.mark.slow
@settings(
    max_examples=10_000,
    derandomize=True,
    deadline=timedelta(seconds=10),  # each input compiles (or is refused) within 10 s
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(text=mutated())
def test_ten_thousand_mutated_programs_get_success_or_located_errors(tmp_path: Path, text: str):
    _check_compiles_or_says_where(tmp_path, text)


def _check_compiles_or_says_where(tmp_path: Path, text: str) -> None:
    """lfc on ``text``: status 0, or 1 with located errors; never a traceback."""
    src = tmp_path / "Fuzz.lf"
    src.write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(["-q", "-o", str(tmp_path / "out"), str(src)])
    out = err.getvalue()
    assert "Traceback" not in out
    assert status in (0, 1)
    if status == 1:
        lines = [line for line in out.splitlines() if "error" in line]
        assert lines and all(LOCATED.match(line) for line in lines if ": error: " in line), out
