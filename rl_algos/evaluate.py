"""Evaluate a trained policy: load a run directory's checkpoint, play N episodes of its
environment with seeds of its own, report the mean and standard deviation of the returns,
and optionally record one episode as an MP4 or a GIF (imageio).

The checkpoint (``model.pt``, written by the PPO, DQN and SAC learner reactors) carries the
algorithm, the network kind and spec, the state dict and the environment id; a run's
``config.json`` supplies the environment id of older checkpoints. Actions are greedy: the
most probable action of a PPO policy (the mean of a Gaussian one, clipped to the action
space), the mean action of a SAC policy (squashed into the bounds), the largest Q value of
a DQN network. A network of the user's module (:mod:`rl_algos.custom_network`) is rebuilt by
its factory, whose module is imported from the current directory or PYTHONPATH. A checkpoint
with an observation scaling
(``obs_norm``, :class:`rl_algos.normalize.ObsStats`) has it applied to every observation.
An environment whose observation or action space differs from the network's is refused
before any episode, naming both (:func:`check_spaces`).

Each evaluation is added to the list in ``eval.json`` beside the checkpoint (oldest first,
each with its time and the SHA-256 of the model it played), so that no earlier evaluation is
lost: ``json.load(open("eval.json"))[-1]`` is the newest.
"""

from __future__ import annotations

import datetime
import glob
import hashlib
import json
import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from gymnasium import spaces as gym_spaces

from .custom_network import network_spaces as custom_network_spaces
from .envs import make_env
from .modelfile import MODEL_FILE
from .networks import Weights, load_weights
from .normalize import ObsStats
from .ppo import gaussian_log_std
from .record import read_record
from .runlog import is_run_directory, run_started
from .sac import SquashedPolicy, mean_action

#: First episode seed of an evaluation: far from the seeds training draws (small integers).
EVAL_SEED = 1_000_000
RESULT_FILE = "eval.json"


