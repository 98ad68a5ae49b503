"""What makes small RL tags pay on several workers: the compact codec, batched publication,
free-running tag agreement, waiting under contention and the automatic worker count."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, build, run_digest, run_program, same_on_any_workers

from reactors.core.errors import GraphError
from reactors.core.port import Port
from reactors.model.program import Prediction, Program, WorkerChoice
from reactors.parallel import costs, shm
from reactors.parallel.codec import Packer, Unpacker
from reactors.parallel.contention import LOADAVG_ENV, Contention
from reactors.parallel.placement import place
from reactors.parallel.plan import free_running, make_plan
from reactors.parallel.sync import C_PACK, Control
from reactors.parallel.topology import Crossing, batches

BENCH = ROOT / "lf_src" / "bench"
EDGES = ROOT / "tests" / "parallel_fixtures" / "Edges.lf"
SKIPS = ROOT / "tests" / "parallel_fixtures" / "Skips.lf"
SKIPS_MANY = ROOT / "tests" / "parallel_fixtures" / "SkipsMany.lf"

# --------------------------------------------------------------------------- the codec


def _area():
    raw = memoryview(bytearray(1024))
    cells = raw.cast("q")
    return Packer(raw, 64, 512, cells, 0), Unpacker(raw, 64, cells, 0)


VALUES = [
    np.arange(8, dtype=np.float32),
    np.arange(6.0).reshape(2, 3),
    np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
    np.zeros((0, 3)),
    np.array(2.5),
    np.array([True, False]),
    np.arange(4, dtype=">i4"),
    np.int64(3),
    np.float32(0.5),
    np.bool_(True),
    (1.0, False, True),
    (3, -(1 << 63), 2.5),
    [1, 2.5, True],
    (),
    {"reward": 1.5, "done": False, "step": 7},
    {},
]


@pytest.mark.parametrize(
    "value", VALUES, ids=[f"{type(v).__name__}{i}" for i, v in enumerate(VALUES)]
)
def test_codec_round_trip_keeps_types_dtypes_and_shapes(value):
    packer, unpacker = _area()
    assert packer.pack(value)
    got = unpacker.unpack()
    assert type(got) is type(value)
    if isinstance(value, np.generic):
        assert got == value and got.dtype == value.dtype
    elif isinstance(value, np.ndarray):
        assert got.dtype == value.dtype and got.shape == value.shape
        assert np.array_equal(got, value)
        assert not got.flags.writeable  # like every array received from another worker
        assert got.base is None or not np.shares_memory(got, np.frombuffer(packer.raw, np.uint8))
    else:
        assert got == value
        items = got.values() if isinstance(got, dict) else got
        want = value.values() if isinstance(value, dict) else value
        assert [type(x) for x in items] == [type(x) for x in want]
        if isinstance(value, dict):
            assert list(got) == list(value)


def test_codec_reuses_its_header_and_follows_a_change():
    packer, unpacker = _area()
    for k in range(3):
        assert packer.pack(np.full(4, k, np.float32))
        assert unpacker.unpack().tolist() == [k] * 4
    assert packer.gen == 1  # one header for three values of one kind
    assert packer.pack((1.0, True))
    assert unpacker.unpack() == (1.0, True)
    assert packer.pack(np.arange(3))
    assert unpacker.unpack().tolist() == [0, 1, 2]
    assert packer.gen == 3


@pytest.mark.parametrize(
    "value",
    [
        (np.float64(1.0),),  # a numpy scalar in a tuple: its type would be lost
        np.array(["text"]),
        np.datetime64("2026-01-01"),
        (1, "a"),
        (1 << 70,),
        {1: 2.0},
        {"": 1.0},
        {"a\0b": 1.0},
        np.zeros(1000),  # too large for the inline cells: a slot, zero-copy
        np.array([object()]),
        "text",
    ],
)
def test_codec_declines_what_it_cannot_keep_exactly(value):
    packer, _ = _area()
    assert not packer.pack(value)


def test_channel_values_take_the_codec_and_others_still_cross(tmp_path):
    prefix = f"lftestcodec{os.getpid()}x"
    ctl = Control(bytearray(Control.size(2, 1)), 2, 1)
    ctl.init()
    src, dst = Port("src"), Port("dst")
    w, r = shm.Writer(ctl, 0, (1,), src, prefix), shm.Reader(ctl, 0, 1, dst, prefix, [])
    try:
        sent = [np.ones(4, np.float32), (1.0, False), 7, (1, "a"), np.ones(3), 2.5, {"a": 1.0}]
        for seq, v in enumerate(sent):
            src._v, src._p, dst._p = v, True, False
            w.publish(seq)
            r.receive(seq)
            got = dst.value
            assert type(got) is type(v)
            assert np.array_equal(got, v) if isinstance(v, np.ndarray) else got == v
        assert ctl.cells[ctl.channel_base(0) + C_PACK] >= 3  # headers rewritten after others
    finally:
        r.maps.clear()
        shm.unlink_prefix(prefix)


# --------------------------------------------------------------------------- batches


def _crossing(i, writer, last_write, first_read):
    return Crossing(i, (i, "p", 0), writer, tuple(sorted(first_read)), last_write, first_read)


def test_batches_group_one_writers_crossings_of_one_level():
    level = [0, 0, 0, 1, 1, 2, 2]
    found = [
        _crossing(0, 0, 1, {1: 5}),
        _crossing(1, 0, 2, {1: 6}),
        _crossing(2, 0, 3, {1: 5}),  # another level: another batch
        _crossing(3, 1, 0, {0: 3}),  # another writer
    ]
    got = batches(found, level)
    assert [(b.writer, b.members, b.last_write, b.first_read) for b in got] == [
        (0, (0, 1), 2, {1: 5}),
        (0, (2,), 3, {1: 5}),
        (1, (3,), 0, {0: 3}),
    ]


def test_a_batch_never_waits_past_a_readers_first_rank():
    level = [0, 0, 0, 0]
    found = [_crossing(0, 0, 0, {1: 1}), _crossing(1, 0, 2, {1: 3})]
    got = batches(found, level)  # one level, but crossing 0 is read (rank 1) before rank 2
    assert [b.members for b in got] == [(0,), (1,)]


@pytest.fixture(scope="module")
def envbank(tmp_path_factory):
    out = tmp_path_factory.mktemp("envbank")
    launcher = build(BENCH / "EnvBank.lf", out, "-D", "n=6", "-D", "rounds=30", "-D", "iters=2")
    return launcher, Program.load(str(out / "src-gen" / "EnvBank" / "graph.json"))


def test_an_env_bank_on_two_workers_sends_one_batch_per_direction(envbank):
    _, graph = envbank
    plan = make_plan(graph, 2)
    assert len(plan.crossings) > 2
    assert len(plan.batches) == 2  # the step out, the observations and results back
    assert sorted(len(b.members) for b in plan.batches) == [1, len(plan.crossings) - 1]


def _checksum(launcher, *args):
    r = run_program(launcher, *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.split("RESULT ", 1)[1])["checksum"]


def test_a_hub_that_gathers_folds_the_rows_to_the_loops_checksum_on_any_workers(envbank):
    """EnvBank's hub with ``batched``: each multiport as one array, its rows from other
    workers copied at once out of shared memory (reactors.parallel.codec.Arrived), and the
    loop's checksum to the bit, on 1, 2 and 4 workers and on the threads backend."""
    launcher, _ = envbank
    want = _checksum(launcher, "-w", "1")
    runs = [
        ("-w", "1", "--batched", "True"),
        ("-w", "2", "--batched", "True"),
        ("-w", "4", "--oversubscribe", "--batched", "True"),
        ("-w", "2", "--backend", "threads", "--batched", "True"),
    ]
    assert [_checksum(launcher, *args) for args in runs] == [want] * len(runs)


