"""The runtime's per-tag modules compiled to C extension modules by mypyc, when built.

A tag of a parallel run spends most of its time outside the reactions in a few modules: the
worker's tag loop, the tag exchange and waiting, the channels' codec, the tag engine and the
coordinator (which prints each tag's text on worker 0). Their
Python sources, unchanged, compile with mypyc (the compiler of mypy, which builds mypy and black
the same way) into extension modules that run the same code about a third faster there
(docs/parallel.md, "Which tags gain from more workers"). ``make`` builds them (:func:`main`) into
``build/native/`` beside the packages, with a manifest of the SHA-256 of each source they were
built from.

:func:`use_compiled`, called when the package is imported, puts a finder on ``sys.meta_path``
that loads those modules from their extension files, only when the manifest names this
interpreter's extension suffix and every source still has the digest it was built from: a
module edited since the build runs from its source, never from a stale build (then all of them
do: the compiled modules call each other directly). ``REACTORS_COMPILED=0`` in the environment
runs the sources. Results are the same either way (tests/test_native.py compares the digests of
every port value at every tag). Every process of a run imports this module first, so it
imports nothing that the runtime does not import anyway (``importlib.abc`` and ``pathlib``
would add ~4 ms to each process's start).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import sys
from types import ModuleType
from typing import Any

#: the modules compiled, by their names below the package ``reactors`` (``core.engine`` is
#: ``reactors.core.engine``, in ``reactors/core/engine.py``)
MODULES = (
    "core.action",
    "core.clock",
    "core.engine",
    "core.event_queue",
    "core.pending",
    "core.port",
    "core.scheduler",
    "core.timer",
    "parallel.agreement",
    "parallel.codec",
    "parallel.contention",
    "parallel.coordinator",
    "parallel.shm",
    "parallel.skipped_tags",
    "parallel.sync",
    "parallel.tag_steps",
    "parallel.worker_connections",
    "parallel.worker_scheduler",
)
#: mypyc's name for the shared library of the compiled group: ``reactors__mypyc``
GROUP = "reactors"
ENV = "REACTORS_COMPILED"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.path.join(os.path.dirname(PACKAGE_DIR), "build", "native")
MANIFEST = "manifest.json"


def _path(name: str) -> str:
    """The path of module ``name`` of :data:`MODULES` below the package's folder, without its
    suffix (``core/engine``)."""
    return os.path.join(*name.split("."))


def source_digests() -> dict[str, str]:
    """The SHA-256 (hex) of the source of each of :data:`MODULES`, by module name."""
    digests = {}
    for name in MODULES:
        with open(os.path.join(PACKAGE_DIR, f"{_path(name)}.py"), "rb") as f:
            digests[name] = hashlib.sha256(f.read()).hexdigest()
    return digests


def _suffix() -> str:
    return importlib.machinery.EXTENSION_SUFFIXES[0]


class _Finder:
    """A ``sys.meta_path`` finder of the compiled modules (full name -> extension file),
    ahead of the sources."""

    def __init__(self, files: dict[str, str]):
        self.files = files

    def find_spec(self, name: str, path: Any = None, target: ModuleType | None = None) -> Any:
        file = self.files.get(name)
        if file is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(name, file)
        spec = importlib.machinery.ModuleSpec(name, loader, origin=file)
        spec.has_location = True  # the module's __file__ is its extension file
        return spec


def built(build_dir: str | os.PathLike[str] = BUILD_DIR) -> dict[str, str] | None:
    """Full module name -> extension file of a build in ``build_dir`` that matches this
    interpreter and the current sources; None when there is none, it is for another
    interpreter, or a source changed since (a stale build is never loaded)."""
    build_dir = os.fspath(build_dir)
    try:
        with open(os.path.join(build_dir, MANIFEST), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    if manifest.get("suffix") != _suffix() or manifest.get("sources") != source_digests():
        return None
    files = {f"{GROUP}__mypyc": os.path.join(build_dir, f"{GROUP}__mypyc{_suffix()}")}
    for name in MODULES:
        files[f"reactors.{name}"] = os.path.join(build_dir, "reactors", _path(name) + _suffix())
    if not all(os.path.exists(f) for f in files.values()):
        return None
    return files


def use_compiled() -> bool:
    """Load the compiled modules from now on when a matching build exists and
    ``REACTORS_COMPILED`` is not ``0``; whether they are used. Called once by the package's
    ``__init__``, before any of them is imported."""
    if compiled():
        return True
    if os.environ.get(ENV, "1") == "0":
        return False
    files = built()
    if files is None:
        return False
    sys.meta_path.insert(0, _Finder(files))
    return True


def compiled() -> bool:
    """Whether this process runs the compiled modules (set when the package was imported:
    :func:`use_compiled`); ``-w 0``'s cost model and the bench rows depend on it."""
    return any(isinstance(f, _Finder) for f in sys.meta_path)


def build(build_dir: str = BUILD_DIR) -> None:
    """Compile :data:`MODULES` with mypyc into ``build_dir`` and write its manifest (the
    digest of each source). Needs mypy (mypyc) and a C compiler; raises
    ``SystemExit``/``CompileError`` from setuptools or mypyc when the build fails, and leaves
    no manifest then, so nothing half-built is loaded."""
    from mypyc.build import mypycify
    from setuptools import Distribution

    manifest = os.path.join(build_dir, MANIFEST)
    if os.path.exists(manifest):
        os.unlink(manifest)
    sources = source_digests()
    temp = os.path.join(build_dir, "temp")
    here = os.getcwd()
    os.chdir(os.path.dirname(PACKAGE_DIR))  # mypyc names the modules after their paths
    try:
        extensions = mypycify(
            [os.path.join("reactors", f"{_path(name)}.py") for name in MODULES],
            opt_level="3",
            group_name=GROUP,
            target_dir=os.path.join(temp, "c"),
        )
        dist = Distribution({"name": "reactors-native", "ext_modules": extensions})
        cmd: Any = dist.get_command_obj("build_ext")
        cmd.build_lib, cmd.build_temp, cmd.inplace = build_dir, temp, False
        dist.run_command("build_ext")
    finally:
        os.chdir(here)
    with open(manifest, "w", encoding="utf-8") as f:
        f.write(json.dumps({"suffix": _suffix(), "sources": sources}, indent=1) + "\n")


def main(argv: list[str]) -> int:
    """``main(["build"])`` (what ``make`` runs): compile the modules unless a build that
    matches the sources exists. Exit status 0; 2 for other arguments; a failed build raises
    (:func:`build`)."""
    if argv != ["build"]:
        print("usage: reactors.native.main(['build'])", file=sys.stderr)
        return 2
    if built() is None:
        build()
        print(f"reactors.native: compiled {', '.join(MODULES)} into {BUILD_DIR}")
    return 0
