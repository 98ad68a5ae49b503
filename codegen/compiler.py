"""The compiler pipeline: load -> check -> elaborate -> analyse -> emit (DESIGN.md)."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, replace

from reactors.model.arguments import check
from reactors.model.program import load as load_program
from reactors.parallel.placement import placed

from . import protobufs, tree
from .analyse import Analysis, analyse
from .check import check_defines, check_files, find_main
from .class_check import check_classes
from .classes import ClassTable, ReactorClass
from .diagnostics import CompileError, Reporter
from .elaborate import elaborate
from .emit import Output, emit_program
from .instance import Elaborated
from .loader import Program, load, project_root, resolve_import
from .model import program_of
from .names import check_define_names
from .parse import parse_define, parse_file
from .pyexpr import lf_text
from .scope import check_bodies
from .sources import special_file
from .target import TargetConfig, read_target

BUILTIN = os.path.join(os.path.dirname(__file__), "builtin.lf")


@dataclass(frozen=True)
class Overrides:
    """Command-line overrides of target properties (``None``: keep the program's); ``timeout``
    in nanoseconds."""

    workers: int | None = None
    timeout: int | None = None
    fast: bool | None = None
    params: dict[str, str] | None = None  # main reactor parameter -> LF expression text


@dataclass(frozen=True)
class Front:
    """Everything the compiler knows about a program before emitting it: each stage's result
    (``target`` is the final configuration, command-line overrides applied)."""

    program: Program
    table: ClassTable
    main: ReactorClass
    prog: Elaborated
    analysis: Analysis
    target: TargetConfig


def front(path: str, rep: Reporter, overrides: Overrides | None = None) -> Front | None:
    """Load, check, elaborate and analyse ``path``.

    Returns None (with a warning) for a file without a main reactor: a library.

    Raises:
        CompileError: any error was reported (syntax, validation, causality loop, ...).
    """
    ov = overrides or Overrides()
    program = load(path, rep)
    check_files(program, rep)
    main_decl = find_main(program, rep)
    model = program.files.get(program.main_file)
    target = read_target(model.target if model else None, rep)
    rep.check()
    if main_decl is None:
        rep.warning(f"no main reactor in '{os.path.basename(path)}': nothing to build", None)
        return None
    program = replace(program, files={**program.files, BUILTIN: parse_file(BUILTIN, rep)})
    table = ClassTable(program, rep)
    main_cls = table.get(program.main_file, main_decl)
    delays = _delay_classes(table)
    table.build_all()  # the classes of the instances a -D PATH.NAME=VALUE names
    defines = _defines(main_cls, ov.params or {}, rep) if main_cls is not None else {}
    check_classes(table, rep)
    rep.check()
    assert main_cls is not None, "cyclic inheritance is an error, raised just above"
    prog = elaborate(main_cls, table, delays, rep, defines)
    rep.check()
    check_bodies(prog, _file_preambles(program), rep, (c.pyclass for c in table.all()))
    rep.check()
    analysis = analyse(prog, rep)
    target = _final_target(target, prog, ov, main_decl, rep)
    rep.check()
    assert analysis is not None, "a causality loop is an error, raised just above"
    return Front(program, table, main_cls, prog, analysis, target)


def compile_file(
    path: str,
    rep: Reporter,
    out_root: str | None = None,
    overrides: Overrides | None = None,
    no_compile: bool = False,
) -> Output | None:
    """Compile one ``.lf`` file; return where the program was written (None for a library).

    Raises:
        CompileError: any error was reported (syntax, validation, causality loop, ...).
        OSError: the output cannot be written.
    """
    f = front(path, rep, overrides)
    if f is None:
        return None
    used = {id(i.cls) for i in f.prog.instances}
    classes = [c for c in f.table.all() if id(c) in used]
    main_file = f.program.main_file
    out = Output(out_root or project_root(main_file), f.main.name)
    files = _target_files(main_file, f.target, rep)
    main_model = f.program.files.get(main_file)
    proto_pos = protobufs.property_pos(main_model.target if main_model else None, main_file)
    protos = protobufs.resolve_protos(f.target.protobufs, main_file, proto_pos, rep)
    rep.check()
    with tempfile.TemporaryDirectory(prefix="lfc-protoc-") as generated:
        # protoc runs before anything is written, so a protoc error leaves no partial build
        files += protobufs.compile_protos(protos, generated, proto_pos, rep)
        rep.check()
        model = program_of(
            f.prog, f.analysis, f.target, out.name, main_file, project_root(main_file)
        )
        bound = [protobufs.binding(p) for p in protos]
        preambles = _file_preambles(f.program)
        emit_program(out, classes, preambles, f.prog, placed(model), files, bound)
    if not no_compile:
        _syntax_check(out, rep)
    return out


def _defines(main_cls: ReactorClass, params: dict[str, str], rep: Reporter) -> dict[str, tree.Expr]:
    """The values of ``lfc -D NAME=VALUE`` (LF expression text) for parameters of the main
    reactor, and of ``-D PATH.NAME=VALUE`` for those of the instances at PATH inside it: of
    the parameter's kind, as on the program's command line
    (:func:`reactors.model.arguments.check`), then parsed and checked like defaults written in the
    file; errors are reported, naming the ``-D`` value."""
    texts = {}
    for name, p in check_define_names(main_cls, params, rep):
        where = f"{os.path.basename(p.pos.file)}:{p.pos.line}"
        try:
            texts[name] = check(name, params[name], lf_text(p.default), p.type, where)
        except ValueError as e:
            rep.error(f"-D {name}={params[name]}: {e}", None)
    return _parsed_defines(texts, params, rep)


def _parsed_defines(
    texts: dict[str, str], params: dict[str, str], rep: Reporter
) -> dict[str, tree.Expr]:
    """The checked ``-D`` values ``texts`` (NAME -> LF text; ``params``: NAME -> the text as
    given) parsed and checked as the compiler reads a default. Each is read as the one
    parameter of a made-up file (:func:`codegen.parse.parse_define`), which is no place to
    point at: a problem found there is reported with the ``-D`` value instead."""
    own = Reporter()
    models = {}
    for name, text in texts.items():
        try:
            models[name] = parse_define(name, text, own)
        except CompileError:
            pass
    values = check_defines(models, own)
    files = {f"<-D {name}>": name for name in texts}
    for d in own.diagnostics:
        name = files.get(d.pos.file, "") if d.pos else ""
        message = f"-D {name}={params[name]}: {d.message}" if name else d.message
        (rep.error if d.severity == "error" else rep.warning)(message, None)
    return values


def _delay_classes(table: ClassTable) -> dict[str, ReactorClass]:
    """The built-in reactors that ``after`` delays are lowered to (spec §3.11)."""
    names = {"delay": "_lf_Delay", "physical_delay": "_lf_PhysicalDelay"}
    found = {kind: table.lookup(BUILTIN, name, None) for kind, name in names.items()}
    return {kind: cls for kind, cls in found.items() if cls is not None}


def _final_target(
    target: TargetConfig, prog: Elaborated, ov: Overrides, main_decl: tree.Reactor, rep: Reporter
) -> TargetConfig:
    """``target`` with the command-line overrides, and ``keepalive`` forced on (with a
    warning) for a program with a physical action declared in its source unless the program
    set it (the physical action a ``~>`` connection is lowered to does not count); ``fast``
    with any physical action is reported as an error."""
    actions = [(i, a) for i in prog.instances for a in i.actions if a.origin == "physical"]
    physical = bool(actions)
    declared = any(i.synthetic is None for i, _ in actions)
    target = replace(
        target,
        workers=target.workers if ov.workers is None else ov.workers,
        timeout=target.timeout if ov.timeout is None else ov.timeout,
        fast=target.fast if ov.fast is None else ov.fast,
    )
    if physical and target.fast:
        rep.error("'fast: true' cannot be used in a program with physical actions", main_decl.pos)
    if declared and not target.keepalive_set:
        target = replace(target, keepalive=True)
        rep.warning(
            "the program has a physical action: 'keepalive' is set to true (set "
            "'keepalive: false' in the target to stop when the event queue is empty)",
            main_decl.pos,
        )
    return target


def _file_preambles(program: Program) -> list[tree.Preamble]:
    """File-level preambles of every file, imported files first, each once (spec §1.4)."""
    out: list[tree.Preamble] = []
    seen: set[str] = set()

    def visit(path: str) -> None:
        if path in seen or path not in program.files:
            return
        seen.add(path)
        model = program.files[path]
        for imp in model.imports:
            target = resolve_import(path, imp)
            if target:
                visit(target)
        out.extend(model.preambles)

    visit(program.main_file)
    return out


def _target_files(main_file: str, target: TargetConfig, rep: Reporter) -> list[str]:
    """The ``files`` property, resolved relative to the main file: regular files and folders
    of them (a FIFO or a device, even through a link, is an error: its copy would block or
    never end)."""
    out = []
    for f in target.files:
        p = os.path.normpath(os.path.join(os.path.dirname(main_file), f))
        special = special_file(p)
        if not os.path.exists(p):
            problem = "does not exist"
        elif special is None:
            out.append(p)
            continue
        elif special[0] == p:
            problem = f"is {special[1]}, not a regular file or a folder"
        else:
            inner = os.path.relpath(special[0], p)
            problem = f"holds '{inner}', which is {special[1]}, not a regular file or a folder"
        rep.error(
            f"file '{f}' named in the 'files' target property {problem}",
            tree.Pos(main_file, 1, 1),
        )
    return out


def _syntax_check(out: Output, rep: Reporter) -> None:
    """Compile the generated module; report a SyntaxError at its ``.lf`` line and column."""
    with open(out.module, encoding="utf-8") as f:
        text = f.read()
    try:
        compile(text, out.module, "exec")
    except SyntaxError as e:
        line_map = list(load_program(out.graph).line_map)
        pos = lf_position(line_map, e.lineno or 0, e.offset or 1, text.split("\n"))
        rep.error(
            f"Python syntax error in target code: {_lf_lines_in(e.msg, line_map)}",
            pos or tree.Pos(out.module, e.lineno or 1, e.offset or 1),
        )
        rep.check()


def lf_position(
    line_map: list, py_line: int, py_col: int = 1, module_lines: list[str] | None = None
) -> tree.Pos | None:
    """The ``.lf`` position of (line, column) of the generated module, from its line map.

    ``module_lines`` (the module's text) lets the column be found in the ``.lf`` line;
    without it the column is taken as the body's (8 spaces deeper in the module). A line
    right after a body (the module's own code that follows it) is shown at the end of the
    body's last line: the body left something open. None when the line maps to no ``.lf`` line.
    """
    for first, last, file, lf_line in line_map:
        if first <= py_line <= last:
            line = lf_line + py_line - first
            if module_lines is None or py_line > len(module_lines):
                return tree.Pos(file, line, max(py_col - 8, 1))
            return tree.Pos(file, line, _lf_column(module_lines[py_line - 1], py_col, file, line))
    for first, last, file, lf_line in line_map:
        if last + 1 == py_line and last >= first:
            line = lf_line + last - first
            return tree.Pos(file, line, len(_read_line(file, line).rstrip()) + 1)
    return None


def _lf_lines_in(message: str, line_map: list) -> str:
    """``message`` with each ``on line N`` of the module said as the ``.lf`` line."""

    def lf_line(m: re.Match) -> str:
        pos = lf_position(line_map, int(m.group(1)))
        return f"on line {pos.line}" if pos else m.group(0)

    return re.sub(r"on line (\d+)", lf_line, message)


def _lf_column(py_text: str, py_col: int, lf_file: str, lf_line: int) -> int:
    """The column in ``lf_file``'s line ``lf_line`` of column ``py_col`` of the module line
    ``py_text`` (the same code, indented differently, maybe after ``{=`` on its line)."""
    code = py_text.strip()
    lf_text = _read_line(lf_file, lf_line)
    start = lf_text.find(code) if code else -1
    if start < 0:
        start = len(lf_text) - len(lf_text.lstrip())
    return max(start + py_col - (len(py_text) - len(py_text.lstrip())), 1)


def _read_line(path: str, line: int) -> str:
    """Line ``line`` (1-based) of the text file ``path``; "" when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")  # the parser's lines: a form feed ends none
    except OSError:
        return ""
    return lines[line - 1].expandtabs(1) if 1 <= line <= len(lines) else ""
