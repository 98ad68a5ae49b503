"""Atari Pong PPO with the learner on the GPU, at several worker counts, beside SB3 PPO.

Ours is ``lf_src/AtariPPO.lf`` built with 8 members of one game each (8 environments, as
Stable-Baselines3's SubprocVecEnv row has; the other hyperparameters are the program's,
CleanRL's, which :mod:`bench.sb3` gives SB3 too), run with ``--device cuda --max_steps N`` at
``-w 1``, ``-w 9`` (a worker per member and one for the learner) and ``-w cores+1``, once
each: a training run of 20,480 steps is its own average. The figure is environment steps per
second of the whole process (start-up, imports and CUDA's start included, as SB3's). Every
run must report the whole budget, and its ``returns.csv`` (logical quantities only) must be
the same bytes on every worker count. Without a GPU (``torch.cuda.is_available()`` false)
each row says "skipped: no GPU". ``-w 0`` is not run here: its first run would only measure.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .common import ROOT, Process, Row, cores
from .programs import build_program
from .sb3 import ATARI_LIMIT_S, ATARI_PEERS, peer_atari, steps_reported
from .scale_rows import PeerResult, Series, Targets, our_rows, skipped
from .scale_runs import Run, alternate, run_once, runtime

MEMBERS = 8
TITLE = f"Atari Pong PPO on the GPU, {MEMBERS} envs: training steps/s (whole process)"
OURS = f"ours (AtariPPO, {MEMBERS} members x 1 game, --device cuda)"
#: SB3's row: SubprocVecEnv, one torch thread (bench.sb3's second Atari peer)
SB3 = ATARI_PEERS[1][0]
#: ours at -w MEMBERS+1 against SB3 in the same invocation, and in steps/s
TARGETS = Targets(least={MEMBERS + 1: 4000.0}, peers={SB3: (MEMBERS + 1, 3.0)})


def gpu() -> bool:
    """Whether torch sees a CUDA device here (False when torch is not installed)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def counts() -> list[int]:
    """-w 1, a worker per member plus the learner's (at most one per core), and cores+1."""
    return sorted({1, min(MEMBERS + 1, cores()), cores() + 1})


def returns_digest(folder: Path) -> dict:
    """The episodes and a SHA-256 of the ``returns.csv`` a run wrote under ``folder``
    (``runs/AtariPPO/<start>/``). RuntimeError when there is none, or more than one."""
    found = sorted(folder.glob("runs/AtariPPO/*/returns.csv"))
    if len(found) != 1:
        raise RuntimeError(f"expected one returns.csv under {folder}, found {len(found)}")
    data = found[0].read_bytes()
    return {"episodes": max(data.count(b"\n") - 1, 0), "returns": hashlib.sha256(data).hexdigest()}


def ppo_run(launcher: Path, workers: int, steps: int, work: Path, device: str = "cuda") -> Run:
    """One training run of ``steps`` environment steps at ``-w workers`` in a folder of its
    own under ``work``. Its result: the steps the logger reports and :func:`returns_digest`.
    The run ends with exit status 1 (its budget before Pong's target), as expected."""
    cwd = work / f"w{workers}"
    cwd.mkdir(parents=True, exist_ok=False)

    def parse(p: Process) -> dict:
        return {"steps": steps_reported(p.stdout), **returns_digest(cwd)}

    args = ["--max_steps", str(steps), "--device", device]
    return run_once(launcher, workers, args, ATARI_LIMIT_S, cwd, parse, accept=(0, 1))


def ppo_rows(steps: int, work: Path, on_gpu: bool | None = None, device: str = "cuda") -> list[Row]:
    """Our rows at :func:`counts` and SB3's row (``steps`` each); with no GPU (``on_gpu``
    None: ask torch), a row for each with status "skipped: no GPU"."""
    if not (gpu() if on_gpu is None else on_gpu):
        return skipped(TITLE, [OURS, SB3], "steps/s", "no GPU")
    series = Series(
        TITLE,
        "steps/s",
        lambda r: steps / r.seconds,
        expected={"steps": steps},
        same=("returns", "episodes"),
        targets=TARGETS,
        runtime=runtime(),
    )
    defines = {"members": MEMBERS, "envs_per_member": 1}
    try:
        launcher = build_program("AtariPPO", defines, work / "build", folder=ROOT / "lf_src")
    except Exception as e:  # noqa: BLE001 - every count's row reports it
        runs: dict[int, list[Run | Exception]] = {w: [e] for w in counts()}
    else:
        runs = alternate(lambda w: ppo_run(launcher, w, steps, work, device), counts(), 1, "PPO")
    peer = PeerResult(SB3, f"{steps:,} steps, same hyperparameters, device auto (CUDA)")
    try:
        figure, note = peer_atari(steps, "subproc", 1, work)
        peer.figures.append(figure)
        peer.note += f"; {note}"
    except Exception as e:  # noqa: BLE001 - the peer's row reports it
        peer.figures.append(e)
    rows = our_rows(series, runs, [peer])
    for r in rows[:-1]:
        r.peer = r.peer.replace("ours", OURS, 1)
    return rows
