"""Building a result while lark's LALR parser reduces each grammar rule, instead of a parse
tree that a transformer walks afterwards.

:func:`install_reductions` replaces the callbacks of a :class:`lark.Lark` parser; a
:class:`Reducer` subclass has one method per rule it builds, called as ``rule(meta,
children)`` with the rule's children already built and ``meta`` (:class:`Start`) the
position of its first token. A rule without a method stays a :class:`lark.Tree`. The methods
for Lingua Franca's grammar are in :mod:`codegen.transform`.
"""

from __future__ import annotations

from contextvars import ContextVar
from functools import partial
from typing import Any, ClassVar, NamedTuple

from lark import Lark, Token, Tree
from lark.exceptions import VisitError

#: Deeper parse trees (expressions nested inside each other) are refused: the compiler's
#: later passes recurse on them too.
MAX_TREE_DEPTH = 300


class Start(NamedTuple):
    """Where a rule's text starts (what lark's ``meta`` would give: ``line``, ``column``)."""

    line: int
    column: int


class Reduction(NamedTuple):
    """How the parser reduces one grammar rule: its name (or alias), which matched symbols
    stay (their index, and whether they are an inlined ``_rule`` whose children are spliced
    in) and whether a single remaining child stands for the rule (``?rule``)."""

    name: str
    keep: tuple[tuple[int, bool], ...]
    expand_single: bool


#: The :class:`Reducer` of the parse under way (the parser's callbacks are shared).
_REDUCER: ContextVar[Reducer] = ContextVar("_REDUCER")


def _reduce(how: Reduction, children: list) -> Any:
    return _REDUCER.get().reduce(how, children)


def install_reductions(lark: Lark) -> None:
    """Make ``lark``'s parser build its result while it parses (one :meth:`Reducer.reduce`
    per rule, by the reducer of the parse under way), instead of a parse tree to transform
    afterwards: the same children reach the same methods, with the positions of the rules'
    first tokens, filtered and inlined as lark's tree builder does."""
    callbacks = lark._callbacks  # shared with lark's LALR parser
    for rule in list(callbacks):
        keep = tuple(
            (i, not sym.is_term and sym.name.startswith("_"))
            for i, sym in enumerate(rule.expansion)
            if rule.options.keep_all_tokens or not (sym.is_term and sym.filter_out)
        )
        name = str(rule.alias or rule.origin.name)
        how = Reduction(name, keep, bool(rule.options.expand1 and not rule.alias))
        callbacks[rule] = partial(_reduce, how)


class Reducer:
    """The builder of one parse: :meth:`reduce` is called for each reduction; a rule named
    ``r`` with a method ``r`` becomes what ``r(meta, children)`` returns. Terminals named in
    :attr:`TERMINALS` become what the method of their name returns (``CODE(token)``)."""

    TERMINALS: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self._rules: dict[str, Any] = {}
        # (line, column, depth) of each node made and not yet taken by its parent, by id()
        self._made: dict[int, tuple[int | None, int | None, int]] = {}

    def parse(self, lark: Lark, text: str) -> Any:
        """The tree of ``text`` parsed by ``lark`` (its reductions installed by
        :func:`install_reductions`); lark's exceptions propagate.

        Raises:
            RecursionError: expressions nested deeper than :data:`MAX_TREE_DEPTH`.
            VisitError: a rule's method raised (a bug here, not in the user's file).
        """
        token = _REDUCER.set(self)
        try:
            return lark.parse(text)
        finally:
            _REDUCER.reset(token)

    def reduce(self, how: Reduction, children: list) -> Any:
        """The node for one reduction of rule ``how`` over the matched ``children``."""
        made = self._made
        line = column = None
        depth = 0
        for c in children:
            if isinstance(c, Token):
                if line is None:
                    line, column = c.line, c.column
                continue
            entry = made.pop(id(c), None)
            if entry is not None:
                if line is None:
                    line, column = entry[0], entry[1]
                depth = max(depth, entry[2])
        kept: list = []
        for i, splice in how.keep:
            c = children[i]
            if splice:
                if kept:
                    kept += c.children
                else:  # a repetition's left-recursive rule: extend its list, not a copy
                    kept = c.children
            elif isinstance(c, Token) and c.type in self.TERMINALS:
                kept.append(getattr(self, c.type)(c))
            else:
                kept.append(c)
        if how.expand_single and len(kept) == 1:
            node = kept[0]
        else:
            depth += not how.name.startswith("_")  # an inlined rule adds no level
            if depth > MAX_TREE_DEPTH:
                raise RecursionError(f"parse tree deeper than {MAX_TREE_DEPTH}")
            node = self._make(how.name, kept, line, column)
        if not isinstance(node, Token):
            made[id(node)] = (line, column, depth)
        return node

    def _make(self, name: str, kept: list, line: int | None, column: int | None) -> Any:
        try:
            rule = self._rules[name]
        except KeyError:
            rule = self._rules[name] = getattr(self, name, None)
        if rule is None:
            return Tree(name, kept)
        meta = Start(line, column)  # type: ignore[arg-type]  # a rule with a method has tokens
        try:
            return rule(meta, kept)
        except RecursionError:
            raise
        except Exception as e:
            raise VisitError(name, Tree(name, kept), e) from e
