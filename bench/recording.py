"""What recording costs and what replaying gains (``--record``, ``--replay``;
reactors/records/replay.py).

- **Recording overhead**: ``lf_src/bench/GymSim.lf`` (CartPole, 15 environments, one worker),
  environment steps per second with and without ``--record`` (the recording holds every
  outside input and the CRCs of every port value at the tags its time budget let it check:
  the note says how many), runs alternated, median of ``reps`` each. Target: the recorded run
  at least 0.9x the plain one (overhead <= 10%).
- **Replay speed**: ``lf_src/bench/Telemetry.lf``, a sensor thread posting 400 physical-action
  events 2 ms apart, recorded (the run waits for them on the wall clock), then replayed (no
  waiting); the program's own wall time from startup to shutdown, median of ``reps``.
  Target: replay >= 10x faster; the replay's checksum must equal the recording's.
"""

from __future__ import annotations

import statistics

from reactors.records import recording_file

from . import programs
from .common import Row, scratch
from .programs import build_program, load_average


def overhead(quick: bool) -> Row:
    """The recording-overhead row (GymSim, ``-w 1``)."""
    rounds, reps = (1000, 1) if quick else (4000, 5)
    launcher = build_program("GymSim", {"rounds": rounds}, scratch())
    tape = launcher.parent.parent / "gymsim.lfrec"
    load = load_average()
    plain, recorded = [], []
    for _ in range(reps):
        plain.append(programs.run(launcher, n_workers=1).result["steps_per_s"])
        recorded.append(
            programs.run(launcher, "--record", str(tape), n_workers=1).result["steps_per_s"]
        )
    p, r = statistics.median(plain), statistics.median(recorded)
    return Row(
        f"Recording overhead (GymSim CartPole, 15 envs, {rounds:,} rounds, -w 1)",
        "ours with --record vs without",
        r,
        "steps/s",
        ratio=r / p,
        note=f"without: {p:,.0f} steps/s; recording {tape.stat().st_size / 1024:,.0f} KiB, "
        f"{len(recording_file.load(str(tape)).checked):,} of {rounds + 3:,} tags checked; "
        + _verdict(r / p, 0.9, reps, load),
    )


def replay_speed(quick: bool) -> Row:
    """The replay-speed row (Telemetry)."""
    readings, reps = (100, 1) if quick else (400, 3)
    launcher = build_program("Telemetry", {"readings": readings}, scratch())
    tape = launcher.parent.parent / "telemetry.lfrec"
    load = load_average()
    recorded, replayed = [], []
    for _ in range(reps):
        rec = programs.run(launcher, "--record", str(tape), n_workers=1).result
        rep = programs.run(launcher, "--replay", str(tape), n_workers=1).result
        if (rep["readings"], rep["mean"]) != (rec["readings"], rec["mean"]):
            raise RuntimeError(f"the replay computed {rep}, the recording {rec}")
        recorded.append(rec["seconds"])
        replayed.append(rep["seconds"])
    a, b = statistics.median(recorded), statistics.median(replayed)
    return Row(
        f"Replay of a recorded physical-action run ({readings} events 2 ms apart)",
        "ours --replay vs the recorded run",
        b,
        "s",
        ratio=a / b,
        note=f"recorded run {a:.3f} s (waits for the events); same checksum; "
        + _verdict(a / b, 10, reps, load),
    )


def _verdict(ratio: float, target: float, reps: int, load: float) -> str:
    """The end of a row's note: the target and whether ``ratio`` met it, the repetitions and
    the load before."""
    met = "MET" if ratio >= target else "MISSED"
    return f"target >= {target:g}x: {met}; median of {reps}; load {load:.2f} before"


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (``quick``: short runs, one each)."""
    return [overhead(quick), replay_speed(quick)]
