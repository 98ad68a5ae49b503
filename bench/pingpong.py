"""PingPong on one worker: cost per reaction, beside a plain Python loop doing the same work.

Three reactions per message (Ping sends, Pong echoes, Ping schedules the next send one
microstep later). Our figure subtracts a 1-message run of the same program (start-up and
shutdown); the plain loop runs the same three bodies as direct method calls in one process.
"""

from __future__ import annotations

import time

from .common import ROOT, Row, build, median_of, scratch, timed_run, variant

PROGRAM = ROOT / "lf_src" / "bench" / "PingPong.lf"
DEFAULT = "main reactor PingPong(count = 1000000)"


class _Ping:
    def __init__(self, n):
        self.left = n

    def serve(self):
        self.left -= 1
        return self.left

    def receive(self, value):
        return self.left > 0


class _Pong:
    def __init__(self):
        self.count = 0

    def receive(self, value):
        self.count += 1
        return value


def plain_loop(n: int) -> float:
    """Seconds for ``n`` messages as plain method calls (3 per message)."""
    ping, pong = _Ping(n), _Pong()
    t0 = time.perf_counter()
    go = True
    while go:
        go = ping.receive(pong.receive(ping.serve()))
    return time.perf_counter() - t0


def run(quick: bool) -> list[Row]:
    n = 200_000 if quick else 1_000_000
    tmp = scratch()
    big = build(
        variant(PROGRAM, {DEFAULT: f"main reactor PingPong(count = {n})"}, tmp / "big"),
        tmp / "big_out",
    )
    one = build(
        variant(PROGRAM, {DEFAULT: "main reactor PingPong(count = 1)"}, tmp / "one"),
        tmp / "one_out",
    )
    reps = 1 if quick else 3
    t_big = median_of(reps, lambda: timed_run([str(big)]))
    t_one = median_of(reps, lambda: timed_run([str(one)]))
    ours = (t_big - t_one) / (3 * n) * 1e6
    plain = median_of(reps, lambda: plain_loop(n)) / (3 * n) * 1e6
    return [
        Row(
            f"PingPong {n:,} messages, 1 worker",
            "ours (lfc + reactors)",
            ours,
            "µs/reaction",
            note=f"{1 / ours:.2f} M reactions/s; target <= 1 µs",
        ),
        Row(
            f"PingPong {n:,} messages, 1 worker",
            "plain Python loop",
            plain,
            "µs/reaction",
            ratio=plain / ours,
            note="same bodies as direct calls",
        ),
    ]
