"""Emission: the generated Python module, ``graph.json`` and the launcher (docs/PROGRAM.md)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shlex
import shutil
import sys
import tempfile
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, replace

import jinja2

from reactors.model.program import LineRange, Program

from . import tree
from .classes import ReactorClass
from .diagnostics import printable
from .instance import Elaborated, ReactionInst
from .pyexpr import indent, python
from .scope import MODULE_IMPORTS

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("codegen", "templates"),
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
# Every path, name and text the template writes into the module outside target code is a
# Python literal (``{{ x | py }}``): no character of it (newline, quote, backslash, ``{{``)
# can end the literal or the line it stands on.
_ENV.filters["py"] = repr


@dataclass
class Output:
    """Where the build goes: ``root/src-gen/<name>/`` and ``root/bin/<name>``."""

    root: str
    name: str

    @property
    def src_dir(self) -> str:
        return os.path.join(self.root, "src-gen", self.name)

    @property
    def module(self) -> str:
        return os.path.join(self.src_dir, f"{self.name}.py")

    @property
    def graph(self) -> str:
        return os.path.join(self.src_dir, "graph.json")

    @property
    def launcher(self) -> str:
        return os.path.join(self.root, "bin", self.name)


# The module's ``BUILD_ID`` while it is rendered; replaced by the build id (same length, so
# the line map stays valid) once the module and graph.json are known.
_NO_BUILD_ID = "0" * 16

_MARK = re.compile(r"#\s(\S+\.lf):(\d+)$")


class _Markers:
    """Marks emitted code with its ``.lf`` origin so that module lines map back to ``.lf`` lines.

    A body is preceded by a comment line ``# File.lf:N`` (its lines are N, N+1, ...); a one-line
    expression carries ``# File.lf:N`` at the end of its own line. ``File.lf`` is the file's
    base name, or a longer tail of its path when two imported files share a base name.
    """

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}  # label in a marker -> .lf path
        self.labels: dict[str, str] = {}  # .lf path -> its label
        self.lengths: dict[str, int] = {}  # body marker -> number of lines of the body

    def mark(self, code: tree.Code | None, fallback: tree.Pos) -> str:
        """The marker text for a body (``File.lf:N``, N the line of its first line)."""
        file = (code.pos if code else fallback).file
        line = code.body_line if code else fallback.line
        marker = f"{self._label(file)}:{line}"
        self.lengths[marker] = max(len(code.text.split("\n")) if code else 0, 1)
        return marker

    def inline(self, pos: tree.Pos) -> str:
        """A trailing comment for a one-line expression from ``pos``."""
        return f"  # {self._label(pos.file)}:{pos.line}"

    def expression(self, expr: tree.Expr | None, text: str, pos: tree.Pos, after: str) -> str:
        """``text``, the Python of ``expr`` written at ``pos``, then ``after`` (a comma) and the
        marker of its last line; a target-code block of several lines also gets its other
        lines' markers (:meth:`spread`), so that an error raised from any line of it is
        located."""
        if isinstance(expr, tree.Code) and "\n" in text:
            last = expr.body_line + text.count("\n")
            return f"{self.spread(expr, text)}{after}  # {self._label(expr.pos.file)}:{last}"
        return f"{text}{after}{self.inline(pos)}"

    def spread(self, expr: tree.Code, text: str) -> str:
        """``text``, the Python of the target-code block ``expr``, with each of its lines but
        the last ending with its own ``.lf`` line's marker where a comment may stand (not
        inside a string)."""
        ends = _line_ends(text)
        lines = text.split("\n")
        label = self._label(expr.pos.file)
        for k in range(len(lines) - 1):
            stripped = lines[k].strip()
            if k + 1 in ends and stripped and not stripped.startswith("#"):
                lines[k] += f"  # {label}:{expr.body_line + k}"
        return "\n".join(lines)

    def _label(self, file: str) -> str:
        """The shortest tail of ``file``'s path that no other file uses, made one word of
        printable characters (a blank becomes ``_``, a control character its escape), so that
        it can end a comment line."""
        if file not in self.labels:
            parts = printable(re.sub(r"\s", "_", os.path.normpath(file))).split(os.sep)
            tails = ("/".join(parts[-n:]) for n in range(1, len(parts) + 1))
            # every tail taken: two paths that differ only in escaped characters
            unique = f"{len(self.paths)}:{'/'.join(parts)}"
            label = next((t for t in tails if t not in self.paths), unique)
            self.labels[file], self.paths[label] = label, file
        return self.labels[file]

    def line_map(self, text: str) -> tuple[LineRange, ...]:
        """The module lines of every marked range of ``text`` and their ``.lf`` lines.

        A body's range covers its own lines only (what follows it in the module, e.g. the
        next class after a file-level preamble, belongs to no ``.lf`` line), so ranges never
        overlap.
        """
        out: list[LineRange] = []
        lines = text.split("\n")  # Python's lines: a form feed or U+2028 in code ends none
        for i, line in enumerate(lines, start=1):
            m = _MARK.search(line)
            if m is None:
                continue
            path, lf_line = self.paths.get(m.group(1), m.group(1)), int(m.group(2))
            if line.strip().startswith("#"):  # a body follows, as deep as the marker or deeper
                marker = f"{m.group(1)}:{m.group(2)}"
                out.append(LineRange(i + 1, self._body_end(lines, i, marker), path, lf_line))
            else:
                out.append(LineRange(i, i, path, lf_line))
        return tuple(out)

    def _body_end(self, lines: list[str], marker_line: int, marker: str) -> int:
        """The last module line (1-based) of the body under the marker on ``marker_line``:
        at most the body's own length, and no line less indented than the marker."""
        depth = len(lines[marker_line - 1]) - len(lines[marker_line - 1].lstrip())
        limit = min(marker_line + self.lengths.get(marker, len(lines)), len(lines))
        last = marker_line
        while last < limit and (
            not lines[last].strip() or len(lines[last]) - len(lines[last].lstrip()) >= depth
        ):
            last += 1
        return last


