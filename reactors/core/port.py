"""Port capsules (spec §2.3, §3.4): single channels, multiports and mutable-input copies.

A :class:`Port` is one channel. Zero-delay connections are by reference, so every channel
reached from a root channel *is* the root's :class:`Port` object (the build step hands the same
object to the writer and to every reader): no copying per tag. A port holds its value (which
persists across tags), its presence at the current tag, and the ranks of the reactions its
presence triggers. A transport's channel reader (:mod:`reactors.parallel.transport`) fills ``_v``
directly and then calls :meth:`Port.trigger`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, NoReturn

from . import batched
from .event_queue import heappush
from .pending import Pending, current, loaded

PLAIN_WIDTH: Final = -2  # ``width`` of a port that is not a multiport (spec §2.3)


def _unwired(_obj: object) -> None:
    """Placeholder presence recorder for ports not yet attached to a scheduler."""


class Port:
    """One channel of a port: ``value`` (persistent), ``is_present`` (this tag), ``set(v)``.

    ``value`` and ``is_present`` are read-only attributes. ``set`` stores the object itself
    (no copy), marks the port present and triggers the reactions listening to it. ``width``
    is -2. ``len()`` of a plain port raises TypeError, as in LF.
    """

    __slots__ = ("_v", "_p", "_triggers", "_rq", "_mark", "_name", "_fan")

    _v: Any
    _p: bool
    _triggers: tuple[int, ...]
    _rq: list[int]
    _mark: Callable[[Any], None]
    _name: str
    _fan: FanIn | None

    def __init__(self, name: str = "?"):
        self._v = None
        self._p = False
        self._triggers = ()
        self._rq = []
        self._mark = _unwired
        self._name = name
        self._fan = None

    @property
    def value(self) -> Any:
        """The latest value set (None if never set)."""
        v = self._v
        if isinstance(v, Pending):
            v = self._v = v.load(True)
        return v

    @property
    def is_present(self) -> bool:
        """True iff set at the current tag."""
        return self._p

    @property
    def width(self) -> int:
        """:data:`PLAIN_WIDTH`: a plain port."""
        return PLAIN_WIDTH

    def set(self, value: Any) -> None:
        """Set the value and mark the port present at the current tag (spec §2.3).

        Setting again in the same tag overwrites the value; readers share the object.
        """
        self._v = value
        if not self._p:
            self.trigger()

    def trigger(self) -> None:
        """Mark present and trigger readers, keeping ``_v`` (for a transport that filled it).
        A channel of a :class:`FanIn` (``_fan``) queues its reactions only if no channel of
        the group did at the current tag."""
        if not self._p:
            self._p = True
            self._mark(self)
            fan = self._fan
            if fan is not None:
                first = fan.first
                if first is not None and first is not self and first._p:
                    return
                fan.first = self
            rq = self._rq
            for rank in self._triggers:
                heappush(rq, rank)

    def __repr__(self) -> str:
        return f"<port {self._name} value={current(self)!r} present={self._p}>"


class FanIn:
    """The channels that trigger exactly the same reactions (a hub's multiport gathering a
    bank's outputs: all of ``obs[i]`` and ``result[i]``), each with this object as its
    ``_fan``: ``first`` is the one that became present first at the latest tag where one did.
    Only that one queues the reactions (the rank loop would skip the repeats, but pushing and
    popping them costs ~0.1 us each: ~3 us per round for a hub of 15 environments with two
    outputs each). Exact because a reaction is triggered only before it runs at a tag
    (whoever sets its trigger runs at a lower rank, and values from other workers arrive
    before it), and presence is cleared at every tag."""

    __slots__ = ("first",)

    def __init__(self) -> None:
        self.first: Port | None = None


#: The classes of port channels (what is present at a tag besides actions; what digests hash).
CHANNELS = frozenset({Port})


def group_fan_ins(ports: Iterable[Port]) -> None:
    """Make the :class:`Port` s among ``ports`` that trigger the same reactions (a non-empty
    ``_triggers``, already set) and are in no group yet the channels of one :class:`FanIn`."""
    same: dict[tuple[int, ...], list[Port]] = {}
    for port in ports:
        if port._fan is None and port._triggers:
            same.setdefault(port._triggers, []).append(port)
    for group in same.values():
        if len(group) > 1:
            fan = FanIn()
            for port in group:
                port._fan = fan


class Multiport:
    """A multiport capsule (spec §2.3): ``len(p)``, ``p[i]``, iteration, ``width``.

    Its own ``value`` is None and ``is_present`` False; channels are :class:`Port` objects.
    ``p[i] = v`` raises TypeError (use ``p[i].set(v)``).
    """

    __slots__ = ("_channels", "width", "_name")
    value = None
    is_present = False

    def __init__(self, channels: Iterable[Any], name: str = "?"):
        self._channels = tuple(channels)
        self.width = len(self._channels)
        self._name = name

    def __len__(self) -> int:
        return self.width

    def __getitem__(self, i: int) -> Any:
        return self._channels[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._channels)

    def __setitem__(self, i: int, v: Any) -> NoReturn:
        raise TypeError("multiport channels cannot be assigned; use the .set method: p[i].set(v)")

    def gather(self, fill: Any = None) -> Any:
        """The channels' values at the current tag as one new numpy array ``(width, ...)``
        (our extension of LF, :mod:`reactors.core.batched`): row ``i`` is
        ``np.asarray(p[i].value)``; every row has row 0's shape and dtype. The array is the
        caller's: the runtime never writes into it later. ``fill`` (when not None) is the row of
        an absent channel, cast to the rows' dtype; :meth:`present_mask` tells those rows.

        Raises ValueError naming this port and the first absent channel (no ``fill``), or the
        two channels whose shapes or dtypes differ, or a channel whose value is no array of
        numbers, booleans or strings.
        """
        values, present = self._values_and_presence()
        rows = batched.gather_pending(self._name, values, present, fill)
        if rows is not None:
            return rows
        return batched.gather(self._name, loaded(self._channels, values), present, fill)

    def present_mask(self) -> Any:
        """The channels' presence at the current tag: a new numpy bool array ``(width,)``."""
        return batched.present_mask(self._values_and_presence()[1])

    def scatter(self, values: Any) -> None:
        """Set channel ``i`` to ``values[i]`` for every ``i`` (our extension of LF,
        :mod:`reactors.core.batched`): ``values`` is an array whose leading dimension is
        ``width`` (channel ``i`` gets its row ``i``, a view for two or more dimensions) or a
        sequence of ``width`` items. Like :meth:`Port.set`, nothing is copied: the writer must
        not modify ``values`` afterwards (readers on other workers get a copy, readers on its
        own worker the row itself).

        Raises ValueError naming this port and both lengths when ``len(values)`` is not
        ``width`` or ``values`` has no length.
        """
        batched.scatter(self._name, self._channels, values)

    def _values_and_presence(self) -> tuple[list[Any], list[bool]]:
        """The channels' values (some :class:`Pending`) and presences, in channel order."""
        chans = self._channels
        return [c._v for c in chans], [c._p for c in chans]

    def __repr__(self) -> str:
        return f"<multiport {self._name}[{self.width}]>"


class MutableInput:
    """The view of a ``mutable input`` channel a reaction gets (spec §1.8, §2.2).

    ``value`` is a deep copy (``copy.deepcopy``) of the channel's value, made on first read and
    private to this invocation; it may be modified or reassigned. ``is_present`` is the
    channel's presence. ``set(v)`` replaces the private value (it does not send anything).
    """

    __slots__ = ("_src", "_copy", "_copied")

    def __init__(self, src: Port):
        self._src = src
        self._copied = False
        self._copy: Any = None

    @property
    def value(self) -> Any:
        """The private deep copy of the input's value."""
        if not self._copied:
            self._copy = copy.deepcopy(self._src.value)
            self._copied = True
        return self._copy

    @value.setter
    def value(self, v: Any) -> None:
        self._copy = v
        self._copied = True

    def set(self, v: Any) -> None:
        """Replace the private copy (the upstream port is not affected)."""
        self.value = v

    @property
    def is_present(self) -> bool:
        """True iff the input is present at the current tag."""
        return self._src._p

    @property
    def width(self) -> int:
        """:data:`PLAIN_WIDTH`: a plain port."""
        return PLAIN_WIDTH


class MutableMultiport(Multiport):
    """A multiport of :class:`MutableInput` channel views (``mutable input[N]``): ``gather``
    stacks the views' private values (a channel reassigned with ``set`` gives its new value)."""

    __slots__ = ()

    def _values_and_presence(self) -> tuple[list[Any], list[bool]]:
        """The views' private values (copied on first read) and presences, in channel order."""
        chans = self._channels
        return [c.value for c in chans], [c.is_present for c in chans]


def mutable_view(capsule: Port | Multiport) -> MutableInput | MutableMultiport:
    """A fresh per-invocation mutable view of a :class:`Port` or :class:`Multiport`."""
    if isinstance(capsule, Multiport):
        return MutableMultiport([MutableInput(c) for c in capsule._channels], capsule._name)
    return MutableInput(capsule)