@pytest.fixture(scope="module")
def edges(tmp_path_factory):
    out = tmp_path_factory.mktemp("edges")
    launcher = build(EDGES, out)
    return launcher, Program.load(str(out / "src-gen" / "Edges" / "graph.json"))


def test_startup_and_shutdown_outputs_cross_in_batches_of_their_own(edges):
    _, graph = edges
    plan = make_plan(graph, 2)
    by_port = {plan.crossings[i].root[1]: b.edge for b in plan.batches for i in b.members}
    # the hub's step and the environments' obs cross at every tag; hello (startup) and bye
    # (shutdown) only at the first and the stop tag
    assert by_port == {"step": False, "obs": False, "hello": True, "bye": True}
    for b in plan.batches:
        assert len({plan.crossings[i].edge for i in b.members}) == 1


def test_values_of_the_start_and_stop_tags_arrive_on_any_workers(edges):
    launcher, _ = edges
    ref, ref_digest = run_digest(launcher, "w1", "-w", "1")
    assert ref.returncode == 0, ref.stderr
    lines = ref.stdout.splitlines()
    assert lines[0] == "hello [100, 101, 102]"
    assert lines[-1] == "bye [-21, -42, -63]"
    assert len([x for x in lines if x.startswith("obs ")]) == 6
    same_on_any_workers(launcher, ref, ref_digest, None)


