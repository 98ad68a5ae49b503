"""Experiment tracking (rl_algos.tracking): a run with ``--track true`` leaves an offline
Weights & Biases run named as its run directory, holding config.json as its config and every
scalar row of the run's CSV files (the logger's and, from another process, the learner's)
as its history, with the same returns.csv as a run without tracking, which never imports
wandb; a failed run still finishes its W&B run. W&B runs offline here, with its folders in a
temporary directory: nothing reaches the network."""

from __future__ import annotations

import csv
import json
import os
import pickle
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, build, run_in_folder

from rl_algos import metrics, tracking
from rl_algos.metrics import ScalarLog

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

FIXTURE = ROOT / "tests" / "tracking_fixtures" / "TrackedPPO.lf"
PPO_TAGS = {
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/clipfrac",
    "charts/learning_rate",
}
BUDGET = "stopped at its step budget"

# one xdist worker runs the whole module, so that its module-scoped runs are made once
pytestmark = pytest.mark.xdist_group("rl-tracking")


# ------------------------------------------------------------------- reading a .wandb file


def wandb_records(run_dir: Path) -> list:
    """The records of the one offline W&B run under ``run_dir/wandb/``, from its ``.wandb``
    file: a 7-byte header (``:W&B``, a magic number, a version), then a LevelDB-style log of
    32 KiB blocks, each record in chunks with a 7-byte header (CRC-32C, little-endian
    16-bit length, kind: 1 whole, 2 first, 3 middle, 4 last); a block's tail under 7 bytes
    is padding. Each record is a ``wandb_internal_pb2.Record``."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:7]
    records, pos, pending = [], 7, b""
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:
            pos += 32768 - pos % 32768
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def of_kind(records: list, kind: str) -> list:
    return [getattr(r, kind) for r in records if r.WhichOneof("record_type") == kind]


def history(records: list) -> list[dict]:
    """The history rows, key -> value (``_step``, ``_runtime``, ``_timestamp`` left out)."""
    rows = []
    for h in of_kind(records, "history"):
        row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in h.item}
        rows.append({k: v for k, v in row.items() if not k.startswith("_")})
    return rows


def scalars_of_history(rows: list[dict]) -> Counter:
    """(step, tag, value) of every scalar in W&B history ``rows``."""
    return Counter(
        (row["global_step"], k, float(v)) for row in rows for k, v in row.items()
        if k != "global_step"
    )  # fmt: skip


def scalars_of_csvs(run_dir: Path) -> Counter:
    """(step, tag, value) of every row of the run's ScalarLog files."""
    found: Counter = Counter()
    for name in ("metrics.csv", "losses.csv"):
        with open(run_dir / name, newline="") as f:
            found.update((int(r["step"]), r["tag"], float(r["value"])) for r in csv.DictReader(f))
    return found


# ------------------------------------------------------------------- runs of the fixture


@pytest.fixture(scope="module")
def wandb_env(tmp_path_factory):
    """W&B offline and silent, its folders in a temporary directory, for the module."""
    folder = tmp_path_factory.mktemp("wandb-home")
    names = ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_SILENT", "true")
        for name in names:
            mp.setenv(name, str(folder / name.lower()))
        yield mp


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    return build(FIXTURE, tmp_path_factory.mktemp("tracked") / "out")


@pytest.fixture(scope="module")
def no_wandb(tmp_path_factory) -> str:
    """A folder whose ``wandb`` package fails to import: put first on PYTHONPATH, a run that
    imports wandb fails."""
    folder = tmp_path_factory.mktemp("no-wandb")
    (folder / "wandb").mkdir()
    (folder / "wandb" / "__init__.py").write_text('raise ImportError("no wandb here")\n')
    return str(folder)


