"""What a hub's worker spends per tag on a bank's values from other workers: decoded on arrival
(a channel that a reaction reads by itself) against left in shared memory and gathered in one
copy (``p.gather()``: :class:`reactors.parallel.codec.Arrived`).

Every channel is written by another worker, as for a hub with 16 workers on 16 cores: a writer
and a reader of each channel in this process, in one control block (:class:`Crossings`). A tag
is the readers' receives, one gather of the multiport and the end-of-tag settle; the writers'
publications are not timed. 16 and 64 channels of float32 (8,) observations and of
``(reward, done)`` tuples; each row the median over ``rounds`` tags, the best of three.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import numpy as np

from reactors.core.port import Multiport, Port
from reactors.parallel import shm
from reactors.parallel.codec import Arrived, settle
from reactors.parallel.sync import Control

from .common import Row

VALUES: dict[str, Any] = {
    "float32 (8,)": np.arange(8, dtype=np.float32),
    "(float, bool)": (1.5, True),
}


class Crossings:
    """``n`` crossings in one control block, written by worker 0 and read by worker 1; their
    shared-memory slots are named from ``prefix`` (unlink them with
    :func:`reactors.parallel.shm.unlink_prefix`)."""

    def __init__(self, n: int, prefix: str):
        self.ctl = Control(bytearray(Control.size(2, n)), 2, n)
        self.ctl.init()
        self.src = [Port(f"env[{i}].obs") for i in range(n)]
        self.dst = [Port(f"hub.obs[{i}]") for i in range(n)]
        self.arrived: list[Arrived] = []
        self.writers = [shm.Writer(self.ctl, i, (1,), p, prefix) for i, p in enumerate(self.src)]
        self.readers = [
            shm.Reader(self.ctl, i, 1, p, prefix, self.arrived) for i, p in enumerate(self.dst)
        ]
        self.seq = -1

    def publish(self, values: list) -> None:
        """The writers' part of the next tag: channel ``i`` carries ``values[i]`` (None:
        absent)."""
        self.seq += 1
        for src, w, v in zip(self.src, self.writers, values, strict=True):
            src._v, src._p = v, v is not None
            w.publish(self.seq)

    def receive(self) -> None:
        """The readers' part of the tag published last."""
        for dst, r in zip(self.dst, self.readers, strict=True):
            dst._p = False
            r.receive(self.seq)

    def send(self, values: list) -> None:
        """One tag: publish ``values`` and receive them."""
        self.publish(values)
        self.receive()


def per_tag_us(n: int, value: Any, decoded: bool, rounds: int) -> float:
    """Median µs of a tag's receives, gather and settle of ``n`` channels of ``value``;
    ``decoded``: the channels are decoded on arrival (as after a reaction read one by
    itself)."""
    prefix = f"lfgather{os.getpid()}n{n}"
    x = Crossings(n, prefix)
    hub = Multiport(x.dst, "hub.obs")
    try:
        x.send([value] * n)
        if decoded:
            for r in x.readers:
                layout = r.unpacker.layout
                assert layout is not None  # set by the first arrival
                layout.defer = False
        times = []
        for _ in range(rounds):
            x.publish([value] * n)
            t0 = time.perf_counter()
            x.receive()
            hub.gather()
            settle(x.arrived)
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e6
    finally:
        shm.unlink_prefix(prefix)


def run(quick: bool) -> list[Row]:
    """Two rows per channel count and kind of value: decoded on arrival, left in shared
    memory (its ratio: how many times less time the hub's worker spends)."""
    rounds = 200 if quick else 2000
    rows = []
    for n in (16, 64):
        for kind, value in VALUES.items():
            title = f"Gather of {n} channels of {kind}, all from other workers: a tag's receives"
            decoded = min(per_tag_us(n, value, True, rounds) for _ in range(3))
            left = min(per_tag_us(n, value, False, rounds) for _ in range(3))
            rows.append(Row(title, "decoded on arrival (read one by one)", decoded, "µs/tag"))
            rows.append(
                Row(
                    title,
                    "left in shared memory, gathered in one copy",
                    left,
                    "µs/tag",
                    ratio=decoded / left,
                    note="ratio: decoded on arrival over this",
                )
            )
    return rows
