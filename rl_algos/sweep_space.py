"""The search space of ``lf-rl sweep``: a ``--param NAME=SPEC`` per dimension, checked against
the parameters of the built program it runs.

SPEC is ``int:LOW:HIGH`` (integers, both ends included), ``float:LOW:HIGH`` (uniform),
``log:LOW:HIGH`` (log-uniform, 0 < LOW) or ``choice:A,B,C`` (the values as the program's
command line takes them; split at ``;`` instead when there is one, for values holding commas:
``choice:[64, 64];[128, 128]``). A program's parameters are those its ``graph.json`` lists for the
main reactor (``src-gen/<Program>/graph.json`` beside ``bin/``); ``instance.param`` names a
parameter of a contained reactor (``--learner.hidden``), checked for the instance only.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KINDS = ("int", "float", "log", "choice")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True)
class Dimension:
    """One searched parameter ``name``: ``kind`` (one of :data:`KINDS`), its range
    ``low``..``high`` (int, float, log) or its ``choices`` (choice)."""

    name: str
    kind: str
    low: float = 0.0
    high: float = 0.0
    choices: tuple[str, ...] = ()

    def distribution(self) -> Any:
        """The Optuna distribution of this dimension."""
        from optuna import distributions as d

        if self.kind == "int":
            return d.IntDistribution(int(self.low), int(self.high))
        if self.kind == "choice":
            return d.CategoricalDistribution(self.choices)
        return d.FloatDistribution(self.low, self.high, log=self.kind == "log")


def parse_param(text: str) -> Dimension:
    """The dimension of a ``--param NAME=SPEC`` argument.

    Raises:
        ValueError: one line naming what is wrong with ``text`` and the SPECs there are.
    """
    name, eq, spec = text.partition("=")
    kind, _, rest = spec.partition(":")
    usage = "int:LOW:HIGH, float:LOW:HIGH, log:LOW:HIGH or choice:A,B,C"
    if not eq or not re.fullmatch(r"[A-Za-z_][\w.]*", name) or kind not in KINDS or not rest:
        raise ValueError(f"--param {text!r}: give NAME=SPEC, SPEC one of {usage}")
    if kind == "choice":
        choices = tuple(c.strip() for c in rest.split(";" if ";" in rest else ","))
        if not all(choices):
            raise ValueError(f"--param {text!r}: an empty choice")
        return Dimension(name, kind, choices=choices)
    low, high = _bounds(text, kind, rest)
    return Dimension(name, kind, low, high)


def _bounds(text: str, kind: str, rest: str) -> tuple[float, float]:
    parts = rest.split(":")
    number = _INT if kind == "int" else _FLOAT
    if len(parts) != 2 or not all(number.fullmatch(p.strip()) for p in parts):
        what = "integers" if kind == "int" else "numbers"
        raise ValueError(f"--param {text!r}: {kind}:LOW:HIGH takes two {what}")
    low, high = (float(p) for p in parts)
    if not low < high:
        raise ValueError(f"--param {text!r}: LOW must be less than HIGH")
    if kind == "log" and low <= 0:
        raise ValueError(f"--param {text!r}: log:LOW:HIGH needs 0 < LOW")
    return low, high


def command_value(value: Any) -> str:
    """A sampled value as the program's command line takes it: ``32``, ``0.000312``,
    ``1e-05``, or a choice's own text."""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    return str(value)


def graph_json(launcher: str) -> str:
    """The ``graph.json`` of the program of ``launcher`` (``bin/Foo``): ``../src-gen/Foo/``
    beside ``bin/``, else beside the module the launcher's ``exec`` line runs.

    Raises:
        FileNotFoundError: neither is there.
    """
    name = os.path.basename(launcher)
    beside = os.path.join(os.path.dirname(os.path.abspath(launcher)), "..", "src-gen", name)
    candidates = [os.path.join(beside, "graph.json")]
    try:
        with open(launcher, encoding="utf-8", errors="replace") as f:
            module = re.findall(r"(\S+\.py)\b", f.read(4096))
        candidates += [os.path.join(os.path.dirname(m), "graph.json") for m in module]
    except OSError:
        pass
    for c in candidates:
        if os.path.isfile(c):
            return os.path.normpath(c)
    raise FileNotFoundError(f"no graph.json for {launcher}: is it a program built by lfc?")


