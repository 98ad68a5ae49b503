"""The bytes of the network transport (:mod:`reactors.cluster.net`): frames, what one process sends
to the other nodes of its run (:class:`Link`) and what a node receives (:class:`Receiver`);
the proof a connection gives before anything it sends is read is :mod:`reactors.cluster.handshake`.

What is sent, as frames (:data:`FRAME`: kind, two integers, then a payload):

- :data:`K_CELLS`: bytes at an offset of the control block (cells as written; a channel's
  inline value and header cells after its writer published them);
- :data:`K_SEGMENT`: the content of a channel's slot segment (a numpy array's bytes as they
  are, no pickle; a large pickle's bytes as the reader will load them), only to the nodes that
  read that channel;
- :data:`K_SYNC`: asks the receiver to answer one byte once everything before it is applied.

The receiver, after the frames of a read, rings the bell of each worker of its node that
sleeps, and the supervisor's when a cell it watches changed.

Security: a receiver listens only on its node's cluster address; every connection must prove
it belongs to the run before any frame is read: the receiver sends a random 32-byte nonce and
expects HMAC-SHA256 of it under the run's secret (32 random bytes the supervisor made, given to
the actors through Ray). Nothing read from the network is unpickled: frames are offsets and
bytes; a slot's pickle is loaded by its reader as on one machine, and only frames of
authenticated peers of the run are ever stored. Other local processes that connect cannot
starve the run's peers: the receiver's gate bounds how many connections wait for their proof
and for how long, and keeps accepting when the process runs out of file descriptors
(:class:`reactors.cluster.handshake.Gate`).
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import struct
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..parallel.shm import Segment
from ..parallel.sync import (
    ABORT,
    COORD_SLEEP,
    FAILS,
    FINISHED,
    SLEEP,
    STATE,
    STATUS,
    STOP_ASKED,
    W_FAILED,
    W_FINISHED,
    W_GONE,
    Control,
    Waker,
)
from . import handshake
from .handshake import OK, Gate, NetError, connect

FRAME = struct.Struct("<BxxxIQ")  # kind, a (offset or name length), b (length or capacity)
K_CELLS, K_SEGMENT, K_SYNC = 1, 2, 3
SUPERVISOR = 0xFFFF  # the sender id of the supervisor (workers send their index)


def watched_by_supervisor(ctl: Control) -> frozenset[int]:
    """The cells whose change wakes the supervisor
    (:func:`reactors.parallel.supervisor.supervise`)."""
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
        # where the frame queued last for a node starts if it holds merged cells, else -1
        self.run: dict[int, int] = {}
        self.sent_bytes = 0
        try:
            for node, address in sorted(peers.items()):
                self.socks[node] = connect(address, secret, sender)
                self.out[node] = bytearray()
                self.run[node] = -1
        except BaseException:
            self.close()
            raise
        self.all = tuple(self.socks)

    def cell(self, index: int, value: int, merge: bool = False) -> None:
        """Queue cell ``index``'s new value (int64) for every other node. ``merge``: a
        :data:`reactors.cluster.net.DEFER` cell (data, or a batch's cell, which publishes only what
        was queued before it); it joins the frame of such cells queued just before it when
        it continues them: the receiver copies a frame's bytes in no particular order, which
        none of these cells minds, since none publishes another."""
        data = value.to_bytes(8, "little", signed=True)
        offset = 8 * index
        run = self.run
        for node, buf in self.out.items():
            at = run[node]
            if merge and at >= 0:
                _, a, b = FRAME.unpack_from(buf, at)
                if a + b == offset:
                    FRAME.pack_into(buf, at, K_CELLS, a, b + 8)
                    buf += data
                    continue
            run[node] = len(buf) if merge else -1
            buf += FRAME.pack(K_CELLS, offset, 8)
            buf += data

    def bytes_at(self, offset: int, data: Any, nodes: Iterable[int]) -> None:
        """Queue ``data`` (bytes-like) for byte ``offset`` of the control block on ``nodes``."""
        head = FRAME.pack(K_CELLS, offset, len(data))
        for node in nodes:
            buf = self.out.get(node)
            if buf is not None:
                self.run[node] = -1
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
            self.run[node] = -1

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
                self.run[node] = -1

    def queued(self) -> bool:
        """Whether frames wait for :meth:`flush`."""
        return any(self.out.values())

    def _drop(self, node: int) -> None:
        self.socks.pop(node).close()
        del self.out[node], self.run[node]

    def sync(self) -> None:
        """Send what is queued and wait until every receiver applied it."""
        for node, buf in self.out.items():
            self.run[node] = -1
            buf += FRAME.pack(K_SYNC, 0, 0)
        self.flush()
        for sock in self.socks.values():
            if handshake.recv_exactly(sock, 1) != OK:
                raise NetError("a receiver of the run closed its connection")

    def close(self) -> None:
        """Send what is queued (if the peers still listen) and close the connections."""
        with contextlib.suppress(OSError):
            self.flush()
        for sock in self.socks.values():
            sock.close()
        self.socks.clear()


class Receiver:
    """Applies what the other nodes send to this node's copy of the run: the control block
    ``ctl`` (a plain :class:`Control` on it) and the slot segments named after ``prefix``.
    Listens on ``host`` (the node's cluster address; port chosen by the kernel: ``address``).
    A connection first proves the run's ``secret`` to the gate thread, within
    ``handshake_s`` seconds (default :data:`reactors.cluster.handshake.AUTH_S`), with at most
    ``max_pending`` (default :data:`reactors.cluster.handshake.PENDING`) connections waiting at
    once; then a thread of its own applies its frames. After a read it rings ``bells[w]`` of each
    worker ``w`` of ``local`` that sleeps, and ``supervisor_bell`` (if any) when a cell the
    supervisor watches was written. When the supervisor's connection ends before the run
    finished (it died), the copy is marked aborted and every local bell rung; when a
    worker's does before it finished, the worker is marked gone
    (:data:`reactors.parallel.sync.W_GONE`) and the supervisor woken."""

    def __init__(
        self,
        ctl: Control,
        prefix: str,
        host: str,
        secret: bytes,
        local: Sequence[int],
        bells: Mapping[int, Waker],
        supervisor_bell: Waker | None = None,
        handshake_s: float | None = None,
        max_pending: int | None = None,
    ):
        self.prefix, self.secret = prefix, secret
        self.cells, self.raw = ctl.cells, ctl.raw  # the plain views: stores stay on this node
        self.local = [(ctl.worker_base(w) + SLEEP, bells[w]) for w in local]
        self.coordinator = bells[0] if 0 in local else None
        self.supervisor_bell = supervisor_bell
        self.watched = watched_by_supervisor(ctl)
        self.status_cells = [ctl.worker_base(w) + STATUS for w in range(ctl.workers)]
        self.segments: dict[str, Segment] = {}
        self.handshake_s = handshake.AUTH_S if handshake_s is None else handshake_s
        self.max_pending = handshake.PENDING if max_pending is None else max_pending
        self.sock = socket.create_server((host, 0))
        self.sock.setblocking(False)
        self.address: tuple[str, int] = (host, self.sock.getsockname()[1])
        self._closing = False
        self._conns: set[socket.socket] = set()  # the run's peers, each served by a thread
        self._stop_gate, wake = socket.socketpair()  # a byte on it ends the gate
        self._gate_thread = threading.Thread(
            target=self._gate, args=(wake,), daemon=True, name="lf-net-gate"
        )
        self._gate_thread.start()

    def _gate(self, wake: socket.socket) -> None:
        """The gate thread: accept connections and check their proofs
        (:class:`reactors.cluster.handshake.Gate`) until :meth:`close` writes on ``wake``."""
        gate = Gate(self.sock, self.secret, self.handshake_s, self.max_pending, self._admit, wake)
        try:
            gate.run()
        finally:
            gate.close()
            wake.close()

    def _admit(self, conn: socket.socket, sender: int) -> None:
        """``conn`` proved it belongs to the run, as ``sender``: serve it in a thread."""
        conn.setblocking(True)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conns.add(conn)
        threading.Thread(
            target=self._serve, args=(conn, sender), daemon=True, name="lf-net"
        ).start()

    def _serve(self, conn: socket.socket, sender: int) -> None:
        try:
            conn.sendall(OK)
            self._apply(conn)
        except (OSError, ValueError):
            pass
        finally:
            conn.close()
            self._conns.discard(conn)
            if sender == SUPERVISOR and not self._closing:
                self._orphaned()
            elif not self._closing:
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
        copy (:data:`reactors.parallel.sync.W_GONE`; it writes nothing more) and wake the
        supervisor."""
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
            self._stop_gate.send(b"\0")  # the gate ends, closing what waits for its proof
        self._gate_thread.join(1.0)
        self._stop_gate.close()
        for conn in list(self._conns):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for seg in self.segments.values():
            with contextlib.suppress(BufferError, OSError):
                seg.close()


def new_secret() -> bytes:
    """A run's HMAC key: 32 random bytes."""
    return secrets.token_bytes(32)


__all__ = [
    "FRAME",
    "K_CELLS",
    "K_SEGMENT",
    "K_SYNC",
    "Link",
    "NetError",
    "Receiver",
    "SUPERVISOR",
    "new_secret",
    "watched_by_supervisor",
]
