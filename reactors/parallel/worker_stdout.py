"""What reactions print on several workers: captured per tag, sent, printed in one order.

Each worker's ``sys.stdout`` is a :class:`Captured`; at the end of a tag the worker sends its
chunks through its stdout channel (:meth:`reactors.parallel.plan.Plan.output_channel`) as the value
of a :func:`stdout_port`, and the coordinator prints every worker's chunks in rank order
(:func:`reactors.parallel.coordinator.write_output`), which is the order of one worker.
"""

from __future__ import annotations

import threading
from typing import Any, TextIO

from ..core.port import Port
from .plan import Plan
from .transport import ChannelReader, Channels


class Captured:
    """Stands in for ``sys.stdout`` in a worker: what reactions print during a tag, as
    ``(rank, text)`` chunks, sent to the coordinator at the end of the tag; it writes the
    chunks of all workers in rank order, which is the order of one worker. ``real`` is the
    stream written to when a run ends abnormally (:meth:`spill`). Text written by another
    thread than ``owner`` (threads that reactions started) goes straight to ``real``;
    ``owner`` None captures every thread's text."""

    def __init__(self, real: TextIO, owner: int | None = None):
        self.real = real
        self.owner = owner
        self.rank = -1
        self.chunks: list[tuple[int, str]] = []

    def write(self, text: str) -> int:
        if self.owner is not None and threading.get_ident() != self.owner:
            return self.real.write(text)
        if text:
            self.chunks.append((self.rank, text))
        return len(text)

    def flush(self) -> None:
        """An explicit flush (``print(..., flush=True)``) writes what this worker captured
        so far straight out: progress lines of long reactions appear at once, at the price
        of their order relative to other workers' text at the same tag."""
        if self.chunks:
            self.spill()

    def take(self) -> list[tuple[int, str]]:
        """The chunks captured since the last call, ``(rank, text)``; forgets them."""
        chunks, self.chunks = self.chunks, []
        return chunks

    def spill(self) -> None:
        """Write what was captured straight to the real stream (failure paths). When that
        stream cannot be written (a closed pipe, a full device), the text is lost and the
        failure path goes on (the failed output is the supervisor's to tell:
        :mod:`reactors.core.stdout_failure`)."""
        try:
            for _, text in self.take():
                self.real.write(text)
            self.real.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def stdout_port() -> Port:
    """The port that carries a worker's :class:`Captured` chunks of one tag (present when
    something was printed) through an ordinary crossing writer and reader: it triggers no
    reaction and is recorded nowhere."""
    return Port("stdout")


def output_readers(
    channels: Channels, plan: Plan
) -> list[tuple[Port, tuple[ChannelReader, ChannelReader]]]:
    """``(port, (reader of even tags, reader of odd tags))`` of every worker's stdout
    channels, in worker order (for :func:`reactors.parallel.coordinator.write_output`): the port, a
    :func:`stdout_port`, holds the chunks the reader received."""
    out = []
    for w in range(plan.workers):
        p = stdout_port()
        out.append(
            (
                p,
                (
                    channels.reader(plan.output_channel(w, 0), p),
                    channels.reader(plan.output_channel(w, 1), p),
                ),
            )
        )
    return out
