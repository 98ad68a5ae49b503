"""Parameters of the reactors inside the main one, given on a program's command line.

``--learner.device cpu`` sets the parameter ``device`` of the instance ``learner`` of the main
reactor when the program starts; ``--envs.num_envs 8`` that of every member of the bank
``envs``; ``--a.b.n 3`` that of ``b`` inside ``a``. Such an argument is an
:class:`~reactors.model.arguments.Argument` whose name is the option ``PATH.NAME`` (a main
parameter's name has no dot). Its value replaces the instantiation's argument: the command
line comes before the ``.lf`` instantiation, which comes before the reactor's default. The
launcher checks it against :class:`~reactors.model.program.ContainedParameter`; the build
(:mod:`reactors.model.build`) gives each instance its values (:class:`Forwarded`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .arguments import Argument, values

_INDEX = re.compile(r"\[\d+\]")


def instance_path(name: str) -> str:
    """The path of the instance whose full name is ``name`` as the command line writes it:
    ``Main.envs[2].inner`` -> ``envs.inner`` (bank indexes dropped); "" for the main reactor
    (a name without a dot)."""
    return _INDEX.sub("", name.partition(".")[2])


def is_contained(argument: Argument) -> bool:
    """Whether ``argument`` sets a parameter of a contained instance (``PATH.NAME``)."""
    return "." in argument.name


class Forwarded:
    """The contained-instance arguments of a run, by instance path."""

    def __init__(self, arguments: Iterable[Argument]):
        self.by_path: dict[str, list[Argument]] = {}
        for a in arguments:
            if is_contained(a):
                path, _, name = a.name.rpartition(".")
                self.by_path.setdefault(path, []).append(Argument(name, a.text))

    def values(self, name: str, namespace: Mapping[str, Any]) -> dict[str, Any]:
        """Parameter name -> value given for the instance whose full name is ``name``; each
        call makes new values (a bank's members share no list), target code evaluated with
        ``namespace`` (:func:`reactors.model.arguments.values`)."""
        given = self.by_path.get(instance_path(name))
        return values(given, namespace) if given else {}