def _line_ends(text: str) -> set[int]:
    """The lines (1-based) of the Python expression ``text`` whose end a comment may follow:
    those ending outside a string (a line break inside brackets); none if it does not
    tokenize."""
    ends = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NL:
                ends.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError):
        return set()
    return ends


def _class_view(c: ReactorClass, marks: _Markers) -> dict:
    states = [
        {
            "name": s.node.name,
            "mode": s.mode,
            "init": marks.expression(s.node.init, python(s.node.init, "self"), s.node.pos, ""),
        }
        for s in c.states
    ]
    return {
        "pyclass": c.pyclass,
        "name": c.name,
        "doc": f"reactor {c.name} ({os.path.basename(c.file)}:{c.decl.pos.line})",
        "preambles": [
            {"marker": marks.mark(p.code, p.pos), "text": indent(p.code.text, 4)}
            for p in c.preambles
        ],
        "params": [p.name for p in c.parameters if p.name != "bank_index"],
        "states": states,
        "reset_states": [s for s, m in zip(states, c.states) if m.node.reset],
        "methods": [
            {
                "name": m.name,
                "args": [a.name for a in m.args],
                "marker": marks.mark(m.code, m.pos),
                "body": indent(m.code.text, 8),
            }
            for m in c.methods
        ],
        "reactions": [],  # filled per class by emit_program (arguments come from instances)
    }


def _signature(r: ReactionInst, node: tree.Reaction) -> str:
    """``reaction(t, inp) x -> out`` as declared (``node``), plus its mode, for a comment."""

    def eff(e: tree.VarRef | tree.ModeTransition) -> str:
        return (
            f"{e.kind}({e.mode})"
            if isinstance(e, tree.ModeTransition) and e.kind != "default"
            else (e.mode if isinstance(e, tree.ModeTransition) else str(e))
        )

    text = f"reaction({', '.join(map(str, node.triggers))})"
    if node.sources:
        text += " " + ", ".join(map(str, node.sources))
    if node.effects:
        text += " -> " + ", ".join(eff(e) for e in node.effects)
    if node.name:
        text = text.replace("reaction(", f"reaction {node.name}(", 1)
    return text + (f"  [mode {r.mode}]" if r.mode else "")


def _reaction_view(r: ReactionInst, marks: _Markers) -> dict:
    """What the template needs of a declared reaction (synthetic ones have no body here)."""
    node = r.node
    assert node is not None, "only declared reactions are emitted as methods"
    view = {
        "function": r.function,
        "args": [a["name"] for a in r.args],
        "signature": _signature(r, node),
        "marker": marks.mark(node.code, node.pos),
        "body": indent(node.code.text if node.code else "", 8),
        "deadline_function": r.deadline_function,
        "deadline_body": None,
    }
    if node.deadline is not None:
        view["deadline_marker"] = marks.mark(node.deadline.code, node.deadline.pos)
        view["deadline_body"] = indent(node.deadline.code.text, 8)
    return view


