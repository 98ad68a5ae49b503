"""The RL programs beside Stable-Baselines3 (2.x, through its public API).

Two workloads:

- **CartPole PPO, wall time to solve** (mean return of the last 20 episodes >= 475), for each
  of ``SEEDS``: ours is ``bin/CartPolePPO --seed S`` (its default worker count, the logger
  stops it at the target); the peer is SB3's ``PPO("MlpPolicy")`` with rl-zoo3's tuned
  CartPole-v1 hyperparameters (8 environments, n_steps 32, batch 256, 20 epochs, gamma 0.98,
  GAE lambda 0.8, learning rate and clip range annealed linearly from 1e-3 and 0.2), and a
  second time with our program's own values (batch 64, 10 epochs, clip 0.2 constant), each
  stopped by a callback at the same target; and TorchRL's PPO (``ClipPPOLoss``) with
  rl-zoo3's values (:mod:`bench.torchrl_ppo`), checked against the target after each
  rollout. Every run is capped (``Caps``: environment steps and wall time); a capped run
  counts as not solved. Figure: the median over the seeds (a run not solved counts as
  longer than any solved one).
- **Atari Pong PPO, steps per second of full training** (acting and learning) for a fixed
  budget: ours is ``bin/AtariPPO --max_steps N`` on 1 and on 2 workers; the peers are SB3's
  ``PPO("CnnPolicy")`` on ``make_atari_env`` (its Atari wrappers: no-op starts, frame skip 4
  with max-pooling, 84x84 grey, frame stack 4; the same game ALE/Pong-v5 with sticky actions,
  no life-loss ending) with the same hyperparameters (8 environments, 128 steps, batch 256,
  4 epochs, lr 2.5e-4 annealed, clip 0.1, entropy 0.01, value 0.5), on DummyVecEnv (SB3's
  default) and on SubprocVecEnv (one process per environment).

Both sides run as whole processes, timed from launch to exit: interpreter start, imports and
environment creation included, so nothing is left out of either side. SB3 runs in a child
process of this module (``python -m bench.sb3 cartpole|atari ...``, which prints one
``RESULT {json}`` line) with one torch thread, as ours has per worker (its determinism
rule); one more Atari row gives SB3 torch's default thread count (one per core), which on a
loaded machine can be much slower (one CartPole run took 8x longer here that way). The
CartPole runs go seed by seed, ours and each SB3 row in turn, so that the machine's drift in
speed (up to 10% between minutes here) falls on both sides alike.
``--quick``: one seed with small caps and one SB3 row on CartPole, and a one-update Atari
budget (1,024 steps) with one SB3 row: a few minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import ROOT, Row, build, last_lines, launch, scratch
from .rows import Table

SEEDS = (1, 2, 3, 4, 5)
TARGET_RETURN = 475.0
WINDOW = 20
ATARI_ID = "ALE/Pong-v5"

#: rl-zoo3's hyperparams/ppo.yml, CartPole-v1 (SB3 names; "lin_" values annealed to 0)
ZOO_CARTPOLE = dict(
    n_steps=32,
    batch_size=256,
    n_epochs=20,
    gamma=0.98,
    gae_lambda=0.8,
    ent_coef=0.0,
    learning_rate="lin_1e-3",
    clip_range="lin_0.2",
)
#: lf_src/CartPolePPO.lf's defaults in SB3's names
OURS_CARTPOLE = dict(
    n_steps=32,
    batch_size=64,
    n_epochs=10,
    gamma=0.98,
    gae_lambda=0.8,
    ent_coef=0.0,
    vf_coef=0.5,
    learning_rate="lin_1e-3",
    clip_range=0.2,
)
#: CleanRL's ppo_atari.py (lf_src/AtariPPO.lf's defaults) in SB3's names
ATARI = dict(
    n_steps=128,
    batch_size=256,
    n_epochs=4,
    gamma=0.99,
    gae_lambda=0.95,
    ent_coef=0.01,
    vf_coef=0.5,
    max_grad_norm=0.5,
    learning_rate="lin_2.5e-4",
    clip_range=0.1,
)

#: seconds one Atari run may take before it is killed (its row then says FAILED)
ATARI_LIMIT_S = 900.0
#: our target ratios: CartPole median time (SB3's / ours), Atari SPS (ours / best peer)
CARTPOLE_TARGET = 2.0
ATARI_TARGET = 1.5


@dataclass(frozen=True)
class Caps:
    """Sizes of one invocation: the CartPole ``seeds`` and each run's cap, ``steps``
    environment steps and ``seconds`` of wall time; the Atari budget ``atari_steps``;
    ``every_peer``: False leaves out the second CartPole peer and all but the first Atari
    peer."""

    steps: int
    seconds: float
    atari_steps: int
    seeds: tuple[int, ...]
    every_peer: bool = True


FULL = Caps(steps=300_000, seconds=300.0, atari_steps=20_480, seeds=SEEDS)
QUICK = Caps(steps=50_000, seconds=90.0, atari_steps=1_024, seeds=SEEDS[:1], every_peer=False)


@dataclass(frozen=True)
class Solve:
    """One CartPole run: ``seconds`` of wall time (the whole process), whether it was
    ``solved`` before its cap, the environment ``steps`` it took (None when unknown)."""

    seconds: float
    solved: bool
    steps: int | None = None


# ---------------------------------------------------------------- the SB3 side (child process)


def schedule(value: Any) -> Any:
    """rl-zoo3's ``"lin_X"`` -> SB3's linear schedule from X to 0; a number stays as is."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress_remaining: progress_remaining * start
    return value


