"""What reaction code sees (spec §2.1, §2.2, §2.6), and the rules that keep it what it means.

A reaction body runs as a method of its reactor's class: it sees ``self`` (whose members are
the state variables, parameters and methods, beside those of
:class:`reactors.core.reactor.ReactorBase`), one argument per port, action, contained reactor and
mode its reaction declares, and the generated module's globals (the runtime API of
:mod:`reactors.api`, the module's imports, the file-level preambles) and Python's built-ins.
The rules:

- a declaration cannot take a name the runtime gives a meaning: a port, action, contained
  reactor or mode one of the runtime's globals (it would hide it in the reactions that receive
  it), a state variable, parameter or method a member of ``ReactorBase``, the method of a
  reaction, a name starting with ``_lf_``, or ``_p`` for a parameter ``p`` (its storage);
- a body cannot use a port, action, contained reactor or mode of its reactor that its reaction
  does not declare (it is undefined when the reaction runs: ``NameError``), unless the body
  binds that name itself or the module defines it;
- a body cannot call a built-in (``print(...)``) whose name is one of its reaction's arguments.

The analysis of a body is syntactic and errs on the side of silence: a name bound anywhere in
the body (assigned, imported, a parameter of a nested function, a comprehension's variable,
declared ``global``) is never reported, and a program whose preamble imports ``*`` is not
checked for undeclared uses at all (its globals are unknown).
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from collections.abc import Iterable, Iterator

from reactors import api
from reactors.core.reactor import ReactorBase

from . import tree
from .classes import ReactorClass
from .diagnostics import Reporter
from .instance import Elaborated, Instance, ReactionInst
from .reactions import DEADLINE_FUNCTION, REACTION_FUNCTION

#: Modules the generated module imports for reaction code (spec §2.1).
MODULE_IMPORTS = ("os", "sys", "copy")

#: The runtime's globals of reaction code: name -> where it comes from.
RUNTIME_GLOBALS = {name: "reactors.api" for name in api.__all__} | {
    name: "the generated module's import" for name in MODULE_IMPORTS
}
#: What every reactor object has from its base class (methods, ``bank_index``).
MEMBERS = frozenset(n for n in dir(ReactorBase) if not n.startswith("__"))
#: The prefix of the names the runtime and the generated code keep for themselves.
RESERVED_PREFIX = "_lf_"

_METHOD = re.compile(
    "|".join(f.format(r"\d+") for f in (REACTION_FUNCTION, DEADLINE_FUNCTION)), re.ASCII
)
_BUILTINS = frozenset(dir(builtins))


# --------------------------------------------------------------------------- declarations


def check_declarations(cls: ReactorClass, rep: Reporter) -> None:
    """Report each declaration of ``cls`` (inherited ones included) whose name the runtime
    gives another meaning, at the declaration."""
    for what, name, pos in _arguments(cls):
        if name in RUNTIME_GLOBALS:
            rep.error(
                f"'{name}' is a name of the runtime that reaction code uses "
                f"({RUNTIME_GLOBALS[name]}): {what} cannot take it",
                pos,
            )
    params = {p.name for p in cls.parameters} | {"bank_index"}
    for what, name, pos in _members(cls):
        reason = _member_clash(name, params)
        if reason:
            rep.error(f"'{name}' {reason}: {what} cannot take it", pos)


def _arguments(cls: ReactorClass) -> Iterator[tuple[str, str, tree.Pos]]:
    """(what, name, position) of the declarations a reaction receives as arguments."""
    yield from (("a port", p.name, p.pos) for p in cls.ports)
    yield from (("an action", a.node.name, a.node.pos) for a in cls.actions)
    yield from (("a reactor instance", c.node.name, c.node.pos) for c in cls.children)
    yield from (("a mode", m.name, m.pos) for m in cls.modes)


def _members(cls: ReactorClass) -> Iterator[tuple[str, str, tree.Pos]]:
    """(what, name, position) of the declarations that become members of ``self``."""
    yield from (("a state variable", s.node.name, s.node.pos) for s in cls.states)
    yield from (("a parameter", p.name, p.pos) for p in cls.parameters if p.name != "bank_index")
    yield from (("a method", m.name, m.pos) for m in cls.methods)


def _member_clash(name: str, params: set[str]) -> str | None:
    """Why ``name`` cannot be a member of a reactor with parameters ``params``, or None."""
    if name in MEMBERS:
        return f"is a member of every reactor (ReactorBase.{name})"
    if name.startswith(RESERVED_PREFIX):
        return f"starts with '{RESERVED_PREFIX}', which the runtime keeps for itself"
    if _METHOD.fullmatch(name):
        return "is the name of a reaction's method in the generated class"
    if name.startswith("_") and name[1:] in params:
        return f"holds the value of parameter '{name[1:]}' (self.{name})"
    return None


# --------------------------------------------------------------------------- bodies


def check_bodies(
    prog: Elaborated, preambles: Iterable[tree.Preamble], rep: Reporter, pyclasses: Iterable[str]
) -> None:
    """Report, in the bodies of the declared reactions of each class of ``prog`` (and their
    deadline handlers), each use of a port, action, contained reactor or mode of the reactor
    that the reaction does not declare, and each call of a built-in that one of the
    reaction's arguments hides; located at the use in the ``.lf`` file.

    ``preambles`` are the file-level preambles of the program and ``pyclasses`` the classes
    of the generated module: with the runtime's globals and the names any body declares
    ``global``, the module's globals, which a body may use without declaring them.
    """
    firsts: dict[int, Instance] = {}  # one instance per class: its reactions' arguments
    for inst in prog.instances:
        firsts.setdefault(id(inst.cls), inst)
    reactions = [r for i in firsts.values() for r in i.reactions if r.node is not None]
    defined = _module_globals(preambles, _class_codes(i.cls for i in firsts.values()), pyclasses)
    for r in reactions:
        _check_reaction(r, defined, rep)


def _module_globals(
    preambles: Iterable[tree.Preamble], codes: Iterable[tree.Code], pyclasses: Iterable[str]
) -> frozenset[str] | None:
    """The names the generated module defines for reaction code: the runtime's, the classes
    ``pyclasses``, what the file-level ``preambles`` bind at their top level, and what any of
    ``codes`` declares ``global``. None when a preamble imports ``*`` (they are unknown)."""
    names = set(RUNTIME_GLOBALS) | set(pyclasses)
    for p in preambles:
        module = _parse(p.code.text)
        if module is None:
            continue
        if any(isinstance(n, ast.ImportFrom) and n.names[0].name == "*" for n in ast.walk(module)):
            return None
        names |= _top_level_names(p.code.text)
    for code in codes:
        module = _parse(code.text) if "global" in code.text else None
        for node in ast.walk(module) if module is not None else ():
            if isinstance(node, ast.Global):
                names.update(node.names)
    return frozenset(names)


def _class_codes(classes: Iterable[ReactorClass]) -> Iterator[tree.Code]:
    """Every block of target code of ``classes``: preambles, methods, reactions, deadline
    handlers."""
    for cls in classes:
        yield from (p.code for p in cls.preambles)
        yield from (m.code for m in cls.methods)
        for r in cls.reactions:
            yield from _codes(r.node)


def _codes(reaction: tree.Reaction) -> Iterator[tree.Code]:
    """The reaction's body and its deadline handler's."""
    if reaction.code is not None:
        yield reaction.code
    if reaction.deadline is not None:
        yield reaction.deadline.code


def _check_reaction(r: ReactionInst, defined: frozenset[str] | None, rep: Reporter) -> None:
    assert r.node is not None, "declared reactions only"
    args = {a["name"]: a["kind"] for a in r.args}
    missing = {} if defined is None else _undeclared(r.owner, args, defined)
    for code in _codes(r.node):
        names = {*missing, *(n for n in args if n in _BUILTINS)}
        module = _parse(code.text) if any(n in code.text for n in names) else None
        if module is None:
            continue
        bound = _bound(module)
        for node in _first_uses(ast.walk(module), set(missing) - bound):
            rep.error(_undeclared_message(node.id, missing[node.id], r), _pos_in(code, node, rep))
        calls = (c.func for c in ast.walk(module) if isinstance(c, ast.Call))
        for node in _first_uses(calls, {n for n in args if n in _BUILTINS} - bound):
            kind = _KIND_WORDS.get(args[node.id], "argument")
            rep.error(
                f"'{node.id}' here is the {kind} '{node.id}' of this reaction, not Python's "
                f"built-in {node.id}(): rename the {kind}",
                _pos_in(code, node, rep),
            )


_KIND_WORDS = {
    "port": "port",
    "mutable": "port",
    "action": "action",
    "contained": "contained reactor",
    "bank": "bank",
    "mode": "mode",
}


def _undeclared(inst: Instance, args: dict[str, str], defined: frozenset[str]) -> dict[str, str]:
    """Name -> kind ("input", "output", "action", "instance", "mode") of what ``inst``'s
    reactor declares but a reaction with arguments ``args`` does not receive."""
    kinds = {p.name: p.kind for p in inst.ports.values()}
    kinds |= {a.name: "action" for a in inst.actions}
    kinds |= {name: "instance" for name in inst.children}
    kinds |= {m.name: "mode" for m in inst.cls.modes}
    return {n: k for n, k in kinds.items() if n not in args and n not in defined}


def _undeclared_message(name: str, kind: str, r: ReactionInst) -> str:
    cls = r.owner.cls.name
    how = {
        "output": (f"an output of reactor '{cls}'", f"add it to its effects ('-> {name}')"),
        "input": (
            f"an input of reactor '{cls}'",
            f"add it to its triggers or sources ('reaction({name})' or 'reaction(...) {name}')",
        ),
        "action": (
            f"an action of reactor '{cls}'",
            f"add it to its effects ('-> {name}') to schedule it, or to its triggers to read it",
        ),
        "instance": (
            f"a contained reactor of '{cls}'",
            f"name the ports it uses in the reaction ('-> {name}.<input>' to write one, "
            f"'{name}.<output>' among the triggers or sources to read one)",
        ),
        "mode": (
            f"a mode of reactor '{cls}'",
            f"add a transition to it to its effects ('-> reset({name})' or '-> history({name})')",
        ),
    }[kind]
    return (
        f"'{name}' is {how[0]} that this reaction does not declare: {how[1]}; undeclared, "
        "the name is undefined when the reaction runs"
    )


# --------------------------------------------------------------------------- Python syntax


def _parse(text: str) -> ast.Module | None:
    """The body ``text`` as Python, or None when it does not parse (the syntax check of the
    generated module reports that)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _top_level_names(text: str) -> set[str]:
    """The names the module ``text`` binds at its top level (assigned, imported, defined, or
    declared ``global`` in one of its functions)."""
    try:
        top = symtable.symtable(text, "<preamble>", "exec")
    except SyntaxError:
        return set()
    return {
        s.get_name()
        for s in top.get_symbols()
        if s.is_assigned() or s.is_imported() or s.is_declared_global()
    }


