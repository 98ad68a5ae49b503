"""rl_algos.plotter: the helper process draws the same PNG as this process would, a run
without a helper (or with a failed one) still gets its curve, and the helper never outlives
its run."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import ROOT

from rl_algos import plotter

STEPS, RETURNS = [40, 90, 150, 230], [12.0, 35.5, 9.25, 80.0]


def curve(png_path, **more) -> plotter.Curve:
    return plotter.Curve(STEPS, RETURNS, 2, str(png_path), **more)


@pytest.fixture
def no_helper():
    plotter.stop()
    yield
    plotter.stop()


def test_the_helper_draws_the_same_png_as_this_process(tmp_path, no_helper):
    here = plotter.draw(curve(tmp_path / "here.png", title="t", target=50.0))
    plotter.start()
    helper = plotter._helper
    assert helper is not None
    there = plotter.draw(curve(tmp_path / "there.png", title="t", target=50.0))
    assert plotter._helper is helper and helper.poll() is None  # it drew, and waits for more
    assert open(here, "rb").read() == open(there, "rb").read()
    assert open(there, "rb").read()[:8] == b"\x89PNG\r\n\x1a\n"
    plotter.stop()
    assert helper.returncode == 0 and plotter._helper is None


def test_a_request_the_helper_cannot_draw_is_drawn_here_and_raises_here(tmp_path, no_helper):
    plotter.start()
    missing = tmp_path / "no such dir" / "curve.png"
    with pytest.raises(OSError):
        plotter.draw(curve(missing))
    assert plotter._helper is not None and plotter._helper.poll() is None  # still usable
    ok = plotter.draw(curve(tmp_path / "curve.png"))
    assert os.path.getsize(ok) > 0


def test_a_dead_helper_leaves_the_drawing_to_this_process(tmp_path, no_helper):
    plotter.start()
    helper = plotter._helper
    assert helper is not None
    helper.kill()
    helper.wait()
    png = plotter.draw(curve(tmp_path / "curve.png"))
    assert open(png, "rb").read()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_helper_ends_with_its_parent_even_when_killed():
    """A run killed with SIGKILL runs no exit code: its helper notices the new parent."""
    code = textwrap.dedent(
        """
        import time
        from rl_algos import plotter
        plotter.start()
        print(plotter._helper.pid, flush=True)
        time.sleep(60)
        """
    )
    run = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    helper = int(run.stdout.readline())
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    run.stdout.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(helper):
        time.sleep(0.05)
    assert not _alive(helper)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