def sb3_kwargs(hparams: dict) -> dict:
    """SB3 PPO keyword arguments from a table above (schedules built)."""
    return {k: schedule(v) for k, v in hparams.items()}


def sb3_cartpole(seed: int, cap_steps: int, hparams: dict) -> dict:
    """Train SB3 PPO on CartPole-v1 (8 environments) until the mean return of the last 20
    episodes reaches 475 or ``cap_steps``; returns ``{"solved": bool, "steps": int}``. The
    learning rate anneals over ``cap_steps``, as ours anneals over its ``max_steps``."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class StopAtTarget(BaseCallback):
        """Ends ``learn`` once the last WINDOW finished episodes average TARGET_RETURN."""

        def __init__(self) -> None:
            super().__init__()
            self.recent: deque[float] = deque(maxlen=WINDOW)
            self.solved = False

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.recent.append(float(info["episode"]["r"]))
            full = len(self.recent) == WINDOW
            self.solved = full and sum(self.recent) / WINDOW >= TARGET_RETURN
            return not self.solved

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", **sb3_kwargs(hparams))
    stop = StopAtTarget()
    model.learn(total_timesteps=cap_steps, callback=stop)
    return {"solved": stop.solved, "steps": int(model.num_timesteps)}


def pong(**kwargs: Any) -> Any:
    """``gym.make(ATARI_ID, **kwargs)`` with ale-py's games registered first: SB3's subprocess
    workers start from a fresh interpreter where nothing has imported ale-py yet."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    return gym.make(ATARI_ID, **kwargs)


