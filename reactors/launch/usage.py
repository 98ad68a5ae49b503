"""A generated program's ``--help`` text: its options, then the parameters it takes, the main
reactor's (``--NAME VALUE``) and those of the reactors inside it (``--PATH.NAME VALUE``), each
with its value, its ``.lf`` line and its description (the ``.lf`` doc comment beside or above
it, :mod:`codegen.doc_comments`). Used by :mod:`reactors.launch.main` and
:mod:`reactors.launch.options`."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from typing import NamedTuple

from ..model.program import ContainedParameter, MainParameter, Program

#: Columns a line of ``--help`` keeps within; descriptions wrap to it.
WIDTH = 100
#: A description starts on the line below its parameter when it would start further right.
_DESCRIPTION_COLUMN = 60

USAGE = """\
usage: {prog} [options]
  -f, --fast [true|false]                 do not wait for physical time
  -o, --timeout <duration> <units>        stop after this much logical time
  -k, --keepalive [true|false]            keep running when the event queue is empty
  -w, --workers <n>                       number of workers (0: one per core)
  --backend processes|threads             how workers run when there are several
  --oversubscribe                         a process per worker even with more workers than
                                          cores (default: at most one worker per core)
  --cluster ray[=<address>]               run the workers as actors of a running Ray cluster
                                          (address: host:port; default: the local one)
  --digest <file>                         write a digest of every port value at every tag
  --checkpoint-every <n> <units>          snapshot the program every so much logical time
  --checkpoint-every-tags <n>             snapshot the program every n tags
  --checkpoint-dir <dir>                  where snapshots go (default: the program's own,
                                          e.g. an RL run's directory; else checkpoints)
  --checkpoint-keep <k>                   keep the last k snapshots (default: 3)
  --resume <snapshot or dir>              continue a run from a snapshot (a dir: the newest
                                          of the run there, also in its checkpoints/, e.g.
                                          an RL run's directory; not a run that finished or
                                          that another process is writing);
                                          only one your key authenticates (see --trust)
  --record <file>                         record the inputs from outside logical time
  --record-every-tag                      check every tag's port values in the recording
                                          (default: as many tags as 5% of the run's time allows)
  --replay <file>                         re-run with a recording's inputs, check its digests;
                                          only one your key authenticates (see --trust)
  --trust                                 resume or replay a file your key does not
                                          authenticate (another user's, an older version's):
                                          it is unpickled, so it can run any code
  -m, --start-time-multiple <n> <units>   round the start time up to a multiple
  --verbose                               explain choices (e.g. the worker count of -w 0)
  -h, --help                              print this message
  --<parameter> <value>                   set a main-reactor parameter (listed below)
  --<instance>.<parameter> <value>        set a parameter of a reactor inside the main one
                                          (listed below; a bank's: every member's)
Units: nsec usec msec sec minute hour day week (and their LF spellings).
Snapshots and recordings carry an HMAC-SHA256 under your key, the file $LF_RL_KEY, else
$XDG_CONFIG_HOME/lf-rl/key or ~/.config/lf-rl/key (made on first use; keep it private)."""

#: How the values of parameters are written, before their list in ``--help``.
VALUES = """\
A VALUE is an LF expression of the kind of the parameter's default: 3 (an integer; not 1.5,
not 2.0), 1e-3 (a number; 3 is one too), true, 10 msec (a time; 0 is one too), [64, 64] (a list;
items of the kind the default's share), any text for a string (--env_id Acrobot-v1).
{= code =} is Python code that the program runs when it starts, in every worker: a command
line with one runs what it says, as the .lf file would; what it returns is not checked."""

Parameter = MainParameter | ContainedParameter


def usage(program: Program) -> str:
    """The ``--help`` text of ``program``: the options, then the main reactor's parameters,
    then those of the reactors inside it (grouped by instance; a bank once), each with its
    value, ``.lf`` line and description."""
    name = program.name or "program"
    text = USAGE.format(prog=name)
    sections = [_main_section(name, program.main_parameters)]
    sections.append(_contained_section(name, program.contained_parameters))
    listed = [s for s in sections if s]
    if not listed:
        return text
    return "\n".join([text, "", VALUES, *(line for s in listed for line in ["", *s])])


def _main_section(name: str, params: Sequence[MainParameter]) -> list[str]:
    if not params:
        return []
    title = (
        f"Parameters of the main reactor {name} (--NAME VALUE when it starts, "
        "lfc -D NAME=VALUE when compiled):"
    )
    return [title, *_entries(params, _Columns.of(params))]


def _contained_section(name: str, params: Sequence[ContainedParameter]) -> list[str]:
    if not params:
        return []
    title = [
        f"Parameters of the reactors inside {name}, by instance (--INSTANCE.NAME VALUE when it",
        "starts, lfc -D INSTANCE.NAME=VALUE when compiled; those of a bank: all its members):",
    ]
    columns = _Columns.of(params)
    lines = title
    groups: dict[str, list[ContainedParameter]] = {}
    for p in params:
        groups.setdefault(p.path, []).append(p)
    for path, group in groups.items():
        first = group[0]
        bank = f"a bank of {first.members} {first.class_name}"
        lines.append(f" {path}: {bank if first.members > 1 else first.class_name}")
        lines.extend(_entries(group, columns))
    return lines


class _Columns(NamedTuple):
    """The widths of a list's heads (at most :data:`_HEAD_WIDTH`) and ``.lf`` lines."""

    head: int
    where: int

    @classmethod
    def of(cls, params: Sequence[Parameter]) -> _Columns:
        heads = max(len(_head(p)) for p in params)
        return cls(min(heads, _HEAD_WIDTH), max(len(where(p)) + 2 for p in params))


#: Heads longer than this push their ``.lf`` line and description to the right.
_HEAD_WIDTH = 34


def _entries(params: Sequence[Parameter], columns: _Columns) -> list[str]:
    """One entry per parameter: head, ``.lf`` line, description (wrapped to :data:`WIDTH`)."""
    lines: list[str] = []
    for p in params:
        text = "; ".join(
            x for x in (p.doc, f"compile time only: {p.fixed}" if p.fixed else "") if x
        )
        head, place = f"  {_head(p):<{columns.head}}  ", f"({where(p)})"
        lines.extend(_described(head + place, f"{head}{place:<{columns.where}}  ", text))
    return lines


def _described(bare: str, lead: str, text: str) -> list[str]:
    """``bare`` (a parameter's head and line) followed by its description ``text``, on the
    same line from the column where ``lead`` ends when there is room, else below it."""
    if not text:
        return [bare]
    if len(lead) <= _DESCRIPTION_COLUMN:
        wrapped = textwrap.wrap(text, WIDTH - len(lead))
        return [lead + wrapped[0], *(" " * len(lead) + w for w in wrapped[1:])]
    indent = " " * 8
    return [bare, *textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent)]


def where(p: Parameter) -> str:
    """``file.lf:LINE`` of the declaration of ``p``."""
    return f"{os.path.basename(p.file)}:{p.line}"


#: A value longer than this is shown as ``{= ... =}`` (target code) in a parameter's head.
_LONGEST_CODE = 40


def _head(p: Parameter) -> str:
    """``name: type = value`` (``name = value`` without a declared type; ``path.name`` for a
    contained instance's), on one line."""
    name = p.option if isinstance(p, ContainedParameter) else p.name
    typed = f"{name}: {p.type}" if p.type else name
    value = p.default
    if value.startswith("{=") and len(value) > _LONGEST_CODE:
        value = "{= ... =}"
    return " ".join(f"{typed} = {value}".split())
