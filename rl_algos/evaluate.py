"""Evaluate a trained policy: load a run directory's checkpoint, play N episodes of its
environment with seeds of its own, report the mean and standard deviation of the returns,
and optionally record one episode as an MP4 or a GIF (imageio).

The checkpoint (``model.pt``, written by the PPO, DQN and SAC learner reactors) carries the
algorithm, the network kind and spec, the state dict and the environment id; a run's
``config.json`` supplies the environment id of older checkpoints. Actions are greedy: the
most probable action of a PPO policy (the mean of a Gaussian one, clipped to the action
space), the mean action of a SAC policy (squashed into the bounds), the largest Q value of
a DQN network. A checkpoint with an observation scaling
(``obs_norm``, :class:`rl_algos.normalize.ObsStats`) has it applied to every observation.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .envs import make_env
from .networks import GaussianActorCritic, SquashedGaussianActor, Weights, load_weights
from .normalize import ObsStats
from .record import read_record

#: First episode seed of an evaluation: far from the seeds training draws (small integers).
EVAL_SEED = 1_000_000
RESULT_FILE = "eval.json"


@dataclass(frozen=True)
class Evaluation:
    """Returns of ``episodes`` greedy episodes of ``env_id`` seeded ``seed``, ``seed + 1``...;
    ``video``: the MP4 or GIF written (None when not asked for)."""

    model: str
    env_id: str
    seed: int
    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    video: str | None = None

    @property
    def mean(self) -> float:
        """Mean return."""
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        """Standard deviation of the returns (population, as SB3's ``evaluate_policy``)."""
        return float(np.std(self.returns))

    def summary(self) -> str:
        """``CartPole-v1: mean return 500.0 +- 0.0 over 10 episodes (min 500, max 500)``."""
        return (
            f"{self.env_id}: mean return {self.mean:.1f} +- {self.std:.1f} over "
            f"{len(self.returns)} episodes (min {min(self.returns):g}, "
            f"max {max(self.returns):g}; seeds {self.seed}..{self.seed + len(self.returns) - 1})"
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON form written to ``eval.json``."""
        return {
            "model": self.model,
            "env_id": self.env_id,
            "seed": self.seed,
            "episodes": len(self.returns),
            "mean_return": self.mean,
            "std_return": self.std,
            "returns": list(self.returns),
            "lengths": list(self.lengths),
            "video": self.video,
        }


def find_model(path: str) -> str:
    """The checkpoint of a run: ``path`` itself (a file), ``path/model.pt``, the only
    ``path/*.model.pt``, or that of the newest run directory below ``path`` (a
    ``runs/<program>`` folder).

    Raises:
        FileNotFoundError: no checkpoint there.
        ValueError: several learners' checkpoints and none named ``model.pt``.
    """
    if os.path.isfile(path):
        return path
    found = _checkpoints(path)
    if not found:
        runs = sorted(d for d in glob.glob(os.path.join(path, "*")) if _checkpoints(d))
        if runs:
            return find_model(runs[-1])
        raise FileNotFoundError(f"no model.pt in {path}")
    if len(found) > 1:
        names = ", ".join(os.path.basename(f) for f in found)
        raise ValueError(f"{path} holds several checkpoints ({names}); name one")
    return found[0]


def _checkpoints(run_dir: str) -> list[str]:
    main = os.path.join(run_dir, "model.pt")
    if os.path.isfile(main):
        return [main]
    return sorted(glob.glob(os.path.join(run_dir, "*.model.pt")))


def load_policy(model_path: str) -> tuple[torch.nn.Module, str | None, ObsStats | None]:
    """The network of a checkpoint (eval mode, CPU), its environment id (None when the
    checkpoint predates recording it) and its observation scaling (None when none).

    Raises:
        KeyError: a checkpoint without ``kind``, ``spec`` or ``state_dict``.
    """
    ckpt = torch.load(model_path, map_location="cpu", weights_only=True)
    state = {k: v.numpy() for k, v in ckpt["state_dict"].items()}
    net = load_weights(Weights(ckpt["kind"], dict(ckpt["spec"]), state))
    norm = ObsStats.from_dict(ckpt["obs_norm"]) if "obs_norm" in ckpt else None
    return net.eval(), ckpt.get("env_id") or None, norm


def greedy_action(net: torch.nn.Module, obs: np.ndarray) -> int | np.ndarray:
    """The greedy action of ``net`` (an ActorCritic, GaussianActorCritic, QNetwork or SAC's
    SquashedGaussianActor) for one observation: an int, or the Gaussian's mean
    ((action_dim,) float32; not clipped, squashed into the bounds for SAC)."""
    x = torch.as_tensor(obs[None])
    if x.dtype != torch.uint8:
        x = x.float()
    with torch.no_grad():
        out = net(x)
        if isinstance(net, SquashedGaussianActor):
            return net.squash(out[0])[0].numpy()
    scores = out[0] if isinstance(out, tuple) else out  # (logits or mean, value) or Q values
    if isinstance(net, GaussianActorCritic):
        return scores[0].numpy()
    return int(scores.argmax(-1)[0])


def evaluate(
    run_dir: str,
    episodes: int = 10,
    seed: int = EVAL_SEED,
    video: str | None = None,
    env_id: str | None = None,
) -> Evaluation:
    """Play ``episodes`` greedy episodes with the checkpoint of ``run_dir`` (see
    :func:`find_model`); ``video``: an MP4 or GIF path for the first episode; ``env_id``
    overrides the recorded environment; otherwise the run's ``make_kwargs`` parameter
    (config.json), if any, goes to ``gymnasium.make``. Writes ``eval.json`` beside the
    checkpoint.

    Raises:
        FileNotFoundError, ValueError: see :func:`find_model`; ValueError also when no
            environment id is known.
    """
    if episodes < 1:
        raise ValueError(f"--episodes must be at least 1, not {episodes}")
    model = find_model(run_dir)
    net, recorded, norm = load_policy(model)
    record = read_record(os.path.dirname(model))
    make_kwargs = {} if env_id else record.get("parameters", {}).get("make_kwargs") or {}
    env_id = env_id or recorded or record.get("env_id")
    if not env_id:
        raise ValueError(f"{model} records no environment id; give one with --env")
    returns, lengths = [], []
    for i in range(episodes):
        frames: list[np.ndarray] | None = [] if (video and i == 0) else None
        ret, length = play(net, env_id, seed + i, frames, norm, make_kwargs)
        returns.append(ret)
        lengths.append(length)
        if frames is not None and video:
            write_video(frames, video)
    result = Evaluation(model, env_id, seed, tuple(returns), tuple(lengths), video)
    with open(os.path.join(os.path.dirname(model), RESULT_FILE), "w", encoding="utf-8") as f:
        json.dump(result.to_json(), f, indent=1)
    return result


def play(
    net: torch.nn.Module,
    env_id: str,
    seed: int,
    frames: list[np.ndarray] | None = None,
    norm: ObsStats | None = None,
    make_kwargs: dict[str, Any] | None = None,
) -> tuple[float, int]:
    """One greedy episode of ``env_id`` reset with ``seed``; returns (return, length). When
    ``frames`` is a list, the rendered RGB frames (H, W, 3) uint8 are appended to it;
    ``norm`` scales the observations the network sees; ``make_kwargs`` go to
    ``gymnasium.make``."""
    if frames is not None:  # pygame draws off screen, with no display or sound device
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    kwargs = dict(make_kwargs or {})
    if frames is not None:
        kwargs["render_mode"] = "rgb_array"
    env = make_env(env_id, **kwargs)
    try:
        obs, _ = env.reset(seed=seed)
        total, length, done = 0.0, 0, False
        while not done:
            if frames is not None:
                frames.append(np.asarray(env.render()))
            seen = np.asarray(obs) if norm is None else norm.apply(np.asarray(obs))
            obs, reward, terminated, truncated, _ = env.step(
                _bounded(env, greedy_action(net, seen))
            )
            total += float(reward)
            length += 1
            done = bool(terminated or truncated)
        return total, length
    finally:
        env.close()


def _bounded(env: Any, action: int | np.ndarray) -> int | np.ndarray:
    """``action`` clipped to the bounds of a Box action space (as in training)."""
    space = env.action_space
    if isinstance(action, np.ndarray):
        return np.clip(action.reshape(space.shape), space.low, space.high)
    return action


def write_video(frames: list[np.ndarray], path: str, fps: int = 30) -> str:
    """Write RGB ``frames`` (uint8 arrays (height, width, 3)) at ``fps`` frames per second
    as an MP4 (H.264, a ``path`` ending in ``.mp4``) or else an animated GIF; returns
    ``path``.

    Raises:
        ImportError: imageio is not installed (``pip install imageio``), or, for an MP4, its
            ffmpeg plugin (``pip install imageio-ffmpeg``).
    """
    import imageio.v2 as imageio

    if path.lower().endswith(".mp4"):
        try:
            import imageio_ffmpeg  # noqa: F401 -- the plugin imageio writes MP4 with
        except ImportError:
            raise ImportError(
                "an MP4 needs imageio's ffmpeg plugin: pip install imageio-ffmpeg "
                "(or name a .gif file)"
            ) from None
        # macro_block_size 1: any frame size, no rescaling
        imageio.mimwrite(path, list[Any](frames), fps=fps, macro_block_size=1)
    else:
        imageio.mimsave(path, list[Any](frames), duration=1000 / fps, loop=0)
    return path
