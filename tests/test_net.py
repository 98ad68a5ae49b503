"""The network transport between nodes (reactors.cluster.net), in one process: a writer's node and a
reader's node are two control blocks (bytearrays) and two segment prefixes, joined by TCP on
127.0.0.1. The runs over a Ray cluster are in test_cluster.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from reactors.cluster import net
from reactors.cluster.net import NetChannels, NetControl, NetPlan
from reactors.cluster.ray_actor import ReceiverProcess
from reactors.cluster.wire import FRAME, K_CELLS, SUPERVISOR, Link, NetError, Receiver, new_secret
from reactors.core.port import Port
from reactors.parallel import shm
from reactors.parallel.sync import (
    DONE,
    GO_M,
    GO_SEQ,
    GO_T,
    SLEEP,
    STATE,
    STATUS,
    W_FINISHED,
    W_GONE,
    W_READY,
    Control,
)

WORKERS, CHANNELS = 2, 3


class _Bell:
    def __init__(self) -> None:
        self.rung = 0

    def ring(self) -> None:
        self.rung += 1


def _until(cond, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.001)
    return cond()


@pytest.fixture
def nodes():
    """Node 0 (worker 0 writes there) and node 1 (worker 1's copy, with a receiver): the
    sending NetControl, the receiving Control, the receiver, worker 1's bell and the
    prefixes; every segment is unlinked at the end."""
    base = f"lftest{os.getpid()}x{time.monotonic_ns() % 10**6}"
    prefixes = (base, base + "n1")
    secret = new_secret()
    far = Control(bytearray(Control.size(WORKERS, CHANNELS)), WORKERS, CHANNELS)
    bell = _Bell()
    receiver = Receiver(far, prefixes[1], "127.0.0.1", secret, [1], {1: bell})
    plan = NetPlan((0, 1), prefixes, (("127.0.0.1", 0), receiver.address), secret)
    link = Link({1: receiver.address}, secret, 0)
    near = NetControl(bytearray(Control.size(WORKERS, CHANNELS)), WORKERS, CHANNELS, 0, link, 0)
    near.plain.init()
    link.bytes_at(0, near.raw, link.all)  # as the supervisor's snapshot does
    link.sync()
    yield near, far, receiver, bell, plan
    near.release()
    receiver.close()
    assert shm.unlink_prefix(base) >= 0
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(base)]


def test_a_snapshot_and_each_write_reach_the_other_node_in_order(nodes):
    near, far, _, bell, _ = nodes
    assert bytes(far.raw) == bytes(near.raw)  # the snapshot, applied before sync returned
    assert far.cells[GO_SEQ] == -1
    # GO_T and GO_M wait for GO_SEQ, which publishes them: all three arrive together
    near.cells[GO_T] = 5_000
    near.cells[GO_M] = 2
    time.sleep(0.05)
    assert far.cells[GO_T] == 0
    far.cells[far.worker_base(1) + SLEEP] = 1  # worker 1 sleeps there: the receiver rings
    near.cells[GO_SEQ] = 7
    assert _until(lambda: far.cells[GO_SEQ] == 7)
    assert (far.cells[GO_T], far.cells[GO_M]) == (5_000, 2)
    assert _until(lambda: bell.rung >= 1)
    # a sleeping announcement stays on its node
    near.cells[near.worker_base(0) + SLEEP] = 1
    near.cells[near.worker_base(0) + DONE] = 3
    assert _until(lambda: far.cells[far.worker_base(0) + DONE] == 3)
    assert far.cells[far.worker_base(0) + SLEEP] == 0


def test_a_free_running_tag_note_goes_only_to_the_supervisors_node(nodes):
    near, far, receiver, _, _ = nodes
    near.note_tag(4_000, 1, 9)  # worker 0 on node 0, the supervisor's: nothing to send
    assert (near.cells[GO_T], near.cells[GO_M], near.cells[GO_SEQ]) == (4_000, 1, 9)
    near.link.sync()
    assert far.cells[GO_SEQ] == -1
    # worker 0 on node 1 (``far``'s receiver now playing node 0's): queued for node 0 and
    # sent with the next flush, GO_SEQ after GO_T and GO_M
    link = Link({0: receiver.address}, receiver.secret, 0)
    other = NetControl(bytearray(Control.size(WORKERS, CHANNELS)), WORKERS, CHANNELS, 0, link, 1)
    other.note_tag(6_000, 3, 11)
    time.sleep(0.05)
    assert far.cells[GO_SEQ] == -1
    other.flush()
    assert _until(lambda: far.cells[GO_SEQ] == 11)
    assert (far.cells[GO_T], far.cells[GO_M]) == (6_000, 3)
    other.release()


def test_reports_keep_their_seqlock_across_nodes(nodes):
    near, far, *_ = nodes
    for k in range(50):
        near.write_report(0, 1000 + k, k, 2000 + k, 0)
    b = far.worker_base(0)
    time.sleep(0.05)
    assert far.cells[b + 1] != 1049  # queued until the next sent cell, or a flush
    near.flush()
    assert _until(lambda: far.cells[b + 1] == 1049)  # NEXT_T
    assert far.cells[b + 5] == 100 and far.cells[b + 5] % 2 == 0  # REV: even, 2 per report


@pytest.mark.parametrize(
    "value",
    [
        17,
        2.5,
        None,
        True,
        (0.5, 1.0, False),
        {"reward": 1.0, "done": False},
        np.arange(4, dtype=np.float32),  # inline (packed)
        np.arange(1200, dtype=np.float64).reshape(300, 4),  # a slot segment, no pickle
        ["a", b"x" * 5000, {"k": (1, 2)}],  # a large pickle in a slot segment
    ],
    ids=["int", "float", "none", "bool", "tuple", "dict", "small-array", "array", "pickle"],
)
def test_values_published_on_one_node_are_read_on_the_other(nodes, value):
    near, far, _, _, plan = nodes
    channels = NetChannels(near, plan.prefixes[0], 0, plan)
    src, dst = Port("src"), Port("dst")
    writer = channels.writer(0, (1,), src)
    reader = shm.Reader(far, 0, 1, dst, plan.prefixes[1], [])
    state = far.channel_base(0)
    for seq in range(3):
        src._v, src._p = value, True
        writer.publish(seq)
        near.cells[GO_SEQ] = seq  # a sent cell: what was queued goes with it
        assert _until(lambda seq=seq: far.cells[state] == 2 * seq + 1)
        dst._p = False
        reader.receive(seq)
        got = dst.value
        if isinstance(value, np.ndarray):
            assert got.dtype == value.dtype and got.shape == value.shape
            assert (got == value).all()
        else:
            assert got == value
    del got
    reader.maps.clear()
    channels.close()


def test_an_absent_value_is_published_as_absent(nodes):
    near, far, _, _, plan = nodes
    channels = NetChannels(near, plan.prefixes[0], 0, plan)
    src = Port("src")
    writer = channels.writer(1, (1,), src)
    src._p = False
    writer.publish(4)
    assert len(near.link.out[1]) == FRAME.size + 8  # its state cell alone
    near.cells[GO_SEQ] = 4
    assert _until(lambda: far.cells[far.channel_base(1)] == 8)


def test_a_peer_without_the_run_secret_is_refused_and_nothing_is_applied(nodes):
    near, far, receiver, _, _ = nodes
    before = bytes(far.raw)
    with pytest.raises(NetError, match="refused this run's proof|did not answer"):
        Link({1: receiver.address}, new_secret(), SUPERVISOR)
    # a peer that sends frames straight away: they are read as its proof, which fails
    s = socket.create_connection(receiver.address)
    s.recv(32)
    frame = FRAME.pack(K_CELLS, 8 * STATE, 8) + (3).to_bytes(8, "little")
    s.sendall(frame * 8)
    try:
        answer = s.recv(1)
    except ConnectionResetError:  # closed with the frames unread
        answer = b""
    assert answer in (b"", b"\0")  # refused
    s.close()
    time.sleep(0.05)
    assert bytes(far.raw) == before


def test_a_receiver_listens_only_on_the_address_it_was_given(nodes):
    _, _, receiver, _, _ = nodes
    host, port = receiver.address
    assert host == "127.0.0.1"
    addresses = {
        a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    } - {"127.0.0.1", "127.0.1.1"}
    for other in addresses:
        with pytest.raises(OSError):
            socket.create_connection((other, port), timeout=1).close()


def test_the_supervisor_connection_ending_early_aborts_that_node(nodes):
    _, far, receiver, bell, plan = nodes
    sup = Link({1: receiver.address}, plan.secret, SUPERVISOR)
    sup.close()  # as if the supervisor died: the run has not finished
    assert _until(lambda: far.cells[STATE] == 3)  # ABORT
    assert bell.rung >= 1


def test_a_snapshot_larger_than_the_receive_buffer_arrives_whole():
    secret = new_secret()
    workers, channels = 4, 200  # a control block of ~130 KiB
    far = Control(bytearray(Control.size(workers, channels)), workers, channels)
    receiver = Receiver(far, "lftestbig", "127.0.0.1", secret, [], {})
    near = Control(bytearray(Control.size(workers, channels)), workers, channels)
    near.init()
    near.raw[100:108] = b"abcdefgh"
    link = Link({1: receiver.address}, secret, SUPERVISOR)
    try:
        assert len(near.raw) > 1 << 16
        link.bytes_at(0, near.raw, link.all)
        link.sync()
        assert bytes(far.raw) == bytes(near.raw)
    finally:
        link.close()
        receiver.close()


def test_a_worker_whose_connection_closes_before_it_finished_is_marked_gone(nodes):
    _, far, receiver, _, plan = nodes
    sup = _Bell()
    receiver.supervisor_bell = sup
    status = far.worker_base(0) + STATUS
    done = Link({1: receiver.address}, plan.secret, 0)
    done.cell(status, W_FINISHED)
    done.close()  # finished first: nothing to say
    time.sleep(0.05)
    assert far.cells[status] == W_FINISHED
    far.cells[status] = W_READY
    dead = Link({1: receiver.address}, plan.secret, 0)
    dead.close()  # as when its process or its node died
    assert _until(lambda: far.cells[status] == W_GONE)
    assert sup.rung >= 1


def test_a_kept_done_goes_with_the_next_send_and_one_kept_too_long_pauses_keeping(nodes):
    near, far, *_ = nodes
    done = far.worker_base(0) + DONE
    near.set_done(0, 5)  # a worker that must not wait: sent at once
    assert not near.link.queued()
    assert _until(lambda: far.cells[done] == 5)
    near.set_done(0, 6, may_wait=True)  # kept for the worker's next send
    assert near.link.queued() and near.local_cells[near.worker_base(0) + DONE] == 6
    near.flush()  # soon after (e.g. the first publication of the next tag)
    assert _until(lambda: far.cells[done] == 6)
    near.set_done(0, 7, may_wait=True)
    assert near.link.queued()
    # the next DONE while that one is still kept: the others waited a whole tag for it,
    # so this one goes at once (7 before it) and DONE cells are sent at once for a pause
    near.set_done(0, 8, may_wait=True)
    assert not near.link.queued()
    assert _until(lambda: far.cells[done] == 8)
    pause = net._PAUSE[0]
    for seq in range(9, 8 + pause):
        near.set_done(0, seq, may_wait=True)
        assert not near.link.queued()
    near.set_done(0, 8 + pause, may_wait=True)  # then kept again
    assert near.link.queued()
    time.sleep(0.002)  # kept longer than a long first reaction may take
    near.flush()
    near.set_done(0, 9 + pause, may_wait=True)  # a pause again (twice as long)
    assert not near.link.queued() and near.pause == 4 * pause
    assert _until(lambda: far.cells[done] == 9 + pause)


def test_contiguous_data_cells_travel_as_one_frame(nodes):
    near, far, *_ = nodes
    link = near.link
    b = near.worker_base(0)
    for k, cell in enumerate(range(b + 1, b + 5)):  # a report's four data cells
        link.cell(cell, 100 + k, merge=True)
    assert len(link.out[1]) == FRAME.size + 4 * 8  # one frame
    link.cell(b + 7, 1, merge=True)  # not next to them: a frame of its own
    link.cell(b + 8, 2)  # a cell that may publish the ones before it: never merged
    assert len(link.out[1]) == 3 * FRAME.size + 6 * 8
    link.flush()
    assert _until(lambda: far.cells[b + 8] == 2)
    assert list(far.cells[b + 1 : b + 5]) == [100, 101, 102, 103]


def test_a_receiver_process_stores_what_arrives_and_ends_when_closed():
    prefix = f"lftest{os.getpid()}rp{time.monotonic_ns() % 10**6}"
    seg = shm.Segment(prefix + "ctl", True, Control.size(WORKERS, CHANNELS))
    far = Control(seg.buf, WORKERS, CHANNELS)
    secret = new_secret()
    proc = ReceiverProcess(far, prefix, "127.0.0.1", secret, [1], {1: _Bell()})
    assert proc.pid != os.getpid() and proc.address[0] == "127.0.0.1"
    link = Link({1: proc.address}, secret, 0)
    link.cell(GO_SEQ, 42)
    link.flush()
    assert _until(lambda: far.cells[GO_SEQ] == 42)  # written by the other process
    link.close()
    proc.close()
    assert not os.path.exists(f"/proc/{proc.pid}")  # ended and reaped
    far.release()
    seg.close()
    assert shm.unlink_prefix(prefix) >= 1


# --------------------------------------------------------------------------- a receiver under
# load from peers that are not of the run: idle connections, a peer that answers one byte at a
# time (slow loris), a process out of file descriptors. A peer of the run still proves itself
# and delivers within BOUND_S (a few milliseconds on an idle machine).

BOUND_S = 1.0


@pytest.fixture
def short_handshakes(monkeypatch):
    """Receivers made meanwhile give a connection 0.5 s to prove itself and keep at most 16
    waiting for their proof."""
    from reactors.cluster import handshake

    monkeypatch.setattr(handshake, "AUTH_S", 0.5)
    monkeypatch.setattr(handshake, "PENDING", 16)


def _delivers(address, secret, value: int) -> float:
    """Seconds a peer of the run takes to connect to the receiver at ``address``, prove
    itself, write ``GO_SEQ = value`` and see it applied (Link.sync)."""
    t0 = time.monotonic()
    link = Link({1: address}, secret, 0)
    link.cell(GO_SEQ, value)
    link.sync()
    link.close()
    return time.monotonic() - t0


def _closed_by_peer(s: socket.socket, within_s: float) -> bool:
    """Whether the other end closes ``s`` within ``within_s`` seconds (what it sends, the
    nonce, is read and dropped)."""
    s.settimeout(within_s)
    end = time.monotonic() + within_s
    try:
        while time.monotonic() < end:
            if not s.recv(64):
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return False


def test_idle_connections_neither_pile_up_nor_keep_a_peer_of_the_run_out(short_handshakes):
    secret = new_secret()
    far = Control(bytearray(Control.size(WORKERS, CHANNELS)), WORKERS, CHANNELS)
    threads = threading.active_count()
    receiver = Receiver(far, "lftestidle", "127.0.0.1", secret, [], {})
    idle = [socket.create_connection(receiver.address) for _ in range(200)]
    try:
        assert _delivers(receiver.address, secret, 7) < BOUND_S
        assert far.cells[GO_SEQ] == 7
        assert threading.active_count() <= threads + 2  # not a thread per connection
        assert sum(_closed_by_peer(s, 0.01) for s in idle) >= 200 - 16  # at most 16 wait
        assert _until(lambda: not receiver._conns)  # the run's peer left: forgotten
    finally:
        for s in idle:
            s.close()
        receiver.close()


def test_a_peer_answering_one_byte_at_a_time_is_cut_at_the_handshake_deadline(
    short_handshakes,
):
    secret = new_secret()
    far = Control(bytearray(Control.size(WORKERS, CHANNELS)), WORKERS, CHANNELS)
    receiver = Receiver(far, "lftestslow", "127.0.0.1", secret, [], {})
    slow = socket.create_connection(receiver.address)
    try:
        slow.recv(32)
        t0 = time.monotonic()
        cut = False
        while not cut and time.monotonic() - t0 < 5:
            try:
                slow.sendall(b"x")  # one byte of the 34 of a proof, every 0.1 s
            except OSError:
                cut = True
                break
            cut = _closed_by_peer(slow, 0.1)
        took = time.monotonic() - t0
        assert cut and took < 0.5 + BOUND_S, took
        assert _delivers(receiver.address, secret, 9) < BOUND_S
    finally:
        slow.close()
        receiver.close()


_OUT_OF_FDS = """
import resource, sys, threading
from reactors.parallel.sync import Control, GO_SEQ
from reactors.cluster.wire import Receiver
import reactors.cluster.handshake as handshake
handshake.AUTH_S = 2.0
secret = bytes.fromhex(sys.argv[1])
far = Control(bytearray(Control.size(2, 3)), 2, 3)
receiver = Receiver(far, "lftestfds", "127.0.0.1", secret, [], {})
import os
used = len(os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (used + 10, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
print(receiver.address[1], flush=True)
sys.stdin.readline()
print(far.cells[GO_SEQ], flush=True)
"""


def test_a_receiver_out_of_file_descriptors_keeps_accepting(short_handshakes):
    """Idle connections fill the receiving process's descriptor table (EMFILE on accept):
    it drops the oldest that has not proved itself and goes on accepting."""
    secret = new_secret()
    child = subprocess.Popen(
        [sys.executable, "-c", _OUT_OF_FDS, secret.hex()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    idle: list[socket.socket] = []
    try:
        address = ("127.0.0.1", int(child.stdout.readline()))
        idle = [socket.create_connection(address) for _ in range(40)]
        time.sleep(0.2)  # the receiver has met EMFILE
        assert _delivers(address, secret, 42) < BOUND_S
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline() == "42\n"
    finally:
        for s in idle:
            s.close()
        child.kill()
        child.communicate()
