"""A round trip between two workers per tag, beside its floor, quiet and with one busy process.

Ours: ``lf_src/bench/PingPong.lf`` on 2 workers (``-w 2``, processes): Ping and Pong are placed
on different workers, so each message is one tag in which Ping's output crosses to Pong's
worker and Pong's answer crosses back, plus the per-tag exchange of the workers. The figure
is the wall time of a run of ``n`` messages minus a run of 1 (start-up and shutdown), per
message.

Floor: two bare processes ping-ponging an integer through a shared-memory cell with the same
wait and wake-up primitives (:func:`reactors.parallel.sync.wait`,
:func:`reactors.parallel.sync.ring_if_sleeping`), i.e. the cost of the two wake-ups a round trip
needs, without any runtime. Target: ours <= 1.5x the floor, quiet and while one busy process of ours
runs (bench.parallel_tags.Busy); also measured with two.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time

from reactors.parallel.processes import SPIN_NS
from reactors.parallel.shm import Segment, unlink_prefix
from reactors.parallel.sync import Control, FdBell, ring_if_sleeping, wait

from .common import Row, scratch, timed_run
from .parallel_tags import Busy
from .programs import build_program, load_average

A, B, SLEEP_A, SLEEP_B = 20, 21, 30, 31  # free cells of a Control block for 2 workers


def _pong(name: str, n: int, fds) -> None:
    seg = Segment(name)
    assert seg.buf is not None  # an open segment has its buffer
    ctl = Control(seg.buf, 2, 0)
    cells = ctl.cells
    bells = [FdBell(fds[0].detach()), FdBell(fds[1].detach())]
    for k in range(1, n + 1):
        wait(lambda: cells[A] >= k, cells, SLEEP_B, bells[1], SPIN_NS)
        cells[B] = k
        ring_if_sleeping(cells, SLEEP_A, bells[0])
    ctl.release()


def floor_us(n: int) -> float:
    """µs per round trip of a bare shared-memory ping-pong between two processes."""
    from multiprocessing import reduction

    name = f"lfbenchrt{mp.current_process().pid}"
    seg = Segment(name, True, Control.size(2, 0))
    assert seg.buf is not None  # an open segment has its buffer
    ctl = Control(seg.buf, 2, 0)
    cells = ctl.cells
    fds = [FdBell.new(), FdBell.new()]
    try:
        ctx = mp.get_context("spawn")
        p = ctx.Process(target=_pong, args=(name, n, [reduction.DupFd(f) for f in fds]))
        p.start()
        bells = [FdBell(fds[0]), FdBell(fds[1])]
        t0 = time.perf_counter()
        for k in range(1, n + 1):
            cells[A] = k
            ring_if_sleeping(cells, SLEEP_B, bells[1])
            wait(lambda: cells[B] >= k, cells, SLEEP_A, bells[0], SPIN_NS)
        dt = time.perf_counter() - t0
        p.join()
        return dt / n * 1e6
    finally:
        ctl.release()
        seg.close()
        unlink_prefix(name)


def ours_us(big, one, n: int, reps: int) -> float:
    """µs per message of PingPong on 2 workers (n messages minus 1 message)."""
    t_big = statistics.median(timed_run([str(big), "-w", "2"]) for _ in range(reps))
    t_one = statistics.median(timed_run([str(one), "-w", "2"]) for _ in range(reps))
    return (t_big - t_one) / n * 1e6


def run(quick: bool) -> list[Row]:
    n, reps = (20_000, 1) if quick else (100_000, 3)
    big = build_program("PingPong", {"count": n}, scratch())
    one = build_program("PingPong", {"count": 1}, scratch())
    rows = []
    for busy in (0, 1, 2):
        load = load_average()
        with Busy(busy, 600):
            ours = ours_us(big, one, n, reps)
            floor = statistics.median(floor_us(n) for _ in range(reps))
        title = f"Round trip between 2 workers, {n:,} tags" + (
            f", {busy} busy process(es)" if busy else ""
        )
        ratio = ours / floor if floor > 0 else None
        met = "MET" if ratio is not None and ratio <= 1.5 else "MISSED"
        goal = f"target ours <= 1.5x floor: {met}" if busy < 2 else "no target"
        rows += [
            Row(
                title,
                "ours (PingPong, -w 2)",
                ours,
                "µs/tag",
                note=f"a cross-worker round trip plus the tag exchange; load {load:.2f} before",
            ),
            Row(
                title,
                "bare shared-memory ping-pong floor",
                floor,
                "µs/round trip",
                ratio=floor / ours if ours > 0 else None,
                note=f"2 processes, same wait and wake-up, no runtime; {goal}",
            ),
        ]
    return rows
