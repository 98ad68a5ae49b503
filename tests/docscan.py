"""Reading README.md and docs/**/*.md as a user does (tests/test_docs.py): the code they show
(indented and fenced blocks, inline code), the commands in it and the output shown after a
``$ command``, the files, modules, programs, make targets and options they name, and their
links and headings."""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: The name the docs use for any program (``./bin/Foo -w 4``).
PLACEHOLDER = "Foo"
#: Folders of the project whose paths the docs name.
FOLDERS = ("lf_src", "tests", "rl_algos", "reactors", "codegen", "bench")
PACKAGES = ("rl_algos", "reactors", "codegen", "bench")

_PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(FOLDERS)})/[\w./<>*{{}}-]*)")
_DOTTED = re.compile(rf"(?<![\w./-])((?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+)")
_PROGRAM = re.compile(r"(?<![\w./-])(?:\./)?bin/([A-Za-z_]\w*)")
_OPTION = re.compile(r"^(--?[A-Za-z][\w-]*)(?:=.*)?$")


def _name(doc: Path) -> str:
    """``doc`` relative to the project, where it is in it."""
    return str(doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc)


@dataclass(frozen=True)
class Code:
    """A piece of code a doc shows: ``text``, from line ``line`` (1-based) of ``doc``;
    ``block``: an indented or fenced block (``lang``: a fenced block's language), else inline
    code of the prose."""

    doc: Path
    line: int
    text: str
    block: bool
    lang: str = ""

    def where(self) -> str:
        """``docs/GUIDE.md:12``."""
        return f"{_name(self.doc)}:{self.line}"


@dataclass(frozen=True)
class Command:
    """A command the docs show (``tool``: program, lfc, lfc-graph, lf-rl, make, tensorboard;
    ``name``: the program's, or lf-rl's subcommand), its arguments, and the output shown
    after it when it is a ``$ `` session line ("" otherwise)."""

    code: Code
    tool: str
    name: str
    args: tuple[str, ...]
    output: str = ""

    def options(self) -> list[str]:
        """The ``-x`` and ``--name`` options among the arguments (``[--seed S]``: ``--seed``;
        ``--max-steps=5``: ``--max-steps``)."""
        return [m.group(1) for a in self.args if (m := _OPTION.match(a.strip("[]")))]


