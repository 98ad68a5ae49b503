"""Videos during training: every N-th episode of one environment, as MP4 files.

An environment reactor given ``capture_video = N`` (N > 0) records episodes 0, N, 2N, ... of
environment 0 of its bank member 0 into ``<run directory>/videos/rl-video-episode-<e>.mp4``
(the names of gymnasium's ``RecordVideo`` and CleanRL's ``--capture_video``). That environment
is made with ``render_mode="rgb_array"`` and wrapped by :class:`EpisodeVideo`, outermost;
rendering reads the environment's state and draws no random numbers, so a run's results
(``returns.csv``, port values) are the same with and without videos.

Frames go to the video file as they are rendered (imageio's ffmpeg writer, H.264), so memory
stays flat however long the episode. A video is written as ``...part.mp4`` and renamed when its
episode ends or the environment closes (a stopped run keeps the episode it was in, cut
short). A checkpoint saves which episode is recorded, not the open file (nor pygame's
drawing surfaces): a run resumed in the middle of a recorded episode does not record the rest
of that episode, and removes the partial file the stopped run left.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from .config import ConfigError

#: The name of a run directory's folder of videos.
VIDEOS = "videos"
#: Where gymnasium's pygame-drawn games (classic control) keep what they draw with: objects
#: that do not pickle, made again by the next render when None.
DRAWING = ("screen", "clock", "surf")


def check_capture_video(every: Any) -> int:
    """``every`` as an episode interval: 0 (off) or a positive int.

    Raises:
        ConfigError: a negative number or not an int.
    """
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise ConfigError(
            f"capture_video is 0 (no videos) or N > 0 (record every N-th episode), not {every!r}"
        )
    return every


@dataclass(frozen=True)
class VideoCapture:
    """Record every ``every``-th episode into ``folder`` (absolute): what an environment
    maker needs to build the recorded environment."""

    folder: str
    every: int

    def wrap(self, env: gym.Env) -> EpisodeVideo:
        """``env`` (made with ``render_mode="rgb_array"``) recorded by :class:`EpisodeVideo`."""
        return EpisodeVideo(env, self.folder, self.every)


def video_folder(run_dir: str) -> str:
    """The absolute folder of a run's videos: ``<run_dir>/videos``."""
    return os.path.join(os.path.abspath(run_dir), VIDEOS)


def _ffmpeg_writer(path: str, fps: float) -> Any:
    """imageio's streaming MP4 writer (H.264). Raises ImportError with the install command
    when imageio or its ffmpeg plugin is missing."""
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401 -- the plugin imageio writes MP4 with
    except ImportError:
        raise ImportError(
            "capture_video needs imageio and its ffmpeg plugin: pip install imageio imageio-ffmpeg"
        ) from None
    # macro_block_size 1: any frame size, no rescaling
    return imageio.get_writer(path, fps=fps, macro_block_size=1)


class EpisodeVideo(gym.Wrapper):
    """Records episodes 0, ``every``, 2 ``every``, ... of ``env`` (counted from its first
    reset) into ``folder/rl-video-episode-<e>.mp4``, one RGB frame (height, width, 3) uint8
    after the reset and after each step, at the environment's ``render_fps`` (30 if it has
    none).

    Raises:
        ValueError: ``env`` does not render RGB arrays (``render_mode="rgb_array"``).
        ConfigError: ``every`` is not a positive int.
    """

    def __init__(self, env: gym.Env, folder: str, every: int) -> None:
        super().__init__(env)
        if env.render_mode != "rgb_array":
            raise ValueError(f"EpisodeVideo needs render_mode='rgb_array', not {env.render_mode!r}")
        if check_capture_video(every) == 0:
            raise ConfigError("EpisodeVideo records every N-th episode with N >= 1, not 0")
        # pygame (classic control) draws off screen, with no display or sound device
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        os.makedirs(folder, exist_ok=True)
        self.folder, self.every = folder, every
        self.fps = float(env.metadata.get("render_fps") or 30)
        self.episode = -1
        self.recording = False  # this episode is being written
        self._writer: Any = None

    def path(self, episode: int, partial: bool = False) -> str:
        """The file of ``episode``'s video (``partial``: while it is being written)."""
        name = f"rl-video-episode-{episode}" + (".part" if partial else "")
        return os.path.join(self.folder, name + ".mp4")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the environment; finish the video of the episode that ended, start one for
        the new episode if it is an ``every``-th."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._finish()
        self.episode += 1
        if self.episode % self.every == 0:
            self.recording = True
            self._frame()
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the environment; the frame after the step joins the video if recording."""
        out = self.env.step(action)
        self._frame()
        return out

    def close(self) -> None:
        """Finish the video being written (the episode cut short), then close the env."""
        self._finish()
        super().close()

    def _frame(self) -> None:
        if not self.recording:
            return
        if self._writer is None:
            self._writer = _ffmpeg_writer(self.path(self.episode, partial=True), self.fps)
        self._writer.append_data(np.asarray(self.env.render()))

    def _finish(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            if os.path.exists(self.path(self.episode, partial=True)):  # not removed by a resume
                os.replace(self.path(self.episode, partial=True), self.path(self.episode))
        self.recording = False

    def __getstate__(self) -> dict[str, Any]:
        """The wrapper's state without the open file (see the module docstring). The game's
        drawing objects (:data:`DRAWING`) are let go first, here too: they do not pickle,
        and the next frame makes them again."""
        game = self.env.unwrapped
        for name in DRAWING:
            if getattr(game, name, None) is not None:
                setattr(game, name, None)
        return {**self.__dict__, "_writer": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a snapshot's state: an episode recorded when it was taken stays
        unrecorded, its partial file removed."""
        self.__dict__.update(state)
        if self.recording:
            self.recording = False
            try:
                os.remove(self.path(self.episode, partial=True))
            except FileNotFoundError:
                pass
