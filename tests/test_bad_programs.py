"""Programs the compiler must reject: each ``tests/bad/<class>.lf`` holds several cases, each
beginning with ``//# expect: LINE:COL: FRAGMENT``; every case fails with a located error."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from lfsrc import compile_text, errors_of

from codegen import elaborate
from codegen.compiler import Overrides, front
from codegen.diagnostics import CompileError, Reporter
from codegen.limits import MAX_CHANNELS, MAX_DEPTH

BAD = Path(__file__).parent / "bad"
MARK = "//# expect: "


def _cases() -> list[tuple[str, int, int, str]]:
    """(case text, line, column, message fragment) for every case of every bad file."""
    out = []
    for path in sorted(BAD.glob("*.lf")):
        chunks = ("\n" + path.read_text(encoding="utf-8")).split("\n" + MARK)[1:]
        for n, chunk in enumerate(chunks):
            head, _, body = chunk.partition("\n")
            line, col, fragment = head.split(":", 2)
            out.append(
                pytest.param(body, int(line), int(col), fragment.strip(), id=f"{path.stem}-{n}")
            )
    return out


@pytest.mark.parametrize("text,line,col,fragment", _cases())
def test_bad_program_is_rejected_with_a_located_error(tmp_path, text, line, col, fragment):
    errs = errors_of(tmp_path, text)
    hits = [e for e in errs if fragment in e.splitlines()[0]]
    assert hits, f"expected an error containing {fragment!r}, got {errs}"
    assert hits[0].startswith(f"{tmp_path / 'Main.lf'}:{line}:{col}: error: "), hits[0]


def _chain(depth: int, main: bool = True) -> str:
    """A program whose reactors R0..R<depth-1> each contain the next one."""
    text = "target Python\n"
    text += "".join(f"reactor R{i} {{ c = new R{i + 1}() }}\n" for i in range(depth - 1))
    text += f"reactor R{depth - 1} {{}}\n"
    return text + ("main reactor Main { c = new R0() }\n" if main else "main reactor Main {}\n")


def test_nesting_up_to_the_maximum_depth_compiles(tmp_path):
    f, rep = compile_text(tmp_path, _chain(MAX_DEPTH - 1))
    assert f is not None and len(f.prog.instances) == MAX_DEPTH


@pytest.mark.parametrize("depth", [MAX_DEPTH, 600])
def test_nesting_deeper_than_the_maximum_is_a_located_error(tmp_path, depth):
    errs = errors_of(tmp_path, _chain(depth))
    assert len(errs) == 1, errs
    line = MAX_DEPTH  # the instantiation of the reactor at depth MAX_DEPTH + 1
    assert errs[0].startswith(f"{tmp_path / 'Main.lf'}:{line}:"), errs[0]
    assert f"nested more than {MAX_DEPTH} levels deep" in errs[0]


def test_deep_classes_that_are_never_instantiated_compile(tmp_path):
    f, rep = compile_text(tmp_path, _chain(2000, main=False))
    assert f is not None and not rep.diagnostics


def test_width_from_a_define_above_the_maximum_is_a_located_error(tmp_path):
    path = tmp_path / "Main.lf"
    path.write_text(
        "target Python\nreactor A {}\nmain reactor Main(n = 2) {\n  a = new[n] A()\n}\n"
    )
    rep = Reporter()
    with pytest.raises(CompileError):
        front(str(path), rep, Overrides(params={"n": "1000000000000"}))
    errs = [d.format(None).splitlines()[0] for d in rep.diagnostics if d.severity == "error"]
    assert errs == [
        f"{path}:4:10: error: width 1000000000000 is larger than the maximum of 65,536 for a "
        "bank or multiport"
    ]


@pytest.mark.parametrize(
    "data,line,col,byte",
    [
        ("target Python\n// café\nmain reactor Main {}\n".encode("latin-1"), 2, 7, 0xE9),
        (bytes([0x74, 0x61, 0xFF, 0xFE, 0x00, 0x81] * 40), 1, 3, 0xFF),
    ],
    ids=["latin-1", "random-bytes"],
)
def test_a_file_that_is_not_utf8_is_a_located_error(tmp_path, data, line, col, byte):
    path = tmp_path / "Main.lf"
    path.write_bytes(data)
    rep = Reporter()
    with pytest.raises(CompileError):
        front(str(path), rep)
    errs = [d.format(None).splitlines()[0] for d in rep.diagnostics if d.severity == "error"]
    assert errs == [
        f"{path}:{line}:{col}: error: the file is not UTF-8 text: byte 0x{byte:02x} cannot be "
        "decoded (save it as UTF-8)"
    ]


def test_an_imported_file_that_is_not_utf8_is_a_located_error(tmp_path):
    (tmp_path / "Lib.lf").write_bytes(b'target Python\nreactor L { state s = "\xe9" }\n')
    errs = errors_of(tmp_path, 'target Python\nimport L from "Lib.lf"\nmain reactor Main {}\n')
    assert any(
        e.startswith(f"{tmp_path / 'Lib.lf'}:2:24: error: the file is not UTF-8 text") for e in errs
    ), errs


#: Nine lines whose widths multiply past MAX_CHANNELS at the third, then ask for a delay per
#: channel: elaborating on took 26 s and 2.7 GB before the error.
PAST_THE_CHANNELS = """target Python
reactor A {
  input[65536] x
  output[65536] y
}
main reactor Main {
  a = new[65536] A()
  a.y -> a.x after 1 msec
}
"""


def test_elaboration_stops_at_the_first_bound_it_crosses(tmp_path):
    start = time.process_time()
    errs = errors_of(tmp_path, PAST_THE_CHANNELS)
    cpu = time.process_time() - start
    assert len(errs) == 1 and errs[0].startswith(f"{tmp_path / 'Main.lf'}:3:3: error: "), errs
    assert f"more than {MAX_CHANNELS:,} port channels" in errs[0]
    assert cpu < 3, f"{cpu:.1f} s of CPU before the error"


def test_delay_instances_count_against_the_bounds(tmp_path, monkeypatch):
    """The instances and ports an ``after`` delay is lowered to are counted like any other
    (one instance and two channels per source channel), and the connection that crosses a
    bound is the place of the error."""
    monkeypatch.setattr(elaborate, "MAX_INSTANCES", 100)
    text = (
        "target Python\nreactor A {\n  input[60] x\n  output[60] y\n}\n"
        "main reactor Main {\n  a = new[2] A()\n  a.y -> a.x after 1 msec\n}\n"
    )
    errs = errors_of(tmp_path, text)
    assert len(errs) == 1 and errs[0].startswith(f"{tmp_path / 'Main.lf'}:8:3: error: "), errs
    assert "more than 100 reactor instances" in errs[0]
    monkeypatch.setattr(elaborate, "MAX_INSTANCES", 1000)
    monkeypatch.setattr(elaborate, "MAX_CHANNELS", 400)
    errs = errors_of(tmp_path, text)
    assert len(errs) == 1 and errs[0].startswith(f"{tmp_path / 'Main.lf'}:8:3: error: "), errs
    assert "more than 400 port channels" in errs[0]