@dataclass(frozen=True)
class Evaluation:
    """Returns of ``episodes`` greedy episodes of ``env_id`` seeded ``seed``, ``seed + 1``...;
    ``video``: the MP4 or GIF written (None when not asked for); ``saved``: the ``eval.json``
    it was added to and ``number`` its place there (1 for the first), once saved."""

    model: str
    env_id: str
    seed: int
    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    video: str | None = None
    saved: str | None = None
    number: int = 0

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
        """The JSON form of one entry of ``eval.json``."""
        return {
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "model": self.model,
            "model_sha256": _sha256(self.model),
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
    ``runs/<program>`` folder) that has one.

    Raises:
        FileNotFoundError: no checkpoint there; the message says what is missing: ``path``
            itself, the model of a run that has not saved it yet, or any run.
        ValueError: several learners' checkpoints and none named ``model.pt``.
    """
    if os.path.isfile(path):
        return path
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path} does not exist")
    found = _checkpoints(path)
    if len(found) > 1:
        names = ", ".join(os.path.basename(f) for f in found)
        raise ValueError(f"{path} holds several checkpoints ({names}); name one")
    if found:
        return found[0]
    if _is_run(path):
        raise FileNotFoundError(
            f"{path} has no {MODEL_FILE} yet: a run saves it when it ends or is stopped "
            "(Ctrl-C, SIGTERM)"
        )
    # oldest first: run names begin with the environment and seed, not the time
    runs = sorted(
        (d for d in glob.glob(os.path.join(path, "*")) if _is_run(d)),
        key=lambda d: (run_started(d) or 0.0, d),
    )
    with_model = [d for d in runs if _checkpoints(d)]
    if with_model:
        return find_model(with_model[-1])
    if runs:
        n = len(runs)
        raise FileNotFoundError(
            f"no run in {path} has a {MODEL_FILE} yet ({n} run{'s' if n > 1 else ''})"
        )
    raise FileNotFoundError(
        f"{path} is neither a run directory nor a folder of runs: no {MODEL_FILE}, no run in it"
    )


def _is_run(folder: str) -> bool:
    """Whether ``folder`` is a run directory (:func:`rl_algos.runlog.is_run_directory`), or a
    folder holding a checkpoint."""
    return is_run_directory(folder) or (os.path.isdir(folder) and bool(_checkpoints(folder)))


def _checkpoints(run_dir: str) -> list[str]:
    main = os.path.join(run_dir, MODEL_FILE)
    if os.path.isfile(main):
        return [main]
    return sorted(glob.glob(os.path.join(run_dir, f"*.{MODEL_FILE}")))


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def describe_spaces(obs_shape: tuple[int, ...], actions: int | tuple[int, ...]) -> str:
    """``obs (4,), 2 actions`` (``actions`` an int: a discrete space) or ``obs (3,),
    continuous actions (1,)`` (a shape: a box)."""
    if isinstance(actions, int):
        return f"obs {tuple(obs_shape)}, {actions} actions"
    return f"obs {tuple(obs_shape)}, continuous actions {tuple(actions)}"


def network_spaces(spec: dict[str, Any]) -> tuple[tuple[int, ...], int | tuple[int, ...]]:
    """The (observation shape, actions) a network of ``spec`` (that of :class:`Weights`) takes:
    actions are a count for a discrete policy, a shape (action_dim,) for a continuous one."""
    if "factory" in spec:  # a user's module: its spaces are in the spec
        return custom_network_spaces(spec)
    obs = tuple(int(x) for x in spec["obs_shape"])
    if "n_actions" in spec:
        return obs, int(spec["n_actions"])
    dim = int(spec["action_dim"]) if "action_dim" in spec else len(spec["low"])
    return obs, (dim,)


def env_spaces(env: Any) -> tuple[tuple[int, ...], int | tuple[int, ...]]:
    """The (observation shape, actions) of a gymnasium environment, as
    :func:`network_spaces` gives them (a Box action space as its flattened size)."""
    space = env.action_space
    if isinstance(space, gym_spaces.Discrete):
        actions: int | tuple[int, ...] = int(space.n)
    else:
        actions = (int(np.prod(space.shape)),)
    return tuple(int(x) for x in env.observation_space.shape), actions


def check_spaces(
    net: torch.nn.Module, model: str, trained_on: str | None, env: Any, env_id: str
) -> None:
    """Refuse an environment whose spaces are not those of the network ``net`` (of the
    checkpoint ``model``, trained on ``trained_on``).

    Raises:
        ValueError: ``model.pt was trained on CartPole-v1 (obs (4,), 2 actions); Acrobot-v1
            has obs (6,), 3 actions``.
    """
    wanted, got = network_spaces(dict(getattr(net, "spec", {}))), env_spaces(env)
    if wanted != got:
        on = f" on {trained_on}" if trained_on else ""
        raise ValueError(
            f"{os.path.basename(model)} was trained{on} ({describe_spaces(*wanted)}); "
            f"{env_id} has {describe_spaces(*got)}"
        )


def load_policy(model_path: str) -> tuple[torch.nn.Module, str | None, ObsStats | None]:
    """The network of a checkpoint (eval mode, CPU), its environment id (None when the
    checkpoint predates recording it) and its observation scaling (None when none).

    Raises:
        KeyError: a checkpoint without ``kind``, ``spec`` or ``state_dict``.
        ConfigError: the network is a user's module that cannot be imported or built
            (:mod:`rl_algos.custom_network`).
    """
    ckpt = torch.load(model_path, map_location="cpu", weights_only=True)
    state = {k: v.numpy() for k, v in ckpt["state_dict"].items()}
    net = load_weights(Weights(ckpt["kind"], dict(ckpt["spec"]), state))
    norm = ObsStats.from_dict(ckpt["obs_norm"]) if "obs_norm" in ckpt else None
    return net.eval(), ckpt.get("env_id") or None, norm


def greedy_action(net: torch.nn.Module, obs: np.ndarray) -> int | np.ndarray:
    """The greedy action of ``net`` (an ActorCritic, GaussianActorCritic, QNetwork, a SAC
    policy (:class:`rl_algos.sac.SquashedPolicy`), or a user's module of any of these roles)
    for one observation: an int, or the Gaussian's mean ((action_dim,) float32; not clipped,
    squashed into the bounds for SAC)."""
    x = torch.as_tensor(obs[None])
    if x.dtype != torch.uint8:
        x = x.float()
    with torch.no_grad():
        if isinstance(net, SquashedPolicy):
            return mean_action(net, x)[0].numpy()
        out = net(x)
    scores = out[0] if isinstance(out, tuple) else out  # (logits or mean, value) or Q values
    if gaussian_log_std(net) is not None:
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
    (config.json), if any, goes to ``gymnasium.make``. Adds the result to ``eval.json``
    beside the checkpoint (:func:`save_evaluation`).

    Raises:
        FileNotFoundError, ValueError: see :func:`find_model`; ValueError also when no
            environment id is known, when the environment's spaces are not the network's
            (:func:`check_spaces`) and when ``eval.json`` is not a list of evaluations.
        ImportError: the module of an id ``module:Name-v0`` cannot be imported.
    """
    if episodes < 1:
        raise ValueError(f"--episodes must be at least 1, not {episodes}")
    model = find_model(run_dir)
    results = os.path.join(os.path.dirname(model), RESULT_FILE)
    earlier = read_evaluations(results)
    net, recorded, norm = load_policy(model)
    record = read_record(os.path.dirname(model))
    make_kwargs = {} if env_id else record.get("parameters", {}).get("make_kwargs") or {}
    trained_on = recorded or record.get("env_id")
    env_id = env_id or trained_on
    if not env_id:
        raise ValueError(f"{model} records no environment id; give one with --env")
    env = make_env(env_id, **make_kwargs)
    try:
        check_spaces(net, model, trained_on, env, env_id)
    finally:
        env.close()
    returns, lengths = [], []
    for i in range(episodes):
        frames: list[np.ndarray] | None = [] if (video and i == 0) else None
        ret, length = play(net, env_id, seed + i, frames, norm, make_kwargs)
        returns.append(ret)
        lengths.append(length)
        if frames is not None and video:
            write_video(frames, video)
    result = Evaluation(model, env_id, seed, tuple(returns), tuple(lengths), video)
    save_evaluation([*earlier, result.to_json()], results)
    return replace(result, saved=results, number=len(earlier) + 1)


def read_evaluations(path: str) -> list[dict[str, Any]]:
    """The evaluations in the ``eval.json`` at ``path``, oldest first: [] when there is none
    yet, a one-item list for the single object an earlier version wrote.

    Raises:
        ValueError: the file is not JSON, or neither a list nor an object.
    """
    try:
        with open(path, encoding="utf-8") as f:
            kept = json.load(f)
    except FileNotFoundError:
        return []
    except ValueError as e:
        raise ValueError(f"{path} is not JSON ({e}); move it away to evaluate") from None
    if isinstance(kept, dict):
        return [kept]
    if not isinstance(kept, list):
        raise ValueError(f"{path} is not a list of evaluations; move it away to evaluate")
    return kept


def save_evaluation(evaluations: list[dict[str, Any]], path: str) -> None:
    """Write ``evaluations`` (oldest first) to ``path`` through a temporary file, so that a
    reader never sees half a list."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(evaluations, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


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
