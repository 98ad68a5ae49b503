"""Programs the compiler must reject: each ``tests/bad/<class>.lf`` holds several cases, each
beginning with ``//# expect: LINE:COL: FRAGMENT``; every case fails with a located error."""

from __future__ import annotations

from pathlib import Path

import pytest
from lfsrc import errors_of

BAD = Path(__file__).parent / "bad"
MARK = "//# expect: "


def _cases() -> list[tuple[str, int, int, str]]:
    """(case text, line, column, message fragment) for every case of every bad file."""
    out = []
    for path in sorted(BAD.glob("*.lf")):
        chunks = ("\n" + path.read_text(encoding="utf-8")).split("\n" + MARK)[1:]
        for n, chunk in enumerate(chunks):
            head, _, body = chunk.partition("\n")
            line, col, fragment = head.split(":", 2)
            out.append(
                pytest.param(body, int(line), int(col), fragment.strip(), id=f"{path.stem}-{n}")
            )
    return out


@pytest.mark.parametrize("text,line,col,fragment", _cases())
def test_bad_program_is_rejected_with_a_located_error(tmp_path, text, line, col, fragment):
    errs = errors_of(tmp_path, text)
    hits = [e for e in errs if fragment in e.splitlines()[0]]
    assert hits, f"expected an error containing {fragment!r}, got {errs}"
    assert hits[0].startswith(f"{tmp_path / 'Main.lf'}:{line}:{col}: error: "), hits[0]
