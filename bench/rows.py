"""Result rows of the paper's workloads: ours first, then each peer with its ratio to ours.

A peer that fails (not installed, crashed, timed out) still gets its row, with the reason in
``status``; ratios are only computed between figures measured in the same invocation.
"""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass, field

from .common import Row


def failure(exc: BaseException) -> str:
    """The ``status`` of a failed run: ``FAILED: <type>: <message>`` (one line, short)."""
    msg = " ".join(str(exc).split())
    return f"FAILED: {type(exc).__name__}: {msg}"[:240]


@dataclass
class Table:
    """The rows of one workload. ``higher_better``: the unit is a rate (steps/s), else a time.

    :meth:`ours` must be called first; each :meth:`peer` row then carries
    ``ratio`` = how many times better ours is (peer time / our time, or our rate / peer rate).
    """

    workload: str
    unit: str
    higher_better: bool = True
    rows: list[Row] = field(default_factory=list)
    our_figure: float | None = None
    basis: str = ""  # said in every later peer's note when ratios are not to our main row

    def ours(self, fn, note="") -> float | None:
        """Run ``fn() -> (figure, note)`` for our program; a failure is recorded, not raised."""
        t0 = time.perf_counter()
        try:
            self.our_figure, extra = fn()
            self.rows.append(
                Row(
                    self.workload,
                    "ours (lfc + reactors)",
                    self.our_figure,
                    self.unit,
                    note=_join(note, extra),
                )
            )
        except Exception as e:  # noqa: BLE001 - every failure becomes a row
            traceback.print_exc()
            self.rows.append(
                Row(
                    self.workload,
                    "ours (lfc + reactors)",
                    None,
                    self.unit,
                    status=failure(e),
                    note=note,
                )
            )
        _progress(self.rows[-1], t0)
        return self.our_figure

    def peer(self, name: str, fn, note="", target: float | None = None) -> float | None:
        """Run ``fn() -> figure`` or ``fn() -> (figure, note)`` for a peer and add its row.

        ``target``: the ratio we aim for; the note then says met or missed.
        Returns the peer's figure (None when it failed).
        """
        t0 = time.perf_counter()
        try:
            got = fn()
        except Exception as e:  # noqa: BLE001 - every failure becomes a row
            traceback.print_exc()
            self.rows.append(
                Row(
                    self.workload,
                    name,
                    None,
                    self.unit,
                    status=failure(e),
                    note=_join(note, _target_text(target, None)),
                )
            )
            _progress(self.rows[-1], t0)
            return None
        figure, extra = got if isinstance(got, tuple) else (got, "")
        ratio = self.ratio(figure)
        self.rows.append(
            Row(
                self.workload,
                name,
                figure,
                self.unit,
                ratio=ratio,
                note=_join(note, extra, self.basis, _target_text(target, ratio)),
            )
        )
        _progress(self.rows[-1], t0)
        return figure

    def rebase(self, figure: float, why: str) -> None:
        """Take later ratios against ``figure`` (e.g. ours on one worker when our main run
        failed); ``why`` goes into their notes."""
        self.our_figure, self.basis = figure, why

    def skip(self, name: str, reason: str) -> None:
        """A peer that could not be run at all (e.g. a package is missing)."""
        self.rows.append(
            Row(self.workload, name, None, self.unit, status=f"FAILED: {reason}"[:240])
        )

    def ratio(self, figure: float | None) -> float | None:
        ours = self.our_figure
        if ours is None or figure is None or ours <= 0 or figure <= 0:
            return None
        return ours / figure if self.higher_better else figure / ours


def _progress(row: Row, t0: float) -> None:
    """One line on stderr per row as it is measured (the table comes at the end)."""
    figure = "-" if row.figure is None else f"{row.figure:.4g}"
    sys.stderr.write(
        f"[bench] {row.workload} | {row.peer}: {figure} {row.unit} {row.status} "
        f"({time.perf_counter() - t0:.1f} s)\n"
    )


def _target_text(target: float | None, ratio: float | None) -> str:
    if target is None:
        return ""
    if ratio is None:
        return f"target ratio >= {target:g}: not measured"
    return f"target ratio >= {target:g}: {'MET' if ratio >= target else 'MISSED'}"


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
