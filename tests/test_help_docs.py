"""Parameter descriptions: the ``.lf`` doc comment beside a parameter (or on the lines above
it) is kept by the parser (codegen.doc_comments), carried by graph.json, and printed by the
program's ``--help`` for the main reactor's parameters and those of the reactors inside it;
every parameter of every program in lf_src/ has one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, build, run_program

from codegen.diagnostics import Reporter
from codegen.parse import parse
from reactors.launch.usage import WIDTH, usage
from reactors.model.program import Program

NEST = ROOT / "tests" / "forwarding_fixtures" / "Nest.lf"

DOCUMENTED = """target Python
/** The reactor's own description, not a parameter's. */
reactor R(a = 1, b = 2,  // b's, the last on its line
  // c's,
  // on two lines
  c = 3,

  // not d's: a blank line comes between
  d = [1, 2],  # d's, a hash comment
  /**
   * e's, a block
   */
  e = "x") {   // e's wins over the block above
  timer t(0, 1 sec)  // a member's comment, no parameter's
}
main reactor(x = 1) {  // x's
  r = new R()
}
"""


def docs_of(text: str) -> dict[str, str]:
    model = parse(text, "T.lf", Reporter())
    return {p.name: p.doc for r in model.reactors for p in r.parameters}


def test_comments_beside_and_above_a_parameter_describe_it():
    assert docs_of(DOCUMENTED) == {
        "a": "",
        "b": "b's, the last on its line",
        "c": "c's, on two lines",
        "d": "d's, a hash comment",
        "e": "e's wins over the block above",
        "x": "x's",
    }


def test_a_block_above_a_parameter_alone_on_its_line_describes_it():
    docs = docs_of("target Python\nmain reactor M(\n  /** the seed */\n  seed = 1) {}\n")
    assert docs == {"seed": "the seed"}


def test_a_file_without_comments_parses_as_before():
    assert docs_of("target Python\nmain reactor M(n = 1) {}\n") == {"n": ""}


@pytest.fixture(scope="module")
def nest(tmp_path_factory) -> Path:
    return build(NEST, tmp_path_factory.mktemp("nest") / "out")


def test_help_prints_each_description_beside_its_parameter(nest):
    r = run_program(nest, "--help")
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    i = lines.index(
        "Parameters of the main reactor Nest (--NAME VALUE when it starts, "
        "lfc -D NAME=VALUE when compiled):"
    )
    assert lines[i + 1 : i + 3] == [
        "  k = 3     (Nest.lf:49)  the count the leaves inside mid get",
        "  seed = 1  (Nest.lf:50)  not used",
    ]
    inside = lines[i + 4 :]
    assert inside[:2] == [
        "Parameters of the reactors inside Nest, by instance (--INSTANCE.NAME VALUE when it",
        "starts, lfc -D INSTANCE.NAME=VALUE when compiled; those of a bank: all its members):",
    ]
    groups = [line for line in inside if line.startswith(" ") and not line.startswith("  ")]
    assert groups == [" mid: Mid", " mid.leaves: a bank of 2 Leaf", " solo: Leaf", " clock: Clock"]
    assert (
        "  mid.leaves.n = k             (Nest.lf:10)  a count, printed with the leaf's name"
        in inside
    )
    period = next(line for line in inside if line.startswith("  clock.period"))
    assert period.startswith(
        "  clock.period = 10 msec       (Nest.lf:33)  the tick period; compile time only: the"
    )
    assert (
        "  clock.ticks = 3              (Nest.lf:35)  how many ticks before the program stops"
        in inside
    )
    assert all(len(line) <= WIDTH for line in lines[i + 1 :])


def test_graph_json_carries_the_descriptions(nest):
    graph = json.loads((nest.parent.parent / "src-gen" / "Nest" / "graph.json").read_text())
    assert [p["doc"] for p in graph["main_parameters"]] == [
        "the count the leaves inside mid get",
        "not used",
    ]
    docs = {f"{p['path']}.{p['name']}": p["doc"] for p in graph["contained_parameters"]}
    assert docs["mid.width"] == "how many leaves" and docs["solo.scale"] == (
        "a factor applied to the count"
    )


def test_a_parameter_a_subclass_declares_again_keeps_its_description(tmp_path):
    src = tmp_path / "Sub.lf"
    src.write_text(
        "target Python\n"
        "reactor Base(n = 1) {}  // the base's n\n"
        "reactor Derived(n = 2) extends Base {}\n"
        "main reactor Sub { d = new Derived() }\n"
    )
    launcher = build(src, tmp_path / "out", "-n")
    graph = Program.load(str(launcher.parent.parent / "src-gen" / "Sub" / "graph.json"))
    (p,) = graph.contained_parameters
    assert (p.option, p.default, p.doc) == ("d.n", "2", "the base's n")


def test_every_parameter_of_every_program_in_lf_src_is_described(tmp_path):
    files = [f for f in sorted((ROOT / "lf_src").glob("*.lf")) if "main reactor" in f.read_text()]
    assert len(files) >= 8
    missing = []
    for f in files:
        launcher = build(f, tmp_path / f.stem, "-n")
        graph = Program.load(str(launcher.parent.parent / "src-gen" / f.stem / "graph.json"))
        text = usage(graph)
        params = [*graph.main_parameters, *graph.contained_parameters]
        assert graph.contained_parameters, f.name
        for p in params:
            name = getattr(p, "option", p.name)
            if not p.doc:
                missing.append(f"{f.stem}: {name} ({Path(p.file).name}:{p.line})")
            assert " ".join(p.doc.split()[:3]) in " ".join(text.split()), (f.stem, name)
    assert not missing, "parameters without a description:\n" + "\n".join(missing)
