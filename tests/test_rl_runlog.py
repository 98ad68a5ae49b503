"""What a training run leaves on disk survives the run being killed."""

from __future__ import annotations

import subprocess
import sys

from rl_algos.runlog import CSV_HEADER

KILLED_AFTER_THREE_EPISODES = """
import os, signal, sys
from rl_algos.runlog import EpisodeLog
log = EpisodeLog(sys.argv[1])
for i in range(3):
    log.add(step=10 * (i + 1), ret=float(i), length=10, env=0)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_every_finished_episode_is_on_disk_when_the_run_is_killed(tmp_path):
    csv = tmp_path / "returns.csv"
    r = subprocess.run([sys.executable, "-c", KILLED_AFTER_THREE_EPISODES, str(csv)])
    assert r.returncode == -9
    rows = csv.read_text(encoding="utf-8")
    assert rows == CSV_HEADER + "1,10,0,10,0\n2,20,1,10,0\n3,30,2,10,0\n"


def test_progress_on_a_file_is_a_plain_line_without_rich(monkeypatch):
    """Off a terminal the progress line is written as plain text, and rich is not needed."""
    import io

    from rl_algos import progress

    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setitem(sys.modules, "rich", None)  # importing rich would fail
    out = io.StringIO()
    bar = progress.TrainingProgress("Prog", 1000, stream=out)
    bar.update(500, 3, 12.5, force=True)
    assert bar.bar is None and bar.interval == 10.0
    line = out.getvalue()
    assert line.startswith("Prog: 500/1,000 steps | episodes 3 | mean return 12.5 | ")
    assert line.endswith(" steps/s\n") and line.count("\n") == 1