def _bound(module: ast.AST) -> set[str]:
    """Every name ``module`` binds anywhere (in any of its scopes) or declares global."""
    names: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _first_uses(nodes: Iterable[ast.AST], names: set[str]) -> list[ast.Name]:
    """The first (in the order of the text) of the ``ast.Name`` among ``nodes`` of each of
    ``names``."""
    first: dict[str, ast.Name] = {}
    for node in nodes:
        if isinstance(node, ast.Name) and node.id in names:
            old = first.get(node.id)
            if old is None or (node.lineno, node.col_offset) < (old.lineno, old.col_offset):
                first[node.id] = node
    return sorted(first.values(), key=lambda n: (n.lineno, n.col_offset))


def _pos_in(code: tree.Code, node: ast.Name, rep: Reporter) -> tree.Pos:
    """The ``.lf`` position of ``node`` of the body ``code`` (the body is de-indented and
    its first line may follow ``{=``; ``node``'s column counts UTF-8 bytes)."""
    text_line = code.text.split("\n")[node.lineno - 1]
    column = len(text_line.encode()[: node.col_offset].decode(errors="replace"))
    line = code.body_line + node.lineno - 1
    source = rep.sources.get(code.pos.file, "").split("\n")
    lf_line = source[line - 1].rstrip("\r") if line <= len(source) else text_line
    if line == code.pos.line:  # the first line follows '{=' on its line, stripped
        shift = lf_line.find(text_line, code.pos.col + 1)
    else:  # de-indenting took a common prefix off the line
        shift = len(lf_line) - len(text_line)
    return tree.Pos(code.pos.file, line, max(shift, 0) + column + 1)
