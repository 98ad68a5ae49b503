"""A live progress line for training on stderr: environment steps against the budget,
episodes, mean recent return and environment steps per second.

It reads the wall clock, so it only ever writes to the terminal, never to a port or a run
file (the run's results stay deterministic). On a terminal it is a rich progress bar
refreshed at most every ``interval`` seconds; otherwise (a log file, a test) a plain line is
printed every ``plain_interval`` seconds, without importing rich (a tenth of a second).

Saved in a checkpoint, a progress line keeps its title, budget and counts; restored in a
resumed run, it draws again on stderr.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO, Any


class TrainingProgress:
    """Progress of one run; ``total`` is the step budget (environment steps)."""

    def __init__(
        self,
        title: str,
        total: int,
        interval: float = 0.2,
        plain_interval: float = 10.0,
        stream: IO[str] | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.console = rich_console(self.stream)
        self.total, self.title = int(total), title
        self.intervals = (interval, plain_interval)
        self.interval = interval if self.console is not None else plain_interval
        self.t0 = self.last = time.monotonic()
        self.steps = self.episodes = 0
        self.base = 0  # steps taken before t0 (by the run a resumed run continues)
        self.mean = float("nan")
        self.bar = None
        if self.console is not None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,} steps"),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=self.console,
                auto_refresh=False,
            )
            self.task = self.bar.add_task(title, total=self.total, info="")
            self.bar.start()

    def __getstate__(self) -> dict[str, Any]:
        """Title, budget, intervals and counts (not the terminal)."""
        return {
            "title": self.title,
            "total": self.total,
            "intervals": self.intervals,
            "counts": (self.steps, self.episodes, self.mean),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A new progress line on stderr with the saved counts."""
        self.__init__(state["title"], state["total"], *state["intervals"])  # type: ignore[misc]
        self.steps, self.episodes, self.mean = state["counts"]
        self.base = self.steps

    def rate(self) -> float:
        """Environment steps per second of wall-clock time since the start."""
        return (self.steps - self.base) / max(1e-9, time.monotonic() - self.t0)

    def summary(self) -> str:
        """``episodes 123 | mean return 456.7 | 12,345 steps/s``."""
        return (
            f"episodes {self.episodes} | mean return {self.mean:.1f} | {self.rate():,.0f} steps/s"
        )

    def update(self, steps: int, episodes: int, mean: float, force: bool = False) -> None:
        """Record the run's state; redraw when ``interval`` has passed (or ``force``)."""
        self.steps, self.episodes, self.mean = steps, episodes, mean
        now = time.monotonic()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        if self.bar is not None:
            self.bar.update(self.task, completed=min(steps, self.total), info=self.summary())
            self.bar.refresh()
        else:
            self.stream.write(f"{self.title}: {steps:,}/{self.total:,} steps | {self.summary()}\n")
            self.stream.flush()

    def close(self) -> None:
        """Draw the final state and release the terminal."""
        self.update(self.steps, self.episodes, self.mean, force=True)
        if self.bar is not None:
            self.bar.stop()


def rich_console(stream: IO[str]) -> Any:
    """A rich ``Console`` on ``stream`` when rich takes it for a terminal (its rule: the
    ``TTY_COMPATIBLE`` and ``FORCE_COLOR`` variables, else ``isatty``), else None; rich is
    only imported when the stream may be one."""
    isatty = getattr(stream, "isatty", None)
    forced = "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ
    if not forced and not (isatty is not None and isatty()):
        return None
    from rich.console import Console

    console = Console(file=stream, soft_wrap=True)
    return console if console.is_terminal else None
