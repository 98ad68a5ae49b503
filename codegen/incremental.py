"""What ``make build`` asks lfc: which files are programs (``lfc --list-programs``), and
whether a program's build is up to date (``lfc --if-changed``).

A program is a file with a main (or federated) reactor, as the compiler sees it
(:func:`codegen.check.find_main`), not a file whose text says "main reactor".

After each successful build lfc writes ``src-gen/<Name>/lfc-stamp.json``: the SHA-256 of every
input of the build and the build's settings. A later ``lfc --if-changed`` leaves the program
alone when the stamp still holds, that is when

- every ``.lf`` file the build read (the main file, each file it imports, transitively) and
  every file the ``files`` and ``protobufs`` target properties name has the same content
  (a file touched but not changed does not count, as with ccache: checkouts touch files);
- the compiler is the same: the digest of its own source (the files of ``codegen``, and the
  modules of ``reactors`` that it imports, found by following their ``import`` statements:
  :func:`compiler_digest`);
- the settings are the same: the main file's and the output's absolute paths, the Python
  interpreter the launcher runs, the command-line overrides (``-w``, ``--timeout``,
  ``--fast``, ``-D``) and ``-n``, and ``LF_PACKAGES`` (where package imports are found);
- the launcher, the module and ``graph.json`` still exist.

Anything else rebuilds. The stamp is removed before each build and written after it
succeeds, so a failed or interrupted build is never taken for a good one.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .check import find_main
from .diagnostics import CompileError, Reporter
from .emit import Output
from .loader import Program, project_root
from .parse import parse_file
from .target import read_target

#: The stamp's name in ``src-gen/<Name>/``.
STAMP = "lfc-stamp.json"
#: Bumped when the stamp's layout changes.
_FORMAT = 1

_CODEGEN = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_CODEGEN)
#: The suffixes of the compiler's files that shape its output (code, grammar, templates).
_DATA_SUFFIXES = (".py", ".lark", ".lf", ".j2")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: str) -> str | None:
    """SHA-256 (hex) of the file at ``path``, of each file below it for a folder (by relative
    name), or None when it cannot be read."""
    try:
        if os.path.isdir(path):
            h = hashlib.sha256()
            for folder, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(folder, name)
                    h.update(os.path.relpath(full, path).encode() + b"\0")
                    with open(full, "rb") as f:
                        h.update(_sha256(f.read()).encode())
            return h.hexdigest()
        with open(path, "rb") as f:
            return _sha256(f.read())
    except OSError:
        return None


def _imported_runtime_modules(source: str, package: str | None) -> set[str]:
    """Full names of the modules of ``reactors`` that the Python ``source`` imports, with the
    packages above each (importing ``reactors.core.tag`` runs ``reactors/__init__.py`` and
    ``reactors/core/__init__.py`` first). ``package`` is None for a file of the compiler,
    whose imports count anywhere (at the top or inside a function); for a module of
    ``reactors`` it is its package (``reactors.core``: its relative imports count), and only
    the imports that importing the module runs count: those inside its functions serve a
    running program (``reactors.api``'s calls of a generated module), not the compiler. A
    name that ``from X import name`` takes may be a function or a class: :func:`_runtime_file`
    then finds no file for it."""
    found: set[str] = set()
    tree = ast.parse(source)
    for node in ast.walk(tree) if package is None else _outside_functions(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                if package is None:
                    continue
                parts = package.split(".")
                module = ".".join(parts[: len(parts) - node.level + 1] + [module] * bool(module))
            found |= {module} | {f"{module}.{a.name}" for a in node.names}
    runtime = [m.split(".") for m in found if m.split(".")[0] == "reactors"]
    return {".".join(parts[:i]) for parts in runtime for i in range(1, len(parts) + 1)}


def _outside_functions(tree: ast.Module) -> Iterator[ast.AST]:
    """The nodes of ``tree`` that are not inside a function or a lambda."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo += [
            n
            for n in ast.iter_child_nodes(node)
            if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        ]


