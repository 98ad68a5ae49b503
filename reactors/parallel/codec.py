"""A compact codec for the small values RL programs send between workers every tag.

Observations (small numpy arrays), step results (tuples of floats and bools) and small dicts of
scalars cross workers through a channel's inline cells (:mod:`reactors.parallel.shm`): one copy in
by the writer, one copy out by the reader, no pickle. A value the codec does not take
(:meth:`Packer.pack` returns False) goes the general way (pickle, or a shared-memory slot for a
large array).

A channel's inline area holds a *header*, which describes the kind of value (the dtype and
shape of an array; the struct format of a tuple, list or dict and a dict's keys), and after it
the *data* (the array's bytes in C order; the packed items). The header is written only when
it changes, with a new generation number in the channel's ``C_META`` cell; a reader parses it
once per generation. So a channel that carries the same kind of value every tag costs the
writer a type check and one copy, and the reader one copy into a new object.

Taken values (exact types only, not subclasses such as numpy scalars, so a decoded value has
the types of the original and reactions compute the same results on any number of workers):

- a numpy array of a plain numeric or boolean dtype, decoded as a new C-ordered array of the
  same dtype and shape, read-only like every array received from another worker (an input
  declared ``mutable`` gets a writable copy); a numpy scalar of such a dtype (``np.int64``,
  ``np.float32``...), decoded as a scalar of the same type;
- a tuple or list of ``float``, ``bool`` and ``int`` (int64), and a dict of such values whose
  keys are non-empty ``str`` without NUL: decoded with the same types, the dict in the same key order.

A reader leaves a received array or tuple of scalars in the area (:class:`Arrived`, a
:class:`reactors.core.pending.Pending`) until a reaction reads it: a gather of a bank's
multiport then copies the data of all its channels in one numpy operation (the areas' data
sit at known offsets of the one shared control block) and decodes none; whatever nothing read
is copied out by :func:`settle` before the worker completes the tag, since the writers
overwrite their areas at the next tag. A channel that a reaction reads by itself
(``Port.value``) is decoded on arrival from then on (:attr:`Layout.defer`), so a loop over the
channels pays nothing for this.

Header layout: byte 0 the form (``a`` array, ``s`` numpy scalar, ``t``, ``l``, ``d``), then the dtype and shape
(``"<f4;4"``) or the struct format; for a dict a NUL, then the keys separated by NULs. Data
start at the next multiple of 8 after the header. Struct items use native byte order: every
worker of a run is on one machine.
"""

from __future__ import annotations

import struct
import sys
from typing import Any, Final

from ..core.pending import Pending

_SCALAR: dict[type, str] = {float: "d", bool: "?", int: "q"}
_TYPE: dict[str, type] = {code: t for t, code in _SCALAR.items()}
_NUMPY: dict[type, str] = {float: "=f8", bool: "?", int: "=i8"}  # an item's numpy dtype
_ARRAY: Final = 0x61  # b"a": the tags of packed values
_SCALAR_NP: Final = 0x73  # b"s"
_TUPLE: Final = 0x74  # b"t"
_LIST: Final = 0x6C  # b"l"
_DICT: Final = 0x64  # b"d"


def _numpy() -> Any:
    """The numpy module if it is imported (a value can only be an array then), else None."""
    return sys.modules.get("numpy")


