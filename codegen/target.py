"""Target declaration and properties of the Python target (spec §1.3)."""

from __future__ import annotations

from dataclasses import dataclass

from reactors.core.log import LEVELS
from reactors.model.target import DEFAULTS

from . import tree
from .diagnostics import Reporter
from .units import is_time_unit, to_ns

#: Properties we implement; value kind for validation.
SUPPORTED = {
    "timeout": "time",
    "fast": "bool",
    "keepalive": "bool",
    "logging": "level",
    "workers": "int",
    "single-threaded": "bool",
    "files": "files",
    "tracing": "tracing",
    "seed": "int",
    "protobufs": "files",
}
#: Properties LF accepts for Python that have no effect on this implementation (warning).
IGNORED = {
    "scheduler",
    "python-version",
    "trace-plugin",
    "build",
    "build-type",
    "cmake-args",
    "cmake-include",
    "compile-definitions",
    "no-compile",
    "no-source-mapping",
    "docker",
    "coordination",
    "coordination-options",
    "clock-sync",
    "clock-sync-options",
    "auth",
    "comm-type",
    "sst",
    "DNET",
    "_fed_setup",
}


@dataclass(frozen=True)
class TargetConfig:
    """Resolved target properties. Times are in nanoseconds; unset ones keep the runtime's
    defaults (:data:`reactors.model.target.DEFAULTS`); ``keepalive_set`` says whether the program
    gave ``keepalive`` itself. Derive a changed one with ``dataclasses.replace``.
    """

    timeout: int | None = DEFAULTS.timeout
    fast: bool = DEFAULTS.fast
    keepalive: bool = DEFAULTS.keepalive
    keepalive_set: bool = False
    logging: str = DEFAULTS.logging
    workers: int = DEFAULTS.workers
    single_threaded: bool = DEFAULTS.single_threaded
    tracing: bool = DEFAULTS.tracing
    files: tuple[str, ...] = DEFAULTS.files
    seed: int = DEFAULTS.seed
    # .proto files (relative to the main .lf file) compiled at build time (codegen.protobufs)
    protobufs: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """The ``"target"`` object of graph.json (docs/PROGRAM.md); ``protobufs`` is used at
        build time only and is not in it."""
        return {
            "timeout": self.timeout,
            "fast": self.fast,
            "keepalive": self.keepalive,
            "logging": self.logging,
            "workers": self.workers,
            "single_threaded": self.single_threaded,
            "tracing": self.tracing,
            "files": list(self.files),
            "seed": self.seed,
        }


def read_target(target: tree.Target | None, rep: Reporter) -> TargetConfig:
    """Validate a target declaration and return its configuration.

    Errors (reported, not raised): a target other than Python, a badly typed value.
    Warnings: an unknown property, a property without effect here.
    """
    if target is None:
        return TargetConfig()
    if target.name.lower() != "python":
        rep.error(f"this compiler supports only 'target Python', not '{target.name}'", target.pos)
        return TargetConfig()
    values: dict = {}
    for kv in target.properties:
        _read_property(values, kv, rep)
    return TargetConfig(**values)


def _read_property(values: dict, kv: tree.KeyValue, rep: Reporter) -> None:
    """Add the field(s) ``kv`` sets to ``values`` (a later property overrides an earlier)."""
    kind = SUPPORTED.get(kv.key)
    if kind is None:
        if kv.key in IGNORED:
            rep.warning(f"target property '{kv.key}' has no effect in this implementation", kv.pos)
        else:
            rep.warning(f"unknown target property '{kv.key}'", kv.pos)
        return
    value = _convert(kind, kv, rep)
    if value is None:
        return
    values[kv.key.replace("-", "_")] = value
    if kv.key == "keepalive":
        values["keepalive_set"] = True


def _convert(kind: str, kv: tree.KeyValue, rep: Reporter):
    v = kv.value
    if kind == "time":
        if isinstance(v, tree.Literal) and v.text == "0":
            return 0
        if isinstance(v, tree.Time) and is_time_unit(v.unit):
            if v.unit is None and v.magnitude != 0:
                rep.error("missing time unit", v.pos)
                return None
            return to_ns(v.magnitude, v.unit)
        rep.error(f"target property '{kv.key}' requires a time value, e.g. 1 sec", kv.pos)
        return None
    text = _text(v)
    if kind == "bool":
        if text in ("true", "True", "false", "False"):
            return text.lower() == "true"
        rep.error(f"target property '{kv.key}' requires true or false", kv.pos)
        return None
    if kind == "int":
        if text is not None and text.lstrip("-").isdigit() and int(text) >= 0:
            return int(text)
        rep.error(f"target property '{kv.key}' requires a non-negative integer", kv.pos)
        return None
    if kind == "level":
        if text is not None and text.strip('"').lower() in LEVELS:
            return text.strip('"').lower()
        rep.error(f"logging level must be one of {', '.join(LEVELS)}", kv.pos)
        return None
    if kind == "files":
        items = v.items if isinstance(v, tree.PropList) else (v,)
        return tuple(t.strip('"') for t in map(_text, items) if t is not None)
    if kind == "tracing":
        return text is None or text.lower() == "true"
    return None


def _text(v) -> str | None:
    if isinstance(v, (tree.Literal, tree.PropIdent)):
        return v.text
    if isinstance(v, tree.Time) and v.unit is None:
        return str(v.magnitude)
    return None
