"""The program model's JSON form (graph.json): round trip, version and shape errors, paths."""

import dataclasses
import json

import pytest
from conftest import ROOT, build
from runtime_fixtures.graphkit import Kit, act

from reactors.api import ReactorBase
from reactors.core.errors import GraphError, ProgramFormatError
from reactors.model.program import FORMAT_VERSION, PLAIN_WIDTH, LineRange, PortKind, Program, load
from reactors.model.references import BankArg, ChannelKey, ChannelsArg, MutableArg


def small_program() -> Program:
    k = Kit(timeout=5)
    main = k.add("Main", ReactorBase, actions=[act("a", min_spacing=3, policy="drop")])
    a = k.add("a", ReactorBase, parent=main, ports=[("out", 2)], timers=[("t", 0, 10)])
    b = k.add("b[0]", ReactorBase, parent=main, ports=["inp"], bank_width=1, pin=1)
    k.connect(a, "out", b, "inp")
    k.reaction(a, ["startup", ("timer", "t")], effects=[("port", a, "out")], deadline=7)
    k.reaction(b, [("port", b, "inp")], mutable=["inp"])
    k.reaction(
        main,
        [("port", b, "inp"), ("action", "a")],
        effects=[("mode", "M", "history")],
        args=[
            BankArg("bs", (b,), ("inp",)),
            ChannelsArg("src", (ChannelKey(a, "out", 1),)),
        ],
    )
    k.line_map.append(LineRange(10, 12, "/abs/Main.lf", 3))
    return k.program()


def test_json_round_trip_is_exact():
    p = small_program()
    data = json.loads(p.dumps())
    assert data["version"] == FORMAT_VERSION
    assert Program.from_json(data) == p
    assert data["channels"] == [[1, "out", 0, 2, "inp", 0]]
    assert data["line_map"] == [[10, 12, "/abs/Main.lf", 3]]
    assert data["reactors"][1]["class"] == "ReactorBase"
    assert data["reactors"][2]["ports"] == [
        {"name": "inp", "kind": "output", "width": PLAIN_WIDTH, "mutable": False}
    ]
    assert data["reactions"][1]["args"][0] == {
        "kind": "mutable",
        "name": "inp",
        "reactor": 2,
        "port": "inp",
    }
    assert isinstance(p.reactions[1].args[0], MutableArg)


def test_another_version_names_the_file_and_both_versions(tmp_path):
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(dict(small_program().to_json(), version=1)))
    with pytest.raises(ProgramFormatError) as e:
        load(str(path))
    msg = str(e.value)
    assert str(path) in msg and f"expected {FORMAT_VERSION}" in msg and "found 1" in msg


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d["reactors"][2]["ports"][0].update(kind="port"), "reactors[2].ports[0].kind"),
        (lambda d: d["reactions"][0].pop("rank"), "reactions[0].rank"),
        (lambda d: d["reactions"][0]["triggers"].append({"kind": "bogus"}), "triggers[2].kind"),
        (lambda d: d["target"].update(timeout="1 sec"), "target.timeout"),
        (lambda d: d["channels"].append([1, "out"]), "channels[1]"),
        (lambda d: d["reactors"][0].update(extra=1), "reactors[0]: expected no field 'extra'"),
        (lambda d: d["reactors"][1].update(id=7), "reactors[1].id"),
        (lambda d: d["reactors"][1].update(pin=True), "reactors[1].pin"),
    ],
)
def test_a_wrong_field_is_named(edit, field):
    data = small_program().to_json()
    edit(data)
    with pytest.raises(ProgramFormatError, match="<graph.json>: ") as e:
        Program.from_json(data)
    assert field in str(e.value)


def test_unreadable_file_is_a_graph_error(tmp_path):
    with pytest.raises(GraphError, match="cannot read"):
        load(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(GraphError, match="cannot read"):
        load(str(tmp_path / "bad.json"))


def test_relative_paths_are_resolved_against_the_file(tmp_path):
    p = small_program()
    p = dataclasses.replace(
        p,
        main_file="x/Foo.lf",
        source_directory="x",
        package_directory="/abs",
        reactors=tuple(dataclasses.replace(r, file="x/Foo.lf") for r in p.reactors),
        line_map=(LineRange(1, 2, "x/Foo.lf", 3),),
    )
    (tmp_path / "graph.json").write_text(p.dumps())
    q = load(str(tmp_path / "graph.json"))
    assert q.main_file == str(tmp_path / "x" / "Foo.lf")
    assert q.source_directory == str(tmp_path / "x")
    assert q.package_directory == "/abs"
    assert q.reactors[0].file == str(tmp_path / "x" / "Foo.lf")
    assert q.reactions[0].file == str(tmp_path / "test.lf")
    assert q.line_map[0].file == str(tmp_path / "x" / "Foo.lf")


def test_compiled_program_reads_back_typed(tmp_path):
    launcher = build(ROOT / "lf_src" / "bench" / "PingPong.lf", tmp_path)
    p = load(str(tmp_path / "src-gen" / launcher.name / "graph.json"))
    assert [r.name for r in p.reactors] == ["PingPong", "PingPong.ping", "PingPong.pong"]
    kinds = {(r.short, q.name): q.kind for r in p.reactors for q in r.ports}
    assert kinds[("ping", "receive")] == PortKind.INPUT
    assert kinds[("pong", "send")] == PortKind.OUTPUT
    assert Program.from_json(json.loads(p.dumps())) == p
