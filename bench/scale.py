"""How the runtime scales with the worker count, beside the peers: ``python -m bench --only scale``.

Each workload runs our program at W = 1, 2, 4, 8, ... up to the core count (the count itself
included), then cores+1 and ``-w 0`` (after one ``-w 0`` run that only measures the reactions'
costs), the counts in turn (:func:`bench.scale_runs.alternate`), three times; each row gives
the median. Its peers take their turn after each repetition. Workloads:

- ``GymSim`` CartPole, 16 and 64 environments (env steps/s); peers: the plain loop, "n x
  plain" (cores x the plain loop: the machine's limit), gymnasium's AsyncVectorEnv;
- ``EnvBank``, 16 environments of ``iters`` = 8 (~19 µs a step on the reference machine) and
  80 (~150 µs) numpy steps (µs per round); peers: the plain loop and its ideal share per core;
  then 64 environments of ``iters`` = 8, its hub reading the channels in a loop and then
  taking each multiport as one array (``gather``: the rows from other workers in one copy),
  one repetition each;
- ``TinyBank``, 16 cells, 5,000 rounds: the whole process's wall time (s);
- ``AtariSim`` Pong, 16 environments (env steps/s); peers: ale-py's AtariVectorEnv,
  AsyncVectorEnv, EnvPool where it imports;
- Atari Pong PPO on the GPU and SB3 PPO (:mod:`bench.scale_ppo`; "skipped: no GPU" without);
- the CPU time per tag of GymSim at W = 1, 2, 4, 8, 16 (:mod:`bench.scale_cpu`).

Every run is checked: GymSim's and AtariSim's rewards and episodes equal the plain loop's,
EnvBank's and TinyBank's checksums equal a plain loop's; a wrong result is a FAILED row.
Our rows name the runtime (compiled or from its sources), the load before their runs and
their ratios to -w 1 and to the peers (:mod:`bench.scale_rows`). ``--quick``: one run each,
W = 1, 2 and cores+1 only (the CPU proxy too), few rounds: well under a minute on 2 cores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from .atari_sim import ale_vector_rate, envpool_rate
from .common import Row, cores, scratch
from .gym_sim import plain_loop, vector_rate
from .parallel_tags import numpy_step_us
from .programs import build_program
from .rows import failure
from .scale_cpu import cpu_rows
from .scale_peers import envbank_plain, envpool_missing, tinybank_checksum
from .scale_ppo import ppo_rows
from .scale_rows import PeerResult, Series, Targets, our_rows, skipped
from .scale_runs import Run, alternate, run_once, runtime
from .scale_sync import sync_rows

SEED = 1
CARTPOLE, PONG = "CartPole-v1", "ALE/Pong-v5"
ASYNC = "gymnasium AsyncVectorEnv (shared memory)"
ALE = "ale-py AtariVectorEnv (C++ threads)"
ENVPOOL = "EnvPool (C++ threads)"


@dataclass(frozen=True)
class Sizes:
    """Rounds of each workload's runs and of its peers, and the repetitions ``reps``."""

    reps: int
    gym16: int
    gym64: int
    bank8: int
    bank80: int
    atari: int
    peer_rounds: int
    ppo_steps: int
    tiny: int = 5000


QUICK = Sizes(
    reps=1, gym16=500, gym64=200, bank8=200, bank80=60, atari=100, peer_rounds=100, ppo_steps=2048
)
FULL = Sizes(
    reps=3,
    gym16=3000,
    gym64=1000,
    bank8=2000,
    bank80=300,
    atari=300,
    peer_rounds=300,
    ppo_steps=20480,
)

#: the targets, on a machine with the cores (one worker per core up to 16)
TARGETS = {
    "gym16": Targets(speedup={16: 3.0}),
    "gym64": Targets(speedup={16: 6.0}, least={16: 1_000_000.0}),
    "bank8": Targets(speedup={16: 5.0}),
    "bank80": Targets(speedup={16: 12.0}),
    "atari": Targets(peers={ALE: (16, 1.5)}),
}


def worker_counts(quick: bool, n_cores: int | None = None) -> list[int]:
    """1, 2, 4, ... below the core count, the core count, cores+1, then 0 (``-w 0``);
    ``quick``: 1, 2 and cores+1 only."""
    n = n_cores or cores()
    if quick:
        return sorted({1, 2, n + 1})
    out = [1]
    while out[-1] * 2 < n:
        out.append(out[-1] * 2)
    return [*dict.fromkeys([*out, n, n + 1]), 0]


