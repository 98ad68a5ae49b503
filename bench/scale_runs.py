"""Runs of the ``scale`` benchmark: one program at several worker counts, alternated, checked.

A :class:`Run` is one whole process of a built program at one worker count ``-w W``: its
``RESULT`` line, its wall time, the CPU time of its supervisor and every worker together
(``resource.getrusage(RUSAGE_CHILDREN)`` around the run: a worker's time is added to its
parent's children when the supervisor waits for it, and the supervisor's to ours) and the
machine's 1-minute load average before it. :func:`alternate` runs the worker counts in turn
(W=1, W=2, ... then again, each repetition starting one count later), so that the counts
compare under the same conditions; :func:`verify` and :func:`agree` turn a wrong result into
a reason, which the rows (:mod:`bench.scale_rows`) show as a FAILED row, never as a figure.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .common import Process, last_lines, launch
from .programs import load_average

#: ``-w 0 --verbose`` says which worker count it chose: "...; chose 2"
CHOSE = re.compile(r"chose (\d+)")


@dataclass(frozen=True)
class Run:
    """One process run of a program asked for ``workers`` (0: the program chose ``chose``).

    ``result``: what the program reported (its ``RESULT`` json, or what ``parse`` read);
    ``seconds``: wall time of the whole process, launch to exit (s); ``cpu``: user + system
    time of the process and all its workers (s); ``load``: the machine's 1-minute load average
    just before the run.
    """

    workers: int
    result: dict
    seconds: float
    cpu: float
    load: float
    chose: int | None = None


def children_cpu() -> float:
    """User + system seconds of this process's finished, waited-for children (and theirs)."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_env() -> dict[str, str]:
    """The environment of our program runs: as ``bench.programs.run`` gives it (one BLAS
    thread per worker, unbuffered output)."""
    return dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def run_once(
    launcher: Path,
    workers: int,
    args: Sequence[str] = (),
    timeout: float = 600,
    cwd: Path | None = None,
    parse: Callable[[Process], dict] = Process.result,
    accept: Sequence[int] = (0,),
) -> Run:
    """Run ``launcher -w workers ARGS`` (``--verbose`` too with ``-w 0``, to learn its choice).

    ``parse`` reads the result from the finished process (default: its ``RESULT`` line);
    ``accept``: the exit statuses of a run that went right. Raises RuntimeError when the run
    is killed at ``timeout`` seconds, exits with another status, or ``parse`` finds nothing.
    """
    cmd = [str(launcher), "-w", str(workers), *args, *(["--verbose"] if workers == 0 else [])]
    load = load_average()
    cpu0 = children_cpu()
    p = launch(cmd, cwd, timeout, run_env())
    cpu = children_cpu() - cpu0
    if p.code is None:
        raise RuntimeError(f"{launcher.name} -w {workers} did not finish in {timeout:.0f} s")
    if p.code not in accept:
        raise RuntimeError(
            f"{launcher.name} -w {workers} exited {p.code}: {last_lines(p.stdout + p.stderr)}"
        )
    chose = CHOSE.findall(p.stderr)
    return Run(workers, parse(p), p.seconds, cpu, load, int(chose[-1]) if chose else None)


def alternate(
    one_run: Callable[[int], Run],
    counts: Sequence[int],
    reps: int,
    label: str = "",
    between: Callable[[], None] | None = None,
) -> dict[int, list[Run | Exception]]:
    """``one_run(W)`` for every worker count of ``counts``, the counts in turn ``reps`` times
    (repetition k starts at the k-th count, so that no count always follows the same one);
    ``between()`` runs after each repetition (the peers' turn). Returns each count's runs in
    order; a run that raised leaves its exception in its place (its row then says FAILED)."""
    runs: dict[int, list[Run | Exception]] = {w: [] for w in counts}
    order = list(counts)
    for rep in range(reps if order else 0):
        k = rep % len(order)
        for w in order[k:] + order[:k]:
            try:
                runs[w].append(one_run(w))
            except Exception as e:  # noqa: BLE001 - the count's row reports it
                runs[w].append(e)
            _progress(label, w, runs[w][-1])
        if between is not None:
            between()
    return runs


def _progress(label: str, workers: int, run: Run | Exception) -> None:
    """One line on stderr per run as it ends (the table comes at the end)."""
    what = (
        f"{type(run).__name__}: {run}"[:120]
        if isinstance(run, Exception)
        else f"{run.seconds:.2f} s, cpu {run.cpu:.2f} s"
    )
    sys.stderr.write(f"[bench] scale {label} -w {workers}: {what}\n")


def verify(result: dict, expected: dict) -> str | None:
    """None when ``result`` reports every key of ``expected`` with exactly its value (the
    plain loop's checksum, rewards, episodes...); else what differs, e.g.
    ``"reward 31999.0, expected 32000.0"``."""
    wrong = [
        f"{k} {result.get(k)!r}, expected {v!r}" for k, v in expected.items() if result.get(k) != v
    ]
    return "; ".join(wrong) or None


def agree(runs: Sequence[Run], keys: Sequence[str]) -> str | None:
    """None when every run reports the same values of ``keys`` (what must not depend on the
    worker count); else which keys differ between which worker counts."""
    wrong = []
    for k in keys:
        seen = {repr(r.result.get(k)) for r in runs}
        if len(seen) > 1:
            counts = sorted({r.workers for r in runs})
            wrong.append(f"{k} differs between -w {counts} ({len(seen)} values)")
    return "; ".join(wrong) or None


@functools.cache
def runtime() -> str:
    """Which runtime our programs run, asked of a fresh interpreter with their environment
    (``reactors.native.compiled()``: ``REACTORS_COMPILED=0`` forces the sources, and a module
    edited since ``make`` makes them run): "compiled (mypyc)" or "from its sources". Asked
    once per process."""
    code = "from reactors import native; print(native.compiled())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=run_env(),
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        return f"runtime unknown ({last_lines(out.stderr, 1)})"
    return "compiled (mypyc)" if out.stdout.strip() == "True" else "from its sources"
