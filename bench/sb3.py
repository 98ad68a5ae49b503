"""The RL programs beside Stable-Baselines3 (2.x, through its public API).

Two workloads:

- **CartPole PPO, wall time to solve** (mean return of the last 20 episodes >= 475), for each
  of ``SEEDS``: ours is ``bin/CartPolePPO --seed S`` (its default worker count, the logger
  stops it at the target); the peer is SB3's ``PPO("MlpPolicy")`` with rl-zoo3's tuned
  CartPole-v1 hyperparameters (8 environments, n_steps 32, batch 256, 20 epochs, gamma 0.98,
  GAE lambda 0.8, learning rate and clip range annealed linearly from 1e-3 and 0.2), and a
  second time with our program's own values (batch 64, 10 epochs, clip 0.2 constant), each
  stopped by a callback at the same target. Every run is capped (``Caps``: environment steps
  and wall time); a capped run counts as not solved. Figure: the median over the seeds
  (a run not solved counts as longer than any solved one).
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
``RESULT {json}`` line) with torch's default thread count; ours runs one torch thread per
worker (its determinism rule). ``--quick``: one seed with small caps, and a 2,048-step
budget on Atari.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import ROOT, Row, build, scratch
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

#: our target ratios: CartPole median time (SB3's / ours), Atari SPS (ours / best peer)
CARTPOLE_TARGET = 2.0
ATARI_TARGET = 1.5


@dataclass(frozen=True)
class Caps:
    """Limits of one run: ``steps`` environment steps (CartPole), ``seconds`` of wall time,
    ``atari_steps`` the Atari budget, ``seeds`` the CartPole seeds."""

    steps: int
    seconds: float
    atari_steps: int
    seeds: tuple[int, ...]


FULL = Caps(steps=300_000, seconds=300.0, atari_steps=20_480, seeds=SEEDS)
QUICK = Caps(steps=100_000, seconds=60.0, atari_steps=2_048, seeds=SEEDS[:1])


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


def sb3_atari(steps: int, seed: int, subproc: bool) -> dict:
    """Train SB3 PPO on ALE/Pong-v5 for ``steps`` environment steps; returns
    ``{"steps": int, "train_seconds": float}`` (``learn`` alone, for the note)."""
    import ale_py
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import SubprocVecEnv, VecFrameStack

    gym.register_envs(ale_py)
    env = make_atari_env(
        ATARI_ID,
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
    ``python -m bench.sb3 atari STEPS SEED dummy|subproc``; prints ``RESULT {json}``."""
    ap = argparse.ArgumentParser(prog="python -m bench.sb3")
    ap.add_argument("what", choices=["cartpole", "atari"])
    ap.add_argument("numbers", nargs=2, type=int)
    ap.add_argument("variant", choices=["zoo", "ours", "dummy", "subproc"])
    a = ap.parse_args(argv)
    if a.what == "cartpole":
        hparams = ZOO_CARTPOLE if a.variant == "zoo" else OURS_CARTPOLE
        result = sb3_cartpole(a.numbers[0], a.numbers[1], hparams)
    else:
        result = sb3_atari(a.numbers[0], a.numbers[1], a.variant == "subproc")
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------- running a process


@dataclass(frozen=True)
class Process:
    """A finished child process: exit ``code`` (None: killed at its time limit), its
    ``stdout`` and ``stderr``, and ``seconds`` of wall time from launch to exit."""

    code: int | None
    stdout: str
    stderr: str
    seconds: float

    def result(self) -> dict:
        """The json of its last ``RESULT`` line; RuntimeError when it printed none."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT ") :])
        raise RuntimeError(f"no RESULT line (exit {self.code}): {tail(self.stderr)}")


def launch(cmd: list[str], cwd: Path, limit_s: float, env: dict | None = None) -> Process:
    """Run ``cmd`` in ``cwd`` in a session of its own; past ``limit_s`` seconds the whole
    session is killed and ``code`` is None."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or dict(os.environ, PYTHONUNBUFFERED="1"),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=limit_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    return Process(code, out, err, time.perf_counter() - t0)


def our_env() -> dict:
    """Our programs' environment: this checkout's packages, one BLAS thread."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")


def sb3_child(*args: str) -> list[str]:
    """The command line of an SB3 child process (``main`` above)."""
    return [sys.executable, "-m", "bench.sb3", *args]


def tail(text: str, n: int = 3) -> str:
    """The last ``n`` non-empty lines, joined (where an error says what went wrong)."""
    return " | ".join([ln.strip() for ln in text.splitlines() if ln.strip()][-n:])


def steps_reported(stdout: str) -> int | None:
    """The environment steps our logger's closing line reports (``... after N episodes,
    M environment steps``), or None."""
    for line in reversed(stdout.splitlines()):
        if line.endswith(" environment steps"):
            return int(line.rsplit(" ", 3)[-3].replace(",", ""))
    return None


# ---------------------------------------------------------------- CartPole: time to solve


def ours_cartpole(launcher: Path, seed: int, caps: Caps, cwd: Path) -> Solve:
    """One run of ``bin/CartPolePPO --seed S`` capped at ``caps``."""
    cmd = [str(launcher), "--seed", str(seed), "--max_steps", str(caps.steps)]
    p = launch(cmd, cwd, caps.seconds, our_env())
    if p.code not in (0, 1, None):
        raise RuntimeError(f"CartPolePPO exited {p.code}: {tail(p.stdout + p.stderr)}")
    return Solve(p.seconds, p.code == 0, steps_reported(p.stdout))


def peer_cartpole(seed: int, caps: Caps, variant: str, cwd: Path) -> Solve:
    """One SB3 run (``variant``: "zoo" or "ours" hyperparameters) capped at ``caps``."""
    p = launch(sb3_child("cartpole", str(seed), str(caps.steps), variant), cwd, caps.seconds)
    if p.code is None:
        return Solve(p.seconds, False)
    r = p.result()
    return Solve(p.seconds, bool(r["solved"]), int(r["steps"]))


def median_time(runs: list[Solve]) -> tuple[float | None, str]:
    """The median wall time over ``runs`` (a run not solved counts as infinitely long; None
    when the median run was not solved) and a note: solved count, each run's time and steps."""
    times = [r.seconds if r.solved else float("inf") for r in runs]
    med = statistics.median(times)
    each = ", ".join(
        f"{r.seconds:.1f} s/{r.steps if r.steps is not None else '?'} steps"
        + ("" if r.solved else " (capped)")
        for r in runs
    )
    note = f"{sum(r.solved for r in runs)}/{len(runs)} solved; runs: {each}"
    return (med if med != float("inf") else None), note


