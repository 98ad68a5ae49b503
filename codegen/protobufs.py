"""The ``protobufs`` target property: ``.proto`` files compiled at build time into importable
``<name>_pb2.py`` modules beside the generated module, with protoc from ``grpcio-tools``.

Each file is named relative to the main ``.lf`` file and compiled with its own folder as the
import path. As in LF's Python target, the generated module binds each one under the file's
stem (``Hello.Hello()`` for ``Hello.proto``, with no import); ``import Hello_pb2`` works too
(the generated module's folder is on ``sys.path``). A missing file, or one whose name makes no
Python module name, is reported at the ``protobufs`` property; a protoc error at the
``.proto`` line protoc names, or at the property when it names none.
"""

from __future__ import annotations

import importlib.util
import keyword
import os
import re
import subprocess
import sys
from collections.abc import Sequence

from . import tree
from .diagnostics import Reporter
from .scope import RUNTIME_GLOBALS

#: The target property this module implements.
PROPERTY = "protobufs"
#: How long one protoc run may take (seconds).
PROTOC_TIMEOUT_S = 120

# protoc's located messages: ``file.proto:LINE:COL: message``
_LOCATED = re.compile(r"^(?P<file>[^:\n]+\.proto):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$")


def property_pos(target: tree.Target | None, main_file: str) -> tree.Pos:
    """Position of the ``protobufs`` property in ``target`` (the file's start without one)."""
    for kv in target.properties if target is not None else ():
        if kv.key == PROPERTY:
            return kv.pos
    return tree.Pos(main_file, 1, 1)


def resolve_protos(names: Sequence[str], main_file: str, pos: tree.Pos, rep: Reporter) -> list[str]:
    """Absolute paths of the ``.proto`` files ``names`` (relative to ``main_file``'s folder).

    Errors (reported at ``pos``, not raised): a name not ending in ``.proto``, a file whose
    module Python cannot import or whose stem is a name of the runtime (``sys.proto``), two
    files of one module, a file that does not exist, grpcio-tools not installed while files
    are named.
    """
    out: list[str] = []
    for name in names:
        path = os.path.normpath(os.path.join(os.path.dirname(main_file), name))
        problem = _problem(name, path, out)
        if problem:
            rep.error(problem, pos)
        else:
            out.append(path)
    if out and importlib.util.find_spec("grpc_tools") is None:
        rep.error(
            "the 'protobufs' target property needs protoc from grpcio-tools "
            "(pip install grpcio-tools)",
            pos,
        )
    return out


def _problem(name: str, path: str, others: list[str]) -> str | None:
    """What is wrong with the file ``name`` (at ``path``) beside the files ``others``."""
    bound = binding(path)
    if not name.endswith(".proto"):
        return f"'{name}' in the 'protobufs' target property is not a .proto file"
    if not bound.isidentifier() or keyword.iskeyword(bound):
        return (
            f"protobuf file '{name}': its module '{module_name(path)}' cannot be imported in "
            "Python (use letters, digits, '_' and '-' in the file's name)"
        )
    if bound in RUNTIME_GLOBALS:
        return (
            f"protobuf file '{name}': its module would be bound to '{bound}', a name of the "
            f"runtime ({RUNTIME_GLOBALS[bound]}); rename the file"
        )
    if any(binding(p) == bound for p in others):
        return f"protobuf file '{name}': another file has the module {module_name(path)}"
    if not os.path.isfile(path):
        return (
            f"protobuf file '{name}' named in the 'protobufs' target property does not exist "
            f"({path})"
        )
    return None


def compile_protos(protos: Sequence[str], dest_dir: str, pos: tree.Pos, rep: Reporter) -> list[str]:
    """Run protoc on each of ``protos`` (absolute paths from :func:`resolve_protos`), writing
    ``<name>_pb2.py`` into ``dest_dir``; returns the modules written.

    Errors (reported, not raised): protoc's messages, located in the ``.proto`` file when
    protoc gives a line, otherwise at ``pos``.
    """
    written = []
    for proto in protos:
        folder, base = os.path.split(proto)
        cmd = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{folder}",
            f"--python_out={dest_dir}",
            base,
        ]
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=PROTOC_TIMEOUT_S, cwd=folder
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            rep.error(f"protoc could not compile {proto}: {e}", pos)
            continue
        if done.returncode != 0:
            _report_protoc(done.stderr or done.stdout, proto, pos, rep)
            continue
        written.append(os.path.join(dest_dir, module_name(proto) + ".py"))
    return written


def module_name(proto: str) -> str:
    """The module protoc writes for the file ``proto``: its stem with ``-`` as ``_``, and
    ``_pb2`` (``msgs/Shape-Set.proto`` -> ``Shape_Set_pb2``; protoc's Python generator)."""
    return binding(proto) + "_pb2"


def binding(proto: str) -> str:
    """The name the generated module binds the module of ``proto`` to: its stem with ``-``
    as ``_`` (``Person.proto`` -> ``Person``, as ``import Person_pb2 as Person`` in LF)."""
    return os.path.basename(proto).removesuffix(".proto").replace("-", "_")


def _report_protoc(text: str, proto: str, pos: tree.Pos, rep: Reporter) -> None:
    """Report protoc's output ``text`` for ``proto``: one error per located line, or the
    whole text at ``pos``."""
    folder = os.path.dirname(proto)
    located = False
    for line in text.splitlines():
        m = _LOCATED.match(line.strip())
        if m:
            where = tree.Pos(os.path.join(folder, m["file"]), int(m["line"]), int(m["col"]))
            rep.error(f"protoc: {m['msg']}", where)
            located = True
    if not located:
        detail = text.strip() or "no message"
        rep.error(f"protoc failed on {os.path.basename(proto)}: {detail}", pos)
