"""Very large inputs compile in bounded time and memory (slow: `pytest -m slow`).

Two files of the sizes that once took half a minute: 24,000 reactor classes (3.5 MB) and a
main reactor with a one-line list parameter of 1.2 MB. Each is compiled by the real lfc in a
subprocess; its CPU time (not wall time, which depends on the machine's load) and peak memory
are bounded.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

CLASS = """reactor R{i}(p = {i}) {{
  input inp
  output out
  state s = 0
  reaction(inp) -> out {{=
    self.s += 1
    out.set(inp.value + self.p)
  =}}
}}
"""


def _classes(n: int) -> str:
    body = "".join(CLASS.format(i=i) for i in range(n))
    main = "main reactor Big {\n  a = new R0()\n  b = new R1()\n  a.out -> b.inp\n}\n"
    return "target Python { fast: true }\n" + body + main


def _long_list(n: int) -> str:
    items = ", ".join(str(i) for i in range(n))
    return (
        f"target Python {{ fast: true }}\nmain reactor Big(xs = [{items}]) {{\n"
        "  reaction(startup) {= print(len(self.xs)) =}\n}\n"
    )


# lfc, then its peak resident memory (VmHWM, kB) on stderr: the process's own figure, not the
# rusage of children, which counts the (large) test process that forked it
_LFC = (
    "import sys\n"
    "from codegen import cli\n"
    "status = cli.main(sys.argv[1:])\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
    "sys.stderr.write('peak ' + hwm.split()[1] + '\\n')\n"
    "sys.exit(status)\n"
)


def _compile(src: Path, out: Path) -> tuple[float, float]:
    """Run lfc on ``src``; its CPU time (s) and peak resident memory (MB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(
        [sys.executable, "-c", _LFC, "-q", "-o", str(out), str(src)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert r.returncode == 0, r.stderr[-2000:]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    peak_kb = int(r.stderr.rsplit("peak ", 1)[1])
    return cpu, peak_kb / 1024


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("kind", ["24000 classes", "1 MB list"])
def test_a_very_large_input_compiles_in_bounded_time_and_memory(tmp_path, kind):
    text = _classes(24_000) if kind == "24000 classes" else _long_list(160_000)
    src = tmp_path / "Big.lf"
    src.write_text(text)
    cpu, peak_mb = _compile(src, tmp_path / "out")
    assert cpu < 30, f"{kind}: {cpu:.1f} s of CPU"
    assert peak_mb < 500, f"{kind}: {peak_mb:.0f} MB"
