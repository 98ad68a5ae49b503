"""Port channels between worker processes, through shared memory (one writer per channel).

A *crossing* (:class:`reactors.parallel.topology.Crossing`) is a root channel written in one worker
and read in others. Its per-tag record lives in the :class:`reactors.parallel.sync.Control` cells
(``C_STATE`` = ``2 * tag_seq + present``, stored last; kind, slot, generation, sizes before it);
its value lives in *slots*: shared-memory segments owned by the writer, named
``<run prefix>c<channel>s<slot>g<generation>``, sized from the first value and reused every
tag (a bigger value makes a new generation of the slot).

Values, by kind:

- a numpy array (non-object, non-structured dtype): one ``np.copyto`` into the slot; readers get
  a **read-only zero-copy view**. A reader keeps the slot *held* (its bit in ``C_HELD + w``) while
  the view is its port's value or anything else refers to it (CPython reference count), and the
  writer writes only into slots no reader holds (double buffering in the steady state). A
  reader that sees its program keep received arrays switches that channel to copying.
- a CPU torch tensor (no grad): one copy in, one copy out (``torch.from_numpy`` of a copy);
- None, a bool, an int64 or a float: in the channel's inline cells (no pickle, no slot);
- a small numpy array, a tuple or list of scalars, a small dict of scalars: in the inline cells
  through the compact codec (:mod:`reactors.parallel.codec`: one copy in, one copy out, no
  pickle); a reader leaves an array or a tuple there until it is read or gathered
  (:class:`reactors.parallel.codec.Arrived`; the worker settles the rest before its ``DONE``);
- anything else: ``pickle`` protocol 5, inline when it is small and has no out-of-band
  buffers, else in a slot with its out-of-band buffers, copied out by the reader.

Segments belong to one run (``prefix``, :func:`reactors.parallel.shm_owner.run_prefix`): a writer
unlinks a slot's old generation when it makes a new one, and the supervising process unlinks every
segment of the run at its end (readers may still attach a slot after its writer exited);
what a run killed at once left, the next run reclaims (:func:`reactors.parallel.shm_owner.reclaim`).
"""

from __future__ import annotations

import os
import pickle
import sys
from array import array
from collections.abc import Iterable
from multiprocessing import resource_tracker, shared_memory
from typing import TYPE_CHECKING, Any, Final

from mypy_extensions import mypyc_attr

from ..core.port import Port
from .codec import Arrived, Packer, Unpacker
from .shm_owner import SHM_DIR
from .sync import (
    C_GEN,
    C_HELD,
    C_KIND,
    C_META,
    C_NBYTES,
    C_PACK,
    C_SLOT,
    C_STATE,
    INLINE_CELLS,
    Control,
)

if TYPE_CHECKING:  # not ``as np``: a module-level ``np`` import changes how CPython compiles
    import numpy  # the ``np.f(...)`` calls of the functions below

# the kinds of value in a channel's C_KIND cell (Final: compiled, the values are used)
K_NONE: Final = 0
K_ARRAY: Final = 1
K_TENSOR: Final = 2
K_PICKLE: Final = 3
K_INT: Final = 4
K_FLOAT: Final = 5
K_TRUE: Final = 6
K_FALSE: Final = 7
K_SMALL: Final = 8
K_PACKED: Final = 9
_INLINE_BYTES: Final = 8 * INLINE_CELLS
_INT_MIN: Final = -(1 << 63)
_INT_MAX: Final = (1 << 63) - 1
_ALIGN: Final = 64
_PAGE: Final = 4096
_COPY_AFTER: Final = 2  # held-by-the-program slots before a reader switches to copying


@mypyc_attr(native_class=False)  # compiled, a subclass of a built-in exception cannot be native
class SharedMemoryFull(MemoryError):
    """``/dev/shm`` has less free space than a new segment needs (writing into it would end
    the process with SIGBUS). The message says what to do."""


def shm_free_bytes() -> int:
    """Bytes that unprivileged processes may still allocate in ``/dev/shm``."""
    st = os.statvfs(SHM_DIR)
    return st.f_bavail * st.f_frsize


def check_space(name: str, size: int) -> None:
    """Raise :class:`SharedMemoryFull` unless a new segment of ``size`` bytes fits in
    ``/dev/shm`` (segment ``name``, for the message)."""
    try:
        free = shm_free_bytes()
    except OSError:  # no statvfs there: let the allocation itself decide
        return
    if size > free:
        raise SharedMemoryFull(
            f"{SHM_DIR} is too small: {name} needs {size} bytes, {free} are free. Enlarge it "
            "(e.g. `docker run --shm-size=1g`), free it, or run with fewer workers "
            "(-w) or with `--backend threads`."
        )


