"""Architecture rules that the linters do not express: every public function of the three
packages is annotated (mypy then checks the annotations; import-linter, ruff and mypy themselves
run from `make lint`, which `make test` runs first); the runtime lives in layers, each a
subpackage that says what it owns and may import (import-linter keeps the order), described in
docs/ARCHITECTURE.md; a generated module reaches the runtime through ``reactors.api`` alone."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import LF_TESTS, build, run_program

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("codegen", "reactors", "rl_algos")


def _public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _missing(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    """Names of the parameters (and ``return``) of ``fn`` that carry no annotation."""
    a = fn.args
    params = a.posonlyargs + a.args + a.kwonlyargs
    if method and params and params[0].arg in ("self", "cls"):
        params = params[1:]
    params += [p for p in (a.vararg, a.kwarg) if p is not None]
    missing = [p.arg for p in params if p.annotation is None]
    if fn.returns is None and fn.name != "__init__":
        missing.append("return")
    return missing


def unannotated(path: Path) -> list[str]:
    """``file:line name(missing...)`` for each public function or public method of a public
    class in the module at ``path`` that lacks an annotation."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def visit(body: list[ast.stmt], method: bool) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and _public(node.name):
                visit(node.body, True)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _public(node.name):
                missing = _missing(node, method)
                if missing:
                    found.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}({', '.join(missing)})"
                    )

    visit(tree.body, False)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_public_functions_are_annotated(package: str) -> None:
    missing = [m for f in sorted((ROOT / package).rglob("*.py")) for m in unannotated(f)]
    assert not missing, "public functions without annotations:\n" + "\n".join(missing)


# ---------------------------------------------------------------- the runtime's layers

RUNTIME = ROOT / "reactors"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def runtime_layers() -> list[str]:
    """The runtime's layers, highest first, as the import-linter contract of ``pyproject.toml``
    declares them (a layer is a subpackage or a top-level module of ``reactors``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "layers" and contract.get("containers") == ["reactors"]:
            assert contract.get("exhaustive"), "the layers contract must name every part"
            return list(contract["layers"])
    pytest.fail("pyproject.toml has no layers contract for the runtime (containers reactors)")


def layer_packages() -> list[str]:
    """The layers that are subpackages, highest first."""
    return [name for name in runtime_layers() if (RUNTIME / name).is_dir()]


def test_every_runtime_module_lives_in_a_layer():
    """Nothing of the runtime lies outside its layers: each subpackage is a layer of the
    contract, and the only modules at the top are layers too (the public reaction API and
    the loader of the compiled modules)."""
    layers = runtime_layers()
    packages = {p.name for p in RUNTIME.iterdir() if (p / "__init__.py").is_file()}
    top = {p.stem for p in RUNTIME.glob("*.py")} - {"__init__"}
    assert packages, "the runtime has no subpackages"
    assert packages | top == set(layers), (sorted(packages | top), layers)
    assert not [p for p in RUNTIME.rglob("*.py") if p.parent.parent.parent == RUNTIME]


def _may_import(doc: str) -> set[str]:
    """The layers named on the ``May import:`` line of a subpackage's docstring."""
    found = re.search(r"^May import:(.*?)(?:\n\n|\Z)", doc, re.M | re.S)
    assert found, "no 'May import:' paragraph"
    return set(re.findall(r"``reactors\.(\w+)``", found.group(1)))


def test_each_layer_says_what_it_owns_and_what_it_may_import():
    """Each subpackage's docstring says what it owns and, on its ``May import:`` line,
    exactly the layers below it in the contract (which lint-imports enforces)."""
    layers = runtime_layers()
    for name in layer_packages():
        init = RUNTIME / name / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 20, f"{init}: no docstring saying what it owns"
        below = set(layers[layers.index(name) + 1 :])
        assert _may_import(doc) == below, (name, sorted(_may_import(doc)), sorted(below))


def _runtime_imports(path: Path) -> set[str]:
    """The modules of ``reactors`` that the Python file at ``path`` imports anywhere."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "reactors"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "reactors":
            found.add(node.module)
    return found


def test_generated_modules_import_only_the_reaction_api(tmp_path):
    """A program's generated module reaches the runtime through ``reactors.api`` alone (its
    reaction code, its start before the imports, its end); and it runs."""
    launcher = build(LF_TESTS / "basic" / "Minimal.lf", tmp_path)
    module = tmp_path / "src-gen" / "Minimal" / "Minimal.py"
    assert _runtime_imports(module) == {"reactors.api"}
    result = run_program(launcher)
    assert result.returncode == 0 and result.stdout == "Hello World.\n", result.stderr


def test_the_architecture_doc_describes_every_layer_and_module():
    """docs/ARCHITECTURE.md has a section per subpackage (its heading names
    ``reactors/<name>/``) that names each of its modules, and names the top modules."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    sections = re.split(r"^#+ ", text, flags=re.M)
    missing = []
    for name in layer_packages():
        section = next((s for s in sections if f"`reactors/{name}/`" in s.split("\n")[0]), "")
        if not section:
            missing.append(f"a section whose heading names `reactors/{name}/`")
        for module in sorted((RUNTIME / name).glob("*.py")):
            if module.stem != "__init__" and not re.search(rf"`{module.stem}(\.py)?`", section):
                missing.append(f"reactors/{name}/{module.name}")
    for top in sorted(RUNTIME.glob("*.py")):
        if top.stem != "__init__" and f"reactors/{top.name}" not in text:
            missing.append(f"reactors/{top.name}")
    assert not missing, "docs/ARCHITECTURE.md lacks:\n" + "\n".join(missing)


def test_the_checkpoint_policy_is_public_in_the_reaction_api():
    """Programs import their snapshots' policy from the public module,
    ``reactors.api.CheckpointPolicy``; a program that does not ask for it does not load it."""
    code = (
        "import sys, reactors.api as api\n"
        "print('reactors.records.checkpoint_policy' in sys.modules)\n"
        "from reactors.api import CheckpointPolicy\n"
        "from reactors.records.checkpoint_policy import Policy\n"
        "print(CheckpointPolicy is Policy, CheckpointPolicy(every_tags=3).every_tags)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "True", "3"], out.stderr