def test_a_hub_sits_with_the_larger_share_of_an_odd_bank(edges):
    _, graph = edges
    at = place(graph, 2)
    worker = {r.name: at[r.id] for r in graph.reactors}
    hub = worker["Edges.hub"]
    envs = [worker[f"Edges.envs[{i}]"] for i in range(3)]
    assert envs.count(hub) == 2 and len(set(envs)) == 2  # dealt 2 and 1, the hub with the 2


def test_free_running_needs_fast_and_no_physical_time(envbank):
    _, graph = envbank
    assert free_running(graph, True, False)
    assert not free_running(graph, False, False)
    assert not free_running(graph, True, True)


@pytest.fixture(scope="module")
def skips(tmp_path_factory):
    return build(SKIPS, tmp_path_factory.mktemp("skips"))


@pytest.mark.parametrize("backend", ["processes", "threads"])
def test_a_worker_with_nothing_to_run_skips_the_tags_between_its_own(skips, backend):
    """The sampler's worker reads no crossing and has an event every 50 ticks: on two
    workers it runs its 20 samples, the start and the stop tag, and skips the other 999 of
    the run's 1,021 tags without a report or a wait; the ticker's worker takes each sample
    at its tag and the sampler's crossing as absent at the ticks, as on one worker."""
    one, d1 = run_digest(skips, "one", "-w", "1")
    two, d2 = run_digest(skips, "two", "-w", "2", "--backend", backend, "--verbose")
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    lines = one.stdout.splitlines()
    assert lines[:20] == [f"{5.5 + 50 * k} ms: sample {k + 1}" for k in range(20)]
    assert sorted(lines[20:]) == [
        "sampler: 20 samples, stopped at 1000.0 ms",
        "ticker: 1001 ticks, samples sum to 210",
    ]
    assert two.stdout == one.stdout
    assert d1 and d2 == d1
    assert "worker 1 skipped 999 of 1,021 tags" in two.stderr
    assert "skipped" not in run_program(skips, "-w", "2").stderr  # said with --verbose only


def test_a_stop_asked_while_a_worker_skips_reaches_it_at_the_stop_tag(skips):
    """The ticker asks to stop at its 300th tick (299 ms): the skipping worker is called
    back at the stop tag (299 ms, 1), before its next sample, and runs its shutdown there."""
    one = run_program(skips, "-w", "1", "--stop_at", "300")
    two = run_program(skips, "-w", "2", "--stop_at", "300", "--verbose")
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    assert "sampler: 6 samples, stopped at 299.0 ms" in one.stdout.splitlines()
    assert two.stdout == one.stdout
    # 300 ticks, 6 samples, the stop tag; the sampler runs 8: the start, samples, stop
    assert "worker 1 skipped 299 of 307 tags" in two.stderr


def test_a_recorded_run_keeps_every_worker_at_every_tag(skips, tmp_path):
    """A recording checks every worker's ports at the end of each tag: no tag is skipped
    (and the result is the same)."""
    one = run_program(skips, "-w", "1")
    two = run_program(skips, "-w", "2", "--verbose", "--record", str(tmp_path / "rec"))
    assert two.returncode == 0, two.stderr
    assert two.stdout == one.stdout
    assert "skipped" not in two.stderr