class Segment(shared_memory.SharedMemory):
    """A ``SharedMemory`` that the 3.11 resource tracker does not follow (we unlink ourselves:
    the tracker would warn about, and unlink, segments that other processes attached) and that
    tolerates views still exported when it is garbage-collected. Creating one raises
    :class:`SharedMemoryFull` when ``/dev/shm`` has not ``size`` bytes free."""

    def __init__(self, name: str, create: bool = False, size: int = 0):
        if create:
            check_space(name, size)
        reg, unreg = resource_tracker.register, resource_tracker.unregister
        resource_tracker.register = resource_tracker.unregister = _ignore  # type: ignore[assignment]  # patched for the call, restored below
        try:
            super().__init__(name, create, size)
        finally:
            resource_tracker.register, resource_tracker.unregister = reg, unreg

    def unlink(self) -> None:
        unlink(self._name.lstrip("/"))  # type: ignore[attr-defined]  # SharedMemory's OS-level name

    def __del__(self) -> None:
        try:
            self.close()
        except (OSError, BufferError):
            pass


def _ignore(*_args: object) -> None:
    """Stands in for the resource tracker's register/unregister."""


def unlink(name: str) -> None:
    """Remove the segment ``name`` (no error if it is already gone)."""
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass


def unlink_prefix(prefix: str) -> int:
    """Remove every segment whose name starts with ``prefix``; returns how many."""
    n = 0
    try:
        names = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return 0
    for name in names:
        if name.startswith(prefix):
            unlink(name)
            n += 1
    return n


def _tensor_type() -> type[Any] | None:
    """torch.Tensor if torch is imported (a value can only be a tensor then), else None."""
    return getattr(sys.modules.get("torch"), "Tensor", None)


def _array_meta(a: numpy.ndarray) -> bytes:
    return f"{a.dtype.str};{','.join(map(str, a.shape))}".encode()  # "<f4;210,160,3"


def _parse_meta(meta: bytes) -> tuple[numpy.dtype, tuple[int, ...]]:
    import numpy as np

    dt, _, shape = meta.decode().partition(";")
    return np.dtype(dt), tuple(int(x) for x in shape.split(",") if x)


def _plain_array(v: Any) -> bool:
    ndarray = getattr(sys.modules.get("numpy"), "ndarray", None)  # no numpy, no arrays
    return (
        ndarray is not None
        and v.__class__ is ndarray
        and not v.dtype.hasobject
        and v.dtype.fields is None
    )


