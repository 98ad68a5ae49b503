"""The ``protobufs`` target property: .proto files compiled at build time into ``<name>_pb2``
modules beside the generated module; a missing file or a protoc error is a located error.
(tests/lf/target/Protobufs.lf runs a program sending one of these messages.)"""

from __future__ import annotations

import os

import pytest
from conftest import build, run_program

from codegen.compiler import compile_file
from codegen.diagnostics import CompileError, Reporter

pytest.importorskip("grpc_tools")

PROGRAM = """target Python {{
  protobufs: [{proto}]
}}

preamble {{=
import Point_pb2
=}}

main reactor {{
  reaction(startup) {{=
    p = Point_pb2.Point(x=3, y=4)
    q = Point_pb2.Point()
    q.ParseFromString(p.SerializeToString())
    print(q.x + q.y)
  =}}
}}
"""

POINT = 'syntax = "proto3";\nmessage Point {\n  int32 x = 1;\n  int32 y = 2;\n}\n'


def _compile(tmp_path, proto_name: str = "Point.proto"):
    src = tmp_path / "Main.lf"
    src.write_text(PROGRAM.format(proto=proto_name), encoding="utf-8")
    rep = Reporter()
    try:
        out = compile_file(str(src), rep, out_root=str(tmp_path / "out"))
    except CompileError:
        out = None
    errors = [d for d in rep.diagnostics if d.severity == "error"]
    warnings = [d.message for d in rep.diagnostics if d.severity == "warning"]
    return out, errors, warnings


def test_proto_is_compiled_beside_the_generated_module(tmp_path):
    (tmp_path / "Point.proto").write_text(POINT, encoding="utf-8")
    out, errors, warnings = _compile(tmp_path)
    assert errors == [] and not any("protobufs" in w for w in warnings), (errors, warnings)
    assert os.path.exists(os.path.join(out.src_dir, "Point_pb2.py"))


def test_missing_proto_is_an_error_at_the_property(tmp_path):
    out, errors, _ = _compile(tmp_path, "Nowhere.proto")
    assert out is None
    assert len(errors) == 1
    assert "Nowhere.proto" in errors[0].message and "does not exist" in errors[0].message
    assert errors[0].pos.file.endswith("Main.lf") and errors[0].pos.line == 2


def test_protoc_error_is_located_in_the_proto_file(tmp_path):
    (tmp_path / "Point.proto").write_text(
        'syntax = "proto3";\nmessage Point {\n  int32 x = 1\n  int32 y = 2;\n}\n',
        encoding="utf-8",
    )
    out, errors, _ = _compile(tmp_path)
    assert out is None and errors
    assert errors[0].message.startswith("protoc: ")
    assert errors[0].pos.file.endswith("Point.proto") and errors[0].pos.line == 4


BOUND = """target Python {
  protobufs: [Point.proto, msgs/Shape-Set.proto],
  fast: true
}

preamble {=
import Point_pb2
=}

main reactor {
  reaction(startup) {=
    p = Point.Point(x=3, y=4)  # bound under the file's stem, as in LF: no import
    q = Point_pb2.Point()  # the module's own name stays importable (the preamble)
    q.ParseFromString(p.SerializeToString())
    s = Shape_Set.Shape(sides=q.x + q.y)
    print(q.x + q.y, s.sides)
  =}
}
"""


def test_each_module_is_bound_under_its_stem_and_still_importable(tmp_path):
    """``protobufs: [Point.proto]`` binds ``Point`` (the module Point_pb2) in the program's
    module, as LF's Python target does; ``import Point_pb2`` works as well."""
    (tmp_path / "Point.proto").write_text(POINT, encoding="utf-8")
    (tmp_path / "msgs").mkdir()
    (tmp_path / "msgs" / "Shape-Set.proto").write_text(
        'syntax = "proto3";\nmessage Shape {\n  int32 sides = 1;\n}\n', encoding="utf-8"
    )
    src = tmp_path / "Bound.lf"
    src.write_text(BOUND)
    ran = run_program(build(src, tmp_path / "out"))
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["7", "7"]


def test_a_proto_whose_module_python_cannot_import_is_an_error(tmp_path):
    (tmp_path / "my.point.proto").write_text(POINT, encoding="utf-8")
    out, errors, _ = _compile(tmp_path, "my.point.proto")
    assert out is None and len(errors) == 1
    assert "'my.point_pb2' cannot be imported" in errors[0].message
    assert errors[0].pos.file.endswith("Main.lf") and errors[0].pos.line == 2


def test_a_proto_bound_to_a_name_of_the_runtime_is_an_error(tmp_path):
    (tmp_path / "sys.proto").write_text(POINT, encoding="utf-8")
    out, errors, _ = _compile(tmp_path, "sys.proto")
    assert out is None and len(errors) == 1
    assert "would be bound to 'sys', a name of the runtime" in errors[0].message
