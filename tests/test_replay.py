"""Recording a run's inputs from outside logical time and replaying them (``--record``,
``--replay``; reactors/records/replay.py).

The program, tests/replay_fixtures/Sensor.lf, takes physical-action events from a thread at
random wall-clock times, reads physical time in reactions, has a deadline and a ``~>``
connection: two plain runs differ; a replay of a recording reproduces its stdout and digest
exactly on any worker count and backend.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, build, run_program

from reactors.records import port_checksums, recording_file, replay

FIXTURES = ROOT / "tests" / "replay_fixtures"
VARIANTS = [("-w", "1"), ("-w", "2"), ("-w", "2", "--backend", "threads"), ("-w", "3")]


@pytest.fixture(scope="module")
def sensor(tmp_path_factory) -> Path:
    return build(FIXTURES / "Sensor.lf", tmp_path_factory.mktemp("sensor"))


def run_with_digest(
    launcher: Path, digest: Path, *args: str
) -> tuple[subprocess.CompletedProcess, str]:
    r = run_program(launcher, "--digest", str(digest), *args)
    assert r.returncode == 0, r.stderr[-3000:]
    return r, digest.read_text()


@pytest.mark.parametrize("recorded_on", [("-w", "1"), ("-w", "2")])
def test_replay_reproduces_the_recorded_run(sensor, tmp_path, recorded_on):
    tape = tmp_path / "run.lfrec"
    ref, ref_digest = run_with_digest(sensor, tmp_path / "ref", "--record", str(tape), *recorded_on)
    other, other_digest = run_with_digest(sensor, tmp_path / "other", *recorded_on)
    assert (other.stdout, other_digest) != (ref.stdout, ref_digest)  # the inputs differ
    assert not list(tmp_path.glob("run.lfrec.w*"))  # the workers' parts were joined
    for variant in VARIANTS:
        r, digest = run_with_digest(sensor, tmp_path / "replayed", "--replay", str(tape), *variant)
        assert r.stdout == ref.stdout, variant
        assert digest == ref_digest, variant
        assert "Replay matched the recording" in r.stderr


def test_recording_holds_the_inputs(sensor, tmp_path):
    tape = tmp_path / "run.lfrec"
    r = run_program(sensor, "--record", str(tape))
    assert r.returncode == 0, r.stderr
    rec = replay.load(str(tape))
    assert rec.manifest["program"] == "Sensor"
    assert [v[0] for _t, _m, v in rec.events.pop("Sensor.s.reading")] == list(range(8))
    (connection,) = rec.events  # the physical action of the ~> connection f.avg ~> d.avg
    assert connection.startswith("Sensor._lf_")
    readers = {key[2] for key in rec.clocks}
    assert {"Sensor.s", "Sensor.d"} <= readers  # physical_elapsed() and the deadline check
    shown = [line for line in r.stdout.splitlines() if " at " in line]
    assert len(shown) == len(rec.events[connection])
    # at each, the deadline check and physical_elapsed()
    assert 2 * len(shown) == sum(len(v) for k, v in rec.clocks.items() if k[2] == "Sensor.d")
    assert rec.end is not None and rec.end == rec.last
    assert all(tag <= rec.end for tag in rec.digests)


def test_replay_after_a_code_change_names_where_it_departs(sensor, tmp_path):
    tape = tmp_path / "run.lfrec"
    assert run_program(sensor, "--record", str(tape)).returncode == 0
    changed = tmp_path / "changed" / "Sensor.lf"
    changed.parent.mkdir()
    text = (FIXTURES / "Sensor.lf").read_text()
    changed.write_text(
        text.replace("self.total += x\n", "self.total += x if self.seen < 3 else 2 * x\n")
    )
    launcher = build(changed, tmp_path / "changed")
    for variant in (("-w", "1"), ("-w", "2")):
        r = run_program(launcher, "--replay", str(tape), *variant)
        assert r.returncode == 1, r.stderr
        assert "Traceback" not in r.stderr
        m = re.search(
            r"replay departs from the recording at tag \(([\d,]+) ns, (\d+)\): reactor Sensor\.f, "
            r"port Sensor\.f\.avg: value now ([\d.]+), another in the recorded run",
            r.stderr,
        )
        assert m, r.stderr
        rec = replay.load(str(tape))
        third = sorted(rec.events["Sensor.s.reading"])[3]  # the first reading counted twice
        assert (int(m.group(1).replace(",", "")), int(m.group(2))) == (third[0], third[1])


def test_replay_of_a_killed_recording(sensor, tmp_path):
    tape = tmp_path / "run.lfrec"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen(
        [str(sensor), "--record", str(tape), "--count", "1000"],
        cwd=sensor.parent.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    while len(lines) < 40:  # ~0.7 s: chunks were written (every 0.25 s at most)
        lines.append(p.stdout.readline())
    p.send_signal(signal.SIGKILL)
    p.communicate()
    rec = replay.load(str(tape))
    assert rec.end is None and rec.last is not None
    r = run_program(sensor, "--replay", str(tape))  # with the recorded --count
    assert r.returncode == 0, r.stderr
    replayed = r.stdout.splitlines()
    assert 10 < len(replayed) - 1 <= 40  # the shown values recorded, then the shutdown line
    assert replayed[:-1] == [line.rstrip("\n") for line in lines[: len(replayed) - 1]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--record", "{t}", "--replay", "{t}"), "--record and --replay cannot be used together"),
        (("--replay", "{d}/none.lfrec"), "--replay: no recording"),
        (("--replay", "{d}/junk"), "is not a recording (made with --record)"),
        (("--record", "{d}/no/such/dir/x"), "--record: cannot write"),
        (("--record", "{t}", "--resume", "{d}"), "--resume cannot be used with --record"),
        (("--trust",), "--trust goes with --resume or --replay"),
    ],
)
def test_bad_recordings_are_refused(sensor, tmp_path, args, message):
    (tmp_path / "junk").write_text("not a recording\n")
    t = str(tmp_path / "x.lfrec")
    r = run_program(sensor, *(a.format(t=t, d=tmp_path) for a in args))
    assert r.returncode == 1
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_recording_of_another_program_is_refused(sensor, tmp_path):
    other = tmp_path / "other" / "Other.lf"
    other.parent.mkdir()
    other.write_text("target Python\nmain reactor Other {\n  reaction(startup) {= pass =}\n}\n")
    tape = tmp_path / "other.lfrec"
    assert run_program(build(other, tmp_path / "other"), "--record", str(tape)).returncode == 0
    r = run_program(sensor, "--replay", str(tape))
    assert r.returncode == 1
    assert f"{tape} is a recording of Other, not of Sensor" in r.stderr


def test_digest_keys_tell_values_dtypes_and_shapes_apart():
    import numpy as np

    from reactors.core.port import Port

    def digest(*values):
        ports = []
        for i, v in enumerate(values):
            p = Port(f"main.p{i}")
            p._v = v
            ports.append(p)
        keys, sums = port_checksums.sums_of(ports, None)
        return list(zip(keys, sums))

    a = np.arange(6, dtype=np.float32)
    assert digest(a) == digest(a.copy())
    assert digest(a) != digest(a.reshape(2, 3))  # same bytes, another rank
    assert digest(a.reshape(2, 3)[:, ::2]) == digest(a.reshape(2, 3)[:, ::2].copy())
    assert digest(a) != digest(a.view(np.int32))  # same bytes, another dtype
    assert digest((0.0, True)) != digest((-0.0, True)) != digest((0.0, 1))
    assert digest({"k": [1, 2]}) == digest({"k": [1, 2]}) != digest({"k": [2, 1]})
    objects = np.array([(1, 2), "x"], dtype=object)
    assert digest(objects) == digest(np.array([(1, 2), "x"], dtype=object))  # by value
    assert digest(objects) != digest(np.array([(1, 2), "y"], dtype=object))
    assert (
        port_checksums.crc(np.float64(2.5))
        == port_checksums.crc(np.float64(2.5))
        != port_checksums.crc(2.5)
    )


#: Tags of a Counter run (``--count``), and the one from which the changed copy departs.
COUNT, CHANGE = 6000, 2000


@pytest.fixture(scope="module")
def counter(tmp_path_factory) -> Path:
    return build(
        FIXTURES / "Counter.lf", tmp_path_factory.mktemp("counter"), "-D", f"count={COUNT}"
    )


def test_a_recording_of_short_tags_checks_some_and_replays_them(counter, tmp_path):
    """Hashing a tag's values costs more than 5% of these tags' time: the recorder checks
    only some, spread over the run; every one of them is compared on replay, on any worker
    count, whichever worker count recorded."""
    for recorded_on in ("1", "2"):
        tape = tmp_path / f"w{recorded_on}.lfrec"
        ref, ref_digest = run_with_digest(
            counter, tmp_path / "ref", "--record", str(tape), "-w", recorded_on
        )
        rec = replay.load(str(tape))
        assert rec.end is not None and rec.last == rec.end
        checked = sorted(rec.checked)
        assert checked[-1][1] > COUNT // 2  # spread over the run, not only its start
        if recorded_on == "1":  # (on two workers a tag's synchronisation can cost more)
            assert 1 <= len(checked) < 0.5 * COUNT, len(checked)
        for variant in (("-w", "1"), ("-w", "2")):
            r, digest = run_with_digest(counter, tmp_path / "rep", "--replay", str(tape), *variant)
            assert (r.stdout, digest) == (ref.stdout, ref_digest), (recorded_on, variant)
            m = re.search(r"\(([\d,]+) of ([\d,]+) tags checked\)", r.stderr)
            assert m, r.stderr
            assert int(m.group(1).replace(",", "")) <= int(m.group(2).replace(",", ""))


def test_record_every_tag_checks_every_tag(counter, tmp_path):
    tape = tmp_path / "all.lfrec"
    run_with_digest(counter, tmp_path / "ref", "--record", str(tape), "--record-every-tag")
    rec = replay.load(str(tape))
    assert len(rec.checked) == len(rec.digests) >= COUNT  # every microstep, and shutdown's
    r = run_program(counter, "--record-every-tag")
    assert r.returncode != 0 and "--record-every-tag goes with --record <file>" in r.stderr


def test_a_departure_is_found_at_a_checked_tag(counter, tmp_path):
    tape = tmp_path / "run.lfrec"
    run_with_digest(counter, tmp_path / "ref", "--record", str(tape), "-w", "2")
    changed = tmp_path / "changed" / "Counter.lf"
    changed.parent.mkdir()
    text = (FIXTURES / "Counter.lf").read_text()
    changed.write_text(
        text.replace("self.n * 0.5 + k)", f"self.n * 0.5 + k if self.n < {CHANGE} else k)")
    )
    launcher = build(changed, tmp_path / "changed", "-D", f"count={COUNT}")
    rec = replay.load(str(tape))
    ports = {tag: p for tag, p in rec.checked.items() if p is None or "Counter.s.out[0]" in p}
    first = min(tag for tag in ports if tag[1] >= CHANGE)  # where the source's worker checked
    for variant in (("-w", "1"), ("-w", "2")):
        r = run_program(launcher, "--replay", str(tape), *variant)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        m = re.search(
            r"replay departs from the recording at tag \(0 ns, (\d+)\): reactor Counter\.s, "
            r"port Counter\.s\.out\[0\]: value now \(\d+, 0\), another in the recorded run",
            r.stderr,
        )
        assert m, r.stderr
        assert int(m.group(1)) == first[1], variant


def test_a_recording_of_another_version_is_refused_with_a_message(tmp_path):
    old = tmp_path / "old.lfrec"
    old.write_bytes(b"LFRECORDING 1\n{}\n")
    with pytest.raises(replay.ReplayError, match="recorded by another version.*record it again"):
        replay.load(str(old))


def test_equal_values_encode_alike_whatever_they_share():
    """An array that crossed workers has a copy of the canonical dtype: a batch holding it
    must digest like the same batch built in one process."""
    import pickle

    import numpy as np

    from reactors.records.trace import encode

    a = np.arange(3, dtype=np.float32)
    crossed = np.zeros(3, pickle.loads(pickle.dumps(a.dtype)))  # as a buffer of crossed values
    crossed[:] = a + 1
    assert crossed.dtype is not a.dtype
    assert encode([{"x": a, "y": a + 1}]) == encode([{"x": a, "y": crossed}])
    loop: list = [1]
    loop.append(loop)
    assert encode(loop) == encode(loop)  # a value holding itself still encodes


def test_a_killed_run_on_two_workers_replays_up_to_the_last_tag_both_recorded(tmp_path):
    """The parts of a run killed before they were joined end at different tags (each worker
    writes its chunks on its own clock): the replay stops at the earlier, beyond which the
    inputs of the other worker are unknown."""
    import pickle

    for k, last in ((0, (5_000_000, 0)), (1, (3_000_000, 0))):
        part = recording_file.Writer(str(tmp_path / f"run.lfrec.w{k}"), "run.lfrec")
        part.head({"program": "P", "graph": "g", "workers": 2, "start_time": 0})
        part.chunk(pickle.dumps([("w", None), ("t", *last)]))
        part.close()
    rec = replay.load(str(tmp_path / "run.lfrec"))
    assert rec.end is None and rec.last == (3_000_000, 0)
