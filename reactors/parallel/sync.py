"""Waiting and waking between workers and the coordinator (DESIGN.md, "Truly parallel Python").

Everything the parallel backends agree on per tag lives in one :class:`Control` block: an array
of int64 cells, in shared memory for processes (``multiprocessing.shared_memory``) and in a
plain ``bytearray`` for threads. Every cell has exactly one writer, so no cell needs a lock:
a writer stores the data cells first and the *publishing* cell (a sequence number) last; a
reader waits for the publishing cell, then reads the data (x86-64 keeps stores in order; see
docs/parallel.md, "Memory order").

A waiter (:func:`wait`) first polls its condition for at most ``spin_ns`` (much shorter while
other tasks keep all the cores busy: :class:`Contention`), then announces that it sleeps (its
``SLEEP`` cell), re-checks, and blocks in the kernel on its :class:`Bell` (an ``eventfd`` for processes, a
``threading.Event`` for threads) with a timeout that grows from 1 ms to 50 ms.
A waker rings a bell only when the owner announced it sleeps (:func:`ring_if_sleeping`). The
timeout bounds the cost of the one unfenced race (store/load reordering between the
announcement and the re-check) and lets waiters notice an abort or a dead parent.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable, Iterable
from time import perf_counter_ns
from typing import Any, Final, Protocol

from mypy_extensions import mypyc_attr

from ..core.tag import FOREVER
from .contention import CONTENTION

# --- cell layout (int64 indices) -------------------------------------------------------------
# (Final: the compiled modules use the values, not a lookup of the name)
GO_SEQ: Final = 0
GO_T: Final = 1
GO_M: Final = 2
STOP_T: Final = 3
STOP_M: Final = 4
STATE: Final = 5
START_T: Final = 6
COORD_SLEEP: Final = 7
FAILS: Final = 8
PRINTED: Final = 9
# set by the supervisor on a signal to the exit status (128 + its number): stop at the next tag
STOP_ASKED: Final = 10
# the decision of a free-running run's combining tree (reactors.parallel.agreement): the tag
# after tag number AGREE_SEQ, as (time, microstep, stop time, stop microstep) at AGREE[parity]
AGREE_SEQ: Final = 16
AGREE: Final = (17, 21)
HEADER: Final = 32
# STATE values
STARTING: Final = 0
RUNNING: Final = 1
FINISHED: Final = 2
ABORT: Final = 3
# per-worker cells, at worker_base(w) + ...; NEXT_T..REQ_M: the report of the coordinated
# protocol; REPORT[p] + (0, 1, 2, 3): that of the free-running one for tags of parity p
DONE: Final = 0
NEXT_T: Final = 1
NEXT_M: Final = 2
REQ_T: Final = 3
REQ_M: Final = 4
REV: Final = 5
SLEEP: Final = 6
STATUS: Final = 7
CODE: Final = 8
# a worker with children in the combining tree (reactors.parallel.agreement): the last tag
# number its subtree completed, and the subtree's combined report by parity
SUB_DONE: Final = 9
REPORT: Final = (NEXT_T, 10)
# while a worker sleeps until a batch's crossings arrive (reactors.parallel.worker_scheduler): the
# batch's cell and the value it waits for there (WAIT_CELL 0: it sleeps on something else)
WAIT_CELL: Final = 14
WAIT_AT: Final = 15
# a worker that skips tags (a free-running run, :mod:`reactors.parallel.skipped_tags`):
# from tag number SKIP_FROM on, while its DONE stays below SKIP_FROM, it runs nothing and
# publishes nothing at any tag before (SKIP_T, SKIP_M), its earliest event, but the stop tag;
# worker 0 calls it back at tag number CALL_SEQ, the tag (CALL_T, CALL_M) with the stop tag
# (CALL_ST, CALL_SM). SKIP_* are written by the worker, CALL_* by worker 0.
SKIP_T: Final = 16
SKIP_M: Final = 17
SKIP_FROM: Final = 18
CALL_T: Final = 19
CALL_M: Final = 20
CALL_ST: Final = 21
CALL_SM: Final = 22
CALL_SEQ: Final = 23
SUBREP: Final = (24, 28)
WORKER_STRIDE: Final = 32
# STATUS values
W_STARTING: Final = 0
W_READY: Final = 1
W_FAILED: Final = 2
W_FINISHED: Final = 3
# set on a node's copy by the network transport's receiver (reactors.cluster.wire) when a worker's
# connection closed before it finished: it died, or its node did
W_GONE: Final = 4
# per-channel cells, at channel_base(c) + ...: the state and the kind of value, then
# INLINE_CELLS cells where small values travel inline (so that a small value shares a cache
# line with its state: one line for the writer to take and the reader to fetch), then the
# cells of a value in a slot, the codec's header generation (C_PACK), and HELD + w, reader
# w's bitmask of held slots; a channel's cells start on a 64-byte line
C_STATE: Final = 0
C_KIND: Final = 1
C_INLINE: Final = 2
INLINE_CELLS: Final = 64
C_SLOT: Final = C_INLINE + INLINE_CELLS
C_GEN: Final = C_SLOT + 1
C_NBYTES: Final = C_SLOT + 2
C_META: Final = C_SLOT + 3
C_PACK: Final = C_SLOT + 4
C_HELD: Final = C_PACK + 1
# per-batch cells (reactors.parallel.topology.Batch), at batch_cell(b): ``seq * BATCH_SEQ + k`` once
# the first k crossings of the batch are published for tag number ``seq`` (a batch's crossings
# are published in order, each as soon as its last writer ran); one 64-byte line per batch, so
# that workers publishing batches share no cache line
BATCH_STRIDE: Final = 8
BATCH_SEQ: Final = 1 << 20  # more than the crossings of any batch

NONE_T: Final = FOREVER  # "no tag"


class Aborted(Exception):
    """The coordinator aborted the run (another worker failed, Ctrl-C, a worker died)."""


Idle = Callable[[list[int]], None]
"""Called by a waiter after every blocking slice with the ready file descriptors; may raise
(:class:`reactors.parallel.transport.WorkerDied`, :class:`Aborted`) to end the wait."""


class Waker(Protocol):
    """What rings a waiter's bell (from any worker, thread or the supervisor)."""

    def ring(self) -> None:
        """Wake the waiter (or make its next wait return at once)."""


