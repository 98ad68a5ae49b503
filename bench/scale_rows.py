"""Rows of the ``scale`` benchmark: a row per worker count and per peer, with ratios and targets.

Each of our rows gives the median of its runs (:mod:`bench.scale_runs`), its ratio to ``-w 1``
(how many times better: the speed-up of the extra workers) in the ratio column, and in its
note the runtime it ran, each run's figure, the machine's load before its runs and its ratio
to each peer. A peer's row gives its ratio to ours at one worker per core. A run whose result
is wrong (not the plain loop's checksum, or not the same on every worker count) makes its row
FAILED, without a figure. Targets are stated as in the other benchmarks ("target ...: MET" or
"MISSED"); one that needs more cores than the machine has says "not measurable: N cores".
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .common import Row, cores
from .rows import failure
from .scale_runs import Run, agree, verify

#: -w 0 aims at >= this times the best other worker count's figure
AUTO_TARGET = 0.95
#: -w cores+1 aims at >= this times -w cores (no collapse when workers outnumber cores)
OVER_TARGET = 0.9


@dataclass(frozen=True)
class Targets:
    """The ratios one workload aims at. ``speedup[W]``: ours at ``-w W`` >= that many times
    ours at ``-w 1``; ``least[W]``: ours at ``-w W`` reaches that figure (in the row's unit);
    ``peers[name] = (W, x)``: ours at ``-w W`` >= ``x`` times that peer. Each is checked only
    on a machine with at least W cores. -w 0 and -w cores+1 are held to :data:`AUTO_TARGET`
    and :data:`OVER_TARGET` on every machine."""

    speedup: dict[int, float] = field(default_factory=dict)
    least: dict[int, float] = field(default_factory=dict)
    peers: dict[str, tuple[int, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Series:
    """How one workload's runs become rows: ``title`` (the workload column), ``unit``,
    ``figure(run)`` (e.g. the RESULT's steps/s, or the whole process's seconds),
    ``higher_better`` (a rate; else a time), ``expected`` (RESULT values every run must report
    exactly: the plain loop's), ``same`` (RESULT keys every run must report alike),
    ``targets``, and ``runtime`` (which runtime our runs used)."""

    title: str
    unit: str
    figure: Callable[[Run], float]
    higher_better: bool = True
    expected: dict = field(default_factory=dict)
    same: tuple[str, ...] = ()
    targets: Targets = field(default_factory=Targets)
    runtime: str = ""


@dataclass
class PeerResult:
    """A peer's figures over the repetitions (a failure leaves its exception), and a note."""

    name: str
    note: str = ""
    figures: list[float | Exception] = field(default_factory=list)


def times_better(series: Series, ours: float | None, other: float | None) -> float | None:
    """How many times better ``ours`` is than ``other`` (>1: ours better) in the series' unit."""
    if ours is None or other is None or ours <= 0 or other <= 0:
        return None
    return ours / other if series.higher_better else other / ours


def target_text(what: str, ratio: float | None, at_least: float, needs: int = 1) -> str:
    """``"target <what> >= x: MET"`` (or MISSED, or not measured), or ``"...: not measurable:
    N cores"`` when it needs ``needs`` cores and the machine has fewer."""
    head = f"target {what} >= {at_least:g}"
    if needs > cores():
        return f"{head}: not measurable: {cores()} cores"
    if ratio is None:
        return f"{head}: not measured"
    return f"{head}: {'MET' if ratio >= at_least else 'MISSED'}"


def medians(series: Series, runs: dict[int, list[Run | Exception]]) -> dict[int, float | str]:
    """Each worker count's median figure, or why it has none (a failed run, a wrong result)."""
    all_ok = [r for got in runs.values() for r in got if isinstance(r, Run)]
    across = agree(all_ok, series.same)
    out: dict[int, float | str] = {}
    for w, got in runs.items():
        bad = next((r for r in got if isinstance(r, Exception)), None)
        wrong = [verify(r.result, series.expected) for r in got if isinstance(r, Run)]
        reason = next((m for m in wrong if m), None) or across
        if bad is not None:
            out[w] = failure(bad)
        elif reason:
            out[w] = f"FAILED: wrong result: {reason}"[:240]
        elif not got:
            out[w] = "FAILED: no run"
        else:
            out[w] = statistics.median(series.figure(r) for r in got if isinstance(r, Run))
    return out


def _fig(value: float | str | None) -> float | None:
    return value if isinstance(value, float | int) else None


def our_rows(
    series: Series, runs: dict[int, list[Run | Exception]], peers: Sequence[PeerResult] = ()
) -> list[Row]:
    """A row per worker count of ``runs`` (ratio to -w 1), then a row per peer (ratio: ours
    at -w cores, or at the largest count measured below that, over the peer)."""
    figs = medians(series, runs)
    peer_figs = {p.name: peer_median(p) for p in peers}
    rows = [_our_row(series, w, runs[w], figs, peer_figs) for w in runs]
    return rows + [_peer_row(series, p, figs, peer_figs[p.name]) for p in peers]


def per_core(counts: Sequence[int]) -> int:
    """The count of ``counts`` that is one worker per core (or the largest below it)."""
    below = [w for w in counts if 0 < w <= cores()]
    return max(below, default=1)


def _our_row(
    series: Series,
    w: int,
    got: list[Run | Exception],
    figs: dict[int, float | str],
    peer_figs: dict[str, float | str],
) -> Row:
    ok = [r for r in got if isinstance(r, Run)]
    chose = sorted({r.chose for r in ok if r.chose is not None})
    name = f"ours -w {w}" + (f" (chose {', '.join(map(str, chose))})" if w == 0 else "")
    name += " (cores+1)" if w == cores() + 1 else ""
    row = Row(series.title, name, None, series.unit)
    fig = figs[w]
    if isinstance(fig, str):
        row.status = fig
        row.note = _join(series.runtime, _loads(ok))
        return row
    row.figure = fig
    row.ratio = times_better(series, fig, _fig(figs.get(1)))
    row.note = _join(
        series.runtime,
        _each(series, ok),
        _loads(ok),
        _versus(series, fig, peer_figs),
        *_targets(series, w, figs),
    )
    return row


def _each(series: Series, runs: list[Run]) -> str:
    figures = ", ".join(number(series.figure(r)) for r in runs)
    procs = sorted({r.result["processes"] for r in runs if "processes" in r.result})
    where = f"; ran in {', '.join(map(str, procs))} process(es)" if procs else ""
    wall = statistics.median(r.seconds for r in runs)
    return f"median of {len(runs)} run(s): {figures}{where}; whole process {wall:.2f} s"


def _loads(runs: list[Run]) -> str:
    if not runs:
        return ""
    lo, hi = min(r.load for r in runs), max(r.load for r in runs)
    return f"load {lo:.2f} before" if lo == hi else f"load {lo:.2f}-{hi:.2f} before"


def _versus(series: Series, fig: float, peer_figs: dict[str, float | str]) -> str:
    parts = []
    for name, other in peer_figs.items():
        ratio = times_better(series, fig, _fig(other))
        if ratio is not None:
            parts.append(f"{ratio:.2f}x {name}")
    return "vs " + ", ".join(parts) if parts else ""


def _targets(series: Series, w: int, figs: dict[int, float | str]) -> list[str]:
    fig, one = _fig(figs[w]), _fig(figs.get(1))
    out = []
    # a target at a count not run here is stated on the row of one worker per core
    here = {w} | (
        {c for c in _target_counts(series) if c not in figs} if w == per_core(list(figs)) else set()
    )
    for c in sorted(here & set(series.targets.speedup)):
        ratio = times_better(series, _fig(figs.get(c)), one)
        out.append(target_text(f"-w {c} / -w 1", ratio, series.targets.speedup[c], c))
    for c in sorted(here & set(series.targets.least)):
        least = series.targets.least[c]
        ratio = times_better(series, _fig(figs.get(c)), least)
        out.append(target_text(f"-w {c} / {least:,.0f} {series.unit}", ratio, 1.0, c))
    if w == 0:
        others = [f for c, v in figs.items() if c != 0 and (f := _fig(v)) is not None]
        best = (max if series.higher_better else min)(others, default=None)
        out.append(target_text("-w 0 / best count", times_better(series, fig, best), AUTO_TARGET))
    if w == cores() + 1:
        ratio = times_better(series, fig, _fig(figs.get(cores())))
        out.append(target_text(f"-w {w} / -w {cores()}", ratio, OVER_TARGET))
    return out


def _target_counts(series: Series) -> set[int]:
    return set(series.targets.speedup) | set(series.targets.least)


def peer_median(peer: PeerResult) -> float | str:
    """The median of a peer's figures, or its status when one failed (or none was taken)."""
    bad = next((f for f in peer.figures if isinstance(f, Exception)), None)
    if bad is not None:
        return failure(bad)
    good = [f for f in peer.figures if not isinstance(f, Exception)]
    return statistics.median(good) if good else "FAILED: not measured"


def _peer_row(
    series: Series, peer: PeerResult, figs: dict[int, float | str], fig: float | str
) -> Row:
    row = Row(series.title, peer.name, None, series.unit, note=peer.note)
    if isinstance(fig, str):
        row.status = fig
        return row
    base = per_core(list(figs))
    row.figure = fig
    row.ratio = times_better(series, _fig(figs.get(base)), fig)
    extra = [f"ratio: ours at -w {base} over this"]
    if len(peer.figures) > 1:
        extra.append("median of " + ", ".join(number(f) for f in peer.figures))
    if peer.name in series.targets.peers:
        w, x = series.targets.peers[peer.name]
        ratio = times_better(series, _fig(figs.get(w)), fig)
        extra.append(target_text(f"ours -w {w} / this", ratio, x, w))
    row.note = _join(peer.note, *extra)
    return row


def skipped(title: str, names: Sequence[str], unit: str, why: str) -> list[Row]:
    """A row per name with status ``skipped: <why>`` (e.g. "no GPU"): kept, never dropped."""
    return [Row(title, n, None, unit, status=f"skipped: {why}") for n in names]


def number(x: float | Exception) -> str:
    """A figure for a note: 3 significant digits, or thousands separated (``46,962``)."""
    if isinstance(x, Exception):
        return "failed"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
