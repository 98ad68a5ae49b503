"""Hyperparameter dataclasses built from plain values, with the mistakes a user makes named.

An RL program gives its hyperparameters as main-reactor parameters (``--learning_rate 3e-4``
on its command line); :func:`hyperparameters` picks those that a config class has, and
:func:`make_config` builds the class, refusing an unknown key (naming the valid ones) or a
value of the wrong kind.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

C = TypeVar("C")

#: Declared type -> the Python types a value of it may have (int is fine for a float).
_ACCEPTS: dict[Any, tuple[type, ...]] = {
    int: (int,),
    float: (int, float),
    bool: (bool,),
    str: (str,),
    tuple: (tuple, list),
}


def hyperparameters(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """The items of ``values`` (e.g. the main reactor's parameters) that are fields of the
    dataclass ``cls``; lists become tuples."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in names}


def make_config(cls: type[C], values: Mapping[str, Any], **more: Any) -> C:
    """``cls(**values, **more)`` for a dataclass of hyperparameters.

    Raises:
        ValueError: a key that is not a field (the message names the valid ones), or a value
            whose kind does not match the field's declared type (``bool`` for an ``int`` too).
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = {**values, **more}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise ValueError(
            f"unknown hyperparameter{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))} for {cls.__name__}; "
            f"valid: {', '.join(sorted(fields))}"
        )
    hints = typing.get_type_hints(cls)
    for name, value in given.items():
        _check_kind(cls.__name__, name, value, hints.get(name))
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items()}
    return cls(**given)


def _check_kind(owner: str, name: str, value: Any, declared: Any) -> None:
    accepts = _ACCEPTS.get(declared)
    if accepts is None:
        return
    wrong_bool = isinstance(value, bool) and declared is not bool
    if wrong_bool or not isinstance(value, accepts):
        raise ValueError(
            f"hyperparameter {name} of {owner} must be a {declared.__name__}, "
            f"not {value!r} ({type(value).__name__})"
        )