class Bell(Waker, Protocol):
    """A kernel wake-up of one waiter (:func:`wait`): :class:`FdBell` or :class:`ThreadBell`."""

    def clear(self) -> None:
        """Forget earlier rings."""

    def wait(self, timeout_s: float) -> list[int]:
        """Block until rung or ``timeout_s`` seconds; the ready file descriptors."""


@mypyc_attr(allow_interpreted_subclasses=True)  # reactors.cluster.net.NetControl
class Control:
    """The int64 cell array shared by the coordinator and ``workers`` workers with ``channels``
    crossing channels published in ``batches`` batches. ``buf`` is a writable buffer of at
    least :meth:`size` bytes (zeroed);
    ``cells`` is the int64 memoryview the hot paths index directly; ``local_cells`` is the
    same here (across nodes, :class:`reactors.cluster.net.NetControl`, ``cells`` also sends what is
    written and ``local_cells`` serves reads and the cells only this node reads); ``floats``
    views the cells as float64 and ``raw`` as bytes (for values that travel inline)."""

    def __init__(self, buf: bytearray | memoryview, workers: int, channels: int, batches: int = 0):
        self.workers = workers
        self.channels = channels
        self.batches = batches
        self.raw = memoryview(buf).cast("B")[: self.size(workers, channels, batches)]
        self.cells = self.raw.cast("q")
        self.local_cells = self.cells
        self.floats = self.raw.cast("d")
        self.channel_stride = self.stride(workers)
        self.segment: Any = None  # the shared-memory segment under ``buf``, kept mapped
        # whether every worker of the run shares this block in one host's memory (not across
        # nodes: reactors.cluster.net.NetControl)
        self.one_host = True

    @staticmethod
    def size(workers: int, channels: int, batches: int = 0) -> int:
        """Bytes needed for this many workers, crossing channels and batches."""
        per_channel = Control.stride(workers)
        return 8 * (
            HEADER + WORKER_STRIDE * workers + per_channel * channels + BATCH_STRIDE * batches
        )

    @staticmethod
    def stride(workers: int) -> int:
        """Cells per channel: its cells for ``workers`` workers, rounded up to whole 64-byte
        lines."""
        return -(-(C_HELD + workers) // 8) * 8

    def worker_base(self, w: int) -> int:
        return HEADER + WORKER_STRIDE * w

    def channel_base(self, c: int) -> int:
        return HEADER + WORKER_STRIDE * self.workers + self.channel_stride * c

    def batch_cell(self, b: int) -> int:
        """The cell of batch ``b``: how far it is published (:data:`BATCH_SEQ`)."""
        return (
            HEADER
            + WORKER_STRIDE * self.workers
            + self.channel_stride * self.channels
            + BATCH_STRIDE * b
        )

    def init(self) -> None:
        """Initial values (by the coordinator, before any worker starts)."""
        c = self.cells
        c[GO_SEQ] = c[PRINTED] = c[AGREE_SEQ] = -1
        c[STATE] = STARTING
        for w in range(self.workers):
            b = self.worker_base(w)
            c[b + DONE] = c[b + SKIP_FROM] = c[b + CALL_SEQ] = c[b + SUB_DONE] = -1
            c[b + NEXT_T] = c[b + REQ_T] = NONE_T
        for ch in range(self.channels):
            c[self.channel_base(ch) + C_STATE] = -2
        for b in range(self.batches):
            c[self.batch_cell(b)] = -1

    def inline_base(self, c: int) -> int:
        """The first inline cell of channel ``c``."""
        return self.channel_base(c) + C_INLINE

    def release(self) -> None:
        """Drop the views so the underlying shared memory can be closed."""
        self.floats.release()
        self.cells.release()
        self.raw.release()

    # --- the seqlock-protected report of a worker (next event tag and stop request) -------

    def flush(self) -> None:
        """Make this process's writes so far visible to every worker: here they already are
        (the network transport's block, :class:`reactors.cluster.net.NetControl`, sends them)."""

    def write_cells(self, first: int, values: tuple[int, int, int, int]) -> None:
        """Store the four ``values`` in the cells from ``first`` on: data cells that a later
        write publishes (a free-running worker's report, published by its ``DONE``)."""
        c = self.cells
        c[first], c[first + 1], c[first + 2], c[first + 3] = values

    def set_done(self, w: int, seq: int, may_wait: bool = False) -> None:
        """Worker ``w`` completed tag number ``seq`` (its ``DONE`` cell). ``may_wait``: the
        worker agrees on the next tag itself (a free-running run) and did not finish, so a
        transport between nodes may send this with the worker's next send (see
        :meth:`reactors.cluster.net.NetControl.set_done`); here it is visible at once."""
        self.cells[self.worker_base(w) + DONE] = seq

    def note_tag(self, t: int, m: int, seq: int) -> None:
        """Worker 0 of a free-running run records the tag it entered (``t`` ns, microstep
        ``m``, tag number ``seq``) in ``GO_T``/``GO_M``/``GO_SEQ``: no worker waits on these
        cells then; the supervisor reads them (which tag's output may be pending, where an
        unfinished run ended: :func:`reactors.parallel.worker_records.cut_tag`)."""
        c = self.cells
        c[GO_T], c[GO_M], c[GO_SEQ] = t, m, seq

    def write_report(self, w: int, next_t: int, next_m: int, req_t: int, req_m: int) -> None:
        """Worker ``w`` publishes its earliest pending event and its stop request (the only
        writer of these cells; the coordinator reads them under the seqlock). Visible to
        workers of other nodes after the next sent cell or :meth:`flush`."""
        c = self.cells
        b = self.worker_base(w)
        c[b + REV] += 1  # odd: being written
        c[b + NEXT_T] = next_t
        c[b + NEXT_M] = next_m
        c[b + REQ_T] = req_t
        c[b + REQ_M] = req_m
        c[b + REV] += 1  # even: consistent


@mypyc_attr(allow_interpreted_subclasses=True)  # reactors.cluster.ray_actor.FifoBell
class FdBell:
    """A kernel wake-up for processes: an ``eventfd`` (non-blocking), waited on with poll.

    ``extra``: more file descriptors that end a wait when readable (e.g. process sentinels).
    """

    def __init__(self, fd: int, extra: Iterable[int] = ()):
        self.fd = fd
        self.poll = select.poll()
        self.poll.register(fd, select.POLLIN)
        for x in extra:
            self.poll.register(x, select.POLLIN)

    @staticmethod
    def new() -> int:
        """A fresh non-blocking eventfd (the caller owns and closes it)."""
        return os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def ring(self) -> None:
        os.eventfd_write(self.fd, 1)

    def clear(self) -> None:
        try:
            os.eventfd_read(self.fd)
        except BlockingIOError:
            pass

    def wait(self, timeout_s: float) -> list[int]:
        """Block until rung, an extra fd is readable, or ``timeout_s``; the ready fds."""
        return [fd for fd, _ in self.poll.poll(timeout_s * 1000.0)]


class ThreadBell:
    """A wake-up for threads of one process."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def ring(self) -> None:
        self.event.set()

    def clear(self) -> None:
        self.event.clear()

    def wait(self, timeout_s: float) -> list[int]:
        self.event.wait(timeout_s)
        return []


def all_done(cells: memoryview, done_cells: Iterable[int], seq: int) -> bool:
    """Whether every worker published ``DONE`` of tag number ``seq`` (``done_cells``: their
    ``DONE`` cells), or one failed, or the run was aborted (then waiting for the rest would
    never end)."""
    for cell in done_cells:
        if cells[cell] < seq:
            return cells[FAILS] != 0 or cells[STATE] == ABORT
    return True


def ring_if_sleeping(cells: memoryview, sleep_cell: int, bell: Waker) -> None:
    """Wake the owner of ``bell`` if it announced (in ``cells[sleep_cell]``) that it sleeps."""
    if cells[sleep_cell]:
        bell.ring()


def ring_if_waiting(cells: memoryview, base: int, bell: Waker, published: list[int]) -> None:
    """After a worker published crossings to the worker whose cells start at ``base`` (the
    batch cells it wrote: ``published``): wake that worker if it sleeps, unless it sleeps on a
    batch until a later crossing of it is out (its ``WAIT_CELL`` and ``WAIT_AT``). A reader
    that needs a whole batch before its next reaction wakes once for it, not once per
    crossing: each kernel wake-up costs both sides tens of µs when the cores are busy."""
    if cells[base + SLEEP]:
        waits_on = cells[base + WAIT_CELL]
        if not waits_on or (waits_on in published and cells[waits_on] >= cells[base + WAIT_AT]):
            bell.ring()


_SLICE_MIN_S: Final = 0.001
_SLICE_MAX_S: Final = 0.05
QUICK_POLL_NS: Final = 3_000  # the poll of every wait before it asks whether the cores are free, ns
# how long a waiter of a crowded run yields its core before it blocks, ns
YIELD_NS: Final = 300_000


def _poll(cond: Callable[[], bool], end: int) -> bool:
    """Poll ``cond()`` until it is true (True) or ``perf_counter_ns()`` reaches ``end`` (False)."""
    now = perf_counter_ns
    while now() < end:
        if cond():
            return True
    return False


def _yielding(cond: Callable[[], bool], end: int) -> bool:
    """Yield the core and check ``cond()`` until it is true (True) or ``perf_counter_ns()``
    reaches ``end`` (False)."""
    now, give = perf_counter_ns, os.sched_yield
    while now() < end:
        give()
        if cond():
            return True
    return False


def wait(
    cond: Callable[[], bool],
    cells: memoryview,
    sleep_cell: int,
    bell: Bell,
    spin_ns: int,
    idle: Idle | None = None,
) -> None:
    """Return once ``cond()`` is true: poll it for :data:`QUICK_POLL_NS` (what a running peer
    publishes right after what woke us), then on up to ``spin_ns`` only if the cores are free
    now (:data:`CONTENTION`), then block on ``bell`` with the sleeping announcement in
    ``cells[sleep_cell]``. No ``os.sched_yield``: with another runnable task on the core it
    hands the core over for a whole time slice (measured: 0.5 ms per call with one other
    busy process), far longer than a kernel wake-up.

    In a run with more workers than cores (``CONTENTION.crowded``), a waiter that may not
    spin first yields its core for up to :data:`YIELD_NS`, checking ``cond`` after each
    ``os.sched_yield``: what it waits for is most often another worker of the run that waits
    for a core, and a yield hands the core over in a context switch, where a wake-up from
    the kernel costs tens of µs (a GymSim of 15 CartPoles on ``-w 4`` on 2 cores, from its
    sources: about 38k steps/s blocking at once, 75k yielding first; 160k on ``-w 2``).

    ``idle(ready_fds)`` is called after every blocking slice (it may raise to give up, e.g.
    on an abort or when the parent process died). ``cond`` must include any abort condition
    the caller wants to see promptly.
    """
    if cond():
        return
    if spin_ns:
        start = perf_counter_ns()
        if _poll(cond, start + min(spin_ns, QUICK_POLL_NS)):
            return
        if spin_ns > QUICK_POLL_NS and CONTENTION.spin_ok() and _poll(cond, start + spin_ns):
            return
        if CONTENTION.crowded and _yielding(cond, perf_counter_ns() + YIELD_NS):
            return
    slice_s = _SLICE_MIN_S
    while True:
        bell.clear()
        cells[sleep_cell] = 1
        if cond():
            cells[sleep_cell] = 0
            return
        ready = bell.wait(slice_s)
        cells[sleep_cell] = 0
        if cond():
            return
        if idle is not None:
            idle(ready)
        slice_s = min(slice_s * 2, _SLICE_MAX_S)