def cartpole_rows(caps: Caps, work: Path) -> list[Row]:
    """Our CartPolePPO and SB3 (rl-zoo3's values, then ours) on ``caps.seeds``."""
    t = Table("CartPole PPO: wall time to solve (median)", "s", higher_better=False)
    cap_note = f"seeds {list(caps.seeds)}; cap {caps.steps:,} steps or {caps.seconds:g} s"

    def ours() -> tuple[float, str]:
        launcher = build(ROOT / "lf_src" / "CartPolePPO.lf", work / "cartpole")
        runs = [ours_cartpole(launcher, s, caps, work) for s in caps.seeds]
        return figure_or_fail(*median_time(runs), "-w 1 (its default)")

    def peer(variant: str):
        runs = [peer_cartpole(s, caps, variant, work) for s in caps.seeds]
        return figure_or_fail(*median_time(runs), "")

    t.ours(ours, note=f"{cap_note}; whole process, start-up included")
    t.peer(
        "Stable-Baselines3 PPO, rl-zoo3's CartPole values",
        lambda: peer("zoo"),
        note="batch 256, 20 epochs, lr and clip annealed; DummyVecEnv",
        target=CARTPOLE_TARGET,
    )
    t.peer(
        "Stable-Baselines3 PPO, our CartPolePPO's values",
        lambda: peer("ours"),
        note="batch 64, 10 epochs, lr annealed, clip 0.2; DummyVecEnv",
    )
    return t.rows


def figure_or_fail(figure: float | None, note: str, extra: str) -> tuple[float, str]:
    """``(figure, note)`` for a Table; RuntimeError (a failed row) when the median run was
    not solved."""
    note = "; ".join(p for p in (extra, note) if p)
    if figure is None:
        raise RuntimeError(f"the median run did not solve CartPole within its cap; {note}")
    return figure, note


# ---------------------------------------------------------------- Atari: steps per second


def ours_atari(launcher: Path, steps: int, workers: int, work: Path) -> tuple[float, str]:
    """Steps/s of one ``bin/AtariPPO --max_steps N -w W`` run (whole process), and a note."""
    cmd = [str(launcher), "-w", str(workers), "--max_steps", str(steps)]
    p = launch(cmd, work, 3600, our_env())
    done = steps_reported(p.stdout)
    if p.code not in (0, 1) or done != steps:
        raise RuntimeError(f"AtariPPO exited {p.code}: {tail(p.stdout + p.stderr)}")
    return steps / p.seconds, f"-w {workers}; {steps:,} steps in {p.seconds:.1f} s"


def peer_atari(steps: int, vec: str, work: Path) -> tuple[float, str]:
    """Steps/s of one SB3 child process (``vec``: "dummy" or "subproc"), and a note."""
    p = launch(sb3_child("atari", str(steps), "1", vec), work, 3600)
    if p.code != 0:
        raise RuntimeError(f"SB3 exited {p.code}: {tail(p.stderr)}")
    r = p.result()
    return r["steps"] / p.seconds, (
        f"{r['steps']:,} steps in {p.seconds:.1f} s (learn() alone {r['train_seconds']:.1f} s)"
    )


def atari_rows(caps: Caps, work: Path) -> list[Row]:
    """Our AtariPPO on 1 and 2 workers, then SB3 on DummyVecEnv and SubprocVecEnv."""
    t = Table("Atari Pong PPO: training steps/s (acting + learning)", "steps/s")
    steps = caps.atari_steps
    launcher: list[Path] = []

    def ours(workers: int) -> tuple[float, str]:
        if not launcher:
            launcher.append(build(ROOT / "lf_src" / "AtariPPO.lf", work / "atari"))
        return ours_atari(launcher[0], steps, workers, work)

    t.ours(lambda: ours(1), note="whole process, start-up included")
    two = t.peer("ours on 2 workers (-w 2)", lambda: ours(2), note="ratio: -w 1 over -w 2")
    best = max([f for f in (t.our_figure, two) if f is not None], default=None)
    if best is not None:
        t.rebase(best, f"ratio to our better worker count ({best:.0f} steps/s)")
    for vec, name in (("dummy", "DummyVecEnv"), ("subproc", "SubprocVecEnv")):
        t.peer(
            f"Stable-Baselines3 PPO, {name}",
            lambda: peer_atari(steps, vec, work),
            note="same hyperparameters; torch's default threads",
            target=ATARI_TARGET,
        )
    return t.rows


def run(quick: bool) -> list[Row]:
    """Both workloads; ``quick``: one seed with small caps, and a short Atari budget."""
    caps = QUICK if quick else FULL
    work = scratch()
    return cartpole_rows(caps, work) + atari_rows(caps, work)


if __name__ == "__main__":
    sys.exit(main())
