"""Parse a Lingua Franca (target Python) file into the AST of :mod:`codegen.tree`.

The grammar is ``grammar.lark`` (LALR(1), contextual lexer). The parser builds the frozen
dataclasses of :mod:`codegen.tree` as it reduces each rule (:mod:`codegen.transform`); the
comments it skips give the parameters their descriptions (:mod:`codegen.doc_comments`). Syntax
errors become ``file:LINE:COL: error: ...`` diagnostics; no lark or Python exception escapes.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token
from lark.exceptions import UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import PatternStr

from .diagnostics import Reporter
from .doc_comments import attach, collected, on_comment
from .lexing import end_position, find_lexical_error, line_col
from .reduction import install_reductions
from .sources import read_source
from .transform import build
from .tree import Model, Pos

__all__ = ["parse", "parse_file"]


# How terminals are named in "expected one of: ..." (keywords and punctuation are quoted).
_TERMINAL_NAMES = {
    "IDENT": "identifier",
    "INT": "integer",
    "NEGINT": "integer",
    "FLOAT": "number",
    "STRING": "string",
    "CHAR": "character literal",
    "CODE": "code block '{= ... =}'",
    "UNIT": "time unit",
    "BOOL": "boolean",
    "KEBAB": "property name",
    "PROPWORD": "identifier or path",
    "PKGPATH": "'<package/path.lf>'",
    "HOST": "host name",
    "TYPE": "type",
    "$END": "end of file",
}


def parse(text: str, file: str, reporter: Reporter) -> Model:
    """Parse the text of one ``.lf`` file.

    Parameters:
        text: the file's contents.
        file: the path used in positions and messages.
        reporter: receives the syntax error, if any; the text is recorded in
            ``reporter.sources`` so that diagnostics can show the line.

    Returns:
        The file's :class:`~codegen.tree.Model`.

    Raises:
        CompileError: after reporting a syntax or lexical error (via ``reporter.check()``).
    """
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    reporter.sources[file] = text
    try:
        with _no_cycle_collection(), collected() as comments:
            return attach(build(_lark(), file, text), comments)
    except UnexpectedInput as err:
        message, offset = _describe(err, text)
        line, col = line_col(text, offset) if offset < len(text) else end_position(text)
        reporter.error(message, Pos(file, line, col))
    except VisitError as err:  # a bug in a transformer method, not in the user's file
        reporter.error(f"internal error while parsing {file}: {err.orig_exc!r}", None)
    except RecursionError:
        reporter.error(f"{file}: expression nested too deeply", None)
    reporter.check()
    raise AssertionError("unreachable: an error was reported")


def parse_define(name: str, text: str, reporter: Reporter) -> Model:
    """Parse ``lfc -D name=text`` as a file ``<-D name>`` that declares one main reactor with
    the one parameter ``name = text`` (so that it is checked like one written in a file; for
    ``-D path.name=text`` the parameter is ``name``).

    Raises:
        CompileError: after reporting a syntax error in ``text``.
    """
    param = name.rpartition(".")[2]
    return parse(
        f"target Python\nmain reactor X({param} = {text}) {{}}\n", f"<-D {name}>", reporter
    )


def parse_file(path: str, reporter: Reporter) -> Model:
    """Read and parse one ``.lf`` file.

    Parameters:
        path: the file to read (UTF-8); it is also the file name used in positions.
        reporter: receives read and syntax errors.

    Returns:
        The file's :class:`~codegen.tree.Model`.

    Raises:
        CompileError: when the file cannot be read (:func:`codegen.sources.read_source`: not
            a regular file, too large, not UTF-8, a NUL) or does not parse.
    """
    text = read_source(path, reporter, None)
    if text is None:
        reporter.check()
    assert text is not None  # an error was reported and raised just above
    return parse(text, path, reporter)


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause Python's cycle collector: a parse makes millions of objects that all live on
    (the tree, then the AST; no cycles among them), and on a large file the collector's
    repeated scans of them took more time than the parse itself. Memory is still freed by
    reference counting."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def is_name(text: str) -> bool:
    """Whether ``text`` is an LF name: the grammar's ``IDENT`` terminal, all of it."""
    return re.fullmatch(_lark().get_terminal("IDENT").pattern.to_regexp(), text) is not None


@lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = Path(__file__).with_name("grammar.lark").read_text(encoding="utf-8")
    lark = Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        propagate_positions=False,  # positions come with the reductions
        maybe_placeholders=False,
        cache=True,
        # comments are ignored by the grammar; the lexer hands them over for doc comments
        lexer_callbacks={"LINE_COMMENT": on_comment, "BLOCK_COMMENT": on_comment},
    )
    install_reductions(lark)
    return lark


# --------------------------------------------------------------------------- error messages


def _describe(err: UnexpectedInput, text: str) -> tuple[str, int]:
    """``(message, offset)`` for a lark error; a lexical cause at or before it takes precedence."""
    if isinstance(err, UnexpectedToken):
        value = err.token.value
        offset = len(text) if err.token.type == "$END" else err.token.start_pos
        offset += len(value) - len(value.lstrip())  # a time unit token starts with blanks
        found = _found(err.token)
    else:
        offset = getattr(err, "pos_in_stream", -1)
        offset = offset if 0 <= offset < len(text) else len(text)
        found = f"character {text[offset]!r}" if offset < len(text) else "end of file"
    code_re = re.compile(_lark().get_terminal("CODE").pattern.to_regexp())
    lexical = find_lexical_error(text, code_re)
    if lexical is not None and lexical.offset <= offset:
        return lexical.message, lexical.offset
    expected = _expected(err) - _IGNORED
    if found == "end of file" and expected & _CLOSERS:
        expected &= _CLOSERS  # at the end only closing what is open can help
    names = sorted({_display(t) for t in expected})
    if not names:
        return f"unexpected {found}", offset
    listed = names[0] if len(names) == 1 else "one of: " + ", ".join(names)
    return f"unexpected {found}, expected {listed}", offset


_IGNORED = {"WS", "LINE_COMMENT", "BLOCK_COMMENT"}
_CLOSERS = {"RBRACE", "RPAR", "RSQB"}


def _expected(err: UnexpectedInput) -> set[str]:
    """Terminal names that the parser accepts where it failed (exact, unlike LALR lookaheads)."""
    # UnexpectedToken knows what was expected; UnexpectedCharacters what was allowed
    fallback = set(
        err.expected if isinstance(err, UnexpectedToken) else getattr(err, "allowed", None) or ()
    )
    parser = getattr(err, "interactive_parser", None)
    if parser is None:
        return fallback
    try:
        return set(parser.accepts())
    except UnexpectedInput:
        return fallback


def _found(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    if token.type == "CODE":
        return "code block '{= ... =}'"
    value = token.value.strip()
    return repr(value if len(value) <= 30 else value[:27] + "...")


def _display(name: str) -> str:
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    try:
        pattern = _lark().get_terminal(name).pattern
    except KeyError:
        return name
    if isinstance(pattern, PatternStr):
        return f"'{pattern.value}'"
    keyword = re.fullmatch(r"(\w+)\\b", pattern.value)  # keywords are /word\b/
    return f"'{keyword.group(1)}'" if keyword else name.lower()
