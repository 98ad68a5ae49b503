"""The runtime's compiled per-tag modules (reactors.native): used when built for the current
sources, never when stale, and computing exactly what the sources compute."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, build

from reactors import native


def _fake_build(tmp_path: Path, digests: dict[str, str]) -> Path:
    """A build folder with empty extension files and a manifest of ``digests``."""
    suffix = native._suffix()
    (tmp_path / f"{native.GROUP}__mypyc{suffix}").touch()
    for name in native.MODULES:  # a module of a subpackage in its folder: core/engine
        file = tmp_path.joinpath("reactors", *name.split(".")).with_suffix(suffix)
        file.parent.mkdir(parents=True, exist_ok=True)
        file.touch()
    manifest = {"suffix": suffix, "sources": digests}
    (tmp_path / native.MANIFEST).write_text(json.dumps(manifest))
    return tmp_path


def test_a_build_of_the_current_sources_is_found(tmp_path):
    files = native.built(_fake_build(tmp_path, native.source_digests()))
    assert files is not None
    assert set(files) == {f"reactors.{m}" for m in native.MODULES} | {"reactors__mypyc"}
    worker = tmp_path / "reactors" / "parallel" / f"worker_scheduler{native._suffix()}"
    assert files["reactors.parallel.worker_scheduler"] == str(worker)


def test_a_stale_build_is_never_loaded(tmp_path):
    digests = native.source_digests()
    digests["parallel.worker_scheduler"] = "0" * 64  # built from another worker_scheduler.py
    assert native.built(_fake_build(tmp_path, digests)) is None


def test_a_build_for_another_interpreter_or_incomplete_is_not_loaded(tmp_path):
    build_dir = _fake_build(tmp_path, native.source_digests())
    manifest = json.loads((build_dir / native.MANIFEST).read_text())
    (build_dir / native.MANIFEST).write_text(json.dumps(dict(manifest, suffix=".cpython-39.so")))
    assert native.built(build_dir) is None
    (build_dir / native.MANIFEST).write_text(json.dumps(manifest))
    (build_dir / "reactors" / "parallel" / f"sync{native._suffix()}").unlink()
    assert native.built(build_dir) is None
    assert native.built(tmp_path / "nothing here") is None


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler: the sources run")
def test_make_built_the_compiled_modules_and_they_run():
    """`make test` builds them first (where a C compiler exists), and this process uses them;
    REACTORS_COMPILED=0 runs the sources."""
    assert native.built() is not None, "no build matches the sources: run `make native`"
    assert native.compiled()
    code = "import reactors.native as n; print(n.compiled())"
    for value, expected in (("0", "False"), ("1", "True")):
        env = dict(os.environ, **{native.ENV: value})
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.stdout.strip() == expected, out.stderr


def _digest_run(launcher: Path, compiled: str, *args: str) -> str:
    digest = launcher.parent.parent / f"compiled{compiled}-{'-'.join(args)}.digest"
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{native.ENV: compiled})
    r = subprocess.run(
        [str(launcher), "--digest", str(digest), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=launcher.parent.parent,
    )
    assert r.returncode == 0, r.stderr
    return digest.read_text()


@pytest.mark.skipif(native.built() is None, reason="the compiled modules are not built")
@pytest.mark.parametrize(
    "program, defines, args",
    [
        ("EnvBank", ["-D", "n=6"], ["--rounds", "40", "--iters", "2"]),
        ("PingPong", [], ["--count", "300"]),
    ],
)
def test_compiled_and_source_modules_compute_the_same_values(tmp_path, program, defines, args):
    """Every port value at every tag is the same with the compiled modules and the sources,
    on one worker and on two (digests compared exactly)."""
    launcher = build(ROOT / "lf_src" / "bench" / f"{program}.lf", tmp_path, *defines)
    reference = _digest_run(launcher, "0", "-w", "1", *args)
    assert reference
    for compiled in ("0", "1"):
        for workers in ("1", "2"):
            got = _digest_run(launcher, compiled, "-w", workers, *args)
            assert got == reference, f"REACTORS_COMPILED={compiled} -w {workers} differs"