def proxy_counts(quick: bool) -> list[int]:
    """The worker counts of the CPU-per-tag rows: 1, 2, 4, 8, 16 (quick: as the others)."""
    return [w for w in worker_counts(True) if w] if quick else [1, 2, 4, 8, 16]


@dataclass(frozen=True)
class Workload:
    """One row group: ``program`` built with ``defines`` and run with ``args``; ``series``
    says how runs become rows; ``reference()`` gives the RESULT values every run must report
    (a plain loop's); ``peers``: name -> a function measuring that peer once."""

    key: str
    program: str
    defines: dict
    args: list[str]
    series: Series
    reference: Callable[[], dict]
    peers: dict[str, Callable[[], float]]
    notes: dict[str, str] = field(default_factory=dict)
    skips: dict[str, str] = field(default_factory=dict)
    once: bool = False  # one repetition whatever the sizes say (a comparison, not a target)


@dataclass(frozen=True)
class Measured:
    """What a workload's measurement leaves for later rows: its ``launcher``, the
    ``expected`` RESULT values and its ``runs`` by worker count."""

    launcher: Path
    expected: dict
    runs: dict[int, list[Run | Exception]]


def measure(
    w: Workload, counts: list[int], reps: int, tmp: Path
) -> tuple[list[Row], Measured | None]:
    """Build, check against the reference, run ``counts`` in turn ``reps`` times with the
    peers after each repetition; the workload's rows, and its runs by count."""
    skips = [
        r
        for name, why in w.skips.items()
        for r in skipped(w.series.title, [name], w.series.unit, why)
    ]
    try:
        expected = w.reference()
        launcher = build_program(w.program, w.defines, tmp / w.key)
        if 0 in counts:  # its first -w 0 run only measures the reactions (no profile yet)
            run_once(launcher, 0, w.args)
    except Exception as e:  # noqa: BLE001 - every row of the workload reports it
        names = [f"ours -w {c}" for c in counts] + list(w.peers)
        failed = [Row(w.series.title, n, None, w.series.unit, status=failure(e)) for n in names]
        return failed + skips, None
    targets = TARGETS.get(w.key, Targets())
    series = replace(w.series, expected=expected, runtime=runtime(), targets=targets)
    peers = [PeerResult(name, w.notes.get(name, "")) for name in w.peers]

    def peer_turn() -> None:
        for p in peers:
            try:
                p.figures.append(w.peers[p.name]())
            except Exception as e:  # noqa: BLE001 - the peer's row reports it
                p.figures.append(e)

    reps = 1 if w.once else reps
    runs = alternate(lambda c: run_once(launcher, c, w.args), counts, reps, w.key, peer_turn)
    return our_rows(series, runs, peers) + skips, Measured(launcher, expected, runs)


def gym(n: int, rounds: int, peer_rounds: int) -> Workload:
    """GymSim CartPole with ``n`` environments."""
    last: dict[str, float] = {}

    def plain() -> float:
        last["plain"] = plain_loop(CARTPOLE, n, rounds, SEED)[0]
        return last["plain"]

    def check() -> dict:
        return {"envs": n, "rounds": rounds, **plain_loop(CARTPOLE, n, rounds, SEED)[1]}

    limit = f"n x plain ({cores()} cores x the plain loop)"
    return Workload(
        f"gym{n}",
        "GymSim",
        {"n": n, "env_id": CARTPOLE, "seed": SEED},
        ["--rounds", str(rounds)],
        Series(f"GymSim {CARTPOLE}, {n} envs", "env steps/s", lambda r: r.result["steps_per_s"]),
        check,
        {
            "plain Python loop (1 process)": plain,
            limit: lambda: cores() * last["plain"],
            ASYNC: lambda: vector_rate("async", CARTPOLE, n, peer_rounds, 10),
        },
        {ASYNC: f"{peer_rounds} rounds", limit: "the machine's limit"},
    )