def _skipped_in_skips_many(workers: int) -> dict[int, int]:
    """How many tags each skipping worker of SkipsMany.lf skips on ``workers`` workers, from
    its schedule (times in µs): every tag but the start tag, the stop tag and those of its
    own sources' events (a's bursts of three microsteps, b's timer and its values arriving
    2 ms later, c's pairs), the run being every event's tag up to the stop tag (297.9 ms, 1)."""
    stop = (297_900, 1)

    def upto(tags):
        return {t for t in tags if t <= stop}

    ticks = upto((700 * k, 0) for k in range(1000))
    own = {
        "a": upto((300 + 7_000 * j, m) for j in range(100) for m in range(3)),
        "b": upto([(1_100 + 13_000 * j, 0) for j in range(100)])
        | upto([(3_100 + 13_000 * j, 0) for j in range(100)]),
        "c": upto((2_900 + 5_000 * j, m) for j in range(60) for m in range(2)),
    }
    every = ticks.union(*own.values()) | {stop}
    pins = {"a": 1, "b": 2, "c": 3}  # @worker(n): worker n mod W; the sink on worker 0
    on: dict[int, set] = {}
    for name, pin in pins.items():
        on.setdefault(pin % workers, set()).update(own[name])
    return {w: len(every - tags - {(0, 0), stop}) for w, tags in on.items() if w}


def test_sparse_sources_on_their_own_workers_skip_alike_on_any_workers(tmp_path):
    """Three sparse sources on workers of their own (microstep bursts, an ``after`` delay, a
    stop asked by one of them) and a sink with its own tick: every worker count prints the
    same lines and sends the same values, and each source's worker skips exactly the tags
    where none of its events falls."""
    launcher = build(SKIPS_MANY, tmp_path)
    ref, digest = run_digest(launcher, "w1", "-w", "1")
    assert ref.returncode == 0, ref.stderr
    lines = ref.stdout.splitlines()
    assert lines[:3] == [
        f"300 us +{m}: [{v}, None, None] after 1 ticks" for m, v in enumerate((1, -101, -100))
    ]
    assert lines[-1] == "sink: 426 ticks, stopped at 297900 us"
    same_on_any_workers(launcher, ref, digest, None)
    for workers in (2, 4):  # four processes also on fewer cores
        r = run_program(launcher, "-w", str(workers), "--oversubscribe", "--verbose")
        said = {
            int(m[0]): int(m[1].replace(",", ""))
            for m in re.findall(r"worker (\d+) skipped ([\d,]+) of 706 tags", r.stderr)
        }
        assert said == _skipped_in_skips_many(workers), r.stderr


# --------------------------------------------------------------------------- waiting


def test_this_processs_own_busy_threads_are_not_other_tasks(tmp_path):
    import hashlib
    import threading

    fake = tmp_path / "loadavg"
    fake.write_text("0.50 0.40 0.30 3/300 1234\n")  # this thread, our busy thread, one more
    c = Contention(path=str(fake))
    stop = threading.Event()
    block = bytes(1 << 20)

    def spin():  # hashing a large block releases the GIL: the thread stays runnable
        while not stop.is_set():
            hashlib.sha256(block).digest()

    t = threading.Thread(target=spin)
    t.start()
    try:
        assert c.others_now(samples=5, gap_s=0.001) == 1
    finally:
        stop.set()
        t.join()
    assert c.others_now(samples=3, gap_s=0) == 2  # without it, the file's count


def test_contention_blocks_when_other_tasks_fill_the_cores(tmp_path):
    fake = tmp_path / "loadavg"
    c = Contention(path=str(fake))
    c.cores = 2
    fake.write_text("0.50 0.40 0.30 2/300 1234\n")  # the sampler and one more
    assert c.spin_ok()
    fake.write_text("3.10 2.00 1.00 4/300 1234\n")  # three more: the cores are full
    assert not c.spin_ok()
    assert c.busy_now(samples=3, gap_s=0) and c.others_now(samples=3, gap_s=0) == 3
    fake.write_text("0.50 0.40 0.30 2/300 1234\n")
    assert not c.busy_now(samples=3, gap_s=0)
    missing = Contention(path=str(tmp_path / "none"))
    assert missing.spin_ok() and not missing.busy_now(samples=2, gap_s=0)


