"""The ``protobufs`` target property: .proto files compiled at build time into ``<name>_pb2``
modules beside the generated module; a missing file or a protoc error is a located error.
(tests/lf/target/Protobufs.lf runs a program sending one of these messages.)"""

from __future__ import annotations

import os

import pytest

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
