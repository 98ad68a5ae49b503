"""Located compiler diagnostics: ``file.lf:LINE:COL: error: message`` with the line and a caret.

Every stage of the compiler reports problems through a :class:`Reporter`, which collects
them so that one run can report several errors. A stage that cannot continue raises
:class:`CompileError` holding everything reported so far; the command line prints them and
exits with status 1, never with a Python traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .tree import Pos


@dataclass(frozen=True)
class Diagnostic:
    """One message. ``severity`` is ``"error"``, ``"warning"`` or ``"note"``."""

    severity: str
    message: str
    pos: Pos | None

    def format(self, source: str | None = None) -> str:
        """Render as ``file:line:col: severity: message`` plus the source line and a caret.

        ``source`` is the file's text; when None the file is read from disk if it exists.
        """
        # a message may have several lines (a causality loop's steps); each is shown printable
        message = "\n".join(map(printable, self.message.split("\n")))
        if self.pos is None:
            return f"lfc: {self.severity}: {message}"
        head = f"{printable(str(self.pos))}: {self.severity}: {message}"
        line = _source_line(self.pos, source)
        if line is None:
            return head
        shown = printable(line[: max(self.pos.col, 1) - 1])  # the caret stays under its character
        return f"{head}\n{printable(line)}\n{' ' * len(shown)}^"


def printable(text: str) -> str:
    """``text`` with each character that a terminal would not show as itself replaced by its
    Python escape: a line break (``\\n``), an escape sequence's ESC (``\\x1b``), a NUL, a
    bidirectional override (``\\u202e``), an undecodable byte (``\\udcff``). What
    :meth:`str.isprintable` accepts (the blank, letters of any script) stays as it is.

    One line of text that shows what it holds, for diagnostics and generated comments.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _source_line(pos: Pos, source: str | None) -> str | None:
    if source is None:
        try:
            source = Path(pos.file).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    lines = source.removesuffix("\n").split("\n")  # the parser's lines: a form feed ends none
    if 1 <= pos.line <= len(lines):
        return lines[pos.line - 1].rstrip("\r").expandtabs(1)
    return None


class CompileError(Exception):
    """Raised when compilation cannot go on; carries every diagnostic reported so far."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("\n".join(d.format() for d in diagnostics))
        self.diagnostics = list(diagnostics)


@dataclass
class Reporter:
    """Collects diagnostics across stages.

    ``sources`` maps a file path to its text so that carets can be drawn without re-reading.
    """

    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)

    def error(self, message: str, pos: Pos | None) -> None:
        self._add("error", message, pos)

    def warning(self, message: str, pos: Pos | None) -> None:
        self._add("warning", message, pos)

    def _add(self, severity: str, message: str, pos: Pos | None) -> None:
        d = Diagnostic(severity, message, pos)
        if d not in self.diagnostics:
            self.diagnostics.append(d)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def check(self) -> None:
        """Raise :class:`CompileError` if any error has been reported."""
        if self.errors:
            raise CompileError(self.diagnostics)

    def render(self) -> str:
        """All diagnostics, each with its source line and caret, in report order."""
        return "\n".join(
            d.format(self.sources.get(d.pos.file) if d.pos else None) for d in self.diagnostics
        )
