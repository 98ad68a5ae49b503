"""Architecture rules that the linters do not express: every public function of the three
packages is annotated (mypy then checks the annotations; import-linter, ruff and mypy themselves
run from `make lint`, which `make test` runs first)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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
