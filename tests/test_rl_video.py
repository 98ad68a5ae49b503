"""Videos during training (rl_algos.video, GymEnv's `capture_video`).

Every N-th episode of environment 0 of bank member 0 is written to <run directory>/videos/
as an MP4 with one frame after the reset and one after each step; the run's results are the
same with and without videos. A checkpoint keeps which episode is recorded, not the open file.
"""

from __future__ import annotations

import csv
import importlib.util
import pickle
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import ROOT, build, run_in_folder

from rl_algos.config import ConfigError
from rl_algos.envs import EnvGroup
from rl_algos.video import EpisodeVideo, VideoCapture, check_capture_video

imageio = pytest.importorskip("imageio.v2")
pytest.importorskip("imageio_ffmpeg")

FIXTURE = ROOT / "tests" / "engine_fixtures" / "EngineCartPolePPO.lf"


def frames(path: Path) -> list[np.ndarray]:
    """The frames of a video file, read back."""
    with imageio.get_reader(str(path)) as reader:
        return [frame for frame in reader]  # list() would trust its length: infinite


def videos(folder: Path) -> dict[int, Path]:
    """Episode number -> its video in ``folder``."""
    return {int(p.stem.rsplit("-", 1)[1]): p for p in folder.glob("rl-video-episode-*.mp4")}


def lengths_of_env0(run_dir: Path) -> list[int]:
    """The lengths of the episodes of environment 0, in order, from returns.csv."""
    with open(run_dir / "returns.csv", newline="") as f:
        return [int(r["length"]) for r in csv.DictReader(f) if r["env"] == "0"]


def test_a_program_records_every_nth_episode_and_its_results_stay_the_same(tmp_path):
    launcher = build(FIXTURE, tmp_path / "out")
    tiny = ("--max_steps", "1200", "--num_steps", "8", "--minibatch_size", "32")
    (p1, plain), (p2, recorded) = (
        run_in_folder(launcher, tmp_path / name, *tiny, *args, timeout=120)
        for name, args in (("plain", ()), ("recorded", ("--capture_video", "3")))
    )
    for p in (p1, p2):
        assert "stopped at its step budget" in p.stderr, p.stderr[-2000:]
    assert (plain / "returns.csv").read_bytes() == (recorded / "returns.csv").read_bytes()
    assert not (plain / "videos").exists()
    lengths = lengths_of_env0(recorded)
    found = videos(recorded / "videos")
    # the episodes 0, 3, 6, ... of environment 0, and the one running at the end (cut short)
    assert sorted(found) == list(range(0, len(lengths) + 1, 3)) and len(found) >= 2
    for episode, path in found.items():
        got = frames(path)
        if episode < len(lengths):
            assert len(got) == lengths[episode] + 1  # the reset, then each step
        assert got[0].shape == (400, 600, 3) and got[0].dtype == np.uint8
    assert not list((recorded / "videos").glob("*.part.mp4"))


@pytest.mark.parametrize("engine", ["loop", "gymnasium-sync", "gymnasium-async"])
def test_each_gymnasium_engine_records_environment_0(tmp_path, engine):
    capture = VideoCapture(str(tmp_path), 2)
    group = EnvGroup("CartPole-v1", 2, np.random.default_rng(3), engine=engine, video=capture)
    plain = EnvGroup("CartPole-v1", 2, np.random.default_rng(3), engine=engine)
    lengths = []
    try:
        assert pickle.dumps(group.reset()) == pickle.dumps(plain.reset())
        for a in np.random.default_rng(4).integers(2, size=(100, 2)):
            step = group.step(a)
            assert pickle.dumps(step) == pickle.dumps(plain.step(a))
            lengths += [e.length for e in step.episodes if e.env == 0]
    finally:
        group.close()
        plain.close()
    found = videos(tmp_path)
    finished = [e for e in range(len(lengths)) if e % 2 == 0]
    assert len(finished) >= 2 and sorted(found)[: len(finished)] == finished
    for e in finished:  # and the episode running at close, cut short, if it is even
        assert len(frames(found[e])) == lengths[e] + 1


def test_an_atari_game_is_recorded_in_colour(tmp_path):
    if importlib.util.find_spec("ale_py") is None:
        pytest.skip("ale-py is not installed")
    kwargs = {"max_num_frames_per_episode": 120}
    group = EnvGroup(
        "ALE/Pong-v5", 1, np.random.default_rng(1), video=VideoCapture(str(tmp_path), 1), **kwargs
    )
    plain = EnvGroup("ALE/Pong-v5", 1, np.random.default_rng(1), **kwargs)
    assert pickle.dumps(group.reset()) == pickle.dumps(plain.reset())
    episodes = []
    while not episodes:
        a = np.array([2])
        step = group.step(a)
        assert pickle.dumps(step) == pickle.dumps(plain.step(a))
        episodes = step.episodes
    group.close()
    got = frames(tmp_path / "rl-video-episode-0.mp4")
    assert len(got) == episodes[0].length + 1 and got[0].shape == (210, 160, 3)


def test_a_resumed_recorder_drops_the_episode_it_was_in(tmp_path):
    """A snapshot taken while recording, restored after the process died: the partial file
    is removed, that episode is not recorded, the next one is."""
    env = EpisodeVideo(gym.make("CartPole-v1", render_mode="rgb_array"), str(tmp_path), 1)
    env.reset(seed=0)
    for _ in range(3):
        env.step(0)
    snapshot = pickle.dumps(env)
    env._writer.close()  # the process dies: its file stays partial
    assert [p.name for p in tmp_path.iterdir()] == ["rl-video-episode-0.part.mp4"]
    resumed = pickle.loads(snapshot)
    assert not list(tmp_path.iterdir()) and resumed.episode == 0 and not resumed.recording
    done, steps = False, 0
    while not done:
        done = resumed.step(0)[2]
        steps += 1
    resumed.reset()
    resumed.step(0)
    resumed.close()
    assert [p.name for p in tmp_path.iterdir()] == ["rl-video-episode-1.mp4"]
    assert len(frames(tmp_path / "rl-video-episode-1.mp4")) == 2


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True])
def test_capture_video_takes_an_episode_interval(bad):
    with pytest.raises(ConfigError, match="capture_video is 0 .* or N > 0"):
        check_capture_video(bad)
    assert check_capture_video(0) == 0 and check_capture_video(5) == 5


def test_the_cpp_engines_cannot_record(tmp_path):
    if importlib.util.find_spec("envpool") is None:
        pytest.skip("envpool is not installed")
    capture = VideoCapture(str(tmp_path), 1)
    with pytest.raises(ConfigError, match="cannot take capture_video; engines that can: loop"):
        EnvGroup("CartPole-v1", 2, np.random.default_rng(0), engine="envpool", video=capture)
