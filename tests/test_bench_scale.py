"""The ``scale`` benchmark (bench/scale.py and its bench/scale_*.py pieces) at tiny sizes.

A real TinyBank build runs at the quick mode's worker counts (1, 2, cores+1) through the
benchmark's own measurement: a row per count, ratios to -w 1 computed from the figures, the
runtime named (``REACTORS_COMPILED=0`` forces the sources, and the rows must say so), a
checksum that is not the plain loop's turning every row FAILED, the CPU-per-tag rows, and the
rows that need a GPU skipped without one.
"""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT, build, run_program

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import scale, scale_rows, scale_runs  # noqa: E402
from bench.common import Row, cores  # noqa: E402
from bench.scale_cpu import cpu_rows  # noqa: E402
from bench.scale_peers import envbank_plain  # noqa: E402
from bench.scale_ppo import ppo_rows  # noqa: E402

ROUNDS = 2000


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """TinyBank (16 cells, ROUNDS rounds) measured at the quick counts from its sources."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REACTORS_COMPILED", "0")
        scale_runs.runtime.cache_clear()
        work = scale.tiny(ROUNDS)
        rows, made = scale.measure(work, scale.worker_counts(True), 1, tmp_path_factory.mktemp("s"))
        scale_runs.runtime.cache_clear()
    assert made is not None, rows
    return work, rows, made


def test_worker_counts_double_up_to_the_cores_then_one_more_and_auto():
    assert scale.worker_counts(False, 2) == [1, 2, 3, 0]
    assert scale.worker_counts(False, 16) == [1, 2, 4, 8, 16, 17, 0]
    assert scale.worker_counts(False, 12) == [1, 2, 4, 8, 12, 13, 0]
    assert scale.worker_counts(True, 16) == [1, 2, 17]
    assert scale.proxy_counts(False) == [1, 2, 4, 8, 16]


def test_a_row_per_worker_count_with_ratios_to_one_worker_and_the_runtime(tiny):
    _, rows, made = tiny
    counts = scale.worker_counts(True)
    ours = {int(r.peer.split()[2]): r for r in rows if r.peer.startswith("ours -w ")}
    assert sorted(ours) == counts and set(made.runs) == set(counts)
    for w, row in ours.items():
        assert row.status == "ok", row
        assert row.note.startswith("from its sources;"), row.note
        assert "load " in row.note and " before" in row.note
        run = made.runs[w][0]
        assert (
            isinstance(run, scale_runs.Run) and run.result["checksum"] == made.expected["checksum"]
        )
        assert row.figure == run.seconds  # TinyBank's figure: the whole process, s
        assert row.ratio == pytest.approx(ours[1].figure / row.figure)  # a time: -w 1's / this
    over = ours[cores() + 1]
    assert over.peer.endswith("(cores+1)")
    assert f"target -w {cores() + 1} / -w {cores()} >= 0.9: " in over.note


def test_a_checksum_that_is_not_the_plain_loops_makes_every_row_failed(tiny):
    work, _, made = tiny
    wrong = dict(made.expected, checksum=made.expected["checksum"] + 1)
    series = scale_rows.Series(
        work.series.title, "s", lambda r: r.seconds, higher_better=False, expected=wrong
    )
    rows = scale_rows.our_rows(series, made.runs)
    assert len(rows) == len(made.runs)
    for row in rows:
        assert row.figure is None and row.ratio is None
        assert row.status.startswith("FAILED: wrong result: checksum "), row.status
    assert scale_runs.verify({"checksum": 5, "n": 16}, {"checksum": 5}) is None
    assert scale_runs.verify({"checksum": 4}, {"checksum": 5}) == "checksum 4, expected 5"


def test_results_that_differ_between_worker_counts_are_failed_rows():
    runs = {
        w: [scale_runs.Run(w, {"returns": f"digest{w}", "steps": 64}, 2.0, 1.0, 0.1)]
        for w in (1, 2)
    }
    series = scale_rows.Series("PPO", "steps/s", lambda r: 64 / r.seconds, same=("returns",))
    rows = scale_rows.our_rows(series, runs)
    assert [r.status for r in rows] == [
        "FAILED: wrong result: returns differs between -w [1, 2] (2 values)"
    ] * 2
    same = {
        w: [scale_runs.Run(w, {"returns": "d", "steps": 64}, 2.0 / w, 1.0, 0.1)] for w in (1, 2)
    }
    ok = scale_rows.our_rows(series, same)
    assert [r.figure for r in ok] == [32.0, 64.0] and ok[1].ratio == 2.0


def test_targets_beyond_the_cores_are_not_measurable(monkeypatch):
    monkeypatch.setattr(scale_rows, "cores", lambda: 2)
    series = scale_rows.Series(
        "GymSim",
        "env steps/s",
        lambda r: r.result["steps_per_s"],
        targets=scale_rows.Targets(speedup={16: 6.0}, peers={"plain": (16, 1.5)}),
    )
    runs = {w: [scale_runs.Run(w, {"steps_per_s": 100.0 * w}, 1.0, 1.0, 0.1)] for w in (1, 2, 3)}
    peer = scale_rows.PeerResult("plain", figures=[50.0])
    one, two, three, plain = scale_rows.our_rows(series, runs, [peer])
    assert "target -w 16 / -w 1 >= 6: not measurable: 2 cores" in two.note
    assert "target -w 3 / -w 2 >= 0.9: MET" in three.note  # 300 / 200
    assert "2.00x plain" in one.note and plain.ratio == 4.0  # ours at -w 2 (one per core) / 50
    assert "target ours -w 16 / this >= 1.5: not measurable: 2 cores" in plain.note
    monkeypatch.setattr(scale_rows, "cores", lambda: 16)
    assert scale_rows.target_text("-w 16 / -w 1", 6.5, 6.0, 16).endswith(": MET")
    assert scale_rows.target_text("-w 16 / -w 1", 5.0, 6.0, 16).endswith(": MISSED")


def test_cpu_per_tag_rows_remove_the_start_up(tiny):
    _, _, made = tiny
    rows = cpu_rows("CPU per tag", made.launcher, [1, 2], ROUNDS, made.expected, made.runs)
    assert [r.peer for r in rows] == ["ours -w 1", "ours -w 2"]
    for w, row in zip([1, 2], rows, strict=True):
        assert row.status == "ok" and row.unit == "µs CPU/tag", row
        whole = made.runs[w][0].cpu / ROUNDS * 1e6  # the run's CPU over its tags, start-up in
        assert 0 < row.figure < 0.9 * whole, (row, whole)
    assert rows[1].ratio == pytest.approx(rows[0].figure / rows[1].figure)


def test_without_a_gpu_the_ppo_rows_are_skipped(tmp_path):
    rows = ppo_rows(1024, tmp_path, on_gpu=False)
    assert len(rows) == 2 and all(r.status == "skipped: no GPU" for r in rows)
    assert "Stable-Baselines3" in rows[1].peer


def test_a_skipped_row_is_no_failure_of_the_invocation(monkeypatch, tmp_path):
    from bench import __main__ as main

    monkeypatch.setattr(main, "ROOT", tmp_path)  # the table goes to tmp_path/bench/results
    (tmp_path / "bench").mkdir()
    skipped = [Row("PPO", "SB3", None, "steps/s", status="skipped: no GPU")]
    monkeypatch.setattr(main, "_run_one", lambda name, quick: skipped)
    assert main.main(["--quick", "--only", "scale"]) == 0
    failed = [Row("PPO", "ours", None, "steps/s", status="FAILED: RuntimeError: x")]
    monkeypatch.setattr(main, "_run_one", lambda name, quick: skipped + failed)
    assert main.main(["--quick", "--only", "scale"]) == 1


def test_the_envbank_reference_is_the_programs_checksum(tmp_path):
    launcher = build(ROOT / "lf_src" / "bench" / "EnvBank.lf", tmp_path, "-D", "n=4")
    r = run_program(launcher, "-w", "1", "--iters", "3", "--rounds", "12", timeout=120)
    assert r.returncode == 0, r.stderr
    got = [json.loads(ln[7:]) for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert got and got[0]["checksum"] == envbank_plain(4, 3, 12)[1]


def test_sync_per_tag_is_read_from_the_workers_spans(tmp_path):
    """A worker's ``sync:`` spans summed and divided by the tags (the most ``sync: next tag``
    spans of any worker: one that skipped tags has fewer); reactions do not count."""
    from bench.scale_sync import per_worker

    events = [
        {"name": "sync: next tag", "ph": "X", "pid": 0, "ts": 0, "dur": 4.0},
        {"name": "sync: next tag", "ph": "X", "pid": 0, "ts": 9, "dur": 2.0},
        {"name": "sync: crossings", "ph": "X", "pid": 0, "ts": 5, "dur": 6.0},
        {"name": "reaction 1 of GymSim.server", "ph": "X", "pid": 0, "ts": 3, "dur": 50.0},
        {"name": "sync: next tag", "ph": "X", "pid": 1, "ts": 0, "dur": 3.0},
    ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(events))
    assert per_worker(trace) == {0: 6.0, 1: 1.5}
    trace.write_text(json.dumps({"traceEvents": events[3:4]}))
    assert per_worker(trace) == {}
