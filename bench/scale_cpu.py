"""CPU time per tag summed over all the processes of a run: the scaling proxy that needs no cores.

On a machine with fewer cores than workers the wall time says little about how the runtime
would scale, but the CPU time it spends per tag still does: if the per-tag cost of the
runtime grows with the worker count, the CPU time summed over the supervisor and every
worker grows with it. Measured on GymSim (CartPole, 16 environments) at W = 1, 2, 4, 8, 16
whatever the core count (with ``--oversubscribe`` above it):
``resource.getrusage(RUSAGE_CHILDREN)`` around each run (:func:`bench.scale_runs.run_once`),
and the start-up (interpreters, imports, environment creation) taken out by a run of 1 round at
the same W:

    CPU per tag = (CPU of the run of R rounds - CPU of the run of 1 round) / (R - 1)

(one round is one tag: the step request travels ``after 0``). Runs of R rounds that the
GymSim rows already made at a count are reused (the median of their CPU times); the others
run once: CPU time varies much less from run to run than wall time does.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from .common import Row, cores
from .rows import failure
from .scale_runs import Run, alternate, run_once, verify

UNIT = "µs CPU/tag"


def cpu_rows(
    title: str,
    launcher: Path,
    counts: Sequence[int],
    rounds: int,
    expected: dict,
    made: dict[int, list[Run | Exception]] | None = None,
    reps: int = 1,
) -> list[Row]:
    """A row per worker count of ``counts``: the CPU µs per tag of ``launcher`` (a GymSim
    build) over ``rounds`` rounds, start-up removed; ratio: -w 1's over this one (>1: cheaper
    per tag than one worker). ``made``: runs of ``rounds`` rounds already made, by count;
    ``expected``: the RESULT values every such run must report (the plain loop's)."""
    made = made or {}
    # above the cores only --oversubscribe runs that many workers (the rows' runs there do not)
    longs = {
        w: [r for r in made.get(w, []) if isinstance(r, Run)] if w <= cores() else []
        for w in counts
    }
    more = [w for w in counts if not longs[w]]

    def once(w: int, rounds: int) -> Run:
        over = ["--oversubscribe"] if w > cores() else []
        return run_once(launcher, w, ["--rounds", str(rounds), *over])

    extra = alternate(lambda w: once(w, rounds), more, reps, "cpu/tag")
    shorts = alternate(lambda w: once(w, 1), counts, reps, "cpu/tag")
    mixed: dict[int, list[Run | Exception]] = {w: [*longs[w], *extra.get(w, [])] for w in counts}
    per_tag = {w: _per_tag(mixed[w], shorts[w], rounds, expected) for w in counts}
    return [_row(title, w, per_tag, mixed[w]) for w in counts]


def _per_tag(
    longs: Sequence[Run | Exception],
    shorts: Sequence[Run | Exception],
    rounds: int,
    expected: dict,
) -> float | str:
    """CPU µs per tag, or the status of a failed or wrong run."""
    bad = next((r for r in [*longs, *shorts] if isinstance(r, Exception)), None)
    if bad is not None:
        return failure(bad)
    good = [r for r in longs if isinstance(r, Run)]
    base = [r for r in shorts if isinstance(r, Run)]
    wrong = next((m for r in good if (m := verify(r.result, expected))), None)
    if wrong:
        return f"FAILED: wrong result: {wrong}"[:240]
    if not good or not base:
        return "FAILED: no run"
    long_cpu = statistics.median(r.cpu for r in good)
    short_cpu = statistics.median(r.cpu for r in base)
    return (long_cpu - short_cpu) / (rounds - 1) * 1e6


def _row(title: str, w: int, per_tag: dict[int, float | str], longs: Sequence) -> Row:
    row = Row(title, f"ours -w {w}", None, UNIT)
    got = per_tag[w]
    if isinstance(got, str):
        row.status = got
        return row
    one = per_tag.get(1)
    row.figure = got
    row.ratio = one / got if isinstance(one, float) and got > 0 else None
    runs = [r for r in longs if isinstance(r, Run)]
    whole = statistics.median(r.cpu for r in runs)
    wall = statistics.median(r.result["seconds"] for r in runs)
    over = f"{w} workers on {cores()} cores; " if w > cores() else ""
    row.note = (
        f"{over}start-up removed (a run of 1 round); whole run {whole:.2f} s CPU; "
        f"timed rounds {wall:.2f} s wall; load {min(r.load for r in runs):.2f} before; "
        "ratio: -w 1's CPU per tag over this"
    )
    return row
