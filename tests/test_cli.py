"""The lfc command line (spec §5) and the built program's options and exit status (§2.9, §5.3)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import build, lfc, run_program

COUNTER = """target Python { fast: true, timeout: 1 sec }
main reactor Counter {
  timer t(0, 100 msec)
  state n = 0
  reaction(t) {=
    self.n += 1
  =}
  reaction(shutdown) {=
    print(f"ticks={self.n} at={lf.time.logical_elapsed()}")
  =}
}
"""


def write(dirpath: Path, name: str, text: str) -> Path:
    dirpath.mkdir(parents=True, exist_ok=True)
    p = dirpath / f"{name}.lf"
    p.write_text(text)
    return p


def test_default_output_is_the_parent_of_src(tmp_path):
    src = write(tmp_path / "proj" / "src" / "sub", "Counter", COUNTER)
    r = lfc("-q", str(src))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "proj" / "bin" / "Counter").exists()
    assert (tmp_path / "proj" / "src-gen" / "Counter" / "Counter.py").exists()
    assert (tmp_path / "proj" / "src-gen" / "Counter" / "graph.json").exists()


def test_default_output_without_src_is_the_files_folder(tmp_path):
    src = write(tmp_path / "loose", "Counter", COUNTER)
    assert lfc("-q", str(src)).returncode == 0
    assert (tmp_path / "loose" / "bin" / "Counter").exists()


def test_program_runs_and_options_override_target_properties(tmp_path):
    launcher = build(write(tmp_path, "Counter", COUNTER), tmp_path / "out")
    assert run_program(launcher).stdout.strip() == "ticks=11 at=1000000000"
    # The tick after 200 ms would fall past the stop tag, so the queue empties and the program
    # stops by starvation at (200 ms, 1) (spec §3.9), before the 250 ms timeout.
    r = run_program(launcher, "-o", "250", "msec")
    assert r.stdout.strip() == "ticks=3 at=200000000"


def test_lfc_timeout_override_is_baked_in(tmp_path):
    launcher = build(write(tmp_path, "Counter", COUNTER), tmp_path / "out", "--timeout", "300 msec")
    assert run_program(launcher).stdout.strip() == "ticks=4 at=300000000"


def test_no_compile_still_writes_the_module(tmp_path):
    src = write(tmp_path, "Counter", COUNTER.replace("self.n += 1", "self.n +=="))
    assert lfc("-q", "-o", str(tmp_path / "a"), str(src)).returncode == 1
    assert lfc("-q", "-n", "-o", str(tmp_path / "b"), str(src)).returncode == 0


def test_python_syntax_error_in_a_body_is_reported_at_its_lf_line(tmp_path):
    src = write(tmp_path, "Counter", COUNTER.replace("self.n += 1", "self.n +== 1"))
    r = lfc("-o", str(tmp_path / "a"), str(src))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert (
        r.stderr.startswith(f"{src}:6:") and "error: Python syntax error in target code" in r.stderr
    )


def test_clean_removes_stale_generated_files(tmp_path):
    src = write(tmp_path, "Counter", COUNTER)
    out = tmp_path / "out"
    assert lfc("-q", "-o", str(out), str(src)).returncode == 0
    stale = out / "src-gen" / "Counter" / "stale.txt"
    stale.write_text("x")
    assert lfc("-q", "-c", "-o", str(out), str(src)).returncode == 0
    assert not stale.exists()


def test_graph_json_describes_the_elaborated_program(tmp_path):
    build(write(tmp_path, "Counter", COUNTER), tmp_path / "out")
    g = json.loads((tmp_path / "out" / "src-gen" / "Counter" / "graph.json").read_text())
    assert g["name"] == "Counter" and g["target"]["timeout"] == 1_000_000_000
    assert [r["name"] for r in g["reactors"]] == ["Counter"]
    assert g["reactors"][0]["timers"] == [
        {"name": "t", "offset": 0, "period": 100_000_000, "mode": None}
    ]
    assert [(r["index"], r["level"]) for r in g["reactions"]] == [(0, 0), (1, 1)]


def test_generated_module_names_the_lf_lines(tmp_path):
    build(write(tmp_path, "Counter", COUNTER), tmp_path / "out")
    text = (tmp_path / "out" / "src-gen" / "Counter" / "Counter.py").read_text()
    assert "class _Counter(ReactorBase):" in text
    assert (
        "    def reaction_function_0(self):\n        # Counter.lf:6\n        self.n += 1\n" in text
    )


FAILING = """target Python { fast: true }
reactor Worker {
  input inp
  reaction(inp) {=
    values = [1, 2]
    print(values[inp.value])
  =}
}
main reactor Failing {
  w = new Worker()
  reaction(startup) -> w.inp {= w.inp.set(5) =}
  reaction(shutdown) {= print("shutdown must not run after a failure") =}
}
"""


def test_a_failing_reaction_stops_the_program_and_names_the_lf_line(tmp_path):
    launcher = build(write(tmp_path, "Failing", FAILING), tmp_path / "out")
    r = run_program(launcher)
    assert r.returncode == 1
    assert "Failing.w" in r.stderr and "Failing.lf:6" in r.stderr and "IndexError" in r.stderr
    assert "shutdown must not run" not in r.stdout


def test_exit_n_in_a_reaction_gives_status_n(tmp_path):
    text = "target Python\nmain reactor Quit { reaction(startup) {= exit(7) =} }\n"
    r = run_program(build(write(tmp_path, "Quit", text), tmp_path / "out"))
    assert r.returncode == 7


def test_syntax_error_is_located_with_a_caret(tmp_path):
    src = write(tmp_path, "Bad", "target Python\nmain reactor Bad {\n  timer t(0, 1 msec\n}\n")
    r = lfc(str(src))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    first = r.stderr.splitlines()
    assert first[0].startswith(f"{src}:4:1: error: unexpected")
    assert first[1] == "}" and first[2] == "^"


def test_version_and_help():
    assert lfc("-V").stdout.startswith("lfc ")
    assert "--output-path" in lfc("-h").stdout


def test_launcher_is_a_shell_script(tmp_path):
    launcher = build(write(tmp_path, "Counter", COUNTER), tmp_path / "out")
    assert launcher.read_text().startswith("#!/bin/sh\n")
    assert subprocess.run([str(launcher)], capture_output=True).returncode == 0


DEFS = """target Python { fast: true }
reactor S(w = 1) { output[w] out  reaction(startup) -> out {= [c.set(i) for i, c in enumerate(out)] =} }
main reactor Defs(n = 2, period = 1 msec, label = "x") {
  s = new S(w = n)
  timer t(period)
  reaction(s.out) {= print(self.label, len(s.out), self.period) =}
}
"""


def test_define_overrides_main_parameters_at_compile_time(tmp_path):
    src = write(tmp_path, "Defs", DEFS)
    assert run_program(build(src, tmp_path / "a")).stdout == "x 2 1000000\n"
    launcher = build(src, tmp_path / "b", "-D", "n=5", "-D", "period=3 msec", "-D", 'label="hi"')
    assert run_program(launcher).stdout == "hi 5 3000000\n"


def test_define_of_an_unknown_parameter_is_an_error(tmp_path):
    r = lfc("-o", str(tmp_path / "o"), "-D", "nope=1", str(write(tmp_path, "Defs", DEFS)))
    assert r.returncode == 1
    assert "the main reactor 'Defs' has no parameter 'nope'" in r.stderr


HIDDEN = "target Python\nmain reactor Net(hidden = 64) { reaction(startup) {= pass =} }\n"


def test_define_value_is_checked_like_the_value_in_the_file(tmp_path):
    in_file = write(tmp_path, "Net", HIDDEN.replace("64", "(32, 16)"))
    r = lfc("-o", str(tmp_path / "a"), str(in_file))
    message = "paren lists are not supported by the Python target: use [a, b]"
    assert r.returncode == 1 and f"error: {message}" in r.stderr
    defined = write(tmp_path / "d", "Net", HIDDEN)
    r = lfc("-o", str(tmp_path / "b"), "-D", "hidden=(32, 16)", str(defined))
    assert r.returncode == 1
    assert r.stderr.startswith(
        f"lfc: error: -D hidden=(32, 16): {message}; hidden takes an integer (default 64, Net.lf:2)\n"
    )
    assert not (tmp_path / "b" / "bin" / "Net").exists()


def test_define_value_that_only_the_compiler_refuses_is_named_by_its_value(tmp_path):
    # an integer to Python's reading, not to LF's grammar (no hexadecimal literals)
    r = lfc("-o", str(tmp_path / "o"), "-D", "hidden=0x10", str(write(tmp_path, "Net", HIDDEN)))
    assert r.returncode == 1
    assert r.stderr == (
        "lfc: error: -D hidden=0x10: invalid time unit 'x10'\nlfc: 1 error; nothing was built\n"
    )


def test_define_value_cannot_refer_to_a_parameter(tmp_path):
    src = write(tmp_path, "Net", HIDDEN.replace("hidden = 64", "hidden = 64, width = 2"))
    r = lfc("-o", str(tmp_path / "o"), "-D", "hidden=width", str(src))
    assert r.returncode == 1
    assert "-D hidden=width: not an integer; hidden takes an integer (default 64, Net.lf:2)" in (
        r.stderr
    )


def test_define_sets_the_main_instance_parameter_at_its_line(tmp_path):
    src = write(tmp_path, "Defs", DEFS)
    launcher = build(src, tmp_path / "b", "-D", "n=5")
    module = (tmp_path / "b" / "src-gen" / "Defs" / "Defs.py").read_text()
    assert "'n': 5,  # Defs.lf:3" in module
    assert run_program(launcher).stdout == "x 5 1000000\n"
