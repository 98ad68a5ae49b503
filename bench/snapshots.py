"""Snapshot time and size of the RL programs (``lf_src/CartPolePPO.lf``, ``CartPoleDQN.lf``).

Each program runs with its own checkpoint policy (``--checkpoint_every``) taking a snapshot
every few updates: the whole program (networks, optimisers, environments, generators, the
replay buffer, the logger). The figure is the median time one worker spends in a tag that
takes a snapshot (capture, pickle, write, fsync, rename, prune), measured inside the program
by timing :meth:`reactors.records.checkpoint.Checkpointer.tag_done`; the note gives the size of a
snapshot file. The run happens in a child process (``python -m bench.snapshots --child``), so
that the benchmark's own process keeps its signal handlers and imports. Target: 50 ms or less.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .common import ROOT, Row, build, scratch

#: Program -> its command line for the measurement (few steps; a snapshot every so often).
PROGRAMS: dict[str, tuple[str, ...]] = {
    "CartPolePPO": ("--max_steps", "12000", "--checkpoint_every", "2"),
    "CartPoleDQN": ("--max_steps", "12000", "--checkpoint_every", "1000"),
}
TARGET_MS = 50.0


def run(quick: bool = False) -> list[Row]:
    """One row per program: the median snapshot time (ms), the size (KiB) in the note."""
    out = scratch()
    rows = []
    for name, args in PROGRAMS.items():
        try:
            found = measure(name, args, out / name)
            ms, kib = found["median_ms"], found["kib"]
            verdict = "within" if ms <= TARGET_MS else "OVER"
            note = (
                f"{kib:,.0f} KiB per snapshot; median of {found['count']} snapshots "
                f"(min {found['min_ms']:.1f}, max {found['max_ms']:.1f} ms); {verdict} the "
                f"{TARGET_MS:g} ms target; one worker, {' '.join(args)}"
            )
            rows.append(Row(f"snapshot {name}", "ours (lfc + reactors)", ms, "ms", note=note))
        except Exception as e:  # noqa: BLE001 - a failure becomes a row
            status = f"FAILED: {type(e).__name__}: {' '.join(str(e).split())}"[:240]
            rows.append(Row(f"snapshot {name}", "ours (lfc + reactors)", None, "ms", status=status))
    return rows


def measure(name: str, args: tuple[str, ...], out: Path) -> dict[str, Any]:
    """Build ``lf_src/<name>.lf`` into ``out``, run it (one worker) with ``args`` in a child
    process and return what it measured: ``median_ms``, ``min_ms``, ``max_ms``, ``count``
    (snapshots) and ``kib`` (size of the last snapshot file).

    Raises:
        RuntimeError: the build failed, or the run took fewer than 3 snapshots.
    """
    build(ROOT / "lf_src" / f"{name}.lf", out)
    module = out / "src-gen" / name / f"{name}.py"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [sys.executable, "-m", "bench.snapshots", "--child", str(module), *args],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"{name} exited {r.returncode}: {r.stderr[-500:]}")
    found = json.loads(lines[-1][len("RESULT ") :])
    if found["count"] < 3:
        raise RuntimeError(f"{name} took {found['count']} snapshots, expected 3 or more")
    return found


def child(module_path: str, args: list[str]) -> dict[str, Any]:
    """In the child process: run the generated module at ``module_path`` with ``args``,
    timing each tag that took a snapshot. Returns the figures of :func:`measure`."""
    from reactors.launch import main as launch_main
    from reactors.records import checkpoint

    times: list[float] = []
    written: list[str] = []

    class Timed(checkpoint.Checkpointer):
        def tag_done(self, sched: Any) -> None:
            count = len(written)
            t0 = time.perf_counter()
            super().tag_done(sched)
            if len(written) > count:
                times.append((time.perf_counter() - t0) * 1e3)

        def _write(self, manifest: dict[str, Any], blobs: list[bytes]) -> None:
            super()._write(manifest, blobs)
            written.append(self.path(manifest["tags"]))

    checkpoint.Checkpointer = Timed  # type: ignore[misc]  # what attach() builds
    folder, file = os.path.split(os.path.abspath(module_path))
    sys.path.insert(0, folder)
    module = __import__(os.path.splitext(file)[0])
    launch_main.main(module, os.path.join(folder, "graph.json"), ["-w", "1", *args])
    return {
        "median_ms": statistics.median(times) if times else None,
        "min_ms": min(times, default=0.0),
        "max_ms": max(times, default=0.0),
        "count": len(times),
        "kib": os.path.getsize(written[-1]) / 1024 if written else 0.0,
    }


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        result = child(sys.argv[2], sys.argv[3:])
        sys.stdout.flush()
        print("RESULT " + json.dumps(result), flush=True)
        os._exit(0)  # the program's own exit status is not the benchmark's
