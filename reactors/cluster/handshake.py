"""The proof a connection to a node's receiver gives before anything it sends is read
(:mod:`reactors.cluster.wire`), and the receiver's gate, which asks for it.

The receiver sends a random nonce (:data:`NONCE` bytes); the peer answers HMAC-SHA256 of
it under the run's secret, then its sender id (2 bytes: a worker's index, or the
supervisor's); the receiver says :data:`OK` or :data:`REFUSED`. Other local processes may
connect too and must not starve the run's peers: one thread (the :class:`Gate`, a
:mod:`selectors` loop) handles every connection until it proved itself; each gets one
deadline for its whole proof (:data:`AUTH_S`, not a timeout per read: a peer sending a
byte now and then is cut at it), at most :data:`PENDING` wait at once (a new one beyond
closes the oldest), and a process out of file descriptors (EMFILE and its kin) closes the
oldest waiting connection, or pauses accepting for :data:`BACKOFF_S`, and goes on. A peer
of the run that was cut so connects again (:func:`connect`), until its own deadline. With
a peer of the run proving itself in about a millisecond, that takes a flood of well over
:data:`PENDING` connections a millisecond to keep it out.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import secrets
import selectors
import socket
import time
from collections.abc import Callable

NONCE = 32
_PROOF = b"lf-net/1"
AUTH_S = 5.0  # how long a connecting peer gets to prove it belongs to the run, s
PENDING = 128  # connections at most waiting for their proof at once
BACKOFF_S = 0.05  # out of descriptors with no connection to drop: accept again after this, s
ANSWER = 32 + 2  # a proof: the HMAC of the nonce, then the sender's id (2 bytes)
OK, REFUSED = b"\1", b"\0"  # the receiver's word after a proof
#: accept() errors after which the gate frees a descriptor or waits, then accepts again
SHORT = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class NetError(ConnectionError):
    """A peer of the run could not be reached, or did not prove it belongs to the run."""


def proof(secret: bytes, nonce: bytes) -> bytes:
    """The proof that a peer knows the run's ``secret``: HMAC-SHA256 of ``nonce``."""
    return hmac.new(secret, _PROOF + nonce, hashlib.sha256).digest()


