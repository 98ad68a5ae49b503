"""Import resolution (spec §1.4): relative paths and package imports `<pkg/...>`."""

from __future__ import annotations

from pathlib import Path

from conftest import build, run_program

LIB = """target Python
reactor Greeter(name = "pkg") {
  reaction(startup) {= print(f"hello from {self.name}") =}
}
"""


def _project(tmp_path: Path, import_line: str, libdir: str) -> Path:
    lib = tmp_path / "proj" / libdir
    lib.mkdir(parents=True)
    (lib / "Greeter.lf").write_text(LIB)
    src = tmp_path / "proj" / "src"
    src.mkdir(parents=True, exist_ok=True)
    main = src / "UsePkg.lf"
    main.write_text(f"target Python\n{import_line}\nmain reactor UsePkg {{ g = new Greeter() }}\n")
    return main


def test_package_import_with_file_from_lf_packages(tmp_path):
    main = _project(tmp_path, "import Greeter from <greet/Greeter.lf>", "lf-packages/greet/src/lib")
    assert run_program(build(main, tmp_path / "out")).stdout == "hello from pkg\n"


def test_package_import_without_file_name_uses_the_class_name(tmp_path):
    main = _project(tmp_path, "import Greeter from <greet>", "build/lfc_include/greet/src/lib")
    assert run_program(build(main, tmp_path / "out")).stdout == "hello from pkg\n"


def test_package_names_may_contain_digits(tmp_path):
    main = _project(tmp_path, "import Greeter from <lib-3-x>", "lf-packages/lib-3-x/src/lib")
    assert run_program(build(main, tmp_path / "out")).stdout == "hello from pkg\n"
