"""The dataflow graph viewer (codegen/viewer.py): graph.json -> one self-contained HTML page."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LF_TESTS, ROOT

from codegen.compiler import compile_file
from codegen.diagnostics import Reporter
from codegen.viewer import Diagram, format_time, load_trace, reaction_key, render
from reactors.model.program import FORMAT_VERSION, Program

PROGRAMS = {
    "NestedBanks": LF_TESTS / "multiport" / "NestedBanks.lf",
    "ModalAfter": LF_TESTS / "modal" / "ModalAfter.lf",
    "PhysicalConnectionAfter": LF_TESTS / "basic" / "PhysicalConnectionAfter.lf",
    "PingPong": ROOT / "lf_src" / "bench" / "PingPong.lf",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """OUT with src-gen/<Name>/graph.json for every program above."""
    out = tmp_path_factory.mktemp("viewer")
    for path in PROGRAMS.values():
        compile_file(str(path), Reporter(), str(out), no_compile=True)
    return out


def graph_of(built: Path, name: str) -> Program:
    return Program.load(str(built / "src-gen" / name / "graph.json"))


def page_data(html: str) -> dict:
    return json.loads(re.search(r"const DATA = (.*);\n", html).group(1).replace("<\\/", "</"))


def all_boxes(box: dict):
    yield box
    for c in box["children"]:
        if c["kind"] == "reactor":
            yield from all_boxes(c)


def test_command_writes_one_self_contained_page_per_graph(built):
    graphs = [str(built / "src-gen" / n / "graph.json") for n in PROGRAMS]
    r = subprocess.run(
        [sys.executable, "-m", "codegen.viewer", *graphs],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(Path(g).with_name("graph.html")) for g in graphs]
    for name in PROGRAMS:
        html = (built / "src-gen" / name / "graph.html").read_text()
        assert page_data(html)["name"] == name
        assert "elkjs 0.12.1" in html and "g.ELK = f()" in html  # the ELK bundle, inlined
        assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=", html, re.I)
        assert not re.search(r"(@import|url\()\s*['\"]?https?:", html)
        assert html.count("<script>") == 2 and "<script " not in html


def test_unreadable_input_is_an_error_not_a_traceback(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "codegen.viewer", str(tmp_path / "none.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and r.stderr.startswith("lfc-graph: error:")


def test_graph_of_another_version_is_an_error(built, tmp_path):
    old = json.loads((built / "src-gen" / "PingPong" / "graph.json").read_text())
    old["version"] = 1
    (tmp_path / "graph.json").write_text(json.dumps(old))
    r = subprocess.run(
        [sys.executable, "-m", "codegen.viewer", str(tmp_path / "graph.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and r.stderr.startswith("lfc-graph: error:")
    assert f"format version: expected {FORMAT_VERSION}, found 1" in r.stderr


def test_banks_are_one_box_with_their_width(built):
    root = Diagram(graph_of(built, "NestedBanks")).to_dict()["root"]
    (outer,) = [c for c in root["children"] if c.get("inst") == "o"]
    (inner,) = [c for c in outer["children"] if c.get("inst") == "inner"]
    assert (outer["bank"], inner["bank"]) == (2, 2)
    assert {p["name"]: p["width"] for p in inner["ports"]} == {"out": 2}
    (conn,) = [e for e in outer["edges"] if e["kind"] == "conn"]  # inner.out -> out
    assert (conn["src"], conn["dst"]) == (f"{inner['id']}:out", f"{outer['id']}:out")
    assert conn["bold"]
    assert [e["iterated"] for e in root["edges"]] == [True]  # (o.out)+ -> d.inp


def test_delays_are_drawn_as_written_and_synthetic_instances_hidden(built):
    data = Diagram(graph_of(built, "ModalAfter")).to_dict()
    names = [b["full"] for b in all_boxes(data["root"])]
    assert not any("_lf_delay" in n for n in names), names
    modal = next(b for b in all_boxes(data["root"]) if b["inst"] == "m")
    delays = sorted(e["label"] for e in modal["edges"] if e["kind"] == "conn" and e["label"])
    assert delays == ["100 ms", "50 ms"]
    # drv.out (width 3) -> m.data, m.hst, m.rst: one edge per channel's destination port
    drv = next(b for b in all_boxes(data["root"]) if b["inst"] == "drv")
    fanout = [e["dst"] for e in data["root"]["edges"] if e["src"] == f"{drv['id']}:out"]
    assert sorted(fanout) == [f"{modal['id']}:{p}" for p in ("data", "hst", "rst")]


def test_modes_hold_their_reactions_and_transitions_are_labelled(built):
    modal = next(
        b
        for b in all_boxes(Diagram(graph_of(built, "ModalAfter")).to_dict()["root"])
        if b["inst"] == "m"
    )
    assert [(m["name"], m["initial"]) for m in modal["modes"]] == [("A", True), ("B", False)]
    reactions = [c for c in modal["children"] if c["kind"] == "reaction"]
    assert [(x["n"], x["mode"]) for x in reactions] == [(1, "A"), (2, "A"), (3, "B"), (4, "B")]
    trans = sorted(
        (e["dst"].split(":")[1], e["label"], e["history"])
        for e in modal["edges"]
        if e["kind"] == "mode"
    )
    assert trans == [
        ("A", "hst", True),
        ("A", "rst", False),
        ("B", "hst", True),
        ("B", "rst", False),
    ]


def test_physical_connection_and_dependencies(built):
    root = Diagram(graph_of(built, "PhysicalConnectionAfter")).to_dict()["root"]
    (conn,) = [e for e in root["edges"] if e["kind"] == "conn"]
    assert conn["physical"] and conn["label"] == "100 ms"
    source = next(b for b in all_boxes(root) if b["inst"] == "source")
    kinds = {c["kind"] for c in source["children"]}
    assert kinds == {"startup", "reaction"}
    x = next(c for c in source["children"] if c["kind"] == "reaction")
    assert {(e["src"], e["dst"]) for e in source["edges"]} == {
        (f"s{source['id'][1:]}:o", f"{x['id']}:i"),
        (f"{x['id']}:o", f"{source['id']}:out"),
    }


def test_trace_colours_reactions_by_time(built, tmp_path):
    trace = tmp_path / "trace.json"
    trace.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {"name": "PingPong.pong.reaction_1", "ph": "X", "ts": 0, "dur": 30.0},
                    {"name": "PingPong.pong.reaction_1", "ph": "X", "ts": 50, "dur": 10.0},
                    {
                        "name": "reaction 2 of PingPong.ping",
                        "ph": "X",
                        "ts": 90,
                        "dur": 2.5,
                    },  # the runtime's
                    {"name": "PingPong.ping.reaction_2", "ph": "i", "ts": 95},
                    {"name": "something else", "ph": "X", "ts": 99, "dur": 1.0},
                ]
            }
        )
    )
    times = load_trace(trace)
    assert times == {("PingPong.pong", 0): (40.0, 2), ("PingPong.ping", 1): (2.5, 1)}
    data = page_data(render(graph_of(built, "PingPong"), times))
    assert data["traced"]
    got = {
        (b["inst"], c["n"]): (c["us"], c["calls"])
        for b in all_boxes(data["root"])
        for c in b["children"]
        if c["kind"] == "reaction"
    }
    assert got == {
        ("ping", 1): (None, 0),
        ("ping", 2): (2.5, 1),
        ("pong", 1): (40.0, 2),
        ("pong", 2): (None, 0),
    }


def test_trace_names():
    assert reaction_key("reaction 2 (step) of Main.b[3]") == ("Main.b[3]", 1)
    assert reaction_key("Main.b[3].reaction_1") == ("Main.b[3]", 0)
    assert reaction_key("reaction of x") is None


def test_format_time():
    assert [format_time(t) for t in (None, 0, 10**6 * 10, 1500, 10**9, 90 * 10**9)] == [
        None,
        "0",
        "10 ms",
        "1500 ns",
        "1 s",
        "90 s",
    ]


LAYOUT_JS = r"""
const fs = require("fs");
const html = fs.readFileSync(process.argv[2], "utf8");
const [elkJs, page] = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map(m => m[1]);
const ctx = { measureText: s => ({ width: 6 * s.length }) };
global.document = { createElement: () => ({ getContext: () => ctx }),
                    getElementById: () => ({ style: {} }) };
