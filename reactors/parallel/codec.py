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

Header layout: byte 0 the form (``a`` array, ``s`` numpy scalar, ``t``, ``l``, ``d``), then the dtype and shape
(``"<f4;4"``) or the struct format; for a dict a NUL, then the keys separated by NULs. Data
start at the next multiple of 8 after the header. Struct items use native byte order: every
worker of a run is on one machine.
"""

from __future__ import annotations

import struct
import sys
from typing import Any, Final

_SCALAR: dict[type, str] = {float: "d", bool: "?", int: "q"}
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


class Unpacker:
    """The reading side of one channel's inline area (the same arguments as :class:`Packer`)."""

    __slots__ = (
        "raw",
        "start",
        "cells",
        "meta_cell",
        "gen",
        "form",
        "st",
        "keys",
        "dtype",
        "count",
        "shape",
        "data",
        "nbytes",
        "flat",
    )

    def __init__(self, raw: memoryview, start: int, cells: memoryview, meta_cell: int):
        self.raw, self.start = raw, start
        self.cells, self.meta_cell = cells, meta_cell
        self.gen = -1
        self.form = 0
        self.st: struct.Struct | None = None
        self.keys: tuple[str, ...] = ()
        self.dtype: Any = None
        self.count = self.data = self.nbytes = 0
        self.shape: tuple[int, ...] = ()
        self.flat = True

    def unpack(self) -> Any:
        """The value the writer packed for the current tag (a new object)."""
        if self.cells[self.meta_cell] != self.gen:
            self._read_header()
        form = self.form
        if form == _ARRAY:
            # a copy into an immutable bytes object, so the array is read-only, as an array
            # received zero-copy is (an input declared `mutable` gets a writable copy)
            p = self.data
            a = sys.modules["numpy"].frombuffer(self.raw[p : p + self.nbytes].tobytes(), self.dtype)
            return a if self.flat else a.reshape(self.shape)
        if form == _SCALAR_NP:
            return sys.modules["numpy"].frombuffer(self.raw, self.dtype, 1, self.data)[0]
        st = self.st
        assert st is not None  # set with the header
        items = st.unpack_from(self.raw, self.data)
        if form == _TUPLE:
            return items
        if form == _LIST:
            return list(items)
        return dict(zip(self.keys, items))

    def _read_header(self) -> None:
        s = self.start
        n = int.from_bytes(self.raw[s : s + 2], "little")
        head = bytes(self.raw[s + 2 : s + 2 + n])
        self.data = s + -(-(2 + n) // 8) * 8
        self.form = head[0]
        text = head[1:].decode()
        if self.form in (_ARRAY, _SCALAR_NP):
            import numpy as np

            dt, _, dims = text.partition(";")
            self.dtype = np.dtype(dt)
            self.shape = tuple(int(x) for x in dims.split(",") if x)
            count = 1
            for dim in self.shape:
                count *= dim
            self.count, self.nbytes = count, count * self.dtype.itemsize
            self.flat = len(self.shape) == 1
        else:
            fmt, _, keys = text.partition("\0")
            self.st = struct.Struct("=" + fmt)
            self.keys = tuple(keys.split("\0")) if keys else ()
        self.gen = self.cells[self.meta_cell]
