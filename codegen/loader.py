"""Loading a program: the main file and, transitively, every file it imports (spec §1.4)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import tree
from .diagnostics import CompileError, Reporter
from .parse import parse
from .sources import read_source


@dataclass(frozen=True)
class Program:
    """Every file of a program, parsed. ``files`` maps an absolute path to its model, main first."""

    main_file: str
    files: dict[str, tree.Model]


def load(main_file: str, rep: Reporter, builtin: tree.Model | None = None) -> Program:
    """Parse ``main_file`` and every file it imports, following imports depth-first.

    Syntax errors are reported through ``rep``; a file that fails to parse is skipped so
    that errors in several files are reported in one run. An import whose file cannot be
    found is a located error at the import.
    """
    main_file = os.path.abspath(main_file)
    files: dict[str, tree.Model] = {}
    _load_one(main_file, rep, files, None)
    return Program(main_file, files)


def _load_one(path: str, rep: Reporter, files: dict[str, tree.Model], at: tree.Pos | None) -> None:
    if path in files:
        return
    text = read_source(path, rep, at)
    if text is None:
        return
    try:
        model = parse(text, path, rep)
    except CompileError:  # reported; go on with the other files, to report their errors too
        return
    files[path] = model
    for imp in model.imports:
        target = resolve_import(path, imp)
        if target is None:
            rep.error(f"cannot find the imported file '{imp.path}'", imp.pos)
            continue
        _load_one(target, rep, files, imp.pos)


def resolve_import(importer: str, imp: tree.Import) -> str | None:
    """The absolute path an import refers to, or None when it cannot be found.

    A quoted path is relative to the importing file (found when anything exists there:
    :func:`codegen.sources.read_source` refuses what is not a regular file). A package path ``<pkg/sub/F.lf>`` or
    ``<pkg>`` is searched (spec §1.4) under ``<root>/build/lfc_include/<pkg>/src/lib``,
    ``<root>/lf-packages/<pkg>/src/lib`` and the folders in ``LF_PACKAGES``, where ``<root>``
    is the parent of the nearest enclosing ``src`` folder.
    """
    here = os.path.dirname(importer)
    if not imp.package:
        p = os.path.normpath(os.path.join(here, imp.path))
        return p if os.path.exists(p) else None  # not a regular file: refused when read
    pkg, _, rest = imp.path.partition("/")
    root = project_root(importer)
    bases = [os.path.join(root, "build", "lfc_include"), os.path.join(root, "lf-packages")]
    bases += [p for p in os.environ.get("LF_PACKAGES", "").split(os.pathsep) if p]
    for base in bases:
        lib = os.path.join(base, pkg, "src", "lib")
        names = [rest] if rest else [f"{n.name}.lf" for n in imp.names]
        for name in names:
            for cand in (os.path.join(lib, name), os.path.join(base, pkg, "src", name)):
                if os.path.isfile(cand):
                    return cand
    return None


def project_root(file: str) -> str:
    """Parent of the nearest folder named ``src`` or ``lf_src`` above ``file``; else its folder."""
    d = Path(file).resolve().parent
    for p in (d, *d.parents):
        if p.name in ("src", "lf_src"):
            return str(p.parent)
    return str(d)