def _runtime_file(name: str) -> str | None:
    """The source file of the module or package ``name`` of ``reactors``; None for a name
    that is neither (a function, a class)."""
    path = os.path.join(_ROOT, *name.split("."))
    for candidate in (f"{path}.py", os.path.join(path, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def compiler_files() -> list[str]:
    """The files of the compiler's source: every ``.py``, ``.lark``, ``.lf`` and ``.j2`` file
    of ``codegen`` (its vendored viewer scripts aside), then the modules and packages of
    ``reactors`` that these import, directly or through each other
    (:func:`_imported_runtime_modules`); absolute paths."""
    files = []
    for folder, dirs, names in os.walk(_CODEGEN):
        dirs[:] = sorted(d for d in dirs if d not in ("vendor", "__pycache__"))
        files += [os.path.join(folder, n) for n in sorted(names) if n.endswith(_DATA_SUFFIXES)]
    pending = set()
    for path in files:
        if path.endswith(".py"):
            with open(path, encoding="utf-8") as f:
                pending |= _imported_runtime_modules(f.read(), None)
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        seen.add(name)
        runtime_file = _runtime_file(name)
        if runtime_file is None:
            continue
        files.append(runtime_file)
        package = name if runtime_file.endswith("__init__.py") else name.rpartition(".")[0]
        with open(runtime_file, encoding="utf-8") as f:
            pending |= _imported_runtime_modules(f.read(), package) - seen
    return files


@functools.lru_cache(maxsize=1)
def compiler_digest() -> str:
    """SHA-256 (hex) of the compiler's source (:func:`compiler_files`)."""
    h = hashlib.sha256()
    for path in sorted(compiler_files()):
        h.update(os.path.relpath(path, _ROOT).encode() + b"\0" + (file_digest(path) or "").encode())
    return h.hexdigest()


def is_program(path: str, rep: Reporter) -> bool:
    """Whether the ``.lf`` file at ``path`` holds a main or federated reactor.

    Raises:
        CompileError: the file cannot be read or parsed (the errors are in ``rep``).
    """
    model = parse_file(path, rep)
    main = os.path.abspath(path)
    return find_main(Program(main, {main: model}), Reporter()) is not None


def list_programs(paths: Sequence[str]) -> int:
    """Print each of ``paths`` that is a program (:func:`is_program`), one per line, in the
    given order; a file that cannot be read or parsed is reported on stderr
    (``file.lf:LINE:COL: error: ...``). Returns the exit status: 0, or 1 after an error."""
    status = 0
    for path in paths:
        rep = Reporter()
        try:
            if is_program(path, rep):
                print(path)
        except CompileError:
            print(rep.render(), file=sys.stderr)
            status = 1
    return status


class Build:
    """The build of ``main_file`` by one lfc command: its output (``out_root``, else the
    default of :func:`codegen.loader.project_root`) and its command-line ``overrides`` (a
    dataclass, such as :class:`codegen.compiler.Overrides`) and ``-n``."""

    def __init__(self, main_file: str, out_root: str | None, overrides: Any, no_compile: bool):
        root = out_root or project_root(os.path.abspath(main_file))
        self.main_file = main_file
        self.out = Output(root, os.path.splitext(os.path.basename(main_file))[0])
        self.options = {**dataclasses.asdict(overrides), "no_compile": no_compile}

    def settings(self, out: Output) -> dict[str, Any]:
        """What, beside the input files, a build into ``out`` depends on (JSON values)."""
        return {
            "format": _FORMAT,
            "compiler": compiler_digest(),
            "python": sys.executable,
            "main_file": os.path.abspath(self.main_file),
            "output": os.path.abspath(out.root),
            # as JSON gives them back from the stamp (a value JSON lacks: its repr)
            "options": json.loads(json.dumps(self.options, default=repr)),
            "lf_packages": os.environ.get("LF_PACKAGES", ""),
        }

    def up_to_date(self) -> bool:
        """Whether the stamp of an earlier build holds: the same settings, every input file
        with the same content, and the launcher, module and graph.json still there."""
        out = self.out
        try:
            with open(_stamp_path(out), encoding="utf-8") as f:
                stamp = json.load(f)
        except (OSError, ValueError):
            return False
        if not isinstance(stamp, dict) or not isinstance(stamp.get("inputs"), dict):
            return False
        if stamp.get("settings") != self.settings(out):
            return False
        if not all(os.path.isfile(p) for p in (out.launcher, out.module, out.graph)):
            return False
        return all(file_digest(p) == digest for p, digest in stamp["inputs"].items())

    def forget(self) -> None:
        """Remove the stamp (before a build: until it succeeds, nothing is up to date)."""
        try:
            os.remove(_stamp_path(self.out))
        except OSError:
            pass

    def record(self, out: Output, sources: Iterable[str]) -> None:
        """Write the stamp of the successful build written to ``out``: ``sources`` are the
        ``.lf`` files the compiler read (``Reporter.sources``); the files and ``.proto`` files
        that the main file's target properties name are added here.

        Raises:
            OSError: the stamp cannot be written.
        """
        names = {os.path.abspath(p) for p in sources} | set(_target_inputs(self.main_file))
        stamp = {
            "settings": self.settings(out),
            "inputs": {p: file_digest(p) for p in sorted(names)},
        }
        path = _stamp_path(out)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(stamp, f, indent=1, sort_keys=True)
        os.replace(tmp, path)


def _stamp_path(out: Output) -> str:
    return os.path.join(out.src_dir, STAMP)


def _target_inputs(main_file: str) -> list[str]:
    """Absolute paths of the files the ``files`` and ``protobufs`` target properties of
    ``main_file`` name (relative to its folder)."""
    rep = Reporter()
    model = parse_file(main_file, rep)
    target = read_target(model.target, rep)
    here = os.path.dirname(os.path.abspath(main_file))
    return [os.path.normpath(os.path.join(here, n)) for n in (*target.files, *target.protobufs)]
