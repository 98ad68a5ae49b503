"""Helpers for compiler unit tests: run the front end on LF text written to a temporary file."""

from __future__ import annotations

from pathlib import Path

from codegen.compiler import front
from codegen.diagnostics import CompileError, Reporter


def compile_text(tmp_path: Path, text: str, name: str = "Main"):
    """Run parse..analyse on ``text`` saved as ``<name>.lf``; return (Front, Reporter)."""
    path = tmp_path / f"{name}.lf"
    path.write_text(text)
    rep = Reporter()
    return front(str(path), rep), rep


def errors_of(tmp_path: Path, text: str, name: str = "Main") -> list[str]:
    """The rendered diagnostics of a program expected to fail, one string per error."""
    path = tmp_path / f"{name}.lf"
    path.write_text(text)
    rep = Reporter()
    try:
        front(str(path), rep)
    except CompileError:
        pass
    return [
        d.format(rep.sources.get(d.pos.file) if d.pos else None)
        for d in rep.diagnostics
        if d.severity == "error"
    ]


def channels_into(f, inst_name: str, port: str) -> list[tuple[str, int]]:
    """For each channel of ``inst_name.port`` (in order), the (instance name, channel) feeding it."""
    insts = f.prog.instances
    feed = {d: s for s, d in f.prog.edges}
    target = next(i for i in insts if i.name == inst_name)
    out = []
    for ch in target.channels(port):
        s = feed.get(ch)
        out.append(None if s is None else (insts[s[0]].name, s[2]))
    return out
