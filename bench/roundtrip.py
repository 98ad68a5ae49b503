"""A round trip between two workers per tag (target <= 20 µs), beside its floor.

Ours: ``lf_src/bench/PingPong.lf`` on 2 workers (``-w 2``, processes): Ping and Pong are placed
on different workers, so each message is one tag in which Ping's output crosses to Pong's
worker and Pong's answer crosses back, plus the per-tag agreement of the workers. The figure
is the wall time of a run of ``n`` messages minus a run of 1 (start-up and shutdown), per
message.

Floor: two bare processes ping-ponging an integer through a shared-memory cell with the same
wait primitive (:func:`reactors.sync.wait`: spin with ``sched_yield``, then block), i.e. the
cost of the two wake-ups a round trip needs, without any runtime.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time

from reactors.processes import SPIN_NS
from reactors.shm import Segment, unlink_prefix
from reactors.sync import Control, FdBell, wait

from .common import Row, scratch, timed_run
from .programs import build_program

A, B = 20, 21  # two free cells of a Control block for 2 workers and no channel


def _pong(name: str, n: int, fds) -> None:
    seg = Segment(name)
    ctl = Control(seg.buf, 2, 0)
    cells = ctl.cells
    bell = FdBell(fds[1].detach())
    for k in range(1, n + 1):
        wait(lambda: cells[A] >= k, cells, 30, bell, SPIN_NS)
        cells[B] = k
    ctl.release()


def floor_us(n: int) -> float:
    """µs per round trip of a bare shared-memory ping-pong between two processes."""
    from multiprocessing import reduction

    name = f"lfbenchrt{mp.current_process().pid}"
    seg = Segment(name, True, Control.size(2, 0))
    ctl = Control(seg.buf, 2, 0)
    cells = ctl.cells
    fds = [FdBell.new(), FdBell.new()]
    try:
        ctx = mp.get_context("spawn")
        p = ctx.Process(target=_pong, args=(name, n, [reduction.DupFd(f) for f in fds]))
        p.start()
        bell = FdBell(fds[0])
        t0 = time.perf_counter()
        for k in range(1, n + 1):
            cells[A] = k
            wait(lambda: cells[B] >= k, cells, 31, bell, SPIN_NS)
        dt = time.perf_counter() - t0
        p.join()
        return dt / n * 1e6
    finally:
        ctl.release()
        seg.close()
        unlink_prefix(name)


def ours_us(n: int, reps: int) -> float:
    """µs per message of PingPong on 2 workers (n messages minus 1 message)."""
    big = build_program("PingPong", {"count": n}, scratch())
    one = build_program("PingPong", {"count": 1}, scratch())
    t_big = statistics.median(timed_run([str(big), "-w", "2"]) for _ in range(reps))
    t_one = statistics.median(timed_run([str(one), "-w", "2"]) for _ in range(reps))
    return (t_big - t_one) / n * 1e6


def run(quick: bool) -> list[Row]:
    n, reps = (20_000, 1) if quick else (100_000, 3)
    ours = ours_us(n, reps)
    floor = statistics.median(floor_us(n) for _ in range(reps))
    return [
        Row(
            f"Round trip between 2 workers, {n:,} tags",
            "ours (PingPong, -w 2)",
            ours,
            "µs/tag",
            note="a cross-worker round trip plus the tag agreement; target <= 20 µs",
        ),
        Row(
            f"Round trip between 2 workers, {n:,} tags",
            "bare shared-memory ping-pong floor",
            floor,
            "µs/round trip",
            ratio=floor / ours,
            note="2 processes, same spin-then-block wait, no runtime",
        ),
    ]