def run(program: Path, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    proc, run_dir = run_in_folder(program, cwd, *args, timeout=180)
    return proc, run_dir


@pytest.fixture(scope="module")
def untracked(program, tmp_path_factory, wandb_env, no_wandb):
    """A run without tracking on one worker, where importing wandb fails."""
    wandb_env.setenv("PYTHONPATH", no_wandb)
    try:
        return run(program, tmp_path_factory.mktemp("untracked") / "run")
    finally:
        wandb_env.delenv("PYTHONPATH")


@pytest.fixture(scope="module")
def tracked(program, tmp_path_factory, wandb_env):
    """The same run tracked, on two workers."""
    return run(program, tmp_path_factory.mktemp("tracked") / "run", "-w", "2", "--track", "true")


def test_a_run_without_tracking_never_imports_wandb(untracked):
    proc, run_dir = untracked
    assert proc.returncode == 1 and BUDGET in proc.stderr, proc.stderr[-3000:]
    assert not (run_dir / "wandb").exists()


def test_tracking_leaves_the_returns_alone(untracked, tracked):
    (proc, run_dir), (_, plain_dir) = tracked, untracked
    assert proc.returncode == 1 and BUDGET in proc.stderr, proc.stderr[-3000:]
    assert (run_dir / "returns.csv").read_bytes() == (plain_dir / "returns.csv").read_bytes()


def test_the_wandb_run_is_named_and_configured_as_the_run(tracked):
    _, run_dir = tracked
    config = json.loads((run_dir / "config.json").read_text())
    assert run_dir.name.startswith("TrackedPPO__CartPole-v1__1__")
    assert run_dir.name.endswith("-" + config["run_id"][:8])
    records = wandb_records(run_dir)
    (header,) = of_kind(records, "run")
    assert header.display_name == run_dir.name and header.project == "lf-rl"
    assert header.run_id == config["run_id"]
    sent = {i.key: json.loads(i.value_json) for i in header.config.update}
    assert {k: v for k, v in sent.items() if k != "_wandb"} == config
    assert sent["parameters"]["track"] is True and sent["workers"] == 2
    (end,) = of_kind(records, "exit")
    assert end.exit_code == 0


def test_every_scalar_of_every_writer_reaches_the_history(tracked):
    _, run_dir = tracked
    rows = history(wandb_records(run_dir))
    assert scalars_of_history(rows) == scalars_of_csvs(run_dir)
    tags = {k for row in rows for k in row}
    assert PPO_TAGS <= tags and {"charts/episodic_return", "charts/episodic_length"} <= tags
    with open(run_dir / "returns.csv", newline="") as f:
        episodes = [(int(r["step"]), float(r["return"])) for r in csv.DictReader(f)]
    got = [
        (r["global_step"], r["charts/episodic_return"])
        for r in rows
        if "charts/episodic_return" in r
    ]
    assert got == episodes


def test_a_failed_run_still_finishes_its_wandb_run(program, tmp_path, wandb_env):
    proc, run_dir = run(program, tmp_path / "run", "-w", "2", "--track", "true", "--fail_at", "600")
    assert proc.returncode == 1 and "failing on purpose" in proc.stderr, proc.stderr[-3000:]
    records = wandb_records(run_dir)
    (end,) = of_kind(records, "exit")
    assert end.exit_code == 1
    assert scalars_of_history(history(records)) == scalars_of_csvs(run_dir)


def test_tracking_without_wandb_says_so_in_one_line(program, tmp_path, wandb_env, no_wandb):
    wandb_env.setenv("PYTHONPATH", no_wandb)
    try:
        proc, _ = run(program, tmp_path / "run", "--track", "true", "--max_steps", "8")
    finally:
        wandb_env.delenv("PYTHONPATH")
    assert proc.returncode == 1
    assert "track = true needs the wandb package (pip install wandb)" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


# ------------------------------------------------------------------- the pieces


def test_history_rows_join_one_step_but_keep_repeated_tags_apart():
    rows = [(8, "a", 1.0), (8, "b", 2.0), (8, "a", 3.0), (9, "a", 4.0)]
    assert list(tracking.history_rows(rows)) == [
        {"global_step": 8, "a": 1.0, "b": 2.0},
        {"global_step": 8, "a": 3.0},
        {"global_step": 9, "a": 4.0},
    ]


def test_a_tail_reads_complete_rows_once_and_follows_a_file_cut_back(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(metrics.CSV_HEADER + "1,a,0.5\nbad row\n2,b,1")
    tail = tracking.ScalarTail(str(path))
    assert tail.rows() == [(1, "a", 0.5)]
    with open(path, "a") as f:
        f.write("5\n")
    assert tail.rows() == [(2, "b", 15.0)] and tail.rows() == []
    path.write_text(metrics.CSV_HEADER + "1,a,0.5\n")  # cut back below what was read
    assert tail.rows() == []
    with open(path, "a") as f:
        f.write("3,c,2\n")
    assert tail.rows() == [(3, "c", 2.0)]


WRITER = """
import sys, time
from rl_algos.metrics import ScalarLog
log = ScalarLog(sys.argv[1], "losses.csv", tensorboard=False)
print("open", flush=True)
time.sleep(float(sys.argv[2]))
log.add("losses/x", 1.5, 7)
log.close()
"""


def test_waiting_for_a_writer_of_another_process_ends_when_it_closes(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), "0.6"],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    try:
        assert proc.stdout.readline() == "open\n"
        path = str(tmp_path / "losses.csv")
        assert metrics.wait_closed([path], timeout=0.05) == [path]
        start = time.monotonic()
        assert metrics.wait_closed([path], timeout=30) == []
        assert time.monotonic() - start > 0.2
        assert tracking.ScalarTail(path).rows() == [(7, "losses/x", 1.5)]
    finally:
        proc.wait(timeout=30)


def test_a_writer_of_this_process_is_not_waited_for(tmp_path):
    log = ScalarLog(str(tmp_path), "metrics.csv", tensorboard=False)
    try:
        assert metrics.open_here(log.path)
        assert metrics.wait_closed([log.path], timeout=5) == []
    finally:
        log.close()
    assert not metrics.open_here(log.path)


class FakeRun:
    """What a Tracker uses of a W&B run, recorded."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.exit_code: int | None = None

    def log(self, row: dict) -> None:
        self.rows.append(dict(row))

    def finish(self, exit_code: int = 0) -> None:
        self.exit_code = exit_code


@pytest.fixture
def fake_runs(monkeypatch) -> list[FakeRun]:
    """Every W&B run a Tracker opens, fake."""
    opened: list[FakeRun] = []

    def open_run(run_dir, record, project, run_id):
        opened.append(FakeRun())
        return opened[-1]

    monkeypatch.setattr(tracking, "open_run", open_run)
    return opened


def test_a_tracker_polls_at_intervals_and_resumes_where_it_was(tmp_path, fake_runs, monkeypatch):
    logger = ScalarLog(str(tmp_path), "metrics.csv", tensorboard=False)
    learner = ScalarLog(str(tmp_path), "losses.csv", tensorboard=False)
    (tmp_path / "returns.csv").write_text("episode,step,return,length,env\n1,8,9,9,0\n")
    tracker = tracking.Tracker(str(tmp_path), {"seed": 1}, "lf-rl", "f" * 32)
    logger.add("charts/episodic_return", 9.0, 8)
    assert tracker.poll() == 0  # not due yet
    assert tracker.poll(force=True) == 1
    learner.add("losses/value_loss", 2.0, 16)
    snapshot = pickle.dumps(tracker)
    resumed = pickle.loads(snapshot)  # a resumed run: its own W&B run object
    tracker.run = None  # the stopped process's run is gone
    assert resumed.poll(force=True) == 1
    resumed.end()
    logger.close()
    learner.close()
    resumed.finish()
    resumed.finish()
    first, second = fake_runs
    assert first.rows == [{"global_step": 8, "charts/episodic_return": 9.0}]
    assert second.rows == [{"global_step": 16, "losses/value_loss": 2.0}]
    assert second.exit_code == 0 and first.exit_code is None


def test_an_empty_project_is_refused(tmp_path, fake_runs):
    with pytest.raises(ValueError, match="wandb_project"):
        tracking.Tracker(str(tmp_path), {}, "", "f" * 32)


def test_an_unknown_wandb_mode_is_refused_before_wandb_starts(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "bogus")
    with pytest.raises(ValueError, match="WANDB_MODE='bogus' is not a W&B mode; valid: offline"):
        tracking.offline_unless_told()
    monkeypatch.setenv("WANDB_MODE", "online")
    assert tracking.offline_unless_told() is None
    monkeypatch.delenv("WANDB_MODE")
    assert tracking.offline_unless_told() == "offline"
