"""Parallel execution: placement, channels, and faults on several workers.

Fault tests run tests/parallel_fixtures/Faults.lf (two reactors in a ring, one per worker)
with FAIL_MODE set; every run must leave no worker process and no shared-memory segment.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import build, lfc, run_program
from runtime_fixtures.graphkit import Kit

from reactors.core.port import Port
from reactors.model.program import Program
from reactors.parallel import placement, shm, topology
from reactors.parallel.sync import Control

HERE = Path(__file__).resolve().parent
FAULTS = HERE / "parallel_fixtures" / "Faults.lf"


# --------------------------------------------------------------------------- placement


def _program(reactors, effects=(), triggers=(), channels=()) -> Program:
    """A minimal program: ``reactors`` as (parent, n_reactions, keyword arguments of
    ``Kit.add``); ``effects``/``triggers``: (reaction id, reactor, port) port references."""
    k = Kit()
    for i, (parent, _, extra) in enumerate(reactors):
        k.add(**{"short": f"r{i}", "parent": parent, **extra})
    refs = {"effects": {}, "triggers": {}}
    for role, items in (("effects", effects), ("triggers", triggers)):
        for x, rid, port in items:
            refs[role].setdefault(x, []).append(("port", rid, port))
    x = 0
    for i, (_, n, _) in enumerate(reactors):
        for _ in range(n):
            k.reaction(i, refs["triggers"].get(x, ()), effects=refs["effects"].get(x, ()))
            x += 1
    for src, sport, dst, dport in channels:
        k.connect(src, sport, dst, dport)
    return k.program()


def test_bank_members_are_spread_and_pins_respected():
    g = _program(
        [(None, 0, {})]
        + [(0, 1, {"short": "b", "bank_index": i, "bank_width": 4}) for i in range(4)]
        + [(0, 1, {"pin": 3})]
    )
    w = placement.place(g, 2)
    assert w[1:5] == [0, 1, 0, 1]
    assert w[5] == 1  # pin 3 on 2 workers: 3 mod 2
    assert placement.place(g, 2) == w  # a pure function


def test_modal_reactors_keep_their_contents_and_writers_share_a_worker():
    reactors = [(None, 0, {}), (0, 1, {"modes": ["A"]}), (1, 1, {}), (0, 1, {}), (0, 1, {})]
    groups = placement.groups(_program(reactors))
    assert groups[2] == groups[1]  # inside a modal reactor
    reactors[3] = (0, 1, {"ports": ["out"]})
    g = _program(reactors, effects=[(2, 3, "out"), (3, 3, "out")])  # r3 and r4 write r3.out
    assert placement.groups(g)[4] == placement.groups(g)[3]


def test_resolve_workers_caps_by_parallelism():
    g = _program([(None, 0, {})] + [(0, 1, {}) for _ in range(3)])
    assert placement.resolve_workers(g, 0, cores=16) == 3
    assert placement.resolve_workers(g, 0, cores=2) == 2
    assert placement.resolve_workers(g, 8) == 3  # no worker without reactions
    assert placement.resolve_workers(_program([(None, 1, {})]), 4) == 1


def test_crossings_have_one_writer_and_ordered_ranks():
    g = _program(
        [(None, 0, {}), (0, 1, {"ports": ["out"]}), (0, 1, {"ports": ["inp"]})],
        effects=[(0, 1, "out")],
        triggers=[(1, 2, "inp")],
        channels=[(1, "out", 2, "inp")],
    )
    [c] = topology.crossings(g, [0, 0, 1])
    assert (c.root, c.writer, c.readers, c.last_write, c.first_read) == (
        (1, "out", 0),
        0,
        (1,),
        0,
        {1: 1},
    )
    assert topology.crossings(g, [0, 1, 1]) == []


# --------------------------------------------------------------------------- channels


@pytest.fixture
def channel():
    """A writer and a reader of channel 0 in this process, and the run prefix."""
    prefix = f"lftest{os.getpid()}x"
    ctl = Control(bytearray(Control.size(2, 1)), 2, 1)
    ctl.init()
    src, dst = Port("src"), Port("dst")
    w = shm.Writer(ctl, 0, (1,), src, prefix)
    r = shm.Reader(ctl, 0, 1, dst, prefix, [])
    yield src, dst, w, r
    r.maps.clear()
    assert shm.unlink_prefix(prefix) >= 0
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]


def _send(src, dst, w, r, seq, value):
    src._v, src._p = value, True
    dst._p = False
    w.publish(seq)
    r.receive(seq)
    assert dst._p
    return dst.value


def test_arrays_travel_zero_copy_read_only_and_slots_are_reused(channel):
    src, dst, w, r = channel
    a = np.arange(1200, dtype=np.float32).reshape(300, 4)  # beyond the inline cells
    got = _send(src, dst, w, r, 0, a)
    assert got.shape == (300, 4) and got.dtype == np.float32 and (got == a).all()
    assert not got.flags.writeable
    del got
    for seq in range(1, 6):
        assert (_send(src, dst, w, r, seq, a + seq) == a + seq).all()
    assert len(w.slots) == 2  # double buffering in the steady state
    kept = [_send(src, dst, w, r, seq, a * seq) for seq in range(6, 10)]
    assert [float(k[0, 1]) for k in kept] == [6.0, 7.0, 8.0, 9.0]  # kept values stay intact
    assert r.copying


def test_other_values_and_new_shapes(channel):
    src, dst, w, r = channel
    obj = {"obs": np.ones((2, 2)), "reward": 1.5, "done": False}
    got = _send(src, dst, w, r, 0, obj)
    assert got["reward"] == 1.5 and (got["obs"] == 1).all()
    big = np.zeros(100_000, dtype=np.int64)
    assert _send(src, dst, w, r, 1, big).shape == (100_000,)
    assert _send(src, dst, w, r, 2, np.asfortranarray(np.ones((3, 5))))[2, 4] == 1
    assert _send(src, dst, w, r, 2, np.arange(5, dtype=np.uint8)).tolist() == [0, 1, 2, 3, 4]
    assert _send(src, dst, w, r, 2, np.array([True, False])).dtype == np.bool_
    assert _send(src, dst, w, r, 3, "text") == "text"
    for v in (None, True, False, 7, -(1 << 63), 1 << 70, 2.5, float("nan"), (1, "a")):
        got = _send(src, dst, w, r, 3, v)
        assert got == v or (v != v and got != got)
        assert type(got) is type(v)
    src._p = False
    w.publish(4)
    dst._p = False
    r.receive(4)
    assert not dst._p and dst._v == (1, "a")  # absent: the value persists


def test_torch_tensors_travel(channel):
    torch = pytest.importorskip("torch")
    src, dst, w, r = channel
    t = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    got = _send(src, dst, w, r, 0, t)
    assert isinstance(got, torch.Tensor) and torch.equal(got, t)


# --------------------------------------------------------------------------- faults


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    return build(FAULTS, tmp_path_factory.mktemp("faults"))


def _children(pid: int) -> set:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return {int(x) for x in f.read().split()}
    except OSError:
        return set()


def _start(launcher, mode, *args, session=False):
    env = dict(os.environ, FAIL_MODE=mode, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [str(launcher), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=session,
    )


def _finish(p, timeout=30):
    """Wait for the program while remembering its worker processes; check nothing is left."""
    kids = set()
    deadline = time.monotonic() + timeout
    while p.poll() is None and time.monotonic() < deadline:
        kids |= _children(p.pid)
        time.sleep(0.02)
    out, err = p.communicate(timeout=5)
    left = time.monotonic() + 5
    while time.monotonic() < left and any(os.path.exists(f"/proc/{k}") for k in kids):
        time.sleep(0.05)
    assert not [k for k in kids if os.path.exists(f"/proc/{k}")], "worker processes left"
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"lf{p.pid}x")], (
        "shared memory left"
    )
    return p.returncode, out, err


@pytest.mark.parametrize("backend", ["processes", "threads"])
def test_reaction_error_stops_all_workers_and_names_the_lf_line(faults, backend):
    code, out, err = _finish(_start(faults, "raise", "--backend", backend))
    assert code == 1
    assert f"reaction 2 of Faults.n[1] failed at {FAULTS}:23" in err
    assert "ZeroDivisionError" in err and "shutdown" not in out
    assert "1 got 3" in out and "1 got 4" not in out and "0 got 4" not in out


@pytest.mark.parametrize("mode,status", [("exit", 3), ("exit0", 0)])
def test_exit_status_is_kept(faults, mode, status):
    code, out, err = _finish(_start(faults, mode))
    assert code == status and "shutdown" not in out


def test_killed_worker_is_noticed(faults):
    t0 = time.monotonic()
    code, out, err = _finish(_start(faults, "kill"))
    assert code != 0 and time.monotonic() - t0 < 10
    assert "worker 1 was killed by signal SIGKILL" in err and "Faults.n[1]" in err


@pytest.mark.parametrize("how", ["SIGINT", "SIGINT to the group", "SIGTERM"])
def test_interrupts_stop_cleanly(faults, how):
    group = how.endswith("group")
    p = _start(faults, "sleep", session=group)
    assert p.stdout.readline().endswith("got 1\n")
    time.sleep(0.3)
    sig = signal.SIGTERM if how == "SIGTERM" else signal.SIGINT
    if group:
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    code, out, err = _finish(p)
    assert code == (143 if sig == signal.SIGTERM else 130), err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- compiler, records


def test_tags_where_a_worker_prints_nothing_print_nothing_of_it(tmp_path):
    # a worker sends its stdout only at the tags where it printed; its channel for the
    # other tags of a parity still names an older tag, which must read as no text
    src = tmp_path / "Sparse.lf"
    src.write_text(
        "target Python { fast: true }\n"
        "reactor P(every = 2) {\n"
        "  timer t(0, 1 msec)\n  state n = 0\n"
        "  reaction(t) {=\n"
        "    if self.n % self.every == 0:\n"
        "        print(f'{self.every} {self.n}')\n"
        "    self.n += 1\n"
        "    if self.n == 12:\n        request_stop()\n"
        "  =}\n}\n"
        "main reactor { @worker(0) a = new P(every = 3)\n @worker(1) b = new P(every = 5) }\n"
    )
    launcher = build(src, tmp_path / "out")
    want = [f"{k} {n}" for k in (3, 5) for n in range(12) if n % k == 0]
    one, two = run_program(launcher, "-w", "1"), run_program(launcher, "-w", "2")
    assert one.returncode == 0 and two.returncode == 0, two.stderr
    assert two.stdout == one.stdout
    assert sorted(one.stdout.split("\n")[:-1]) == sorted(want)


def test_graph_json_has_placement_and_pins(tmp_path):
    src = tmp_path / "Pins.lf"
    src.write_text(
        "target Python { workers: 2, fast: true, timeout: 0 }\n"
        "reactor A { reaction(startup) {= print(self.bank_index) =} }\n"
        "main reactor { @worker(1) a = new[3] A()\n b = new[2] A() }\n"
    )
    r = lfc("-q", "-o", str(tmp_path / "out"), str(src))
    assert r.returncode == 0, r.stderr
    g = json.loads((tmp_path / "out" / "src-gen" / "Pins" / "graph.json").read_text())
    assert [(x["worker"], x["pin"]) for x in g["reactors"]] == [
        (0, None),
        (1, 1),
        (1, 1),
        (1, 1),
        (0, None),
        (1, None),
    ]
    launcher = tmp_path / "out" / "bin" / "Pins"
    assert run_program(launcher).stdout == "0\n1\n2\n0\n1\n"
    assert run_program(launcher, "-w", "1").stdout == "0\n1\n2\n0\n1\n"


def test_timing_trace_is_written(tmp_path, faults):
    src = tmp_path / "Traced.lf"
    src.write_text(
        FAULTS.read_text()
        .replace("workers: 2", "workers: 2, tracing: true")
        .replace("main reactor Faults", "main reactor Traced")
    )
    launcher = build(src, tmp_path / "out")
    r = subprocess.run([str(launcher)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    events = json.loads((tmp_path / "Traced.trace.json").read_text())["traceEvents"]
    assert {e["pid"] for e in events} == {0, 1}
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    # each worker's waits for the other, beside its reactions
    waits = {e["pid"] for e in events if e["name"] == "sync: next tag"}
    assert waits == {0, 1}, sorted({e["name"] for e in events})


def test_waiting_workers_block_instead_of_spinning(tmp_path):
    """Four workers on this machine's cores, idle between 200 ms timer ticks for 2 s: they
    must sleep in the kernel (busy waiting would cost about 2 s of CPU per core). The CPU of
    the same run stopped at its start tag (start-up and shutdown: about 1.2 s here, more on a
    loaded machine) is taken off."""
    import resource

    launcher = build(HERE / "parallel_fixtures" / "Idle.lf", tmp_path)

    def timed(*args: str) -> tuple[float, float, subprocess.CompletedProcess]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        r = run_program(launcher, "-w", "4", "--oversubscribe", *args)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), r

    wall, cpu, r = timed()
    _, start_up, r0 = timed("-o", "0", "sec")
    assert r.returncode == 0 and r.stdout == "66\n", r.stderr
    assert r0.returncode == 0 and r0.stdout == "6\n", r0.stderr  # the start tag only
    assert wall >= 2.0 and cpu - start_up < 0.6, (wall, cpu, start_up)


@pytest.mark.parametrize("backend", ["processes", "threads"])
@pytest.mark.parametrize("source_on", [0, 1])
def test_physical_actions_and_stop_requests_from_threads(tmp_path, backend, source_on):
    """Events a thread of either worker schedules (worker 0 also coordinates), and a stop
    requested from a thread, behave as on one worker."""
    src = tmp_path / "Physical.lf"
    src.write_text(
        (HERE / "parallel_fixtures" / "Physical.lf")
        .read_text()
        .replace("  s = new Source()", f"  @worker({source_on}) s = new Source()")
    )
    launcher = build(src, tmp_path / "out")
    r = run_program(launcher, "--backend", backend)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[0, 1, 2, 3, 4] 1 True\n"


def test_digest_encoding_and_merge(tmp_path):
    from reactors.records import trace

    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert trace.encode(a) == trace.encode(a.copy(order="F"))  # layout does not matter
    assert trace.encode(a) != trace.encode(a.reshape(3, 2))  # shape does
    assert trace.encode(a) != trace.encode(a.astype(np.int64))  # dtype does
    assert trace.encode({"x": 1}) == trace.encode({"x": 1})
    assert b"unpicklable" in trace.encode(lambda: 0)
    parts = [tmp_path / "d.w0", tmp_path / "d.w1"]
    parts[0].write_text("5 0 B.out h1\n0 1 A.out h2\n" + trace.WHOLE)
    parts[1].write_text("0 1 A.in h3\n" + trace.WHOLE)
    trace.merge([str(p) for p in parts] + [str(tmp_path / "d.w2")], str(tmp_path / "d"))
    assert (tmp_path / "d").read_text() == "0 1 A.in h3\n0 1 A.out h2\n5 0 B.out h1\n"
    assert not any(p.exists() for p in parts)


# --------------------------------------------------------------------------- start-up


def _pids(stderr: str, what: str) -> set[int]:
    """The process ids said after ``what`` (two workers' lines may interleave)."""
    return {int(pid) for pid in re.findall(what + r" (\d+)", stderr)}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_on_worker_processes_does_not_load_the_module_in_its_own(tmp_path, workers):
    """On worker processes, the program's process only supervises: the module (and its
    preambles' imports) loads in each worker, not there; on one worker it loads there."""
    launcher = build(HERE / "parallel_fixtures" / "Loads.lf", tmp_path)
    p = subprocess.Popen(
        [str(launcher), "-w", str(workers)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    loaded, ran = _pids(err, "loaded in"), _pids(err, "ran in")
    if workers == 1:
        assert loaded == ran == {p.pid}
    else:
        assert len(ran) == 2 and p.pid not in ran, err
        assert loaded == ran, "a worker ran reactions without loading the module, or the reverse"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_options_in_error_are_refused_before_the_module_loads(tmp_path, workers):
    """Options in error are answered alike on any worker count, by the launcher, before the
    module's preambles run in any process (no user waits for torch to hear of a typo)."""
    launcher = build(HERE / "parallel_fixtures" / "Loads.lf", tmp_path)
    p = run_program(launcher, "-w", workers, "--no-such-option")
    assert p.returncode == 1 and "--no-such-option" in p.stderr
    assert p.stderr.count("loaded in") == 0, p.stderr