def test_a_wait_asks_whether_the_cores_are_free_when_it_starts_not_once_per_period(
    tmp_path, monkeypatch
):
    """``wait`` spins past its quick poll only while the count read at that moment leaves a
    core free: when the worker waited for is runnable on the waiter's core, the count says so
    and the waiter blocks (announcing it in its sleep cell) at once, whatever an earlier wait
    read."""
    import threading
    import time

    from reactors.parallel import sync

    fake = tmp_path / "loadavg"
    fake.write_text("0.10 0.10 0.10 1/300 1234\n")  # only the waiter runs
    monkeypatch.setattr(sync.CONTENTION, "path", str(fake))
    monkeypatch.setattr(sync.CONTENTION, "fd", -1)  # opened again, on the fake file
    monkeypatch.setattr(sync.CONTENTION, "cores", 2)
    cells = memoryview(bytearray(64)).cast("q")
    bell = sync.ThreadBell()

    def waited(spin_s: float) -> tuple[float, bool]:
        """(seconds, whether the waiter slept) for a condition met after 0.2 s."""
        flag, slept = threading.Event(), []

        def later() -> None:
            time.sleep(0.2)
            slept.append(cells[3] == 1)
            flag.set()
            bell.ring()

        t = threading.Thread(target=later)
        t0 = time.perf_counter()
        t.start()
        sync.wait(flag.is_set, cells, 3, bell, int(spin_s * 1e9))
        t.join()
        return time.perf_counter() - t0, slept[0]

    took, slept = waited(0.5)
    assert not slept and took < 0.45  # spun (the cores were free) and saw the flag
    assert sync.CONTENTION.spin_ok()  # free a moment ago,
    fake.write_text("2.10 2.00 1.00 3/300 1234\n")  # two more tasks: the cores are full now
    took, slept = waited(10.0)
    assert slept and took < 5.0  # blocked at once, woken by the bell
    assert not sync.CONTENTION.spin_ok()
    os.close(sync.CONTENTION.fd)


# --------------------------------------------------------------------------- -w 0


def _profile(graph, env_ns, hub_ns=2_000.0):
    names = costs.reaction_names(graph)
    cost = {}
    for n in names:
        if ".envs[" in n:
            cost[n] = env_ns if n.endswith(".1") else 0.0
        else:
            cost[n] = hub_ns
    return costs.Profile(100, cost, costs.build_key(graph))


def test_w0_takes_two_workers_for_heavy_environments_and_one_for_tiny_ones(envbank):
    _, graph = envbank
    heavy = costs.choose(graph, _profile(graph, 140_000.0), cores=2)
    assert heavy.workers == 2 and heavy.predicted[2] < heavy.predicted[1] / 1.5, heavy.reason
    tiny = costs.choose(graph, _profile(graph, 1_000.0), cores=2)
    assert tiny.workers == 1, tiny.reason
    busy = costs.choose(graph, _profile(graph, 12_000.0), cores=2, others=2)
    assert busy.predicted[2] > costs.choose(graph, _profile(graph, 12_000.0), cores=2).predicted[2]
    assert costs.choose(graph, _profile(graph, 140_000.0), cores=1).workers == 1


def test_w0_takes_one_worker_when_another_task_holds_a_core(envbank):
    _, graph = envbank
    heavy = _profile(graph, 140_000.0)
    for others in (1, 2):
        got = costs.choose(graph, heavy, cores=2, others=others)
        assert got.workers == 1, got.reason
        assert f"{others} other task(s)" in got.reason
    four = costs.choose(graph, heavy, cores=4, others=1)  # three cores are free
    assert four.workers == 3 and four.predicted[4] > four.predicted[3], four.reason
    assert [costs.share(w, 2, 1) for w in (1, 2, 3)] == [1, 2, 2]
    assert costs.share(2, 2, 0) == 1 and costs.share(2, 4, 2) == 1


