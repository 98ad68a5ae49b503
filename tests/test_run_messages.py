"""What a run says on stderr when things go wrong is the same on any worker count and backend,
and starts with what concerns the user: a failing reaction's traceback begins at its ``.lf``
lines and names the reaction as the header and the diagram do; a closed standard output
ends the run quietly; a Ctrl-C does not make the plotter helper print a traceback."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest
from conftest import build

from reactors.core.errors import SourceMap, format_exception

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fault_fixtures"
RAISES = FIXTURES / "Raises.lf"
VARIANTS = [("1", "processes"), ("2", "processes"), ("2", "threads")]


def _run(launcher: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """Run in the build folder (not the project's, where a relative ``reactors/...`` path
    would name the runtime's sources)."""
    return subprocess.run(
        [str(launcher), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=launcher.parent.parent,
        env=dict(os.environ, PYTHONUNBUFFERED="1", **env),
    )


def _on_every_variant(
    launcher: Path, *args: str, **env: str
) -> dict[str, subprocess.CompletedProcess]:
    return {
        f"-w {w} {b}": _run(launcher, "-w", w, "--backend", b, *args, **env) for w, b in VARIANTS
    }


@pytest.fixture(scope="module")
def raises(tmp_path_factory):
    return build(RAISES, tmp_path_factory.mktemp("raises"))


def test_a_failing_reaction_is_told_alike_from_the_users_lines_on_any_worker_count(raises):
    runs = _on_every_variant(raises)
    want = (
        f"FATAL: reaction 2 of Raises.n[1] failed at {RAISES}:11\n"
        "Traceback (most recent call last):\n"
        f'  File "{RAISES}", line 26, in reaction 2\n'
        "    check(inp.value)\n"
        f'  File "{RAISES}", line 11, in check\n'
        '    raise ValueError(f"bad value {value}")\n'
        "ValueError: bad value 5\n"
    )
    for name, r in runs.items():
        assert r.returncode == 1, (name, r.stderr)
        assert r.stderr == want, name
    # what the tags before the failing one printed (the other worker may be stopped before
    # it prints its part of the failing tag)
    before = runs["-w 1 processes"].stdout.split("0 got 5\n")[0]
    assert before.endswith("1 got 4\n")
    assert all(r.stdout.startswith(before) for r in runs.values())


def test_reactions_failing_on_two_workers_at_one_tag_are_told_once(raises):
    """One worker stops at the first failure; two workers whose reactions fail at the same
    tag tell one of them (which one depends on which failed first)."""
    for name, r in _on_every_variant(raises, FAIL_BOTH="1").items():
        assert r.returncode == 1, (name, r.stderr)
        assert r.stderr.startswith("FATAL: reaction 2 of Raises.n["), (name, r.stderr)
        assert r.stderr.count("FATAL") == 1 and r.stderr.count("Traceback") == 1, name


def test_frames_of_the_compiled_runtime_are_left_out_of_a_reactions_traceback(
    tmp_path, monkeypatch
):
    """mypyc names a compiled module's frames by its path relative to the project
    (``reactors/parallel/worker_scheduler.py``), not by the absolute path of the sources."""
    monkeypatch.chdir(tmp_path)  # a program runs anywhere
    runtime: dict = {}
    exec(
        compile("def run(body):\n    body()\n", "reactors/parallel/worker_scheduler.py", "exec"),
        runtime,
    )
    user = tmp_path / "user.py"
    user.write_text("def reaction_function_3(self):\n    raise KeyError('k')\n")
    space: dict = {}
    exec(compile(user.read_text(), str(user), "exec"), space)
    try:
        runtime["run"](lambda: space["reaction_function_3"](None))
    except KeyError as e:
        exc = e
    text, _ = format_exception(exc, SourceMap(str(user), [(1, 2, "/x/Main.lf", 10)]))
    frames = [line for line in text.splitlines() if line.startswith("  File")]
    assert "reactors/parallel/worker_scheduler.py" not in text, text
    assert frames[-1] == '  File "/x/Main.lf", line 11, in reaction 4', text
    assert "reactors/parallel/worker_scheduler.py" in "".join(traceback.format_exception(exc))


@pytest.fixture(scope="module")
def chatter(tmp_path_factory):
    return build(FIXTURES / "Chatter.lf", tmp_path_factory.mktemp("chatter"))


@pytest.mark.parametrize("workers,backend", VARIANTS)
def test_a_closed_standard_output_ends_the_run_quietly(chatter, workers, backend):
    """As ``./bin/Chatter | head -1``: status 1, as a Python program that follows the
    advice of Python's documentation on SIGPIPE, and nothing on stderr."""
    reader, writer = os.pipe()
    p = subprocess.Popen(
        [str(chatter), "-w", workers, "--backend", backend, "-o", "60", "sec"],
        stdout=writer,
        stderr=subprocess.PIPE,
        text=True,
        cwd=chatter.parent.parent,
    )
    os.close(writer)
    with os.fdopen(reader) as out:
        assert out.readline()
    try:
        _, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 1 and err == "", err
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"lf{p.pid}x")]