const mod = { exports: {} };
new Function("module", "exports", elkJs)(mod, mod.exports);
const code = page.replace(/\ndraw\(\);\s*$/, "\n") + "; return buildGraph;";
const buildGraph = new Function("ELK", "location", code)(mod.exports, { hash: process.argv[3] });
new mod.exports().layout(buildGraph()).then(g => {
  let nodes = 0, edges = 0;
  (function visit(n) {
    if (!(n.width > 0 && n.height > 0)) throw new Error("node without a size: " + n.id);
    nodes++;
    for (const e of n.edges || []) {
      if (!e.sections || !e.sections.length) throw new Error("unrouted " + e.id);
      edges++;
    }
    (n.children || []).forEach(visit);
  })(g);
  console.log(JSON.stringify({ nodes, edges }));
}).catch(e => { console.error(String(e)); process.exit(1); });
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("hash_", ["#expanded", "#collapsed"])
def test_the_page_script_lays_out_with_elk(built, tmp_path, hash_):
    """Runs the page's own script (DOM stubbed) and ELK under node: every edge gets routed."""
    script = tmp_path / "layout.js"
    script.write_text(LAYOUT_JS)
    page = tmp_path / "ModalAfter.html"
    page.write_text(render(graph_of(built, "ModalAfter")))
    r = subprocess.run(
        ["node", str(script), str(page), hash_], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    counts = json.loads(r.stdout)
    assert counts["edges"] >= (20 if hash_ == "#expanded" else 5), counts


#: Names a received graph.json may hold: markup that would end the title or the script.
HOSTILE = "</title><script>alert(1)</script><!--<script>"


def test_names_in_a_received_graph_are_text_not_markup(built, tmp_path):
    """The page shows graph.json's names as text: the title is escaped and the data in the
    script can neither close it nor open a comment or another script."""
    data = json.loads((built / "src-gen" / "PingPong" / "graph.json").read_text())
    data["name"] = HOSTILE
    data["reactors"][1]["name"] = data["reactors"][1]["short"] = "r</script><b>x</b>"
    data["reactors"][1]["label"] = "a & b <i>"
    data["main_file"] = "/x/</script>.lf"
    (tmp_path / "graph.json").write_text(json.dumps(data))
    r = subprocess.run(
        [sys.executable, "-m", "codegen.viewer", str(tmp_path / "graph.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "graph.html").read_text()
    assert html.count("<script>") == 2 and html.count("</script>") == 2
    assert "<b>" not in html and "<i>" not in html and "alert(1)</script>" not in html
    assert html.count("<!--") == 1  # the page's own header comment
    title = re.search(r"<title>(.*)</title>", html).group(1)
    assert title == (
        "&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;!--&lt;script&gt; - dataflow graph"
    )
    shown = page_data(html)
    assert shown["name"] == HOSTILE and shown["file"] == "/x/</script>.lf"
