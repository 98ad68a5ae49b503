"""Lexical helpers for the parser: code-block bodies, lexical-error scanning, offsets.

The grammar (``grammar.lark``) does the tokenising; these helpers cover what a lark terminal
cannot express: de-indenting a ``{= ... =}`` body, and finding an unterminated code block,
string or comment so that a syntax error can name its real cause and position.
"""

from __future__ import annotations

import re
import textwrap
from typing import NamedTuple

_INTERESTING = re.compile(r"""\{=|"|'|/[/*]|#""")
_CHAR = re.compile(r"'(?:[^'\\\n]|\\.)'")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*+"')
_TRIPLE_STRING = re.compile(r'"""(?:[^"\\]|\\[\s\S]|"(?!""))*+"""')


class LexError(NamedTuple):
    """An unterminated construct: ``offset`` into the text and a message."""

    offset: int
    message: str


def code_body(token: str, line: int) -> tuple[str, int]:
    """The de-indented body of a code-block token and the file line of its first line.

    Parameters:
        token: the whole token, ``{=`` and ``=}`` included.
        line: the file line on which ``{=`` stands.

    Returns:
        ``(text, body_line)``. A one-line body is stripped. Otherwise blank leading and
        trailing lines are dropped; a first line that shares its line with ``{=`` is stripped
        (its indentation is meaningless) and the other lines lose their common indentation.
    """
    body = token[2:-2]
    if "\n" not in body:
        return body.strip(), line
    lines = body.split("\n")
    first = 0
    while first < len(lines) and not lines[first].strip():
        first += 1
    last = len(lines)
    while last > first and not lines[last - 1].strip():
        last -= 1
    if first == last:
        return "", line
    kept = lines[first:last]
    if first == 0:  # code right after `{=`
        rest = textwrap.dedent("\n".join(kept[1:]))
        text = kept[0].strip() + ("\n" + rest if len(kept) > 1 else "")
    else:
        text = textwrap.dedent("\n".join(kept))
    return text, line + first


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based ``(line, column)`` of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - text.rfind("\n", 0, offset)


def end_position(text: str) -> tuple[int, int]:
    """The position just after the last non-blank character (where "end of file" is shown)."""
    stripped = text.rstrip()
    if not stripped:
        return 1, 1
    return line_col(text, len(stripped))


def find_lexical_error(text: str, code_re: re.Pattern) -> LexError | None:
    """The first unterminated code block, string or comment in an LF text, if any.

    Parameters:
        text: the whole file.
        code_re: the compiled ``CODE`` terminal of the grammar (so both agree on where a block
            ends).

    Returns:
        A :class:`LexError`, or None when every code block, string and comment is closed.
    """
    pos = 0
    while True:
        m = _INTERESTING.search(text, pos)
        if m is None:
            return None
        start, kind = m.start(), m.group()
        end = _skip(text, start, kind, code_re)
        if isinstance(end, LexError):
            return end
        pos = end


def _skip(text: str, start: int, kind: str, code_re: re.Pattern) -> int | LexError:
    """Offset just past the construct that starts at ``start``, or the error it contains."""
    if kind == "{=":
        m = code_re.match(text, start)
        if m:
            return m.end()
        return LexError(
            start,
            "unterminated code block: '{=' has no matching '=}'"
            + _commented_close_hint(text, start),
        )
    if kind == '"':
        m = (_TRIPLE_STRING if text.startswith('"""', start) else _STRING).match(text, start)
        return m.end() if m else LexError(start, "unterminated string")
    if kind == "'":
        if text.startswith("'''", start):
            return _closed(text, start, "'''", "unterminated comment: ''' has no matching '''")
        m = _CHAR.match(text, start)
        return m.end() if m else start + 1
    if kind == "/*":
        return _closed(text, start, "*/", "unterminated comment: '/*' has no matching '*/'")
    newline = text.find("\n", start)  # `//` or `#` line comment
    return len(text) if newline < 0 else newline


def _commented_close_hint(text: str, start: int) -> str:
    """A hint when the first ``=}`` after ``{=`` sits behind a ``#`` or ``//`` on its line."""
    close = text.find("=}", start + 2)
    if close < 0:
        return ""
    line_start = max(text.rfind("\n", 0, close) + 1, start + 2)
    if "#" in text[line_start:close] or "//" in text[line_start:close]:
        return " ('=}' after '#' or '//' on the same line is inside a comment)"
    return ""


def _closed(text: str, start: int, closer: str, message: str) -> int | LexError:
    end = text.find(closer, start + len(closer))
    return end + len(closer) if end >= 0 else LexError(start, message)