def test_a_keyboard_interrupt_raised_by_a_reaction_is_said_alike(chatter):
    runs = _on_every_variant(chatter, RAISE_AT="5")
    for name, r in runs.items():
        assert r.returncode == 130, (name, r.stderr)
        assert r.stderr == "---- Interrupted (KeyboardInterrupt); stopping.\n", name


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_standard_output_is_said_alike_on_any_worker_count(chatter):
    """``> /dev/full``: a reaction's ``print`` fails on one worker, the coordinator's write of
    the tag's text on several; both say that the output cannot be written, once."""
    with open("/dev/full", "w") as full:
        for w, b in VARIANTS:
            r = subprocess.run(
                [str(chatter), "-w", w, "--backend", b],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
                cwd=chatter.parent.parent,
            )
            said = "ERROR: cannot write the program's output: No space left on device\n"
            assert r.returncode == 1 and r.stderr == said, (w, b, r.stderr)


def test_events_left_after_a_stop_are_not_told_on_any_worker_count(tmp_path):
    """One worker drops an event scheduled past a stop asked at the same tag; a worker that
    learns of that stop at the end of the tag queues it, then discards it: the runs differ
    in how many events they discard, not in what they do or say."""
    runs = _on_every_variant(build(FIXTURES / "StopElsewhere.lf", tmp_path))
    assert {r.stderr for r in runs.values()} == {""}, {n: r.stderr for n, r in runs.items()}
    assert len({r.stdout for r in runs.values()}) == 1
    assert all(r.returncode == 0 for r in runs.values())


def test_the_plotter_helper_ignores_a_ctrl_c_to_the_process_group(tmp_path):
    """The helper belongs to the run, which ends it: a Ctrl-C to the whole group (a
    terminal's) leaves it drawing, and says nothing."""
    pytest.importorskip("matplotlib")
    helper = subprocess.Popen(
        [sys.executable, "-m", "rl_algos.plotter", str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        time.sleep(0.5)  # importing matplotlib, or waiting for a request
        os.killpg(helper.pid, signal.SIGINT)
        time.sleep(0.2)
        png = tmp_path / "curve.png"
        request = dict(steps=[1, 2], returns=[1.0, 2.0], window=2, png_path=str(png), title="t")
        helper.stdin.write(json.dumps(request) + "\n")
        helper.stdin.flush()
        ready, _, _ = select.select([helper.stdout], [], [], 30)
        answer = helper.stdout.readline() if ready else ""
        helper.stdin.close()
        helper.wait(10)
        err = helper.stderr.read()
    finally:
        helper.kill()
    assert answer == "ok\n" and png.read_bytes()[:4] == b"\x89PNG", (answer, err)
    assert helper.returncode == 0 and err == "", err