def test_w0_without_a_profile_runs_one_worker_and_measures(envbank, tmp_path):
    launcher, graph = envbank
    assert costs.choose(graph, None, cores=2).workers == 1
    other = costs.Profile(10, {"Other.x.0": 1.0}, costs.build_key(graph))
    assert costs.choose(graph, other, cores=2).measure
    rebuilt = costs.Profile(10, _profile(graph, 1.0).cost, "an earlier build")
    assert "another build" in costs.choose(graph, rebuilt, cores=2).reason
    profile = launcher.parent.parent / "src-gen" / "EnvBank" / costs.PROFILE
    profile.unlink(missing_ok=True)
    first = subprocess.run([str(launcher), "-w", "0", "--verbose"], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "no profile of an earlier run" in first.stderr
    saved = costs.Profile.load(str(profile))
    assert saved is not None and saved.per_rank(graph) is not None
    assert saved.tags == 30 + 1 - costs.SKIP_TAGS  # every tag after the skipped ones
    second = subprocess.run([str(launcher), "-w", "0", "--verbose"], capture_output=True, text=True)
    assert second.returncode == 0 and "predicted time per tag" in second.stderr, second.stderr
    assert "measured" not in second.stderr  # a usable profile: nothing measured again
    # the choice, why and the predictions are in graph.json too, which still loads
    written = Program.load(str(profile.parent / costs.GRAPH_FILE)).worker_choice
    assert written is not None and f"-w 0: {written.reason}" in second.stderr
    assert [p.workers for p in written.predicted] == [1, 2]
    assert written.workers in (1, 2) and all(p.ns_per_tag > 0 for p in written.predicted)
    assert first.stdout.split("checksum")[1] == second.stdout.split("checksum")[1]


def test_w0_rewrites_graph_json_only_when_its_choice_changed(envbank, tmp_path):
    _, graph = envbank
    path = tmp_path / costs.GRAPH_FILE
    path.write_text(graph.dumps())
    choice = costs.choose(graph, _profile(graph, 140_000.0), cores=2)
    assert costs.explain(str(path), choice, Program.load(str(path)).worker_choice)
    recorded = Program.load(str(path)).worker_choice
    assert recorded is not None and recorded.workers == choice.workers
    before = path.stat().st_ino  # a write replaces the file (a new inode)
    assert costs.explain(str(path), choice, recorded)
    assert path.stat().st_ino == before
    other = costs.choose(graph, _profile(graph, 1.0), cores=2)
    assert other.reason != choice.reason
    assert costs.explain(str(path), other, recorded)
    assert path.stat().st_ino != before
    assert Program.load(str(path)).worker_choice.reason == other.reason


def test_w0_takes_a_recorded_choice_made_from_the_same_inputs(envbank):
    _, graph = envbank
    heavy = _profile(graph, 140_000.0)
    made = costs.choose(graph, heavy, cores=2)
    assert made.workers == 2 and made.inputs
    # a recorded choice with the same inputs is taken as it is (here, a doctored reason)
    recorded = WorkerChoice(2, "recorded", (Prediction(1, 5), Prediction(2, 3)), (), made.inputs)
    again = costs.choose(graph, heavy, cores=2, recorded=recorded)
    assert (again.workers, again.reason, again.predicted) == (2, "recorded", {1: 5.0, 2: 3.0})
    # other inputs (another task wants a core, another profile) are weighed anew
    busy = costs.choose(graph, heavy, cores=2, others=1, recorded=recorded)
    assert busy.workers == 1 and busy.inputs != made.inputs
    light = costs.choose(graph, _profile(graph, 1.0), cores=2, recorded=recorded)
    assert light.reason != "recorded"


def test_w0_counts_other_tasks_only_when_it_would_take_several_workers(envbank):
    _, graph = envbank
    asked = []

    def others(n):
        return lambda: asked.append(n) or n

    assert costs.choose_now(graph, _profile(graph, 1.0), 2, others(1)).workers == 1
    assert asked == []  # one worker whatever the other tasks: not sampled
    assert costs.choose_now(graph, _profile(graph, 140_000.0), 2, others(0)).workers == 2
    assert costs.choose_now(graph, _profile(graph, 140_000.0), 2, others(1)).workers == 1
    assert asked == [0, 1]


def test_a_graph_json_written_before_a_field_was_added_still_loads(envbank, tmp_path):
    _, graph = envbank
    data = json.loads(dataclasses.replace(graph, worker_choice=WorkerChoice(1, "why")).dumps())
    del data["worker_choice"]["inputs"]  # as -w 0 wrote it before choices had inputs
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(data))
    assert Program.load(str(path)).worker_choice == WorkerChoice(1, "why")
    data["worker_choice"]["reason"] = None
    path.write_text(json.dumps(data))
    with pytest.raises(GraphError, match="reason"):
        Program.load(str(path))