def code_of(doc: Path) -> list[Code]:
    """Every block and inline code span of ``doc``, in order."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    out: list[Code] = []
    prose: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^\s*```(\w*)", lines[i])
        indented = re.match(r"^ {4,}\S", lines[i]) and (i == 0 or not lines[i - 1].strip())
        if fence or indented:
            out += _inline(doc, prose)
            prose = []
            end = i + 1
            if fence:
                while end < len(lines) and not lines[end].strip().startswith("```"):
                    end += 1
                out.append(Code(doc, i + 2, "\n".join(lines[i + 1 : end]), True, fence.group(1)))
                end += 1
            else:
                while end < len(lines) and re.match(r"^ {4,}\S", lines[end]):
                    end += 1
                out.append(Code(doc, i + 1, "\n".join(x.strip() for x in lines[i:end]), True))
            i = end
            continue
        if not lines[i].strip():
            out += _inline(doc, prose)
            prose = []
        else:
            prose.append((i + 1, lines[i]))
        i += 1
    return out + _inline(doc, prose)


def _inline(doc: Path, paragraph: list[tuple[int, str]]) -> list[Code]:
    """The inline code spans of a paragraph (lines with their numbers); a span may wrap."""
    if not paragraph:
        return []
    text = "\n".join(line for _, line in paragraph)
    first = paragraph[0][0]
    return [
        Code(doc, first + text.count("\n", 0, m.start()), " ".join(m.group(1).split()), False)
        for m in re.finditer(r"`([^`]+)`", text)
    ]


def commands_of(code: Code) -> list[Command]:
    """The commands in ``code``: each line of a block (a ``$ `` line with the output lines
    after it), or the inline span itself."""
    if not code.block:
        found = parse_command(code, code.text)
        return [found] if found else []
    out: list[Command] = []
    lines = code.text.splitlines()
    for k, line in enumerate(lines):
        at = replace(code, line=code.line + k)
        if line.startswith("$ "):
            shown = []
            for after in lines[k + 1 :]:
                if after.startswith("$ "):
                    break
                shown.append(after)
            found = parse_command(at, line[2:], "\n".join(shown))
        else:
            found = parse_command(at, line)
        if found:
            out.append(found)
    return out


def parse_command(code: Code, text: str, output: str = "") -> Command | None:
    """The command ``text`` (with its output, for a session), or None when it is no command
    of ours."""
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError:  # an unbalanced quote: a command cut short by the prose
        tokens = text.split("#")[0].split()
    while tokens and re.match(r"^[A-Z_]+=", tokens[0]):  # VAR=value before the command
        tokens = tokens[1:]
    if not tokens:
        return None
    head, rest = tokens[0].removeprefix(".venv/bin/"), tuple(tokens[1:])
    program = _PROGRAM.fullmatch(tokens[0])
    if program:
        return Command(code, "program", program.group(1), rest, output)
    if head in ("python", "python3") and rest[:2] == ("-m", "rl_algos.cli"):
        head, rest = "lf-rl", rest[2:]
    if head == "lf-rl":
        sub = next((a for a in rest if not a.startswith("-")), "")
        return Command(code, "lf-rl", sub, rest, output)
    if head in ("lfc", "lfc-graph", "make", "tensorboard"):
        return Command(code, head, head, rest, output)
    return None


def program_shown(code: Code) -> str | None:
    """The main reactor's name when ``code`` is a block holding a complete ``.lf`` program (a
    ``target`` line, a ``main reactor`` line, no ``...`` left out), else None."""
    if not code.block or code.lang not in ("", "lf") or "..." in code.text:
        return None
    main = re.search(r"^main reactor (\w+)", code.text, re.M)
    return main.group(1) if main and re.search(r"^target \w+", code.text, re.M) else None


def all_code() -> list[Code]:
    """The code of every doc."""
    return [c for doc in DOCS for c in code_of(doc)]


def all_commands() -> list[Command]:
    """The commands of every doc."""
    return [cmd for c in all_code() for cmd in commands_of(c)]


def named_paths() -> list[tuple[str, str]]:
    """(where, path) of each project path a doc names (``lf_src/lib/Env.lf``, ``tests/lf/``),
    but templates such as ``bench/results/<date>.md``."""
    out = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for m in _PATH.finditer(line):
                path = m.group(1).rstrip(".,:;")
                if not re.search(r"[<>*{}]", path):
                    out.append((f"{_name(doc)}:{n}", path))
    return out


def named_programs() -> list[tuple[str, str]]:
    """(where, name) of each program a doc runs as ``./bin/X`` or ``bin/X``."""
    out = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            out += [(f"{_name(doc)}:{n}", m.group(1)) for m in _PROGRAM.finditer(line)]
    return out


def named_objects() -> list[tuple[str, str]]:
    """(where, dotted name) of each module or object of ours named in code
    (``rl_algos.envs.make_atari``, ``reactors.native.MODULES``)."""
    return [(c.where(), m.group(1)) for c in all_code() for m in _DOTTED.finditer(c.text)]


def resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module of this project, or a top-level name of one (a
    function, class, variable or import), or an attribute defined in such a class's body."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        source = next(
            (p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None
        )
        if source is not None:
            rest = parts[i:]
            return not rest or _defines(ast.parse(source.read_text(encoding="utf-8")), rest)
    return False


def _defines(node: ast.AST, names: list[str]) -> bool:
    """Whether the body of ``node`` defines ``names[0]`` (and, for a class, its body the rest)."""
    for stmt in getattr(node, "body", []):
        if _binds(stmt, names[0]):
            inner = isinstance(stmt, ast.ClassDef) and len(names) > 1
            return _defines(stmt, names[1:]) if inner else True
    return False


def _binds(stmt: ast.stmt, name: str) -> bool:
    """Whether the statement ``stmt`` binds ``name``."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name == name
    if isinstance(stmt, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    if isinstance(stmt, ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id == name
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name for a in stmt.names)
    if isinstance(stmt, (ast.If, ast.Try)):
        return any(_binds(s, name) for s in stmt.body)
    return False


def help_options(text: str) -> set[str]:
    """The options a ``--help`` text lists: each ``-x``/``--name`` in it, and ``--NAME`` of
    each main-reactor parameter (``  seed = 1  (Foo.lf:3)``), all in :func:`normal` form."""
    found = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))
    found |= {f"--{p}" for p in re.findall(r"^  (\w+) = .*\(\S+\.lf:\d+\)", text, re.M)}
    return {normal(o) for o in found}


