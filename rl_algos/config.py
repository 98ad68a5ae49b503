"""Hyperparameter dataclasses built from plain values, with the mistakes a user makes named.

An RL program gives its hyperparameters as main-reactor parameters (``--learning_rate 3e-4``
on its command line); :func:`hyperparameters` picks those that a config class has, refusing
a name that is a misspelling of one of its fields, and :func:`make_config` builds the class,
refusing an unknown key (naming the valid ones). Both refuse a value of the wrong kind.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

C = TypeVar("C")

#: How alike (difflib's ratio, 0 to 1) a name and a field must be for the name to be taken
#: for the field misspelled: 'learning_rat' and 'learning_rate' are 0.96, 'gama' and 'gamma'
#: 0.89; the closest other names of the programs in lf_src/ are 0.8 ('act_threads' and
#: 'update_threads') and 0.78 ('max_steps' and 'num_steps').
MISSPELLED = 0.85


class ConfigError(ValueError):
    """A hyperparameter refused: the message says which, why, and what to write instead.

    ``show_traceback`` is False: a program that raises it while starting (the runtime's
    :func:`reactors.core.errors.report`) prints the message on one line with the ``.lf`` line
    that asked for the config, not a traceback; the mistake is in the values, not the code.
    """

    show_traceback = False


#: Declared type -> the Python types a value of it may have (int is fine for a float).
_ACCEPTS: dict[Any, tuple[type, ...]] = {
    int: (int,),
    float: (int, float),
    bool: (bool,),
    str: (str,),
    tuple: (tuple, list),
}


def hyperparameters(
    cls: type, values: Mapping[str, Any], *, others: Iterable[str] = ()
) -> dict[str, Any]:
    """The items of ``values`` (e.g. the main reactor's parameters) that are fields of the
    dataclass ``cls``, each checked as :func:`make_config` checks it; lists become tuples.

    ``others``: names of ``values`` that are meant as parameters of another kind, even though
    one is as alike a field as a misspelling is.

    Raises:
        ConfigError: a name of ``values`` that is not a field is a misspelling of one (at
            least :data:`MISSPELLED` alike, difflib's ratio; the message names the field), or
            a field's value is not of its declared kind.
    """
    fields = [f.name for f in dataclasses.fields(cls)]
    skip = set(fields) | set(others)
    for name in values:
        near = [] if name in skip else difflib.get_close_matches(name, fields, 1, MISSPELLED)
        if near:
            raise ConfigError(
                f"'{name}' is not a field of {cls.__name__}; did you mean '{near[0]}'? "
                f"(a parameter that is not a hyperparameter: hyperparameters({cls.__name__}, "
                f"..., others=['{name}']))"
            )
    hints = typing.get_type_hints(cls)
    picked = {k: v for k, v in values.items() if k in fields}
    for name, value in picked.items():
        _check_kind(cls.__name__, name, value, hints.get(name))
    return {k: tuple(v) if isinstance(v, list) else v for k, v in picked.items()}


def make_config(cls: type[C], values: Mapping[str, Any], **more: Any) -> C:
    """``cls(**values, **more)`` for a dataclass of hyperparameters.

    Raises:
        ConfigError: a key that is not a field (the message names the valid ones), or a value
            whose kind does not match the field's declared type (``bool`` for an ``int`` too).
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = {**values, **more}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise ConfigError(
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
        raise ConfigError(
            f"hyperparameter {name} of {owner} must be a {declared.__name__}, "
            f"not {value!r} ({type(value).__name__})"
        )


#: A device name :func:`rl_algos.device.choose_device` takes.
_DEVICE = re.compile(r"auto|cpu|cuda(?::\d+)?")


def chosen(hparams: Mapping[str, Any], **given: Any) -> dict[str, Any]:
    """``hparams`` with the values a learner reactor's own parameters choose on top
    (``hidden``, ``device``, ``network``, ``network_kwargs``: set on its command line as
    ``--learner.hidden '[128, 128]'``); "", an empty list or an empty dict chooses nothing,
    leaving the value to ``hparams``, then to the config class's default.

    Raises:
        ConfigError: a ``hidden`` that is not a list of positive integers, or a ``device``
            other than "auto", "cpu", "cuda" or "cuda:N".
    """
    out = dict(hparams)
    for name, value in given.items():
        if value == "" or (isinstance(value, (list, tuple, dict)) and not value):
            continue
        _check_choice(name, value)
        out[name] = value
    return out


def _check_choice(name: str, value: Any) -> None:
    if name == "hidden" and not (
        isinstance(value, (list, tuple))
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise ConfigError(f"hidden {value!r}: expected a list of positive integers (MLP widths)")
    if name == "network_kwargs" and not isinstance(value, dict):
        raise ConfigError(f"network_kwargs {value!r}: expected a dict of the factory's arguments")
    if name == "device" and not (isinstance(value, str) and _DEVICE.fullmatch(value)):
        raise ConfigError(f"device {value!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
