"""Doc comments of reactor parameters: the one-line description a program's ``--help`` prints.

The convention (docs/lfc.md, "Parameter descriptions") is a comment at the end of the
parameter's line in the reactor's signature::

    main reactor CartPolePPO(
        seed = 1,              // seed of the environments, the networks and the sampling

A parameter without one may have its description on the line(s) directly above it, alone on
their lines: ``//`` (or ``#``) lines, or a ``/** ... */`` block. The grammar ignores comments;
the lexer hands each one to :func:`collected` as it reads a file (:func:`on_comment` is its
callback), and :func:`attach` gives each :class:`~codegen.tree.Parameter` its ``doc``. Nothing
else of a comment reaches the AST.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import NamedTuple

from lark import Token

from .tree import Model, Parameter, Reactor


class Comment(NamedTuple):
    """One comment of a file: where it starts (1-based ``line`` and ``column``), the line it
    ends on, and its text with its delimiters."""

    line: int
    column: int
    end_line: int
    text: str


#: The comments of the file being parsed, in the order the lexer read them.
_COMMENTS: ContextVar[list[Comment]] = ContextVar("_COMMENTS")


def on_comment(token: Token) -> Token:
    """The lexer's callback for a comment token: keep it for the parse under way (if any)."""
    found = _COMMENTS.get(None)
    if found is not None and token.line is not None and token.column is not None:
        end = token.end_line if token.end_line is not None else token.line
        found.append(Comment(token.line, token.column, end, str(token)))
    return token


@contextmanager
def collected() -> Iterator[list[Comment]]:
    """A list that receives the comments the lexer reads while the block runs."""
    found: list[Comment] = []
    mark = _COMMENTS.set(found)
    try:
        yield found
    finally:
        _COMMENTS.reset(mark)


def attach(model: Model, comments: Sequence[Comment]) -> Model:
    """``model`` with each reactor parameter's ``doc`` taken from ``comments`` (the file's,
    from :func:`collected`) by the convention of the module; the model as it is without
    comments."""
    if not comments:
        return model
    found = _Comments(comments, model.source.split("\n"))
    return replace(model, reactors=tuple(found.documented(r) for r in model.reactors))


class _Comments:
    """A file's comments by the line they start on and the line they end on, and its lines."""

    def __init__(self, comments: Sequence[Comment], lines: list[str]):
        self.lines = lines
        self.starting: dict[int, list[Comment]] = {}
        self.ending: dict[int, Comment] = {}
        for c in comments:
            self.starting.setdefault(c.line, []).append(c)
            self.ending[c.end_line] = c

    def documented(self, r: Reactor) -> Reactor:
        """``r`` with the descriptions of its parameters."""
        params = r.parameters
        docs = [self.doc(p, params) for p in params]
        if not any(docs):
            return r
        return replace(r, parameters=tuple(replace(p, doc=d) for p, d in zip(params, docs)))

    def doc(self, p: Parameter, params: tuple[Parameter, ...]) -> str:
        """The description of ``p`` (one of ``params``, its reactor's): its trailing
        comment, else the comments above it."""
        line, column = p.pos.line, p.pos.col
        # a later parameter on the same line takes the comments after it
        after = [q.pos.col for q in params if q.pos.line == line and q.pos.col > column]
        stop = min(after, default=None)
        for c in self.starting.get(line, ()):
            if c.column > column and (stop is None or c.column < stop):
                return clean(c.text)
        if not self.first_on_line(line, column):
            return ""
        return " ".join(reversed(list(self.above(line))))

    def above(self, line: int) -> Iterator[str]:
        """The texts of the comments alone on the lines directly above ``line``, nearest
        first."""
        at = line - 1
        while at in self.ending:
            c = self.ending[at]
            if not self.first_on_line(c.line, c.column):
                return
            text = clean(c.text)
            if text:
                yield text
            at = c.line - 1

    def first_on_line(self, line: int, column: int) -> bool:
        """Whether nothing but blanks precede ``column`` on ``line`` (both 1-based)."""
        lines = self.lines
        return 0 < line <= len(lines) and not lines[line - 1][: column - 1].strip()


_DELIMITERS = re.compile(r"^(?://+|#+|/\*+|''')|(?:\*+/|''')$")
_STARS = re.compile(r"^\s*\*+(?!/)")


def clean(text: str) -> str:
    """The words of a comment on one line: ``// seed of the run`` -> ``seed of the run``;
    a block's ``/**``, ``*/`` and leading ``*`` of its lines are dropped."""
    body = _DELIMITERS.sub("", text.strip()).strip()
    words = [_STARS.sub("", part) for part in body.split("\n")]
    return " ".join(" ".join(words).split())