def test_profile_files_are_checked(tmp_path):
    path = tmp_path / "profile.json"
    assert costs.Profile.load(str(path)) is None
    path.write_text("{not json")
    assert costs.Profile.load(str(path)) is None
    p = costs.Profile(5, {"A.x.0": 12.5}, "b1")
    assert p.save(str(path)) and costs.Profile.load(str(path)) == p
    assert not p.save(str(tmp_path / "missing" / "profile.json"))


def test_same_values_on_two_workers_while_other_processes_keep_the_cores_busy(envbank):
    launcher, _ = envbank
    ref, want = run_digest(launcher, "quiet", "-w", "1")
    assert ref.returncode == 0 and want, ref.stderr
    code = "import time\nend = time.time() + 60\nwhile time.time() < end: pass\n"
    busy = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    try:
        for backend in ("processes", "threads"):
            r, got = run_digest(launcher, f"busy{backend}", "-w", "2", "--backend", backend)
            assert r.returncode == 0, r.stderr
            assert got == want, f"{backend}: digests differ under load"
    finally:
        for p in busy:
            p.kill()
            p.wait()


def test_refined_placement_keeps_groups_and_predicts_no_worse(envbank):
    _, graph = envbank
    from reactors.parallel.placement import groups, place

    profile = _profile(graph, 15_000.0, hub_ns=40_000.0)
    per_rank = profile.per_rank(graph)
    at, predicted = costs.refine(graph, per_rank, 2)
    assert predicted <= costs.predict(graph, per_rank, 2, at=place(graph, 2))
    group = groups(graph)
    for i, g in enumerate(group):
        assert at[i] == at[g]  # a group never splits
    plan = make_plan(graph, 2, at)
    assert list(plan.placement) == at


def test_w0_runs_with_the_chosen_placement_and_the_same_results(envbank, tmp_path):
    launcher, graph = envbank
    ref = subprocess.run([str(launcher), "-w", "1"], capture_output=True, text=True)
    profile = launcher.parent.parent / "src-gen" / "EnvBank" / costs.PROFILE
    assert _profile(graph, 140_000.0, hub_ns=60_000.0).save(str(profile))
    quiet = tmp_path / "loadavg"  # no other task wants a core, whatever else the tests run
    quiet.write_text("0.00 0.00 0.00 1/100 1\n")
    env = {**os.environ, LOADAVG_ENV: str(quiet)}
    got = subprocess.run(
        [str(launcher), "-w", "0", "--verbose"], capture_output=True, text=True, env=env
    )
    assert got.returncode == 0, got.stderr
    assert "chose 2" in got.stderr, got.stderr
    assert ref.stdout.split("checksum")[1] == got.stdout.split("checksum")[1]
    profile.unlink()


def test_a_profile_holds_for_the_parameters_it_was_measured_with(envbank):
    import dataclasses

    from reactors.model.arguments import Argument

    _, graph = envbank
    other = dataclasses.replace(graph, arguments=(Argument("iters", "50"),))
    profile = _profile(graph, 15_000.0)
    assert profile.per_rank(graph) is not None
    assert profile.per_rank(other) is None  # measured without --iters 50
    assert costs.choose(other, profile, cores=2).measure
