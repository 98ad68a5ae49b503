"""Batched multiports: one numpy array for all channels of a multiport (our extension of LF).

The RL pattern around a bank is gather (each of ``n`` members sends an observation, a reward, a
done flag into one hub's ``input[n]``) and scatter (the hub sends member ``i`` its action through
an ``output[n]``). :meth:`Multiport.gather <reactors.core.port.Multiport.gather>` takes the
channels' values at the current tag as one array of shape ``(width, ...)`` in one numpy call
after a type check per channel; :meth:`~reactors.core.port.Multiport.scatter` sets channel ``i``
to ``values[i]``. The rules (docs/lf-differences.md, "Batched multiports"):

- a row is what ``np.asarray`` makes of the channel's value; every row must have the shape and
  dtype of row 0 (no promotion: ``1`` beside ``1.5`` is an error, not ``[1.0, 1.5]``), and an
  object dtype (a dict, a ragged list) is an error;
- an absent channel is an error unless ``fill`` is given, which then becomes its row (cast to the
  rows' dtype); :func:`present_mask` says which rows were present;
- the result is a new array the caller owns: the runtime never writes into it afterwards, on any
  number of workers, so a reaction may keep it in a state variable;
- ``scatter`` stores ``values[i]`` itself in channel ``i`` (a row of an array is a view of it), as
  ``set`` stores its object: readers on the writer's worker share it, readers on other workers
  get a copy made at the end of the writer's reaction, so a writer must not modify ``values``
  after scattering it, exactly as it must not modify an object after ``set``.

Across workers, channels may hold :class:`reactors.core.pending.Pending` values (arrays and
tuples still in their writers' rows of shared memory): :func:`gather_pending` takes their rows
in one copy and stacks the others beside them, with the result of :func:`gather` bit for bit.

numpy is imported on the first call (a program that never gathers does not import it).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np

from .pending import Pending, loaded

_SCALARS: Final = (float, int, bool)
_SCALAR_SET: Final = frozenset(_SCALARS)
#: ``np.result_type`` of the items' types of tuples gathered so far (it costs ~1 µs a call)
_RESULT_TYPES: dict[tuple[type, ...], Any] = {}


def gather(name: str, values: Sequence[Any], present: Sequence[bool], fill: Any) -> np.ndarray:
    """The values of the channels of multiport ``name`` as one new array ``(len(values), ...)``.

    ``values[i]`` is channel ``i``'s value and ``present[i]`` its presence at the current tag.
    Row ``i`` is ``np.asarray(values[i])`` where present, else ``fill`` cast to the rows' dtype
    (with every channel absent, the rows are ``np.asarray(fill)``). No channel: an empty float64
    array of shape ``(0,)``.

    Raises ValueError naming the port and the first absent channel (``fill`` is None),
    the two channels whose shapes or dtypes differ, or a channel whose value has no numeric or
    string dtype (``object``).
    """
    import numpy as np

    if all(present):
        return _stack(name, values, range(len(values)))
    rows = [i for i, p in enumerate(present) if p]
    if fill is None:
        absent = next(i for i, p in enumerate(present) if not p)
        raise ValueError(
            f"{name}.gather(): channel {absent} is absent at this tag "
            "(pass fill= to give absent channels a row, and use present_mask() to tell them)"
        )
    if not rows:
        fill_row = np.asarray(fill)
        return np.broadcast_to(fill_row, (len(values), *fill_row.shape)).copy()
    stacked = _stack(name, [values[i] for i in rows], rows)
    out = np.empty((len(values), *stacked.shape[1:]), stacked.dtype)
    out[...] = fill
    out[rows] = stacked
    return out


def gather_pending(
    name: str, values: list[Any], present: Sequence[bool], fill: Any = None
) -> np.ndarray | None:
    """:func:`gather` of ``values`` (channels' ``_v``, some :class:`reactors.core.pending.Pending`;
    ``present`` and ``fill`` as for :func:`gather`) without decoding those: their rows in one
    copy (:meth:`~reactors.core.pending.Pending.rows`), the others stacked as :func:`gather`
    stacks them, absent channels' rows ``fill``. None when no present value is pending, when
    a channel is absent without ``fill`` or all are, or when the rows do not have one shape
    and dtype (the caller then decodes them and calls :func:`gather`, which says what is
    wrong)."""
    import numpy as np

    if all(present):
        return _pending_rows(name, values)
    if fill is None:
        return None
    rows = [i for i, p in enumerate(present) if p]
    stacked = _pending_rows(name, [values[i] for i in rows]) if rows else None
    if stacked is None:
        return None
    out = np.empty((len(values), *stacked.shape[1:]), stacked.dtype)
    out[...] = fill
    out[rows] = stacked
    return out


def _pending_rows(name: str, values: list[Any]) -> np.ndarray | None:
    """:func:`gather_pending` of channels that are all present."""
    import numpy as np

    for v in values:
        if isinstance(v, Pending):
            got = v.rows(values)
            break
    else:
        return None
    if got is None:
        return None
    rows, there, here = got
    if not len(here):
        return rows
    local = here.tolist()
    try:
        mine = _stack(name, [values[i] for i in local], local)
    except ValueError:
        return None
    if mine.dtype != rows.dtype or mine.shape[1:] != rows.shape[1:]:
        return None
    out = np.empty((len(values), *rows.shape[1:]), rows.dtype)
    out[there] = rows
    out[here] = mine
    return out


def present_mask(present: Sequence[bool]) -> np.ndarray:
    """The channels' presence at the current tag as a new bool array of shape ``(width,)``."""
    import numpy as np

    return np.array(present, dtype=np.bool_).reshape(len(present))