def normal(option: str) -> str:
    """An option with ``_`` for ``-`` after its leading dashes (``--max-steps`` and
    ``--max_steps`` are one option of a program)."""
    dashes = len(option) - len(option.lstrip("-"))
    return option[:dashes] + option[dashes:].replace("-", "_")


def shown_pattern(output: str) -> re.Pattern[str]:
    """A pattern for printed text that matches the ``output`` shown in a doc: whitespace of
    any width, ``...`` for anything."""
    words = re.split(r"(\.\.\.)", " ".join(output.split()))
    return re.compile("".join(".*?" if w == "..." else re.escape(w) for w in words), re.S)


# --------------------------------------------------------------------------- links and headings


@dataclass(frozen=True)
class Link:
    """A relative link of a doc's prose, ``[text](target)``: ``path`` (relative to the doc's
    folder; "" for the doc itself) and ``anchor`` (after ``#``; "" for none)."""

    doc: Path
    line: int
    path: str
    anchor: str

    def where(self) -> str:
        """``docs/GUIDE.md:12``."""
        return f"{_name(self.doc)}:{self.line}"

    def file(self) -> Path:
        """The file the link points to."""
        return (self.doc.parent / self.path).resolve() if self.path else self.doc


def prose_lines(doc: Path) -> list[tuple[int, str]]:
    """(number, text) of the lines of ``doc`` outside fenced and indented code blocks (an
    indented block starts after a blank line and goes on while its lines stay indented)."""
    out: list[tuple[int, str]] = []
    fenced = indented = False
    previous = ""
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            if line.strip():
                indented = bool(re.match(r"^ {4,}\S", line)) and (indented or not previous.strip())
            if not indented:
                out.append((n, line))
        previous = line
    return out


def links_of(doc: Path) -> list[Link]:
    """The relative links of ``doc``'s prose (not those to a web address or inside code)."""
    out = []
    for n, line in prose_lines(doc):
        line = re.sub(r"`[^`]*`", "", line)
        for m in re.finditer(r"\]\(([^()\s]+)\)", line):
            target = m.group(1)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                path, _, anchor = target.partition("#")
                out.append(Link(doc, n, path, anchor))
    return out


def headings_of(doc: Path) -> list[str]:
    """The text of each heading of ``doc`` (``## 2. Changing hyperparameters``), as a reader
    sees it: no ``#``, code spans and emphasis as their text, links as their words."""
    out = []
    for _, line in prose_lines(doc):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))
            out.append(re.sub(r"[`*]", "", text))
    return out


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, what is neither a word character, a
    space nor a hyphen dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors_of(doc: Path, slug: Callable[[str], str]) -> set[str]:
    """The anchors of ``doc``'s headings under ``slug``, a repeated one numbered ``-1``,
    ``-2``... as both GitHub and Python-Markdown do."""
    seen: dict[str, int] = {}
    out = set()
    for heading in headings_of(doc):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out
