"""The network transport between the nodes of a ``--cluster`` run (DESIGN.md, "On a cluster").

On one node the workers share the run's control block and channel segments in ``/dev/shm``
(:mod:`reactors.processes`). Across nodes every node keeps its own copy of them, and each
process sends what it writes to the other nodes over TCP, where a receiver (a thread per
connection, in a process of its own: :class:`reactors.ray_actor.ReceiverProcess`) stores it
in that node's copy in the order it was written. This is sound because every cell of the control
block has exactly one writer (:mod:`reactors.sync`) and each writer publishes its data before
the cell that publishes it: one writer's stream, applied in order, keeps that order. So the
runtime's protocol, its tag agreement and its results are those of one machine; what crosses
the network per tag is what the workers publish: a worker's reports and ``DONE`` cell (the
tags every upstream worker has completed: LF's centralized coordination, the coordinator
playing the RTI), the coordinator's grant of the next tag, and each crossing's value.

What is sent, as frames (:data:`FRAME`: kind, two integers, then a payload):

- :data:`K_CELLS`: bytes at an offset of the control block (cells as written; a channel's
  inline value and header cells after its writer published them);
- :data:`K_SEGMENT`: the content of a channel's slot segment (a numpy array's bytes as they
  are, no pickle; a large pickle's bytes as the reader will load them), only to the nodes that
  read that channel;
- :data:`K_SYNC`: asks the receiver to answer one byte once everything before it is applied.

A write is sent at once (:data:`SEND`), or kept until the next sent one when a cell that
publishes it always follows in the same code path (:data:`DEFER`: e.g. the coordinator's
``GO_T`` before ``GO_SEQ``), or never (:data:`LOCAL`: the sleeping announcements, which only
this node's wakers read). The receiver, after a frame it applied, rings the bell of each
worker of its node that sleeps, and the supervisor's when a cell it watches changed.

Security: a receiver listens only on its node's cluster address; every connection must prove
it belongs to the run before any frame is read: the receiver sends a random 32-byte nonce and
expects HMAC-SHA256 of it under the run's secret (32 random bytes the supervisor made, given to
the actors through Ray). Nothing read from the network is unpickled: frames are offsets and
bytes; a slot's pickle is loaded by its reader as on one machine, and only frames of
authenticated peers of the run are ever stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import socket
import struct
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

from .processes import ShmChannels
from .shm import (
    K_ARRAY,
    K_FLOAT,
    K_INT,
    K_PACKED,
    K_PICKLE,
    K_SMALL,
    K_TENSOR,
    Segment,
    Writer,
    slot_extent,
)
from .sync import (
    ABORT,
    C_HELD,
    C_KIND,
    C_META,
    C_NBYTES,
    C_SLOT,
    C_STATE,
    CODE,
    COORD_SLEEP,
    DONE,
    FAILS,
    FINISHED,
    GO_M,
    GO_SEQ,
    GO_T,
    INLINE_CELLS,
    LOST,
    NEXT_M,
    NEXT_T,
    PRINTED,
    REPORT,
    REQ_M,
    REQ_T,
    REV,
    SLEEP,
    START_T,
    STATE,
    STATUS,
    STOP_ASKED,
    STOP_M,
    STOP_T,
    W_FAILED,
    W_FINISHED,
    W_GONE,
    WAIT_AT,
    WAIT_CELL,
    Control,
    Waker,
)

FRAME = struct.Struct("<BxxxIQ")  # kind, a (offset or name length), b (length or capacity)
K_CELLS, K_SEGMENT, K_SYNC = 1, 2, 3
SEND, DEFER, LOCAL = 0, 1, 2  # what a write of a cell does (cell_policy)
_NONCE = 32
_PROOF = b"lf-net/1"
_AUTH_S = 5.0  # how long a connecting peer gets to prove it belongs to the run
SUPERVISOR = 0xFFFF  # the sender id of the supervisor (workers send their index)
_SLOT_KINDS = (K_ARRAY, K_TENSOR, K_PICKLE)
_KEEP_NS = 1_000_000  # a DONE kept longer than this (a long first reaction): send at once
_PAUSE = (64, 4_096)  # tags of sending DONE at once after a DONE kept too long: first, most


class NetError(ConnectionError):
    """A peer of the run could not be reached, or did not prove it belongs to the run."""


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
    ``DONE``, ``CODE``/``LOST`` by ``STATUS``, a reader's held slots by its next ``DONE``, a
    batch's cell by the flush that ends :meth:`reactors.worker.WorkerScheduler._publish`."""
    n = ctl.size(ctl.workers, ctl.channels, ctl.batches) // 8
    policy = bytearray(n)  # SEND
    for cell in (GO_T, GO_M, STOP_T, STOP_M, START_T, PRINTED):
        policy[cell] = DEFER
    policy[COORD_SLEEP] = LOCAL
    for w in range(ctl.workers):
        b = ctl.worker_base(w)
        for cell in (NEXT_T, NEXT_M, REQ_T, REQ_M, CODE, LOST, *range(REPORT[1], REPORT[1] + 4)):
            policy[b + cell] = DEFER
        for cell in (SLEEP, WAIT_CELL, WAIT_AT):
            policy[b + cell] = LOCAL
    for c in range(ctl.channels):
        b = ctl.channel_base(c)
        for cell in range(b, b + C_HELD + ctl.workers + INLINE_CELLS):
            policy[cell] = DEFER
    for b in range(ctl.batches):  # the worker flushes after publishing its batches
        policy[ctl.batch_cell(b)] = DEFER
    return policy