class Packer:
    """The writing side of one channel's inline area: ``raw`` the control block's bytes,
    ``start`` the area's first byte, ``cap`` its size in bytes, ``cells`` the int64 cells and
    ``meta_cell`` the cell that holds the header generation."""

    __slots__ = (
        "raw",
        "start",
        "cap",
        "cells",
        "meta_cell",
        "gen",
        "cls",
        "types",
        "keys",
        "dtype",
        "shape",
        "st",
        "data",
        "room",
    )

    def __init__(self, raw: memoryview, start: int, cap: int, cells: memoryview, meta_cell: int):
        self.raw, self.start, self.cap = raw, start, cap
        self.cells, self.meta_cell = cells, meta_cell
        self.gen = 0
        # what the current header describes: the value's class, and the items' types and a
        # dict's keys, or an array's dtype and shape
        self.cls: type | None = None
        self.types: tuple = ()
        self.keys: tuple = ()
        self.dtype: Any = None
        self.shape: tuple = ()
        self.st: struct.Struct | None = None
        self.data = self.room = 0  # the data's first byte and the room left for them

    def forget(self) -> None:
        """The area was overwritten by something else: write a header with the next value."""
        self.cls = None

    def pack(self, v: Any) -> bool:
        """Write ``v`` into the area if the codec takes it and it fits; whether it did."""
        cls = v.__class__
        if cls is tuple or cls is list:
            types = tuple(map(type, v))
            if (cls is not self.cls or types != self.types) and not self._items_header(cls, types):
                return False
            return self._pack_items(v)
        if cls is dict:
            keys, types = tuple(v), tuple(map(type, v.values()))
            if cls is not self.cls or keys != self.keys or types != self.types:
                if not self._items_header(dict, types, keys):
                    return False
            return self._pack_items(v.values())
        if cls is self.cls:  # an array or numpy scalar of the class last sent
            if v.dtype is not self.dtype or v.shape != self.shape:
                if not self._array_header(v):
                    return False
        else:
            np = _numpy()
            if np is None or not (
                cls is np.ndarray or (isinstance(v, np.generic) and cls.__module__ == "numpy")
            ):
                return False
            if not self._array_header(v):
                return False
        p = self.data
        self.raw[p : p + v.nbytes] = v.tobytes()
        return True

    def _pack_items(self, items: Any) -> bool:
        st = self.st
        assert st is not None  # set with the header
        try:
            st.pack_into(self.raw, self.data, *items)
        except struct.error:  # an int beyond int64
            return False
        return True

    def _items_header(self, cls: type, types: tuple, keys: tuple | None = None) -> bool:
        """A header for a tuple, list or dict (with ``keys``) of items of ``types``."""
        codes = [_SCALAR.get(t) for t in types]
        if None in codes:
            return False
        fmt = "".join(codes)  # type: ignore[arg-type]  # no None left
        st = struct.Struct("=" + fmt)
        if keys is None:
            head = bytes([_TUPLE if cls is tuple else _LIST]) + fmt.encode()
        else:
            if any(k.__class__ is not str or not k or "\0" in k for k in keys):
                return False
            head = bytes([_DICT]) + fmt.encode() + b"\0" + "\0".join(keys).encode()
        if not self._header(head, st.size):
            return False
        self.cls, self.types, self.keys, self.st = cls, types, keys or (), st
        return True

    def _array_header(self, v: Any) -> bool:
        """A header for an array or a numpy scalar of ``v``'s class, dtype and shape."""
        dt = v.dtype
        if dt.hasobject or dt.fields is not None or dt.kind in "MmUSV":
            return False
        form = b"a" if v.__class__ is _numpy().ndarray else b"s"
        head = form + f"{dt.str};{','.join(map(str, v.shape))}".encode()
        if not self._header(head, v.nbytes):
            return False
        self.cls, self.dtype, self.shape = v.__class__, dt, v.shape
        return True

    def _header(self, head: bytes, size: int) -> bool:
        """Write a new header (its length first, in two bytes) if it and ``size`` bytes of
        data fit; a new generation in the meta cell."""
        data = -(-(2 + len(head)) // 8) * 8
        if data + size > self.cap:
            return False
        s = self.start
        self.raw[s : s + 2] = len(head).to_bytes(2, "little")
        self.raw[s + 2 : s + 2 + len(head)] = head
        self.data, self.room = s + data, self.cap - data
        self.gen += 1
        self.cells[self.meta_cell] = self.gen
        return True


class Layout:
    """What one header of a channel's inline area says (a new header, a new layout): ``head``
    its bytes, ``form`` the value's form (``_ARRAY``...), ``data`` the first byte of the data in
    the control block, ``size`` their length in bytes; an array's or numpy scalar's ``dtype``
    and ``shape``; a tuple's, list's or dict's struct ``st``, a dict's ``keys`` and the items'
    Python ``types``. ``defer``: the channel's values are left in shared memory on arrival
    (:class:`Arrived`, to be gathered): arrays and tuples of one item or more, until a
    reaction reads one by itself (``Port.value``), which makes them decoded on arrival from
    then on. :meth:`rows` and :meth:`index` keep what they computed for their next calls."""

    __slots__ = (
        "head",
        "form",
        "data",
        "size",
        "dtype",
        "shape",
        "flat",
        "st",
        "keys",
        "types",
        "defer",
        "cast",
        "at",
        "where",
        "idx",
        "channels",
    )

    def __init__(self, head: bytes, data: int):
        self.head, self.data = head, data
        self.form = head[0]
        text = head[1:].decode()
        self.dtype: Any = None
        self.shape: tuple[int, ...] = ()
        self.flat = True
        self.st: struct.Struct | None = None
        self.keys: tuple[str, ...] = ()
        self.types: tuple[type, ...] = ()
        if self.form in (_ARRAY, _SCALAR_NP):
            import numpy as np

            dt, _, dims = text.partition(";")
            self.dtype = np.dtype(dt)
            self.shape = tuple(int(x) for x in dims.split(",") if x)
            count = 1
            for dim in self.shape:
                count *= dim
            self.size = count * self.dtype.itemsize
            self.flat = len(self.shape) == 1
        else:
            fmt, _, keys = text.partition("\0")
            self.st = struct.Struct("=" + fmt)
            self.size = self.st.size
            self.keys = tuple(keys.split("\0")) if keys else ()
            self.types = tuple(_TYPE[c] for c in fmt)
        self.defer = self.form == _ARRAY or (self.form == _TUPLE and len(self.types) > 0)
        self.cast: tuple[Any, Any, Any] | None = None  # a tuple's: _item_casts, once needed
        # what index() computed for the last gather
        self.at: list[int] = []
        self.where: list[int] = []
        self.idx: Any = None
        self.channels: tuple[Any, Any] = (None, None)

    def decode(self, raw: memoryview, p: int) -> Any:
        """The value whose data start at byte ``p`` of ``raw`` (a new object)."""
        form = self.form
        if form == _ARRAY:
            # a copy into an immutable bytes object, so the array is read-only, as an array
            # received zero-copy is (an input declared `mutable` gets a writable copy)
            a = sys.modules["numpy"].frombuffer(raw[p : p + self.size].tobytes(), self.dtype)
            return a if self.flat else a.reshape(self.shape)
        if form == _SCALAR_NP:
            return sys.modules["numpy"].frombuffer(raw, self.dtype, 1, p)[0]
        st = self.st
        assert st is not None  # set for every form of items
        items = st.unpack_from(raw, p)
        if form == _TUPLE:
            return items
        if form == _LIST:
            return list(items)
        return dict(zip(self.keys, items))

    def rows(self, block: Any) -> Any:
        """The rows of :func:`reactors.core.batched.gather` from ``block``, a new uint8 array
        ``(k, size)`` of ``k`` values' data: ``(k, *shape)`` of ``dtype`` for arrays (a view of
        ``block``); ``(k, items)`` of the items' result type (``np.result_type`` of their
        Python types) for tuples, booleans as 0 and 1, each item cast as numpy casts."""
        if self.form == _ARRAY:
            return block.view(self.dtype).reshape((len(block), *self.shape))
        if self.cast is None:
            self.cast = _item_casts(self.types)
        packed, wide, kind = self.cast
        return block.view(packed).astype(wide).view(kind)

    def index(self, at: list[int], where: list[int], n: int) -> tuple[Any, Any, Any]:
        """For a gather of ``n`` channels of which those numbered ``where`` have their data at
        ``at`` (their first bytes): the byte indices ``(k, size)`` of that data, and the
        channel numbers ``where`` and the others' as int arrays; kept for the next call with
        the same ``at`` and ``where``."""
        if at != self.at or where != self.where:
            np = sys.modules["numpy"]
            self.at, self.where = at, where
            self.idx = np.add.outer(np.array(at, np.intp), np.arange(self.size))
            others = sorted(set(range(n)) - set(where))
            self.channels = (np.array(where, np.intp), np.array(others, np.intp))
        return self.idx, self.channels[0], self.channels[1]


def _item_casts(types: tuple[type, ...]) -> tuple[Any, Any, Any]:
    """For tuples of items of ``types`` (packed as the codec packs them): their record dtype,
    the record dtype whose fields all have the items' result type, and that type."""
    np = sys.modules["numpy"]
    kind = np.result_type(*types)
    names = [f"f{j}" for j in range(len(types))]
    formats = [np.dtype(_NUMPY[t]) for t in types]
    offsets = [sum(f.itemsize for f in formats[:j]) for j in range(len(types))]
    packed = np.dtype({"names": names, "formats": formats, "offsets": offsets})
    wide = np.dtype({"names": names, "formats": [kind] * len(types)})
    return packed, wide, kind


class Arrived(Pending):
    """A value left in its writer's row of shared memory on arrival (``layout`` says what it
    is; its data start at byte ``at`` of ``buf``), decoded when first read
    (:class:`reactors.core.pending.Pending`). ``shared``: ``buf`` is the control block, which
    the writer overwrites at a later tag, so the worker calls :func:`settle` at the end of every
    tag; a gather moves the rows it took into a private copy at once."""

    __slots__ = ("layout", "buf", "at", "shared")

    def __init__(self, layout: Layout, buf: memoryview, at: int):
        self.layout, self.buf, self.at = layout, buf, at
        self.shared = True

    def load(self, read: bool) -> Any:
        self.shared = False  # the port keeps the value from now on: nothing to move
        if read:  # a reaction reads this channel by itself: decode its next values on arrival
            self.layout.defer = False
        return self.layout.decode(self.buf, self.at)

    def detach(self) -> None:
        """Copy the data out of the control block (before the writer overwrites it)."""
        if self.shared:
            at = self.at
            self.buf = memoryview(self.buf[at : at + self.layout.size].tobytes())
            self.at = 0
            self.shared = False

    def rows(self, values: list[Any]) -> tuple[Any, Any, Any] | None:
        lay = self.layout
        buf, head = self.buf, lay.head
        at: list[int] = []
        where: list[int] = []
        for i, v in enumerate(values):
            if isinstance(v, Arrived):
                if v.buf is not buf or (v.layout is not lay and v.layout.head != head):
                    return None
                at.append(v.at)
                where.append(i)
            elif isinstance(v, Pending):
                return None
        idx, there, here = lay.index(at, where, len(values))
        block = sys.modules["numpy"].frombuffer(buf, "B")[idx]
        keep = memoryview(block.tobytes())
        size = lay.size
        for j, i in enumerate(where):
            a: Arrived = values[i]
            a.buf, a.at, a.shared = keep, j * size, False
        return lay.rows(block), there, here


def settle(arrived: list[Arrived]) -> None:
    """Copy out of the control block every value of ``arrived`` (those received at this tag)
    still there, and forget them: a worker's last step of a tag, before it says it is done
    (no writer overwrites a channel's data before every reader is done with the tag)."""
    for a in arrived:
        if a.shared:
            a.detach()
    arrived.clear()


class Unpacker:
    """The reading side of one channel's inline area (the same arguments as :class:`Packer`)."""

    __slots__ = ("raw", "start", "cells", "meta_cell", "gen", "layout")

    def __init__(self, raw: memoryview, start: int, cells: memoryview, meta_cell: int):
        self.raw, self.start = raw, start
        self.cells, self.meta_cell = cells, meta_cell
        self.gen = -1
        self.layout: Layout | None = None

    def unpack(self) -> Any:
        """The value the writer packed for the current tag (a new object)."""
        lay = self._layout()
        return lay.decode(self.raw, lay.data)

    def arrive(self, arrived: list[Arrived]) -> Any:
        """The value the writer packed for the current tag: an :class:`Arrived` left in the
        area (appended to ``arrived``, for :func:`settle`) for an array or a tuple, else the
        value itself (a new object)."""
        lay = self._layout()
        if lay.defer:
            a = Arrived(lay, self.raw, lay.data)
            arrived.append(a)
            return a
        return lay.decode(self.raw, lay.data)

    def _layout(self) -> Layout:
        """The layout of the current header (parsed once per generation)."""
        lay = self.layout
        gen = self.cells[self.meta_cell]
        if lay is None or gen != self.gen:
            s = self.start
            n = int.from_bytes(self.raw[s : s + 2], "little")
            lay = self.layout = Layout(bytes(self.raw[s + 2 : s + 2 + n]), s + -(-(2 + n) // 8) * 8)
            self.gen = gen
        return lay
