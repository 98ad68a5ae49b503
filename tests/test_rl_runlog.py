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