def _site_items(site: tuple, marks: _Markers) -> list[str]:
    """``'name': <python>,  # File.lf:N`` for every parameter of an instantiation, each marked
    with the line of the assignment or of the class's default it comes from."""
    child, cls, fixed = site
    if fixed is not None:
        return [f"{k!r}: {v!r}," for k, v in fixed.items()]
    assigned = {a.name: a for a in child.node.assignments} if child else {}
    items = []
    for p in cls.parameters:
        if p.name in assigned:
            a = assigned[p.name]
            items.append(
                f"{p.name!r}: " + marks.expression(a.value, python(a.value, "self"), a.pos, ",")
            )
        elif p.name == "bank_index":
            items.append("'bank_index': bank_index,")
        else:
            items.append(
                f"{p.name!r}: " + marks.expression(p.default, python(p.default, None), p.pos, ",")
            )
    return items


def emit_program(
    out: Output,
    classes: list[ReactorClass],
    preambles: list[tree.Preamble],
    prog: Elaborated,
    program: Program,
    files: list[str],
    protobufs: Sequence[str] = (),
) -> None:
    """Write the module, graph.json, copied ``files`` and the launcher under ``out``.

    ``prog`` is the elaborated program the module's classes and parameter functions come from;
    ``program`` its model (placement included), written as graph.json with the module's line
    map filled in. ``protobufs`` are the names the module binds to the modules of the
    ``protobufs`` target property (``Person`` for ``Person_pb2``, among ``files``).

    Raises:
        OSError: the output folder cannot be written.
    """
    marks_views = _reactions_by_class(prog)
    os.makedirs(out.src_dir, exist_ok=True)
    text, line_map = _render(program.main_file, classes, preambles, prog, marks_views, protobufs)
    graph = replace(program, line_map=line_map)
    build_id = hashlib.sha256((text + graph.dumps()).encode()).hexdigest()[: len(_NO_BUILD_ID)]
    _write(out.module, text.replace(_NO_BUILD_ID, build_id, 1))
    _write(out.graph, replace(graph, build_id=build_id).dumps())
    for f in files:
        _copy_into(f, out.src_dir)
    os.makedirs(os.path.dirname(out.launcher), exist_ok=True)
    _write(out.launcher, launcher_text(sys.executable, os.path.abspath(out.module)), mode=0o755)


def launcher_text(python: str, module: str) -> str:
    """The ``sh`` launcher running ``module`` with ``python``; both paths are quoted, so no
    character in them (blank, quote, backtick, ``$``) is interpreted by the shell."""
    return f'#!/bin/sh\nexec {shlex.quote(python)} {shlex.quote(module)} "$@"\n'


def _reactions_by_class(prog: Elaborated) -> dict[int, list[ReactionInst]]:
    """One representative instance's declared reactions per class (argument lists agree
    across instances of a class up to bank widths, which only change argument contents)."""
    seen: dict[int, list[ReactionInst]] = {}
    for inst in prog.instances:
        if id(inst.cls) not in seen:
            seen[id(inst.cls)] = sorted(
                (r for r in inst.reactions if r.node is not None), key=lambda r: r.index
            )
    return seen


def _render(main_file, classes, preambles, prog, by_class, protobufs):
    marks = _Markers()
    pre = [{"marker": marks.mark(p.code, p.pos), "text": p.code.text} for p in preambles]
    views = []
    for c in classes:
        v = _class_view(c, marks)
        v["reactions"] = [_reaction_view(r, marks) for r in by_class.get(id(c), [])]
        views.append(v)
    sites = [{"fn": fn, "items": _site_items(site, marks)} for fn, site in prog.sites.items()]
    text = _ENV.get_template("module.py.j2").render(
        main_file=main_file,
        module_imports=MODULE_IMPORTS,
        protobufs=protobufs,
        preambles=pre,
        classes=views,
        sites=sites,
        build_id=_NO_BUILD_ID,
    )
    return text, marks.line_map(text)


def _write(path: str, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` by ``text`` at once: written to a temporary file of a unique name in
    the same folder, then renamed over ``path``; the temporary file is removed on any error.

    Raises:
        OSError: the folder cannot be written (e.g. the disk is full).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _copy_into(src: str, dest_dir: str) -> None:
    target = os.path.join(dest_dir, os.path.basename(src.rstrip("/")))
    if os.path.isdir(src):
        shutil.copytree(src, target, dirs_exist_ok=True)
    else:
        shutil.copy2(src, target)
