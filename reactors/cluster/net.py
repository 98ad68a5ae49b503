"""The network transport between the nodes of a ``--cluster`` run (DESIGN.md, "On a cluster").

On one node the workers share the run's control block and channel segments in ``/dev/shm``
(:mod:`reactors.parallel.processes`). Across nodes every node keeps its own copy of them, and each
process sends what it writes to the other nodes over TCP, where a receiver (a thread per
connection, in a process of its own: :class:`reactors.cluster.ray_actor.ReceiverProcess`) stores
it in that node's copy in the order it was written. This is sound because every cell of the
control block has exactly one writer (:mod:`reactors.parallel.sync`) and each writer publishes its
data before the cell that publishes it: one writer's stream, applied in order, keeps that
order. So the
runtime's protocol, its tag agreement and its results are those of one machine; what crosses
the network per tag is what the workers publish: a worker's reports and ``DONE`` cell (the
tags every upstream worker has completed: LF's centralized coordination, the coordinator
playing the RTI), the coordinator's grant of the next tag, and each crossing's value.

The frames and the receiving side are :mod:`reactors.cluster.wire`. A write is sent at once
(:data:`SEND`), or kept until the next sent one when a cell that publishes it always follows
in the same code path (:data:`DEFER`: e.g. the coordinator's ``GO_T`` before ``GO_SEQ``), or
never (:data:`LOCAL`: the sleeping announcements, which only this node's wakers read).
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from ..parallel.processes import ShmChannels
from ..parallel.shm import (
    K_ARRAY,
    K_FLOAT,
    K_INT,
    K_PACKED,
    K_PICKLE,
    K_SMALL,
    K_TENSOR,
    Writer,
    slot_extent,
)
from ..parallel.sync import (
    C_HELD,
    C_INLINE,
    C_KIND,
    C_META,
    C_NBYTES,
    C_SLOT,
    C_STATE,
    CALL_M,
    CALL_SM,
    CALL_ST,
    CALL_T,
    CODE,
    COORD_SLEEP,
    DONE,
    GO_M,
    GO_SEQ,
    GO_T,
    INLINE_CELLS,
    NEXT_M,
    NEXT_T,
    PRINTED,
    REPORT,
    REQ_M,
    REQ_T,
    REV,
    SKIP_M,
    SKIP_T,
    SLEEP,
    START_T,
    STOP_M,
    STOP_T,
    WAIT_AT,
    WAIT_CELL,
    Control,
)
from .wire import Link

SEND, DEFER, LOCAL = 0, 1, 2  # what a write of a cell does (cell_policy)
_SLOT_KINDS = (K_ARRAY, K_TENSOR, K_PICKLE)
_KEEP_NS = 1_000_000  # a DONE kept longer than this (a long first reaction): send at once
_PAUSE = (64, 4_096)  # tags of sending DONE at once after a DONE kept too long: first, most


@dataclass(frozen=True)
class NetPlan:
    """Where a run's workers are and how their nodes reach each other: ``node_of[w]`` the
    node index of worker ``w`` (0: the supervisor's node), ``prefixes[k]`` the segment prefix
    of node ``k``'s copy, ``addresses[k]`` its receiver's ``(host, port)`` (node 0's is the
    supervisor's), ``secret`` the run's 32-byte HMAC key."""

    node_of: tuple[int, ...]
    prefixes: tuple[str, ...]
    addresses: tuple[tuple[str, int], ...]
    secret: bytes


def cell_policy(ctl: Control) -> bytearray:
    """For each cell of ``ctl``, :data:`SEND`, :data:`DEFER` or :data:`LOCAL` (see the module
    docstring). A deferred cell is always followed, in the code that writes it, by a sent one
    of the same process: ``GO_T..STOP_M`` by ``GO_SEQ``, ``START_T`` by ``STATE``, reports by
    ``DONE``, ``CODE`` by ``STATUS``, a skip's tag by ``SKIP_FROM``, a call's tags by
    ``CALL_SEQ``, a reader's held slots by its next ``DONE``, a
    batch's cell by the flush that ends :meth:`reactors.parallel.worker_connections.Link.publish`
    or, after a tag's last reaction, by the worker's ``DONE`` (or its next send, when that
    ``DONE`` is kept: :meth:`NetControl.set_done`)."""
    n = ctl.size(ctl.workers, ctl.channels, ctl.batches) // 8
    policy = bytearray(n)  # SEND
    for cell in (GO_T, GO_M, STOP_T, STOP_M, START_T, PRINTED):
        policy[cell] = DEFER
    policy[COORD_SLEEP] = LOCAL
    for w in range(ctl.workers):
        b = ctl.worker_base(w)
        for cell in (
            NEXT_T,
            NEXT_M,
            REQ_T,
            REQ_M,
            CODE,
            *range(REPORT[1], REPORT[1] + 4),
            SKIP_T,
            SKIP_M,
            CALL_T,
            CALL_M,
            CALL_ST,
            CALL_SM,
        ):
            policy[b + cell] = DEFER
        for cell in (SLEEP, WAIT_CELL, WAIT_AT):
            policy[b + cell] = LOCAL
    for c in range(ctl.channels):
        b = ctl.channel_base(c)
        for cell in range(b, b + ctl.channel_stride):
            policy[cell] = DEFER
    for b in range(ctl.batches):  # the worker flushes after publishing its batches
        policy[ctl.batch_cell(b)] = DEFER
    return policy


class NetCells:
    """The control block's int64 cells as one process of a multi-node run sees them: reads
    are local; a write is stored locally and given to the :class:`Link` per its cell's
    policy (:func:`cell_policy`). Indexing is by int (reads also by slice)."""

    __slots__ = ("mv", "policy", "link")

    def __init__(self, mv: memoryview, policy: bytearray, link: Link):
        self.mv, self.policy, self.link = mv, policy, link

    def __getitem__(self, i: Any) -> Any:
        return self.mv[i]

    def __setitem__(self, i: int, v: int) -> None:
        self.mv[i] = v
        p = self.policy[i]
        if p == DEFER:
            self.link.cell(i, v, True)
        elif p == SEND:
            self.link.cell(i, v)
            self.link.flush()

    def release(self) -> None:
        self.mv.release()


class NetControl(Control):
    """A :class:`reactors.parallel.sync.Control` whose cell writes also go to the other nodes
    (``link``) from node ``here``; ``plain`` is a second view of the same block that writes
    only locally (the channel writers', whose publications :class:`NetWriter` sends whole)."""

    def __init__(self, buf: Any, workers: int, channels: int, batches: int, link: Link, here: int):
        super().__init__(buf, workers, channels, batches)
        self.link, self.here = link, here
        self.kept_at = 0  # when a DONE was kept for the next send (perf_counter ns), or 0
        self.keep = 1  # > 0: keep DONE cells (set_done)
        self.pause = _PAUSE[0]
        self.plain = Control(buf, workers, channels, batches)
        self.cells = NetCells(self.cells, cell_policy(self), link)  # type: ignore[assignment]
        self.local_cells = self.plain.cells
        self.one_host = False

    def write_report(self, w: int, next_t: int, next_m: int, req_t: int, req_m: int) -> None:
        """As :meth:`Control.write_report`, queued as three frames (odd revision, the report,
        even revision) that go in one send with the next sent cell (the worker's ``DONE``) or
        :meth:`flush`, so that another node's reader sees the seqlock as here."""
        c = self.plain.cells
        b = self.worker_base(w)
        c[b + REV] += 1
        c[b + NEXT_T], c[b + NEXT_M], c[b + REQ_T], c[b + REQ_M] = next_t, next_m, req_t, req_m
        link = self.link
        link.cell(b + REV, c[b + REV])
        link.bytes_at(8 * (b + NEXT_T), c[b + NEXT_T : b + REQ_M + 1].cast("B"), link.all)
        c[b + REV] += 1
        link.cell(b + REV, c[b + REV])

    def write_cells(self, first: int, values: tuple[int, int, int, int]) -> None:
        """As :meth:`Control.write_cells`, queued as one frame for every other node."""
        self.plain.write_cells(first, values)
        end = first + len(values)
        self.link.bytes_at(8 * first, self.plain.raw[8 * first : 8 * end], self.link.all)

    def set_done(self, w: int, seq: int, may_wait: bool = False) -> None:
        """As :meth:`Control.set_done`, and sent. With ``may_wait``, kept for this worker's
        next send instead (a publication in the next tag, a wait, its next ``DONE``) while
        that came soon after: a free-running worker that enters the next tag at once and
        publishes early in it (one side of a ping-pong) then sends one message per tag, not
        two, while one that only publishes at the end of its tags (an environment bank:
        the others wait for its ``DONE`` to enter the next tag) sends at once after the
        first try, and tries again after a pause (:data:`_PAUSE`)."""
        b = self.worker_base(w) + DONE
        self.plain.cells[b] = seq
        link = self.link
        if self.kept_at and link.queued():  # the last one waited for this DONE: too long
            self._kept_too_long()
        link.cell(b, seq)
        self.keep += 1
        if may_wait and self.keep > 0:
            self.kept_at = perf_counter_ns()
        else:
            self.kept_at = 0
            link.flush()

    def note_tag(self, t: int, m: int, seq: int) -> None:
        """As :meth:`Control.note_tag`, stored here and queued only for the supervisor's
        node (node 0), the only reader; it goes with this worker's next send."""
        self.plain.note_tag(t, m, seq)
        if self.here != 0:
            raw = self.plain.raw
            self.link.bytes_at(8 * GO_T, raw[8 * GO_T : 8 * GO_M + 8], (0,))
            self.link.bytes_at(8 * GO_SEQ, raw[8 * GO_SEQ : 8 * GO_SEQ + 8], (0,))

    def flush(self) -> None:
        """Send what this process queued (before it waits, after publications in a tag)."""
        if self.kept_at:
            if perf_counter_ns() - self.kept_at > _KEEP_NS:
                self._kept_too_long()
            else:
                self.pause = _PAUSE[0]
            self.kept_at = 0
        self.link.flush()

    def _kept_too_long(self) -> None:
        """Send DONE cells at once for the next ``pause`` tags, a pause that doubles while
        keeping them keeps failing (up to ``_PAUSE[1]``)."""
        self.kept_at, self.keep = 0, -self.pause
        self.pause = min(2 * self.pause, _PAUSE[1])

    def release(self) -> None:
        self.plain.release()
        super().release()
        self.link.close()


class NetWriter:
    """The writing side of a crossing in a multi-node run: ``inner`` (a
    :class:`reactors.parallel.shm.Writer` on the local block) publishes here, then the publication
    is queued for ``nodes`` (those of its readers, and the supervisor's): the slot's content when
    the value lies in a slot segment, the inline value, the header cells, then ``C_STATE``
    (only ``C_STATE`` for an absent value)."""

    def __init__(self, inner: Writer, ctl: NetControl, index: int, nodes: tuple[int, ...]):
        self.inner, self.link, self.nodes = inner, ctl.link, nodes
        self.cells = ctl.plain.cells
        self.raw = ctl.plain.raw
        self.base = ctl.channel_base(index)
        self.inline = ctl.inline_base(index)
        self.index = index

    def publish(self, seq: int) -> None:
        """Publish the port's value of tag number ``seq`` here, then queue it for
        ``nodes`` (sent with the worker's next flush)."""
        inner, c, b = self.inner, self.cells, self.base
        inner.publish(seq)
        link, nodes = self.link, self.nodes
        if c[b + C_STATE] & 1:
            kind = c[b + C_KIND]
            if kind in _SLOT_KINDS:
                slot = c[b + C_SLOT]
                seg, gen, capacity = inner.slots[slot]
                n = slot_extent(kind, c[b + C_NBYTES], c[b + C_META])
                link.segment(f"c{self.index}s{slot}g{gen}", capacity, seg.buf[:n], nodes)
            elif kind in (K_INT, K_FLOAT):
                link.bytes_at(
                    8 * self.inline, self.raw[8 * self.inline : 8 * self.inline + 8], nodes
                )
            elif kind in (K_SMALL, K_PACKED):
                start = 8 * self.inline
                link.bytes_at(start, self.raw[start : start + 8 * INLINE_CELLS], nodes)
            # the kind, then the slot cells and the codec's header generation
            link.bytes_at(8 * (b + C_KIND), self.raw[8 * (b + C_KIND) : 8 * (b + C_INLINE)], nodes)
            link.bytes_at(8 * (b + C_SLOT), self.raw[8 * (b + C_SLOT) : 8 * (b + C_HELD)], nodes)
        # an absent value is its state cell alone (a reader reads nothing else)
        link.bytes_at(8 * (b + C_STATE), self.raw[8 * b : 8 * b + 8], nodes)

    def close(self) -> None:
        self.inner.close()


class NetChannels(ShmChannels):
    """One worker's ends of the channels in a multi-node run: local segments under its node's
    ``prefix``; writers send their publications to the nodes of their readers
    (``plan.node_of``) and to those of the supervisor and the coordinator (worker 0), which
    read the stdout channels."""

    def __init__(self, ctl: NetControl, prefix: str, me: int, plan: NetPlan):
        super().__init__(ctl, prefix, me)
        self.net, self.plan = ctl, plan

    def writer(self, index: int, readers: tuple[int, ...], port: Any) -> Any:
        inner = Writer(self.net.plain, index, readers, port, self.prefix)
        here = self.plan.node_of[self.me]
        # the supervisor's node and the coordinator's (worker 0) read the stdout channels
        wanted = {self.plan.node_of[r] for r in readers} | {0, self.plan.node_of[0]}
        nodes = tuple(sorted(wanted - {here}))
        w = NetWriter(inner, self.net, index, nodes) if nodes else inner
        self.writers.append(w)
        return w


def node_prefix(prefix: str, node: int) -> str:
    """The segment prefix of node ``node``'s copy of the run whose prefix is ``prefix``
    (node 0, the supervisor's, uses the run's own)."""
    return prefix if node == 0 else f"{prefix}n{node}"


def snapshot(link: Link, ctl: Control) -> None:
    """Send the whole control block (as the supervisor made it, before any worker ran) to
    every other node and wait until each applied it."""
    link.bytes_at(0, ctl.raw, link.all)
    link.sync()


__all__ = [
    "DEFER",
    "LOCAL",
    "NetCells",
    "NetChannels",
    "NetControl",
    "NetPlan",
    "NetWriter",
    "SEND",
    "cell_policy",
    "node_prefix",
    "snapshot",
]