def sb3_atari(steps: int, seed: int, subproc: bool) -> dict:
    """Train SB3 PPO on ALE/Pong-v5 for ``steps`` environment steps; returns
    ``{"steps": int, "train_seconds": float}`` (``learn`` alone, for the note)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecFrameStack

    env = make_atari_env(
        pong,
        n_envs=8,
        seed=seed,
        env_kwargs={"frameskip": 1},  # the wrappers skip 4 frames and max-pool the last two
        wrapper_kwargs={"terminal_on_life_loss": False},
        vec_env_cls=SubprocVecEnv if subproc else None,
    )
    env = VecFrameStack(env, n_stack=4)
    model = PPO("CnnPolicy", env, seed=seed, **sb3_kwargs(ATARI))
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    took = time.perf_counter() - t0
    env.close()
    return {"steps": int(model.num_timesteps), "train_seconds": took}


def main(argv: list[str] | None = None) -> int:
    """Child-process entry: ``python -m bench.sb3 cartpole SEED CAP zoo|ours`` or
    ``python -m bench.sb3 atari STEPS SEED dummy|subproc``, with ``--threads N`` torch
    threads (0: torch's default); prints ``RESULT {json}``."""
    ap = argparse.ArgumentParser(prog="python -m bench.sb3")
    ap.add_argument("what", choices=["cartpole", "atari"])
    ap.add_argument("numbers", nargs=2, type=int)
    ap.add_argument("variant", choices=["zoo", "ours", "dummy", "subproc"])
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    if a.what == "cartpole":
        hparams = ZOO_CARTPOLE if a.variant == "zoo" else OURS_CARTPOLE
        result = sb3_cartpole(a.numbers[0], a.numbers[1], hparams)
    else:
        result = sb3_atari(a.numbers[0], a.numbers[1], a.variant == "subproc")
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------- running a process


def child_env(**more: str) -> dict:
    """The environment of a child process: this checkout's packages first, and ``more``."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", **more)


def our_env() -> dict:
    """Our programs' environment (one BLAS thread, as ``bench.programs.run`` gives them)."""
    return child_env(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def sb3_child(*args: str, threads: int = 1) -> list[str]:
    """The command line of an SB3 child process (``main`` above)."""
    return [sys.executable, "-m", "bench.sb3", *args, "--threads", str(threads)]


def steps_reported(stdout: str) -> int | None:
    """The environment steps our logger's closing line reports (``... after N episodes,
    M environment steps``), or None."""
    for line in reversed(stdout.splitlines()):
        if line.endswith(" environment steps"):
            return int(line.split()[-3].replace(",", ""))
    return None


# ---------------------------------------------------------------- CartPole: time to solve


def ours_cartpole(launcher: Path, seed: int, caps: Caps, cwd: Path) -> Solve:
    """One run of ``bin/CartPolePPO --seed S`` capped at ``caps`` (exit 1: its step budget
    ran out; killed: its time did)."""
    cmd = [str(launcher), "--seed", str(seed), "--max_steps", str(caps.steps)]
    p = launch(cmd, cwd, caps.seconds, our_env())
    if p.code not in (0, 1, None):
        raise RuntimeError(f"CartPolePPO exited {p.code}: {last_lines(p.stdout + p.stderr)}")
    return Solve(p.seconds, p.code == 0, steps_reported(p.stdout))


def peer_cartpole(seed: int, caps: Caps, variant: str, cwd: Path) -> Solve:
    """One SB3 run (``variant``: "zoo" or "ours" hyperparameters) capped at ``caps``."""
    cmd = sb3_child("cartpole", str(seed), str(caps.steps), variant)
    return child_solve("SB3", cmd, caps, cwd)


def torchrl_cartpole(seed: int, caps: Caps, cwd: Path) -> Solve:
    """One TorchRL run (:mod:`bench.torchrl_ppo`, rl-zoo3's values) capped at ``caps``.
    RuntimeError when TorchRL is not installed (its row then says FAILED)."""
    if importlib.util.find_spec("torchrl") is None:
        raise RuntimeError("torchrl is not installed (pip install -e '.[bench]')")
    cmd = [sys.executable, "-m", "bench.torchrl_ppo", str(seed), str(caps.steps)]
    return child_solve("TorchRL", cmd, caps, cwd)


def child_solve(who: str, cmd: list[str], caps: Caps, cwd: Path) -> Solve:
    """Run a peer's child process ``cmd`` (one that prints ``RESULT {"solved", "steps"}``)
    capped at ``caps.seconds`` (killed: not solved). RuntimeError naming ``who`` with the
    last lines of its stderr when it exits non-zero."""
    p = launch(cmd, cwd, caps.seconds, child_env())
    if p.code is None:
        return Solve(p.seconds, False)
    if p.code != 0:
        raise RuntimeError(f"{who} exited {p.code}: {last_lines(p.stderr)}")
    r = p.result()
    return Solve(p.seconds, bool(r["solved"]), int(r["steps"]))


def median_time(runs: list[Solve]) -> tuple[float, str]:
    """The median wall time over ``runs`` (a run not solved counts as infinitely long) and a
    note with the solved count and each run's time and steps. RuntimeError (a failed row,
    the note in its message) when the median run was not solved."""
    times = [r.seconds if r.solved else float("inf") for r in runs]
    med = statistics.median(times)
    each = ", ".join(
        f"{r.seconds:.1f} s/{r.steps if r.steps is not None else '?'} steps"
        + ("" if r.solved else " (capped)")
        for r in runs
    )
    note = f"{sum(r.solved for r in runs)}/{len(runs)} solved; runs: {each}"
    if med == float("inf"):
        raise RuntimeError(f"the median run did not solve CartPole within its cap; {note}")
    return med, note


def interleaved(sides: dict[str, Any], seeds: tuple[int, ...]) -> dict[str, list]:
    """Run ``sides[name](seed)`` for every seed, one seed of every side in turn (seed 1 of
    each side, then seed 2...), so that this shared machine's drift in speed over the minutes
    of the workload falls on every side alike. Returns each side's results in seed order; a
    run that raised leaves its exception in its place."""
    results: dict[str, list] = {name: [] for name in sides}
    for seed in seeds:
        for name, run_one in sides.items():
            try:
                results[name].append(run_one(seed))
            except Exception as e:  # noqa: BLE001 - the side's row reports it
                results[name].append(e)
    return results


def median_of(runs: list) -> tuple[float, str]:
    """:func:`median_time` of one side's :func:`interleaved` results; the first exception
    among them is raised (its row then says FAILED)."""
    for r in runs:
        if isinstance(r, Exception):
            raise r
    return median_time(runs)


def cartpole_rows(caps: Caps, work: Path) -> list[Row]:
    """Our CartPolePPO, then SB3 with rl-zoo3's values (and with ours), on ``caps.seeds``,
    run in turn seed by seed (:func:`interleaved`)."""
    t = Table("CartPole PPO: wall time to solve (median)", "s", higher_better=False)
    cap_note = f"seeds {list(caps.seeds)}; cap {caps.steps:,} steps or {caps.seconds:g} s"
    launcher: list[Path] = []

    def ours(seed: int) -> Solve:
        if not launcher:
            launcher.append(build(ROOT / "lf_src" / "CartPolePPO.lf", work / "cartpole"))
        return ours_cartpole(launcher[0], seed, caps, work)

    sides = {"ours": ours, "zoo": lambda s: peer_cartpole(s, caps, "zoo", work)}
    if caps.every_peer:
        sides["ours_values"] = lambda s: peer_cartpole(s, caps, "ours", work)
        sides["torchrl"] = lambda s: torchrl_cartpole(s, caps, work)
    runs = interleaved(sides, caps.seeds)
    t.ours(
        lambda: median_of(runs["ours"]),
        note=f"{cap_note}; -w 1 (its default); whole process, start-up included; "
        "the sides run in turn seed by seed",
    )
    t.peer(
        "Stable-Baselines3 PPO, rl-zoo3's CartPole values",
        lambda: median_of(runs["zoo"]),
        note="batch 256, 20 epochs, lr and clip annealed; DummyVecEnv; 1 torch thread",
        target=CARTPOLE_TARGET,
    )
    if caps.every_peer:
        t.peer(
            "Stable-Baselines3 PPO, our CartPolePPO's values",
            lambda: median_of(runs["ours_values"]),
            note="batch 64, 10 epochs, lr annealed, clip 0.2; DummyVecEnv; 1 torch thread",
        )
        t.peer(
            "TorchRL PPO, rl-zoo3's CartPole values",
            lambda: median_of(runs["torchrl"]),
            note="ClipPPOLoss, GAE, a Collector over SerialEnv; target checked every "
            "rollout; 1 torch thread (bench/torchrl_ppo.py)",
        )
    return t.rows


# ---------------------------------------------------------------- Atari: steps per second


def ours_atari(launcher: Path, steps: int, workers: int, work: Path) -> tuple[float, str]:
    """Steps/s of one ``bin/AtariPPO --max_steps N -w W`` run (whole process), and a note.
    The run ends with exit status 1 (its step budget before Pong's target), as expected."""
    cmd = [str(launcher), "-w", str(workers), "--max_steps", str(steps)]
    p = launch(cmd, work, ATARI_LIMIT_S, our_env())
    if p.code is None:
        raise RuntimeError(f"AtariPPO did not finish in {ATARI_LIMIT_S:g} s (killed)")
    if p.code not in (0, 1) or steps_reported(p.stdout) != steps:
        raise RuntimeError(f"AtariPPO exited {p.code}: {last_lines(p.stdout + p.stderr)}")
    return steps / p.seconds, f"{steps:,} steps in {p.seconds:.1f} s"


def peer_atari(steps: int, vec: str, threads: int, work: Path) -> tuple[float, str]:
    """Steps/s of one SB3 child process (``vec``: "dummy" or "subproc"), and a note."""
    p = launch(
        sb3_child("atari", str(steps), "1", vec, threads=threads), work, ATARI_LIMIT_S, child_env()
    )
    if p.code is None:
        raise RuntimeError(f"SB3 did not finish in {ATARI_LIMIT_S:g} s (killed)")
    if p.code != 0:
        raise RuntimeError(f"SB3 exited {p.code}: {last_lines(p.stderr)}")
    r = p.result()
    return r["steps"] / p.seconds, (
        f"{r['steps']:,} steps in {p.seconds:.1f} s (learn() alone {r['train_seconds']:.1f} s)"
    )


#: SB3 rows of the Atari workload: (name, vector env, torch threads; 0: torch's default)
ATARI_PEERS = (
    ("Stable-Baselines3 PPO, DummyVecEnv, 1 torch thread", "dummy", 1),
    ("Stable-Baselines3 PPO, SubprocVecEnv, 1 torch thread", "subproc", 1),
    ("Stable-Baselines3 PPO, DummyVecEnv, torch's default threads", "dummy", 0),
)


def atari_rows(caps: Caps, work: Path) -> list[Row]:
    """Our AtariPPO on 2 workers and on 1, then the SB3 rows (ratios to our better one)."""
    t = Table("Atari Pong PPO: training steps/s (acting + learning)", "steps/s")
    steps = caps.atari_steps
    launcher: list[Path] = []

    def ours(workers: int) -> tuple[float, str]:
        if not launcher:
            launcher.append(build(ROOT / "lf_src" / "AtariPPO.lf", work / "atari"))
        return ours_atari(launcher[0], steps, workers, work)

    t.ours(lambda: ours(2), note="-w 2; whole process, start-up included")
    one = t.peer("ours on 1 worker (-w 1)", lambda: ours(1), note="ratio = speed-up from -w 2")
    best = max([f for f in (t.our_figure, one) if f is not None], default=None)
    if best is not None:
        t.rebase(best, f"ratio to our better worker count ({best:.1f} steps/s)")
    for name, vec, threads in ATARI_PEERS if caps.every_peer else ATARI_PEERS[:1]:
        t.peer(
            name,
            lambda: peer_atari(steps, vec, threads, work),
            note="same hyperparameters and budget",
            target=ATARI_TARGET,
        )
    return t.rows


def run(quick: bool) -> list[Row]:
    """Both workloads (``quick``: the small sizes of :data:`QUICK`)."""
    caps = QUICK if quick else FULL
    work = scratch()
    return cartpole_rows(caps, work) + atari_rows(caps, work)


if __name__ == "__main__":
    sys.exit(main())