def slot_extent(kind: int, nbytes: int, meta: int) -> int:
    """How many bytes of a slot hold its value: a pickle's ``nbytes`` (its length header
    included), an array's or tensor's ``meta`` bytes of dtype and shape padded to ``_ALIGN``
    then its ``nbytes`` of data."""
    return nbytes if kind == K_PICKLE else -(-meta // _ALIGN) * _ALIGN + nbytes


class Writer:
    """The writing side of one crossing, in its writer worker. ``port`` is the local root
    :class:`reactors.core.port.Port`; :meth:`publish` runs once per tag."""

    def __init__(self, ctl: Control, index: int, readers: Iterable[int], port: Port, prefix: str):
        self.cells, self.floats, self.raw = ctl.cells, ctl.floats, ctl.raw
        self.base = base = ctl.channel_base(index)
        self.inline = ctl.inline_base(index)
        self.held_cells = [base + C_HELD + r for r in readers]
        self.port = port
        self.prefix = f"{prefix}c{index}"
        self.slots: list[list[Any]] = []  # [Segment, generation, capacity] per slot
        self.packer = Packer(ctl.raw, 8 * self.inline, _INLINE_BYTES, self.cells, base + C_PACK)

    def publish(self, seq: int) -> None:
        """Store the port's value if present, then publish ``(seq, present)``. None, bools,
        ints (int64) and floats travel in the channel's cells."""
        port = self.port
        c, b = self.cells, self.base
        if port._p:
            v = port._v
            cls = v.__class__
            if cls is int and _INT_MIN <= v <= _INT_MAX:
                c[self.inline] = v
                c[b + C_KIND] = K_INT
                self.packer.forget()  # its header was overwritten: a new one next time
            elif cls is float:
                self.floats[self.inline] = v
                c[b + C_KIND] = K_FLOAT
                self.packer.forget()
            elif v is None:
                c[b + C_KIND] = K_NONE
            elif cls is bool:
                c[b + C_KIND] = K_TRUE if v else K_FALSE
            elif self.packer.pack(v):
                c[b + C_KIND] = K_PACKED
            else:
                self.packer.forget()
                self._store(v)
            c[b + C_STATE] = 2 * seq + 1
        else:
            c[b + C_STATE] = 2 * seq

    def _store(self, v: Any) -> None:
        tensor = _tensor_type()
        if _plain_array(v):
            kind, arr, meta = K_ARRAY, v, _array_meta(v)
        elif (
            tensor is not None
            and isinstance(v, tensor)
            and v.device.type == "cpu"
            and not v.requires_grad
            and _numpy_able(v)
        ):
            arr = v.resolve_conj().resolve_neg().numpy()
            kind, meta = K_TENSOR, _array_meta(arr)
        else:
            self._store_pickle(v)
            return
        off = -(-len(meta) // _ALIGN) * _ALIGN
        slot = self._slot(off + arr.nbytes)
        buf = self.slots[slot][0].buf
        buf[: len(meta)] = meta
        if arr.nbytes:
            np = sys.modules["numpy"]
            np.copyto(np.ndarray(arr.shape, arr.dtype, buffer=buf, offset=off), arr, casting="no")
        self._header(kind, slot, arr.nbytes, len(meta))

    def _store_pickle(self, v: Any) -> None:
        bufs: list[pickle.PickleBuffer] = []
        try:
            main = pickle.dumps(v, protocol=5, buffer_callback=bufs.append)
        except Exception as e:
            raise TypeError(
                f"the value set on {self.port._name} ({type(v).__name__}) cannot cross "
                f"workers: it cannot be pickled ({e}). Place its writer and readers on one "
                f"worker with @worker(n), or run with one worker."
            ) from e
        if not bufs and len(main) <= _INLINE_BYTES:
            off = 8 * self.inline
            self.raw[off : off + len(main)] = main
            self.cells[self.base + C_NBYTES] = len(main)
            self.cells[self.base + C_KIND] = K_SMALL
            return
        raws = [b.raw() for b in bufs]
        lens = array("q", [len(main), len(raws)] + [r.nbytes for r in raws]).tobytes()
        total = len(lens) + len(main) + sum(r.nbytes for r in raws)
        slot = self._slot(total, grow=True)
        buf = self.slots[slot][0].buf
        pos = len(lens)
        buf[:pos] = lens
        buf[pos : pos + len(main)] = main
        pos += len(main)
        for r in raws:
            buf[pos : pos + r.nbytes] = r.cast("B")
            pos += r.nbytes
        self._header(K_PICKLE, slot, total, len(lens))

    def _header(self, kind: int, slot: int, nbytes: int, meta: int) -> None:
        c, b = self.cells, self.base
        c[b + C_KIND] = kind
        c[b + C_SLOT] = slot
        c[b + C_GEN] = self.slots[slot][1]
        c[b + C_NBYTES] = nbytes
        c[b + C_META] = meta

    def _slot(self, need: int, grow: bool = False) -> int:
        """A slot no reader holds with room for ``need`` bytes (made or enlarged if needed)."""
        held = 0
        for cell in self.held_cells:
            held |= self.cells[cell]
        free = [i for i in range(len(self.slots)) if not held >> i & 1]
        for i in free:
            if self.slots[i][2] >= need:
                return i
        size = max(_PAGE, -(-(need * (2 if grow else 1)) // _PAGE) * _PAGE)
        if free:
            i = free[0]
            seg, gen, _ = self.slots[i]
            seg.unlink()
            gen += 1
        else:
            i, gen = len(self.slots), 0
            if i >= 63:
                raise RuntimeError(
                    f"{self.port._name}: more than 63 values of this channel "
                    "are still referenced by readers"
                )
            self.slots.append([])  # filled below
        self.slots[i] = [Segment(f"{self.prefix}s{i}g{gen}", True, size), gen, size]
        return i

    def close(self) -> None:
        """Forget the slots. Readers may still attach them after this worker ended (e.g. at
        the last tag), so the supervisor unlinks every segment of the run at its end."""
        self.slots = []


def _refs(held: dict, key: int) -> int:
    """The reference count of ``held[key]`` as seen in here (the dict's reference and the
    temporary ones of the call: how many depends on whether this module is compiled)."""
    return sys.getrefcount(held[key])


#: what :func:`_refs` counts for an object that only the dict refers to
_ALONE = _refs({0: object()}, 0)


def _numpy_able(t: Any) -> bool:
    try:
        t.numpy()
    except (TypeError, RuntimeError):
        return False
    return True


class Reader:
    """The reading side of one crossing, in reader worker ``me``: :meth:`receive` fills the
    local root :class:`reactors.core.port.Port` for the current tag."""

    def __init__(
        self, ctl: Control, index: int, me: int, port: Port, prefix: str, arrived: list[Arrived]
    ):
        self.cells, self.floats, self.raw = ctl.cells, ctl.floats, ctl.raw
        self.base = base = ctl.channel_base(index)
        self.inline = ctl.inline_base(index)
        self.held_cell = base + C_HELD + me
        self.state_cell = base + C_STATE
        self.port = port
        self.prefix = f"{prefix}c{index}"
        self.maps: dict[int, tuple[int, Segment]] = {}  # slot -> (generation, Segment)
        self.held: dict[int, numpy.ndarray] = {}  # slot -> the array handed out from it
        self.copying = False
        self.unpacker = Unpacker(ctl.raw, 8 * self.inline, self.cells, base + C_PACK)
        self.arrived = arrived  # this worker's values left in the control block at this tag

    def receive(self, seq: int) -> None:
        """Read the record of tag ``seq`` (already published); if present, set the port's
        value and trigger its reactions."""
        c, b = self.cells, self.base
        if c[b + C_STATE] != 2 * seq + 1:
            return
        if self.held:
            self._release()
        kind = c[b + C_KIND]
        value: Any
        if kind >= K_INT:
            if kind == K_PACKED:
                value = self.unpacker.arrive(self.arrived)
            elif kind == K_INT:
                value = c[self.inline]
            elif kind == K_FLOAT:
                value = self.floats[self.inline]
            elif kind == K_SMALL:
                off = 8 * self.inline
                value = pickle.loads(self.raw[off : off + c[b + C_NBYTES]])
            else:
                value = kind == K_TRUE
        elif kind == K_NONE:
            value = None
        else:
            value = self._load(kind)
        port = self.port
        port._v = value
        port.trigger()

    def _load(self, kind: int) -> Any:
        """A value from a slot segment: an array, a tensor or a large pickle."""
        c, b = self.cells, self.base
        slot = c[b + C_SLOT]
        buf: memoryview = self._map(slot, c[b + C_GEN]).buf  # type: ignore[assignment]  # attached: not closed
        nbytes, meta = c[b + C_NBYTES], c[b + C_META]
        if kind == K_PICKLE:
            value = self._unpickle(buf, meta)
        else:
            import numpy as np

            dtype, shape = _parse_meta(bytes(buf[:meta]))
            off = -(-meta // _ALIGN) * _ALIGN
            arr = (
                np.ndarray(shape, dtype, buffer=buf, offset=off)
                if nbytes
                else np.empty(shape, dtype)
            )
            if kind == K_TENSOR:
                value = sys.modules["torch"].from_numpy(arr.copy())
            elif self.copying or not nbytes:
                value = arr.copy()
            else:
                arr.flags.writeable = False
                value = arr
                self.held[slot] = arr
                c[self.held_cell] |= 1 << slot
        return value

    def _release(self) -> None:
        """Give back slots whose arrays nothing refers to any more (the port's current value
        still counts); switch to copying when the program keeps arrays."""
        kept = 0
        held = self.held
        for slot in list(held):
            cur = self.port._v is held[slot]  # the port's reference, if it is current
            if _refs(held, slot) - _ALONE - cur <= 0:
                del self.held[slot]
                self.cells[self.held_cell] &= ~(1 << slot)
            elif not cur:
                kept += 1
        if kept >= _COPY_AFTER:
            self.copying = True

    def _map(self, slot: int, gen: int) -> Segment:
        m = self.maps.get(slot)
        if m is None or m[0] != gen:
            m = (gen, Segment(f"{self.prefix}s{slot}g{gen}"))
            self.maps[slot] = m
        return m[1]

    @staticmethod
    def _unpickle(buf: memoryview, meta: int) -> Any:
        head = array("q")
        head.frombytes(bytes(buf[:meta]))
        n_main, n_bufs, sizes = head[0], head[1], head[2:]
        pos = meta
        main = bytes(buf[pos : pos + n_main])
        pos += n_main
        bufs = []
        for n in sizes[:n_bufs]:
            bufs.append(bytearray(buf[pos : pos + n]))
            pos += n
        return pickle.loads(main, buffers=bufs)
