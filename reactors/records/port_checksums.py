"""CRC-32 checksums of port values: what a recording keeps of each tag it checks, so that a
replay can name the first port whose value differs (:mod:`reactors.records.replay`).
"""

from __future__ import annotations

import marshal
import sys
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from ..core.pending import current
from ..core.port import CHANNELS
from .trace import encode

#: numpy's type number of object arrays: the numbers of numbers are below it.
_OBJECT = 17
#: Types whose ``marshal`` form is their stable encoding (containers checked by marshal).
_MARSHALLED = frozenset((int, float, bool, str, bytes, tuple, list, dict, type(None)))


def crc(value: Any) -> int:
    """The CRC-32 of a port value: for a numpy array of numbers, of its bytes (in place when
    C-contiguous) started from its dtype number and rank (not its shape: a reshape alone,
    bytes unchanged, is not seen); for the built-in types marshal
    takes (numbers, strings, bytes, and tuples, lists and dicts of them), of its ``marshal``
    form; else of its stable encoding (:func:`reactors.records.trace.encode`). The same value gives
    the same CRC in any process of the same Python (sets of strings excepted: run with a
    fixed ``PYTHONHASHSEED``)."""
    cls = value.__class__
    if cls in _MARSHALLED:
        try:
            return zlib.crc32(marshal.dumps(value))
        except ValueError:  # holds a type marshal does not take
            return zlib.crc32(encode(value))
    np = sys.modules.get("numpy")
    if np is not None and cls is np.ndarray and value.dtype.num < _OBJECT:
        start = value.dtype.num | (value.ndim << 8)
        try:
            return zlib.crc32(value, start)
        except (BufferError, ValueError):  # not C-contiguous
            return zlib.crc32(value.tobytes(), start)
    return zlib.crc32(encode(value))


def sums_of(present: Iterable[Any], watch: frozenset[str] | None) -> tuple[list[str], list[int]]:
    """The per-tag digest of the ports in ``present`` (those named in ``watch``; None: all):
    their full names and CRC-32s (:func:`crc`). It runs at every tag of a recording, so the
    common values (arrays of numbers, built-ins) are hashed in comprehensions, one pass each,
    the rest (and a tag where one of those fails) value by value."""
    if watch is None:
        ports = [p for p in present if p.__class__ in CHANNELS]
    else:
        ports = [p for p in present if p.__class__ in CHANNELS and p._name in watch]
    values: list[Any] = [current(p) for p in ports]
    crc32, plain = zlib.crc32, _MARSHALLED
    dumps: Callable[[Any], bytes] = marshal.dumps
    np = sys.modules.get("numpy")
    nd = None if np is None else np.ndarray
    try:
        sums: list = [
            crc32(dumps(v))
            if v.__class__ in plain
            else crc32(v, num | (v.ndim << 8))
            if v.__class__ is nd and (num := v.dtype.num) < _OBJECT
            else None
            for v in values
        ]
    except (ValueError, BufferError):  # a container marshal refuses, an array not contiguous
        sums = [None] * len(values)
    if None in sums:
        sums = [crc(v) if c is None else c for v, c in zip(values, sums)]
    return [p._name for p in ports], sums
