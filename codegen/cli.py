"""``lfc``: the command line of the compiler (conventions of LF's ``lfc``, spec §5.2)."""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
from typing import NoReturn

from reactors.core.units import is_unit, parse_duration

from . import incremental
from .compiler import Overrides, compile_file
from .diagnostics import CompileError, Reporter
from .loader import project_root

VERSION = "0.1.0"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose error is one line and how to see the options (not the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\nrun {self.prog} --help for the options\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="lfc",
        description="Compile Lingua Franca programs (target Python) into runnable "
        "Python programs: OUT/src-gen/<Name>/ and OUT/bin/<Name>.",
    )
    p.add_argument("files", nargs="+", metavar="FILE.lf")
    p.add_argument(
        "-o",
        "--output-path",
        metavar="OUT",
        help="root of src-gen/ and bin/ (default: the parent of the nearest src or "
        "lf_src folder above the file, else the file's folder)",
    )
    p.add_argument("-c", "--clean", action="store_true", help="remove earlier generated code first")
    p.add_argument(
        "-n",
        "--no-compile",
        action="store_true",
        help="generate code only; skip the Python syntax check",
    )
    p.add_argument(
        "-w", "--workers", type=int, help="number of workers (overrides the target property)"
    )
    p.add_argument("--timeout", metavar="'N UNIT'", help="logical timeout, e.g. '10 sec'")
    p.add_argument(
        "--fast", action="store_true", default=None, help="do not wait for physical time"
    )
    p.add_argument(
        "-D",
        "--define",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override the default of a main-reactor parameter with an LF expression, "
        "e.g. -D seed=3 -D period='10 msec' (widths and times follow it); PATH.NAME=VALUE "
        "sets a parameter of the reactors at PATH inside it, e.g. -D learner.device=cpu",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    p.add_argument(
        "--if-changed",
        action="store_true",
        help="build a program only when its inputs changed since its last build: an imported "
        ".lf file, a file the target properties name, the compiler, the options (the stamp: "
        "src-gen/<Name>/lfc-stamp.json); otherwise say it is up to date",
    )
    p.add_argument(
        "--list-programs",
        action="store_true",
        help="build nothing; print each FILE that holds a main reactor (a program), one a line",
    )
    p.add_argument("-V", "--version", action="version", version=f"lfc {VERSION}")
    return p


def parse_time(text: str) -> int:
    """``'10 msec'`` -> nanoseconds. Raises ValueError for anything else."""
    parts = text.split()
    if len(parts) == 1 and parts[0] == "0":
        return 0
    if len(parts) != 2 or not is_unit(parts[1]) or not parts[0].isdigit():
        raise ValueError(f"expected '<integer> <unit>', got '{text}'")
    return parse_duration(parts[0], parts[1])


def main(argv: list[str] | None = None) -> int:
    """Compile every file named; exit status 0 on success, 1 when any error was reported."""
    args = _parser().parse_args(argv)
    if args.list_programs:
        return incremental.list_programs(args.files)
    try:
        timeout = parse_time(args.timeout) if args.timeout else None
    except ValueError as e:
        print(f"lfc: error: --timeout: {e}", file=sys.stderr)
        return 1
    params = {}
    for d in args.define:
        name, eq, value = d.partition("=")
        if not eq or not name.strip():
            print(f"lfc: error: -D {d}: expected NAME=VALUE", file=sys.stderr)
            return 1
        params[name.strip()] = value
    ov = Overrides(workers=args.workers, timeout=timeout, fast=args.fast, params=params)
    status = 0
    # Objects that exist before compiling (imported modules, the caller's data) outlive it:
    # keep the cyclic garbage collector from scanning them again and again while compiling.
    gc.freeze()
    try:
        for f in args.files:
            status |= _compile_one(f, args, ov)
    finally:
        gc.unfreeze()
    return status


def _compile_one(path: str, args, ov: Overrides) -> int:
    rep = Reporter()
    if not path.endswith(".lf"):
        print(f"lfc: error: '{path}' is not a .lf file", file=sys.stderr)
        return 1
    if args.clean:
        name = os.path.splitext(os.path.basename(path))[0]
        root = args.output_path or project_root(os.path.abspath(path))
        shutil.rmtree(os.path.join(root, "src-gen", name), ignore_errors=True)
    build = incremental.Build(path, args.output_path, ov, args.no_compile)
    if args.if_changed and build.up_to_date():
        if not args.quiet:
            print(f"lfc: {os.path.relpath(build.out.launcher)} is up to date", file=sys.stderr)
        return 0
    build.forget()
    try:
        out = compile_file(path, rep, args.output_path, ov, no_compile=args.no_compile)
        if out is not None:
            build.record(out, rep.sources)
    except CompileError:
        _print(rep, quiet=args.quiet)
        n = len(rep.errors)
        print(f"lfc: {n} error{'s' if n != 1 else ''}; nothing was built", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"lfc: error: cannot write output: {e}", file=sys.stderr)
        return 1
    _print(rep, quiet=args.quiet)
    if out is not None and not args.quiet:
        print(f"lfc: built {os.path.relpath(out.launcher)}", file=sys.stderr)
    return 0


def _print(rep: Reporter, quiet: bool) -> None:
    if quiet:
        rep.diagnostics = [d for d in rep.diagnostics if d.severity == "error"]
    text = rep.render()
    if text:
        print(text, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