@dataclass(frozen=True)
class ProgramParameters:
    """What ``graph.json`` says of a program's parameters: the main reactor's ``name``, the
    ``defaults`` (text of the default of each parameter settable when it starts), the
    ``fixed`` ones (set when compiled only, e.g. a bank width) and the contained
    ``instances`` (names below the main reactor, ``learner``, ``envs``)."""

    name: str
    defaults: Mapping[str, str]
    fixed: frozenset[str]
    instances: frozenset[str]


def program_parameters(launcher: str) -> ProgramParameters:
    """The parameters of the program ``launcher`` runs (see :func:`graph_json`).

    Raises:
        FileNotFoundError: no graph.json; ValueError: it is not JSON.
    """
    with open(graph_json(launcher), encoding="utf-8") as f:
        graph = json.load(f)
    name = str(graph.get("name", os.path.basename(launcher)))
    params = graph.get("main_parameters") or []
    prefix = f"{name}."
    instances = {
        str(r["name"])[len(prefix) :].split(".")[0].split("[")[0]
        for r in graph.get("reactors", [])
        if str(r.get("name", "")).startswith(prefix)
    }
    return ProgramParameters(
        name=name,
        defaults={p["name"]: str(p.get("default", "")) for p in params if not p.get("fixed")},
        fixed=frozenset(p["name"] for p in params if p.get("fixed")),
        instances=frozenset(instances),
    )


def check_space(dims: Sequence[Dimension], program: ProgramParameters) -> None:
    """Refuse a dimension the program cannot take.

    Raises:
        ValueError: one line: a parameter it does not have (listing those it has), one set
            when compiled only, a name given twice, or a SPEC of the wrong kind for the
            parameter's default (an integer's, a boolean's, a text's).
    """
    seen: set[str] = set()
    for dim in dims:
        if dim.name in seen:
            raise ValueError(f"--param {dim.name} is given twice")
        seen.add(dim.name)
        _check_one(dim, program)


def _check_one(dim: Dimension, program: ProgramParameters) -> None:
    if "." in dim.name:
        instance = dim.name.split(".")[0]
        if instance not in program.instances:
            have = ", ".join(sorted(program.instances)) or "none"
            raise ValueError(f"{program.name} has no reactor instance {instance!r} (it has {have})")
        return
    if dim.name in program.fixed:
        raise ValueError(f"{dim.name} of {program.name} is set when compiled only (lfc -D)")
    if dim.name not in program.defaults:
        have = ", ".join(program.defaults)
        raise ValueError(f"{program.name} has no parameter {dim.name!r}; it has: {have}")
    kind = default_kind(program.defaults[dim.name])
    allowed = {"int": ("int", "choice"), "number": ("int", "float", "log", "choice")}
    if dim.kind not in allowed.get(kind, ("choice",)):
        default = program.defaults[dim.name]
        hint = "int:LOW:HIGH or choice:..." if kind == "int" else "choice:A,B"
        raise ValueError(
            f"{dim.name} of {program.name} takes {_KIND_NAMES[kind]} (default {default}): "
            f"give {hint}, not {dim.kind}:"
        )


_KIND_NAMES = {
    "int": "an integer",
    "number": "a number",
    "bool": "true or false",
    "other": "a value",
}


def default_kind(default: str) -> str:
    """The kind of value a parameter takes, from the text of its default: ``int``,
    ``number``, ``bool`` or ``other`` (texts, lists, times, code)."""
    if _INT.fullmatch(default):
        return "int"
    if _FLOAT.fullmatch(default):
        return "number"
    if default in ("true", "false", "True", "False"):
        return "bool"
    return "other"