def _stack(name: str, values: Sequence[Any], channels: Sequence[int]) -> np.ndarray:
    """``values`` (of the channels numbered ``channels``) stacked into a new array, one numpy
    call when all are arrays of one shape and dtype, scalars of one type or tuples of scalars of
    the same types; else converted one by one and checked (:func:`_checked`)."""
    import numpy as np

    if not values:
        return np.empty((0,))
    first = values[0]
    kind = type(first)
    if kind is np.ndarray:
        shape, dtype = first.shape, first.dtype
        try:  # a list comprehension costs about half of all() over a generator
            same = all([v.shape == shape and v.dtype == dtype for v in values])
        except AttributeError:  # a value that is no array: _checked converts it
            same = False
        if same and not dtype.hasobject:
            return np.array(values, dtype=dtype)
    elif (kind in _SCALARS or isinstance(first, np.generic)) and all(
        type(v) is kind for v in values
    ):
        out = np.array(values)
        if not out.dtype.hasobject and out.ndim == 1:
            return out
    elif kind is tuple:
        dtype = _scalar_tuples_dtype(values)
        if dtype is not None:
            try:
                flat = np.fromiter(chain.from_iterable(values), dtype, len(values) * len(first))
                return flat.reshape(len(values), len(first))
            except OverflowError:  # an int beyond int64: _checked names it
                pass
    return _checked(name, [np.asarray(v) for v in values], channels)


def _scalar_tuples_dtype(values: Sequence[Any]) -> Any:
    """The dtype of ``np.asarray(v)`` for every ``v`` in ``values`` when all are tuples of one
    length whose items at each position are Python scalars of one type (``(reward, done)``
    step results), else None. Checked a position at a time, which costs less than a tuple."""
    import numpy as np

    if set(map(type, values)) != {tuple} or len(set(map(len, values))) != 1:
        return None
    kinds = []
    for column in zip(*values, strict=True):
        types = set(map(type, column))
        if len(types) != 1 or not types <= _SCALAR_SET:
            return None
        kinds.append(types.pop())
    if not kinds:
        return None
    key = tuple(kinds)
    dtype = _RESULT_TYPES.get(key)
    if dtype is None:
        dtype = _RESULT_TYPES[key] = np.result_type(*kinds)
    return dtype


