"""Values that arrived from another worker and are decoded when first read (:class:`Pending`).

A parallel run's transport may leave a :class:`Pending` in a :class:`reactors.core.port.Port`'s
``_v`` instead of the value itself: a small array or tuple of scalars still in its writer's row
of shared memory (:class:`reactors.parallel.codec.Arrived`). Reading the port decodes it; a
multiport's ``gather`` takes every such row in one copy and decodes none
(:func:`reactors.core.batched.gather_pending`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Pending:
    """A channel's value that arrived from another worker and is decoded when first read.

    :attr:`reactors.core.port.Port.value` decodes it on the first read and keeps the value in
    its place; a multiport's ``gather`` takes all such rows in one copy (:meth:`rows`).
    Everything in the runtime reads a port's value through ``Port.value``, :func:`current` or
    :func:`loaded`, never through ``_v`` alone, so that nothing else ever meets one.
    """

    __slots__ = ()

    def load(self, read: bool) -> Any:
        """The value (a new object). Called by ``Port.value`` and :func:`current` alone,
        which keep it in the port's ``_v``. ``read``: the program reads the channel's value by
        itself (``Port.value``), not through a gather; a transport may then decode the
        channel's later values on arrival."""
        raise NotImplementedError

    def rows(self, values: list[Any]) -> tuple[Any, Any, Any] | None:
        """The rows that a gather takes from the :class:`Pending` values among ``values``
        (the channels' ``_v`` in channel order, all present, this one among them), without
        decoding any: ``(rows, there, here)``, the rows ``(k, ...)`` as
        :func:`reactors.core.batched.gather` stacks them, their channel numbers and the other
        channels' numbers (int arrays); or None where the values must be decoded one by one
        first."""
        return None


def current(port: Any) -> Any:
    """The value of ``port`` (a :class:`reactors.core.port.Port`), decoded and kept if it is
    :class:`Pending`, as ``Port.value`` gives it, but not counted as the program's read: what
    the runtime's records (digests, checksums, snapshots) read."""
    v = port._v
    if isinstance(v, Pending):
        v = port._v = v.load(False)
    return v


def loaded(channels: Sequence[Any], values: list[Any]) -> list[Any]:
    """``values`` (the ``channels``' ``_v``) with every :class:`Pending` one decoded through its
    channel's ``value`` (a :class:`reactors.core.port.Port`, which keeps it)."""
    for i, v in enumerate(values):
        if isinstance(v, Pending):
            values[i] = channels[i].value
    return values