def recv_exactly(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    """``n`` bytes from ``sock`` (fewer if it closes first); with a ``deadline``
    (``time.monotonic()``), raises TimeoutError past it."""
    data = b""
    while len(data) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out")
            sock.settimeout(left)
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def connect(address: tuple[str, int], secret: bytes, sender: int) -> socket.socket:
    """A connection to the receiver at ``address`` that proved the run's ``secret`` and said
    who sends (``sender``: a worker index or the supervisor's id), within :data:`AUTH_S`
    seconds: a receiver that closes the connection before its answer (it had too many
    waiting, or no descriptor left) is asked again. Raises :class:`NetError` when it cannot be
    reached, refuses the proof or does not answer in time."""
    where = f"the node at {address[0]}:{address[1]}"
    deadline = time.monotonic() + AUTH_S
    while True:
        left = deadline - time.monotonic()
        try:
            sock = socket.create_connection(address, timeout=max(left, 0.001))
        except OSError as e:
            raise NetError(f"cannot reach {where} ({e})") from e
        try:
            answer = prove(sock, secret, sender, deadline)
        except OSError as e:
            sock.close()
            raise NetError(f"{where} did not answer ({e})") from e
        except BaseException:
            sock.close()
            raise
        if answer == OK:
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        sock.close()
        if answer == REFUSED:
            raise NetError(f"{where} refused this run's proof")
        if time.monotonic() >= deadline:
            raise NetError(f"{where} did not answer (closed before the proof was checked)")
        time.sleep(0.005)  # cut while it waited: connect again


def prove(sock: socket.socket, secret: bytes, sender: int, deadline: float) -> bytes:
    """Answer the receiver's nonce on ``sock`` with the proof and ``sender``; the receiver's
    word (:data:`OK`, :data:`REFUSED`, or b"" when it closed first). Raises OSError
    (``TimeoutError`` past ``deadline``, a ``time.monotonic()`` time)."""
    nonce = recv_exactly(sock, NONCE, deadline)
    if len(nonce) < NONCE:
        return b""
    sock.sendall(proof(secret, nonce) + sender.to_bytes(2, "little"))
    return recv_exactly(sock, 1, deadline)


class _Pending:
    """A connection waiting for its proof: its ``nonce``, the ``answer`` so far, and the
    ``deadline`` (``time.monotonic()``) of the whole proof."""

    __slots__ = ("nonce", "answer", "deadline")

    def __init__(self, nonce: bytes, deadline: float):
        self.nonce, self.answer, self.deadline = nonce, bytearray(), deadline


class Gate:
    """A receiver's gate: the connections to ``listener`` (a non-blocking listening socket)
    until they prove the run's ``secret``, in one :mod:`selectors` loop (:meth:`run`, in the
    receiver's gate thread, until a byte arrives on ``wake``). A connection gets
    ``handshake_s`` seconds for its whole proof; at most ``max_pending`` wait at once (a new
    one beyond closes the oldest). One that proved itself goes to ``admit(conn, sender)``;
    the gate then answers no more for it (the receiver sends :data:`OK` and reads its
    frames). ``pending`` keeps the waiting ones oldest first."""

    def __init__(
        self,
        listener: socket.socket,
        secret: bytes,
        handshake_s: float,
        max_pending: int,
        admit: Callable[[socket.socket, int], None],
        wake: socket.socket,
    ):
        self.listener, self.secret, self.admit, self.wake = listener, secret, admit, wake
        self.handshake_s, self.max_pending = handshake_s, max_pending
        self.sel = selectors.DefaultSelector()
        self.sel.register(wake, selectors.EVENT_READ)
        self.sel.register(self.listener, selectors.EVENT_READ)
        self.pending: dict[socket.socket, _Pending] = {}
        self.paused_until = 0.0  # out of descriptors: not accepting until then

    def run(self) -> None:
        """Until woken by the receiver's close: read the proofs that arrived, accept the
        new connections, drop those past their deadline."""
        while True:
            ready = self.sel.select(self._timeout())
            accept = False
            for key, _ in ready:
                if key.fileobj is self.wake:
                    return
                if key.fileobj is self.listener:
                    accept = True
                else:
                    self._read(key.fileobj)  # type: ignore[arg-type]  # a registered socket
            now = time.monotonic()
            if self.paused_until and now >= self.paused_until:
                self.paused_until = 0.0
                self.sel.register(self.listener, selectors.EVENT_READ)
            if accept and not self._accept(now):
                return  # the listener is closed
            for conn, p in list(self.pending.items()):
                if p.deadline <= now:
                    self._drop(conn)

    def _timeout(self) -> float | None:
        """Seconds until the next deadline or the end of a pause (None: none)."""
        ends = [p.deadline for p in self.pending.values()]
        if self.paused_until:
            ends.append(self.paused_until)
        return max(0.0, min(ends) - time.monotonic()) if ends else None

    def _accept(self, now: float) -> bool:
        """Accept what waits in the listener's queue (at most ``max_pending`` at a time:
        the proofs that arrive meanwhile are read first), sending each its nonce; on a lack
        of descriptors, drop the oldest waiting connection and go on, or pause accepting for
        :data:`BACKOFF_S`. False once the listener is closed."""
        for _ in range(self.max_pending):
            try:
                conn, _ = self.listener.accept()
            except BlockingIOError:
                return True
            except OSError as e:
                if e.errno == errno.ECONNABORTED:
                    continue
                if e.errno not in SHORT:
                    return False
                if self.pending:
                    self._drop(next(iter(self.pending)))
                    continue
                self.sel.unregister(self.listener)
                self.paused_until = now + BACKOFF_S
                return True
            if len(self.pending) >= self.max_pending:
                self._drop(next(iter(self.pending)))
            self._greet(conn, now)
        return True

    def _greet(self, conn: socket.socket, now: float) -> None:
        """Send a new connection its nonce and wait for its proof."""
        nonce = secrets.token_bytes(NONCE)
        conn.setblocking(False)
        try:
            conn.send(nonce)  # 32 bytes into an empty send buffer
        except OSError:
            conn.close()
            return
        self.pending[conn] = _Pending(nonce, now + self.handshake_s)
        self.sel.register(conn, selectors.EVENT_READ)

    def _read(self, conn: socket.socket) -> None:
        """Read what came of ``conn``'s proof (never a byte beyond it); once whole, admit
        the connection to the run or refuse it."""
        p = self.pending[conn]
        try:
            got = conn.recv(ANSWER - len(p.answer))
        except BlockingIOError:
            return
        except OSError:
            got = b""
        if not got:
            self._drop(conn)
            return
        p.answer += got
        if len(p.answer) < ANSWER:
            return
        self.sel.unregister(conn)
        del self.pending[conn]
        if hmac.compare_digest(bytes(p.answer[:32]), proof(self.secret, p.nonce)):
            try:
                self.admit(conn, int.from_bytes(p.answer[32:], "little"))
            except (OSError, RuntimeError):  # no thread to serve it: the peer tries again
                conn.close()
            return
        with contextlib.suppress(OSError):
            conn.send(REFUSED)
        conn.close()

    def _drop(self, conn: socket.socket) -> None:
        self.sel.unregister(conn)
        del self.pending[conn]
        conn.close()

    def close(self) -> None:
        """Close the listener and every connection still waiting for its proof."""
        for conn in list(self.pending):
            self._drop(conn)
        self.sel.close()
        self.listener.close()


__all__ = [
    "AUTH_S",
    "Gate",
    "NetError",
    "OK",
    "PENDING",
    "REFUSED",
    "connect",
    "proof",
    "prove",
    "recv_exactly",
]
