"""PingPong on one worker: cost per reaction, beside a plain Python loop doing the same work.

Three reactions per message (Ping sends, Pong echoes, Ping schedules the next send one
microstep later). Our figure subtracts a 1-message run of the same program (start-up and
shutdown); the plain loop runs the same three bodies as direct method calls in one process.
A third figure times the one-worker scheduler alone, in this process (no start-up, no build).

    python -m bench.pingpong [N] [--repeat R]

prints that scheduler-only figure for N messages, the best of R runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from reactors.core.clock import Clock
from reactors.core.scheduler import Scheduler
from reactors.model.build import build as instantiate
from reactors.model.program import Program

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


def compiled(n: int, tmp: Path) -> tuple[ModuleType, Program]:
    """PingPong.lf with ``n`` messages, compiled by lfc into ``tmp``: its generated module
    (imported) and its program model."""
    src = variant(PROGRAM, {DEFAULT: f"main reactor PingPong(count = {n})"}, tmp / f"sched{n}")
    build(src, tmp / f"sched{n}_out")
    gen = tmp / f"sched{n}_out" / "src-gen" / "PingPong"
    spec = importlib.util.spec_from_file_location(f"_pingpong_{n}", gen / "PingPong.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, Program.load(str(gen / "graph.json"))


def scheduler_seconds(module: ModuleType, program: Program, n: int) -> float:
    """Seconds the one-worker scheduler spends running the compiled PingPong of ``n``
    messages (building its objects excluded). Raises RuntimeError on a wrong message count."""
    built = instantiate(module, program)
    sched = Scheduler(built, Clock(), fast=True)
    t0 = time.perf_counter()
    sched.run()
    dt = time.perf_counter() - t0
    pong: Any = next(i.obj for i in built.instances if i.name == "PingPong.pong")
    if pong.count != n:
        raise RuntimeError(f"wrong result: pong saw {pong.count} messages, expected {n}")
    return dt


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
    module, program = compiled(n, tmp)
    sched = median_of(reps, lambda: scheduler_seconds(module, program, n)) / (3 * n) * 1e6
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
        Row(
            f"PingPong {n:,} messages, 1 worker",
            "ours, scheduler only",
            sched,
            "µs/reaction",
            note="the scheduler's run in-process, no start-up",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    """Command line: print the best scheduler-only time per reaction over ``--repeat`` runs."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=1_000_000, help="messages")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    module, program = compiled(args.n, scratch())
    best = min(scheduler_seconds(module, program, args.n) for _ in range(args.repeat))
    reactions = 3 * args.n
    print(
        f"PingPong {args.n} messages: {best:.3f} s, {best / reactions * 1e6:.3f} us/reaction, "
        f"{best / args.n * 1e6:.3f} us/message (Python {sys.version.split()[0]})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