def watched_by_supervisor(ctl: Control) -> frozenset[int]:
    """The cells whose change wakes the supervisor (:func:`reactors.supervisor.supervise`)."""
    return frozenset(
        {STATE, FAILS, STOP_ASKED} | {ctl.worker_base(w) + STATUS for w in range(ctl.workers)}
    )


class Link:
    """What one process sends to the other nodes of its run: a connection to each one's
    receiver (``peers``: node index to ``(host, port)``), made at construction after proving
    the run's ``secret``; frames are kept per node until :meth:`flush`. ``sent_bytes``
    counts what went out. Raises NetError when a receiver cannot be reached or
    refuses the proof."""

    def __init__(self, peers: dict[int, tuple[str, int]], secret: bytes, sender: int):
        self.socks: dict[int, socket.socket] = {}
        self.out: dict[int, bytearray] = {}
        self.last: dict[int, int] = {}  # where the last frame queued for a node starts (-1: none)
        self.sent_bytes = 0
        try:
            for node, address in sorted(peers.items()):
                self.socks[node] = _connect(address, secret, sender)
                self.out[node] = bytearray()
                self.last[node] = -1
        except BaseException:
            self.close()
            raise
        self.all = tuple(self.socks)

    def cell(self, index: int, value: int, merge: bool = False) -> None:
        """Queue cell ``index``'s new value (int64) for every other node. ``merge``: the
        cell publishes nothing (a :data:`DEFER` data cell), so it may join the frame queued
        last when that one ends right before it: the receiver copies a frame's bytes in no
        particular order, which only a cell that publishes an earlier one would mind."""
        data = value.to_bytes(8, "little", signed=True)
        offset = 8 * index
        last = self.last
        for node, buf in self.out.items():
            at = last[node]
            if merge and at >= 0:
                kind, a, b = FRAME.unpack_from(buf, at)
                if kind == K_CELLS and a + b == offset:
                    FRAME.pack_into(buf, at, K_CELLS, a, b + 8)
                    buf += data
                    continue
            last[node] = len(buf)
            buf += FRAME.pack(K_CELLS, offset, 8)
            buf += data

    def bytes_at(self, offset: int, data: Any, nodes: Iterable[int]) -> None:
        """Queue ``data`` (bytes-like) for byte ``offset`` of the control block on ``nodes``."""
        head = FRAME.pack(K_CELLS, offset, len(data))
        for node in nodes:
            buf = self.out.get(node)
            if buf is not None:
                self.last[node] = len(buf)
                buf += head
                buf += data

    def segment(self, suffix: str, capacity: int, data: memoryview, nodes: Iterable[int]) -> None:
        """Send a slot segment's content (``data``, bytes) for the segment named ``suffix``
        after the receiving node's prefix, of ``capacity`` bytes: what was queued for those
        nodes goes first; the content is sent as it lies (no copy into a frame)."""
        name = suffix.encode()
        head = FRAME.pack(K_SEGMENT, len(name), capacity) + name + len(data).to_bytes(8, "little")
        for node in nodes:
            buf = self.out.get(node)
            if buf is None:
                continue
            buf += head
            sock = self.socks[node]
            try:
                sock.sendall(buf)
                sock.sendall(data)
            except OSError:
                self._drop(node)
                continue
            self.sent_bytes += len(buf) + len(data)
            buf.clear()
            self.last[node] = -1

    def flush(self) -> None:
        """Send what is queued, to every node (in the order it was queued). A node whose
        receiver is gone (its workers all ended, or it died: the supervisor tells which) is
        dropped."""
        for node, buf in list(self.out.items()):
            if buf:
                try:
                    self.socks[node].sendall(buf)
                except OSError:
                    self._drop(node)
                    continue
                self.sent_bytes += len(buf)
                buf.clear()
                self.last[node] = -1

    def queued(self) -> bool:
        """Whether frames wait for :meth:`flush`."""
        return any(self.out.values())

    def _drop(self, node: int) -> None:
        self.socks.pop(node).close()
        del self.out[node], self.last[node]

    def sync(self) -> None:
        """Send what is queued and wait until every receiver applied it."""
        for node, buf in self.out.items():
            self.last[node] = len(buf)
            buf += FRAME.pack(K_SYNC, 0, 0)
        self.flush()
        for sock in self.socks.values():
            if _recv_exactly(sock, 1) != b"\1":
                raise NetError("a receiver of the run closed its connection")

    def close(self) -> None:
        """Send what is queued (if the peers still listen) and close the connections."""
        with contextlib.suppress(OSError):
            self.flush()
        for sock in self.socks.values():
            sock.close()
        self.socks.clear()


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
    """A :class:`reactors.sync.Control` whose cell writes also go to the other nodes
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

    def write_cells(self, first: int, values: tuple[int, ...]) -> None:
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
    :class:`reactors.shm.Writer` on the local block) publishes here, then the publication is
    queued for ``nodes`` (those of its readers, and the supervisor's): the slot's content when
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
            link.bytes_at(8 * (b + 1), self.raw[8 * (b + 1) : 8 * (b + C_HELD)], nodes)
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


class Receiver:
    """Applies what the other nodes send to this node's copy of the run: the control block
    ``ctl`` (a plain :class:`Control` on it) and the slot segments named after ``prefix``.
    Listens on ``host`` (the node's cluster address; port chosen by the kernel: ``address``);
    one thread per accepted connection, which must prove the run's ``secret`` first. After a
    frame it rings ``bells[w]`` of each worker ``w`` of ``local`` that sleeps, and
    ``supervisor_bell`` (if any) when a cell the supervisor watches was written. When the
    supervisor's connection ends before the run finished (it died), the copy is marked
    aborted and every local bell rung; when a worker's does before it finished, the worker
    is marked gone (:data:`reactors.sync.W_GONE`) and the supervisor woken."""

    def __init__(
        self,
        ctl: Control,
        prefix: str,
        host: str,
        secret: bytes,
        local: Sequence[int],
        bells: Mapping[int, Waker],
        supervisor_bell: Waker | None = None,
    ):
        self.prefix, self.secret = prefix, secret
        self.cells, self.raw = ctl.cells, ctl.raw  # the plain views: stores stay on this node
        self.local = [(ctl.worker_base(w) + SLEEP, bells[w]) for w in local]
        self.coordinator = bells[0] if 0 in local else None
        self.supervisor_bell = supervisor_bell
        self.watched = watched_by_supervisor(ctl)
        self.status_cells = [ctl.worker_base(w) + STATUS for w in range(ctl.workers)]
        self.segments: dict[str, Segment] = {}
        self.sock = socket.create_server((host, 0))
        self.address: tuple[str, int] = (host, self.sock.getsockname()[1])
        self._closing = False
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="lf-net-accept").start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="lf-net").start()

    def _serve(self, conn: socket.socket) -> None:
        sender = None
        try:
            sender = _check(conn, self.secret)
            if sender is None:
                return
            self._apply(conn)
        except (OSError, ValueError):
            pass
        finally:
            conn.close()
            if sender == SUPERVISOR and not self._closing:
                self._orphaned()
            elif sender is not None and not self._closing:
                self._gone(sender)

    def _apply(self, conn: socket.socket) -> None:
        """Read frames from ``conn`` until it closes; after each read, wake the local
        sleepers once."""
        raw, cells = self.raw, self.cells
        buf = bytearray(1 << 16)
        view = memoryview(buf)
        have = 0
        while True:
            got = conn.recv_into(view[have:])
            if not got:
                return  # the sender closed
            have += got
            pos, watched = 0, False
            while have - pos >= FRAME.size:
                kind, a, b = FRAME.unpack_from(buf, pos)
                start = pos + FRAME.size
                if kind == K_CELLS:
                    if have - start < b:
                        break
                    if b == 8 and not a & 7:
                        cells[a >> 3] = int.from_bytes(
                            view[start : start + 8], "little", signed=True
                        )
                    else:
                        raw[a : a + b] = view[start : start + b]
                    watched = watched or (a + b - 8) >> 3 in self.watched
                    pos = start + b
                elif kind == K_SEGMENT:
                    if have - start < a + 8:
                        break
                    name = self.prefix + bytes(view[start : start + a]).decode()
                    n = int.from_bytes(view[start + a : start + a + 8], "little")
                    pos = start + a + 8
                    seg = self.segments.get(name)
                    if seg is None:
                        seg = self.segments[name] = Segment(name, True, b)
                    dest: memoryview = seg.buf  # type: ignore[assignment]  # open
                    now = min(n, have - pos)
                    dest[:now] = view[pos : pos + now]
                    pos += now
                    while now < n:  # the rest straight from the socket
                        got = conn.recv_into(dest[now:n])
                        if not got:
                            return
                        now += got
                elif kind == K_SYNC:
                    conn.sendall(b"\1")
                    pos = start
                else:
                    return  # not a frame of ours: stop reading this peer
            if pos:
                buf[: have - pos] = buf[pos:have]
                have -= pos
            if have == len(buf):  # one frame larger than the buffer
                view.release()
                buf.extend(bytes(len(buf)))
                view = memoryview(buf)
            self._wake(watched)

    def _wake(self, watched: bool) -> None:
        cells = self.cells
        for sleep, bell in self.local:
            if cells[sleep]:
                bell.ring()
        if self.coordinator is not None and cells[COORD_SLEEP]:
            self.coordinator.ring()
        if watched and self.supervisor_bell is not None:
            self.supervisor_bell.ring()

    def _orphaned(self) -> None:
        cells = self.cells
        if cells[STATE] != FINISHED:
            cells[STATE] = ABORT
        for _, bell in self.local:
            bell.ring()

    def _gone(self, w: int) -> None:
        """Worker ``w``'s connection closed: if it had not finished, mark it gone on this
        copy (:data:`reactors.sync.W_GONE`; it writes nothing more) and wake the supervisor."""
        cells = self.cells
        if not 0 <= w < len(self.status_cells) or cells[STATE] in (FINISHED, ABORT):
            return
        cell = self.status_cells[w]
        if cells[cell] not in (W_FAILED, W_FINISHED):
            cells[cell] = W_GONE
            if self.supervisor_bell is not None:
                self.supervisor_bell.ring()

    def close(self) -> None:
        """Stop listening, close the connections and this process's segment mappings."""
        self._closing = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self.sock.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for seg in self.segments.values():
            with contextlib.suppress(BufferError, OSError):
                seg.close()


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _proof(secret: bytes, nonce: bytes) -> bytes:
    return hmac.new(secret, _PROOF + nonce, hashlib.sha256).digest()


def _connect(address: tuple[str, int], secret: bytes, sender: int) -> socket.socket:
    """A connection to the receiver at ``address`` that proved the run's ``secret`` and said
    who sends (``sender``: a worker index or the supervisor's id). Raises NetError."""
    try:
        sock = socket.create_connection(address, timeout=_AUTH_S)
    except OSError as e:
        raise NetError(f"cannot reach the node at {address[0]}:{address[1]} ({e})") from e
    try:
        nonce = _recv_exactly(sock, _NONCE)
        sock.sendall(_proof(secret, nonce) + sender.to_bytes(2, "little"))
        if _recv_exactly(sock, 1) != b"\1":
            raise NetError(f"the node at {address[0]}:{address[1]} refused this run's proof")
    except OSError as e:
        sock.close()
        raise NetError(f"the node at {address[0]}:{address[1]} did not answer ({e})") from e
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _check(conn: socket.socket, secret: bytes) -> int | None:
    """The sender id of a new connection once it proved the run's ``secret`` within
    ``_AUTH_S`` seconds; None (and nothing read beyond the proof) otherwise."""
    conn.settimeout(_AUTH_S)
    nonce = secrets.token_bytes(_NONCE)
    conn.sendall(nonce)
    answer = _recv_exactly(conn, 32 + 2)
    if len(answer) != 34 or not hmac.compare_digest(answer[:32], _proof(secret, nonce)):
        return None
    conn.sendall(b"\1")
    conn.settimeout(None)
    return int.from_bytes(answer[32:], "little")


def new_secret() -> bytes:
    """A run's HMAC key: 32 random bytes."""
    return secrets.token_bytes(32)


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
    "K_CELLS",
    "K_SEGMENT",
    "K_SYNC",
    "Link",
    "NetCells",
    "NetChannels",
    "NetControl",
    "NetError",
    "NetPlan",
    "NetWriter",
    "SUPERVISOR",
    "Receiver",
    "cell_policy",
    "new_secret",
    "node_prefix",
    "snapshot",
]