def _checked(name: str, rows: list[np.ndarray], channels: Sequence[int]) -> np.ndarray:
    """``rows`` stacked after checking that each has row 0's shape and dtype (ValueError naming
    the port and the two channels otherwise) and that the dtype is not ``object``."""
    import numpy as np

    first = rows[0]
    for i, row in enumerate(rows):
        if row.dtype.hasobject:
            raise ValueError(
                f"{name}.gather(): channel {channels[i]}'s value is not an array of numbers, "
                "booleans or strings (it becomes a numpy array of dtype object)"
            )
        if row.shape != first.shape or row.dtype != first.dtype:
            raise ValueError(
                f"{name}.gather(): channel {channels[0]} holds {_kind(first)} but channel "
                f"{channels[i]} holds {_kind(row)}; every channel must have one shape and dtype"
            )
    return np.array(rows, dtype=first.dtype)


def _kind(row: np.ndarray) -> str:
    """``row``'s dtype and shape as the errors say them: ``float64 (4,)``."""
    return f"{row.dtype} {row.shape}"


def scatter(name: str, channels: Sequence[Any], values: Any) -> None:
    """Set channel ``i`` of multiport ``name`` (``channels[i]``, each with a ``set`` method) to
    ``values[i]``: the rows of an array whose leading dimension is ``len(channels)``, or the
    items of a sequence of that length. Channel ``i`` stores ``values[i]`` itself, as ``set``
    stores its object (a row of an array of two or more dimensions is a view of it; of a 1-D
    array a numpy scalar).

    Raises ValueError naming the port and both lengths when ``values`` has another length, or
    when it has none (a scalar, a 0-d array).
    """
    try:
        n = len(values)
    except TypeError:
        raise ValueError(
            f"{name}.scatter(): a value of type {type(values).__name__} has no rows; "
            f"expected {len(channels)} rows, one per channel"
        ) from None
    if n != len(channels):
        raise ValueError(
            f"{name}.scatter(): {n} rows for {len(channels)} channels; "
            "the leading dimension must be the multiport's width"
        )
    for channel, row in zip(channels, values, strict=True):
        channel.set(row)


class BankPorts(list[Any]):
    """One port of every member of a contained bank, as a list (``envs_obs`` for ``envs.obs``,
    spec §2.2), with :meth:`gather` and :meth:`scatter` over the members' channels in bank order.
    A member's port that is itself a multiport contributes its ``width`` channels: ``gather``
    then has shape ``(members, width, ...)``."""

    def gather(self, fill: Any = None) -> np.ndarray:
        """The members' values as one new array ``(members, ...)`` (:func:`gather`'s rules).

        Raises ValueError as :func:`gather`, or when the members' multiports differ in width.
        """
        name = _bank_name(self)
        widths = {p.width for p in self}
        if len(widths) > 1:
            raise ValueError(
                f"{name}.gather(): the members' ports differ in width {sorted(widths)}"
            )
        flat = [c for p in self for c in (p if _is_multiport(p) else (p,))]
        values, present = [c._v for c in flat], [c._p for c in flat]
        out = gather_pending(name, values, present, fill)
        if out is None:
            out = gather(name, loaded(flat, values), present, fill)
        if not self or not _is_multiport(self[0]):
            return out
        return out.reshape(len(self), self[0].width, *out.shape[1:])

    def scatter(self, values: Any) -> None:
        """Member ``i``'s port gets ``values[i]`` (``set``, or ``scatter`` of a multiport).

        Raises ValueError as :func:`scatter`.
        """
        scatter(_bank_name(self), [_Member(p) for p in self], values)


class _Member:
    """A bank member's port as a channel of :func:`scatter`: a multiport scatters its row."""

    __slots__ = ("port",)

    def __init__(self, port: Any) -> None:
        self.port = port

    def set(self, row: Any) -> None:
        """Set the port to ``row`` (a multiport: scatter ``row`` over its channels)."""
        if _is_multiport(self.port):
            self.port.scatter(row)
        else:
            self.port.set(row)


def _is_multiport(port: Any) -> bool:
    """Whether ``port`` is a multiport capsule (its ``width`` is not a plain port's, -2)."""
    return bool(port.width >= 0)


def _bank_name(ports: Sequence[Any]) -> str:
    """``bank.port`` from the name of the first member's port (``bank[0].port``)."""
    if not ports:
        return "bank"
    first = getattr(ports[0], "_name", "bank")
    return first.replace("[0].", ".", 1) if "[0]." in first else first
