"""Micro benchmark: PingPong with N messages on one worker, reported in µs per reaction.

    python -m reactors._bench_pingpong [N] [--repeat R]

The program is the classic LF PingPong (Ping: ``reaction(startup, serve) -> send`` and
``reaction(receive) -> serve``; Pong: ``reaction(receive) -> send``), written here as the
generated module and graph.json that ``lfc`` would emit (docs/PROGRAM.md), with
``fast: true``. Each message costs 3 reactions and one tag. Only the scheduler's run is
timed (not building). Prints the best of R runs.
"""

from __future__ import annotations

import argparse
import sys
import time

from reactors.api import ReactorBase, request_stop
from reactors.build import build
from reactors.clock import Clock
from reactors.scheduler import Scheduler


class _Ping(ReactorBase):
    count = ReactorBase.parameter("count")

    def _lf_init_state(self):
        self.pingsLeft = self.count

    def reaction_function_0(self, send):
        send.set(self.pingsLeft)
        self.pingsLeft -= 1
        return 0

    def reaction_function_1(self, receive, serve):
        if self.pingsLeft > 0:
            serve.schedule(0)
        else:
            request_stop()
        return 0


class _Pong(ReactorBase):
    expected = ReactorBase.parameter("expected")

    def _lf_init_state(self):
        self.count = 0

    def reaction_function_0(self, receive, send):
        self.count += 1
        send.set(receive.value)
        return 0


class _Main(ReactorBase):
    count = ReactorBase.parameter("count")


N = 1_000_000


def _lf_params_0(parent, bank_index):
    return {"count": N}


def _lf_params_1(parent, bank_index):
    return {"count": parent.count}


def _lf_params_2(parent, bank_index):
    return {"expected": parent.count}


def _port(name):
    return {"name": name, "kind": "input" if name == "receive" else "output", "width": -2}


def _inst(i, name, pyclass, parent, reactions, actions=()):
    return {
        "id": i,
        "name": name,
        "pyclass": pyclass,
        "parent": parent,
        "bank_index": 0,
        "params": f"_lf_params_{i}",
        "mode": None,
        "ports": [] if parent is None else [_port("receive"), _port("send")],
        "timers": [],
        "actions": list(actions),
        "modes": [],
        "reactions": reactions,
    }


def _rx(i, reactor, index, rank, triggers, args):
    return {
        "id": i,
        "reactor": reactor,
        "index": index,
        "function": f"reaction_function_{index}",
        "deadline": None,
        "deadline_function": None,
        "mode": None,
        "triggers": triggers,
        "args": args,
        "rank": rank,
        "file": __file__,
        "line": 0,
    }


def _p(reactor, name):
    return {"name": name, "kind": "port", "reactor": reactor, "port": name}


GRAPH = {
    "version": 1,
    "name": "PingPong",
    "target": {"fast": True},
    "reactors": [
        _inst(0, "PingPong", "_Main", None, []),
        _inst(
            1,
            "PingPong.ping",
            "_Ping",
            0,
            [0, 1],
            [
                {
                    "name": "serve",
                    "origin": "logical",
                    "min_delay": 0,
                    "min_spacing": None,
                    "policy": "defer",
                    "mode": None,
                }
            ],
        ),
        _inst(2, "PingPong.pong", "_Pong", 0, [2]),
    ],
    "reactions": [
        _rx(
            0, 1, 0, 0, [{"kind": "startup"}, {"kind": "action", "name": "serve"}], [_p(1, "send")]
        ),
        _rx(
            1,
            1,
            1,
            2,
            [{"kind": "port", "reactor": 1, "name": "receive"}],
            [_p(1, "receive"), {"name": "serve", "kind": "action", "action": "serve"}],
        ),
        _rx(
            2,
            2,
            0,
            1,
            [{"kind": "port", "reactor": 2, "name": "receive"}],
            [_p(2, "receive"), _p(2, "send")],
        ),
    ],
    "channels": [[1, "send", 0, 2, "receive", 0], [2, "send", 0, 1, "receive", 0]],
    "line_map": [],
}


def run_once(n: int) -> float:
    """Run PingPong with ``n`` messages; return seconds spent in the scheduler."""
    global N
    N = n
    program = build(sys.modules[__name__], GRAPH)
    sched = Scheduler(program, Clock(), fast=True)
    t0 = time.perf_counter()
    sched.run()
    dt = time.perf_counter() - t0
    pong = program.instances[2].obj
    if pong.count != n:
        raise SystemExit(f"wrong result: pong saw {pong.count} messages, expected {n}")
    return dt


def main(argv=None) -> int:
    """Command line: print the best time per reaction over ``--repeat`` runs."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=1_000_000, help="messages")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    best = min(run_once(args.n) for _ in range(args.repeat))
    reactions = 3 * args.n
    print(
        f"PingPong {args.n} messages: {best:.3f} s, {best / reactions * 1e6:.3f} us/reaction, "
        f"{best / args.n * 1e6:.3f} us/message (Python {sys.version.split()[0]})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