def bank(iters: int, rounds: int, n: int = 16, batched: bool = False) -> Workload:
    """EnvBank, ``n`` environments of ``iters`` numpy steps; ``batched``: its hub takes each
    multiport as one array (``gather``) instead of a loop over the channels. Other than 16
    environments, one repetition (the loop against the gather, no target)."""
    last: dict[str, float] = {}

    def plain() -> float:
        last["plain"] = envbank_plain(n, iters, rounds, SEED)[0]
        return last["plain"]

    ideal = f"ideal (the plain loop / {cores()} cores)"
    hub = ", the hub gathers" if batched else ""
    return Workload(
        f"bank{iters}" + (f"x{n}" if n != 16 else "") + ("g" if batched else ""),
        "EnvBank",
        {"n": n, "iters": iters, "seed": SEED},
        ["--rounds", str(rounds)] + (["--batched", "True"] if batched else []),
        Series(
            f"EnvBank {n} envs, iters={iters} (~{iters * numpy_step_us() + 2:.0f} µs a step "
            f"here){hub}",
            "µs/round",
            lambda r: r.result["us_per_round"],
            higher_better=False,
        ),
        lambda: {
            "envs": n,
            "rounds": rounds,
            "checksum": envbank_plain(n, iters, rounds, SEED)[1],
        },
        {"plain Python loop (1 process)": plain, ideal: lambda: last["plain"] / cores()},
        once=n != 16,
    )


def tiny(rounds: int) -> Workload:
    """TinyBank, 16 cells: the whole process's wall time."""
    return Workload(
        "tiny",
        "TinyBank",
        {"n": 16},
        ["--rounds", str(rounds)],
        Series(
            f"TinyBank 16, {rounds:,} rounds: whole process",
            "s",
            lambda r: r.seconds,
            higher_better=False,
        ),
        lambda: {"n": 16, "rounds": rounds, "checksum": tinybank_checksum(16, rounds)},
        {},
    )


def atari(rounds: int, peer_rounds: int) -> Workload:
    """AtariSim Pong, 16 environments."""
    peers = {
        ALE: lambda: ale_vector_rate(PONG, 16, peer_rounds, 5),
        ASYNC: lambda: vector_rate("async", PONG, 16, peer_rounds, 5),
    }
    missing = envpool_missing()
    if missing is None:
        peers[ENVPOOL] = lambda: envpool_rate(PONG, 16, peer_rounds, 5)
    return Workload(
        "atari",
        "AtariSim",
        {"n": 16, "env_id": PONG, "seed": SEED},
        ["--rounds", str(rounds)],
        Series("AtariSim Pong-v5, 16 envs", "env steps/s", lambda r: r.result["steps_per_s"]),
        lambda: {"envs": 16, "rounds": rounds, **plain_loop(PONG, 16, rounds, SEED)[1]},
        peers,
        {name: f"{peer_rounds} rounds" for name in peers},
        {ENVPOOL: missing} if missing else {},
    )


def workloads(s: Sizes) -> list[Workload]:
    """The row groups in table order."""
    return [
        gym(16, s.gym16, s.peer_rounds),
        gym(64, s.gym64, s.peer_rounds),
        bank(8, s.bank8),
        bank(80, s.bank80),
        bank(8, s.bank8 // 4, 64),
        bank(8, s.bank8 // 4, 64, batched=True),
        tiny(s.tiny),
        atari(s.atari, s.peer_rounds),
    ]


def run(quick: bool) -> list[Row]:
    """Every row group of the benchmark (``quick``: :data:`QUICK` sizes and counts)."""
    s = QUICK if quick else FULL
    tmp, counts, rows = scratch(), worker_counts(quick), []
    for w in workloads(s):
        got, made = measure(w, counts, s.reps, tmp)
        rows += got
        if w.key == "gym16":
            rows += proxy(made, s, quick)
            if made is not None:
                title = f"Sync per tag (trace): GymSim {CARTPOLE}, 16 envs"
                counts16 = proxy_counts(quick)
                rows += sync_rows(title, tmp / "sync", counts16, s.gym16, made.expected)
    return rows + ppo_rows(s.ppo_steps, tmp / "ppo")


def proxy(made: Measured | None, s: Sizes, quick: bool) -> list[Row]:
    """The CPU-per-tag rows of GymSim CartPole 16 envs, reusing the GymSim rows' runs."""
    title = f"CPU per tag, all processes: GymSim {CARTPOLE}, 16 envs"
    if made is None:
        return [Row(title, "ours", None, "µs CPU/tag", status="FAILED: GymSim did not build")]
    return cpu_rows(title, made.launcher, proxy_counts(quick), s.gym16, made.expected, made.runs)
