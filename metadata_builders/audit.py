"""Sync audit and HIP device model, applied *around* any builder.

:class:`DeviceAudit` watches a build at two levels of torch at once, so it
sees every read of device data whatever the Python spelling and whoever wrote
the builder (ours, an installed SGLang, a user's, a subclass of anything):

* the **dispatch** level (a ``TorchDispatchMode``): ``aten._local_scalar_dense``
  (``item``, ``int()``, ``bool()``, ``0 in t``, a slice bound ``x[:t.sum()]``,
  ``torch.arange(t.sum())``, ``torch.empty(t.sum())``, ``t.new_zeros(t.sum())``,
  ``t.expand(t.sum())``), device-to-host ``copy_``, and ops whose output shape
  depends on device data (``nonzero`` -- also behind ``torch.where(mask)`` --,
  ``unique``, ``masked_select``, boolean-mask indexing, ``bincount``, and
  ``repeat_interleave`` without ``output_size``);
* the **function** level (a ``TorchFunctionMode``), for the reads that never reach
  the dispatcher on CPU: ``tolist``, ``cpu``, ``numpy``, ``np.asarray(t)``,
  ``str(t)``, ``f"{t}"``, and ``torch.tensor([t[0], t[1]])``.

Each read becomes one :class:`~metadata_builders.metadata.SyncRecord`: the
Python-level op, its kind (``scalar``, ``copy`` or ``shape``), the builder
function that did it, and which harness inputs the value depends on.

**Device residency on CPU.**  On a GPU a tensor's device says where it lives.
On CPU the audit marks residency on the tensor object: the harness's inputs;
factories given an explicit ``device=`` (also in a builder's ``__init__``, which
``get_builder`` runs under the audit, so graph-state buffers count); ``.to(dev)``
of a host tensor (a device copy); and anything computed from a device tensor.
Factories without ``device=``, ``pin_memory`` staging buffers and results of
``.cpu()`` are host tensors.  ``.to(dev)`` of a device tensor stays on the device
(on CPU ``"cpu"`` names both sides; ``.cpu()``, ``tolist`` and friends are the
unambiguous way down, and are audited).

**The HIP device model.**  ``repeat_interleave(..., output_size=n)`` gets HIP
semantics: no check.  Repeats summing to ``S > n`` write ``S - n`` elements out
of bounds (``oob_write``; the kernel keeps the first ``n``), ``S < n`` leave
``n - S`` uninitialised (``uninitialized_tail``; modelled as zeros).  A gather
(``index``, ``index_select``, ``gather``) from device memory past the end of a
dimension reads out of bounds (``oob_read``; modelled as ``-1``, where CPU torch
would raise ``IndexError``).  A **divergence** is delivered to every asynchronous
(``non_blocking``) host-to-device copy of the extend lengths the harness names:
the device receives what the divergence says, exactly as a stale or in-flight
copy would deliver it, so a builder is judged on what it does with device memory.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from metadata_builders.metadata import FaultRecord, ReadKind, SyncRecord, TokenMap

__all__ = ["OOB_READ_VALUE", "DeviceAudit", "is_device_resident", "kernel_launch", "sync_debug_mode"]

OOB_READ_VALUE = -1
"""What the device model returns for an element gathered out of bounds."""

_THIS_FILE = __file__
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_RESIDENT = "_metadata_builders_resident"
_READS = "_metadata_builders_reads"
_NO_READS: frozenset[str] = frozenset()

aten = torch.ops.aten

_FACTORIES = frozenset(
    {"tensor", "as_tensor", "arange", "zeros", "ones", "full", "empty", "empty_strided", "randint", "rand",
     "randn", "linspace", "eye", "from_numpy", "range", "zeros_like", "ones_like", "full_like", "empty_like"}
)
_HOST_RESULTS = frozenset({"cpu", "numpy", "tolist", "__array__", "__repr__", "__format__", "__str__"})
_SCALAR_OPS = frozenset({aten._local_scalar_dense, aten.is_nonzero, aten.equal, aten.allclose})
_SHAPE_OPS = frozenset(
    {aten.nonzero, aten.argwhere, aten._unique, aten._unique2, aten.unique_dim, aten.unique_consecutive,
     aten.unique_dim_consecutive, aten.masked_select, aten.bincount}
)
_LIKE_FACTORIES = frozenset(
    {aten.empty_like, aten.zeros_like, aten.ones_like, aten.full_like, aten.rand_like, aten.randn_like,
     aten.new_empty, aten.new_zeros, aten.new_ones, aten.new_full, aten.new_empty_strided}
)
_GATHERS = frozenset({aten.index, aten.index_select, aten.gather})


def _tensors(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


def _flat(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors among an op's arguments (one level of lists, as aten ops take them): the hot path."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out.extend(x for x in a if isinstance(x, torch.Tensor))
    if kwargs:
        out.extend(v for v in kwargs.values() if isinstance(v, torch.Tensor))
    return out


def is_device_resident(t: Any) -> bool:
    """Whether ``t`` is a tensor in device memory (really, or as the CPU model marks it)."""
    if not isinstance(t, torch.Tensor):
        return False
    if t.is_cpu:
        return getattr(t, _RESIDENT, False)
    return not t.is_meta


def _reads(t: torch.Tensor) -> frozenset[str]:
    return getattr(t, _READS, _NO_READS)


def _reads_of(tensors: list[torch.Tensor]) -> frozenset[str]:
    reads = _NO_READS
    for t in tensors:
        r = getattr(t, _READS, None)
        if r:
            reads = reads | r
    return reads


def _mark(t: torch.Tensor, resident: bool, reads: frozenset[str]) -> None:
    if t.is_cpu:
        setattr(t, _RESIDENT, resident)
    if reads or _reads(t):
        setattr(t, _READS, reads)


def _op_name(func: Callable) -> str:
    name = getattr(func, "__name__", repr(func))
    qual = getattr(func, "__qualname__", "")
    if qual.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{name}"
    return f"torch.{name}"


_SCALAR, _SHAPE, _INDEX, _COPY, _GATHER, _REPEAT, _LIKE, _MUTATES, _OTHER = range(9)
_KINDS: dict[Any, int] = {}


def _non_blocking(args: tuple, kwargs: dict) -> bool:
    """``x.to(device, non_blocking=True)`` / ``dst.copy_(src, True)``: the copy is asynchronous."""
    return bool(kwargs.get("non_blocking")) or (len(args) > 2 and args[2] is True)


def _kind(func: Any) -> int:
    """What an aten overload is to the audit (cached: the schema is looked up once per overload)."""
    kind = _KINDS.get(func)
    if kind is None:
        packet = func.overloadpacket
        if func is aten.repeat_interleave.Tensor:
            kind = _REPEAT
        elif packet in _SCALAR_OPS:
            kind = _SCALAR
        elif packet in _SHAPE_OPS:
            kind = _SHAPE
        elif packet is aten.copy_:
            kind = _COPY
        elif packet is aten.index:
            kind = _INDEX
        elif packet in _GATHERS:
            kind = _GATHER
        elif func._schema.is_mutable:
            kind = _MUTATES
        elif packet in _LIKE_FACTORIES:
            kind = _LIKE
        else:
            kind = _OTHER
        _KINDS[func] = kind
    return kind


@dataclass(slots=True)
class _Call:
    """The Python-level torch call being handled (the spelling a record names)."""

    func: Callable
    recorded: bool = False


class DeviceAudit:
    """Context manager: audit the syncs and model the device faults of one build.

    ``host_syncs``, ``faults`` and ``token_maps`` fill as the builder runs.
    ``mark_input`` marks a harness-made tensor device-resident under its input
    name.  ``divergence=(clean, device)`` makes every ``non_blocking``
    host-to-device copy of a 1-D tensor holding ``clean`` deliver ``device``.
    """

    def __init__(self, *, divergence: tuple[list[int], list[int]] | None = None) -> None:
        self.host_syncs: list[SyncRecord] = []
        self.faults: list[FaultRecord] = []
        self.token_maps: list[TokenMap] = []
        self.divergence = divergence
        self.divergence_delivered = 0
        """How many asynchronous copies received the divergence."""
        self._current: _Call | None = None
        self._suspended = False
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> DeviceAudit:
        self._stack.enter_context(_DispatchLayer(self))
        self._stack.enter_context(_FunctionLayer(self))
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _ACTIVE.remove(self)
        self._stack.close()

    @staticmethod
    def mark_input(t: torch.Tensor, name: str) -> torch.Tensor:
        """Mark a harness input device-resident, reading the input ``name``; return it."""
        _mark(t, True, frozenset({name}))
        return t

    # -- records ---------------------------------------------------------------------------

    def _record(self, kind: ReadKind, sources: list[torch.Tensor], op: str | None = None) -> None:
        call = self._current
        if call is not None:
            if call.recorded:
                return
            call.recorded = True
        reads = sorted(_reads_of(sources))
        name = op or (_op_name(call.func) if call is not None else "<dispatch>")
        self.host_syncs.append(SyncRecord(name, _caller_stage(), "observed", kind=kind, reads=tuple(reads)))

    def _fault(self, kind: str, count: int, op: str, output_size: int | None = None,
               device_sum: int | None = None) -> None:
        self.faults.append(FaultRecord(kind, count, op, _caller_stage(), output_size, device_sum))  # type: ignore[arg-type]

    # -- function level --------------------------------------------------------------------

    def on_function(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        if self._suspended:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        call = _Call(func)
        self._current = call
        try:
            first = args[0] if args else None
            if name in _HOST_RESULTS and is_device_resident(first):
                self._record("scalar" if first.dim() == 0 else "copy", [first])
                self._suspended = True  # one read, recorded; what formatting does inside is host work
                try:
                    out = func(*args, **kwargs)
                finally:
                    self._suspended = False
                return _host_copy(out, first) if name == "cpu" else out
            if name in _FACTORIES:
                return self._factory(func, name, args, kwargs)
            if name == "to" and isinstance(first, torch.Tensor) and not is_device_resident(first) and _to_device(args, kwargs):
                return self._host_to_device(func, args, kwargs)
            return func(*args, **kwargs)
        finally:
            self._current = None

    def _factory(self, func: Callable, name: str, args: tuple, kwargs: dict) -> Any:
        if name in ("tensor", "as_tensor") and args and not isinstance(args[0], torch.Tensor):
            inside = [t for t in _tensors(args[0]) if is_device_resident(t)]
            if inside:
                self._record("copy", inside)
        out = func(*args, **kwargs)
        if kwargs.get("device") is not None and not kwargs.get("pin_memory"):
            if any(out is t for t in _tensors(args)):
                out = out.clone()  # a real device makes a copy; never mark the caller's host tensor
            _mark(out, True, _NO_READS)
        return out

    def _host_to_device(self, func: Callable, args: tuple, kwargs: dict) -> torch.Tensor:
        src = args[0]
        if _non_blocking(args, kwargs):
            src = self._delivered(src)
        out = func(src, *args[1:], **kwargs)
        if out is args[0] or out is src:
            out = out.clone()
        _mark(out, True, _reads(args[0]))
        return out

    def _delivered(self, src: torch.Tensor) -> torch.Tensor:
        """What an asynchronous host-to-device copy of ``src`` delivers under the divergence."""
        if self.divergence is None or src.dim() != 1 or src.device.type != "cpu":
            return src
        clean, device = self.divergence
        if src.shape[0] != len(clean) or src.tolist() != clean:
            return src
        self.divergence_delivered += 1
        return torch.tensor(device, dtype=src.dtype)

    # -- dispatch level ----------------------------------------------------------------------

    def on_dispatch(self, func: Any, args: tuple, kwargs: dict) -> Any:
        if self._suspended:
            return func(*args, **kwargs)
        kind = _kind(func)
        inputs = _flat(args, kwargs)
        on_device = [t for t in inputs if is_device_resident(t)] if inputs else inputs
        if on_device and any(t.is_meta for t in inputs):
            return func(*args, **kwargs)
        if on_device:
            if kind is _REPEAT:
                with _model_bookkeeping():
                    return self._repeat_interleave(func, args, kwargs)
            if kind is _SCALAR:
                self._record("scalar", on_device)
            elif kind is _SHAPE:
                self._record("shape", on_device)
            elif kind is _INDEX and any(t.dtype in (torch.bool, torch.uint8) for t in _tensors(args[1])):
                self._record("shape", on_device)
            elif kind is _COPY and is_device_resident(args[1]) and not is_device_resident(args[0]):
                self._record("copy", [args[1]])
            if (kind is _INDEX or kind is _GATHER) and is_device_resident(args[0]):
                with _model_bookkeeping():
                    out = self._gather(func, args, kwargs)
                _mark(out, True, _reads_of(inputs))
                return out
        if (kind is _COPY and is_device_resident(args[0]) and not is_device_resident(args[1])
                and _non_blocking(args, kwargs)):
            args = (args[0], self._delivered(args[1]), *args[2:])
        out = func(*args, **kwargs)
        if kind is _COPY or kind is _MUTATES:
            # In place (add_, copy_, index_put_, ...): the mutated tensor stays where it
            # lives and now also depends on what was written into it.
            reads = _reads_of(inputs)
            target = args[0] if isinstance(args[0], torch.Tensor) else None
            while target is not None and reads:
                # ``buf[:n] = x`` writes through a view: its base now holds x's data too.
                setattr(target, _READS, reads | _reads(target))
                target = target._base
        elif on_device:
            reads = _NO_READS if kind is _LIKE else _reads_of(inputs)
            if isinstance(out, torch.Tensor):
                _mark(out, True, reads)
            else:
                for t in _tensors(out):
                    _mark(t, True, reads)
        return out

    def _repeat_interleave(self, func: Any, args: tuple, kwargs: dict) -> torch.Tensor:
        repeats = args[0]
        output_size = kwargs.get("output_size")
        full = func(repeats)  # the map the device lengths really produce
        total = int(full.shape[0])
        stage = _caller_stage()
        self.token_maps.append(TokenMap(None if output_size is None else int(output_size), total, stage))
        out = full
        if output_size is None:
            self._record("scalar", [repeats], op="repeat_interleave(no output_size)")
        else:
            n = int(output_size)
            if total > n:
                self._fault("oob_write", total - n, "repeat_interleave", n, total)
                out = full[:n]
            elif total < n:
                self._fault("uninitialized_tail", n - total, "repeat_interleave", n, total)
                out = torch.cat([full, full.new_zeros(n - total)])
        _mark(out, True, _reads(repeats))
        return out

    def _gather(self, func: Any, args: tuple, kwargs: dict) -> torch.Tensor:
        """A gather from device memory; out-of-range indices read out of bounds (``oob_read``)."""
        source = args[0]
        if func.overloadpacket is aten.index:
            return self._index(func, source, list(args[1]))
        dim, index = int(args[1]), args[2]
        size = source.shape[dim] if source.dim() else 1
        if _in_range(index, size):
            return func(*args, **kwargs)
        bad = (index >= size) | (index < -size)
        out = func(source, dim, index.masked_fill(bad, 0), *args[3:], **kwargs)
        if func.overloadpacket is aten.gather:
            self._fault("oob_read", int(bad.sum()), "gather")
            return out.masked_fill(bad, OOB_READ_VALUE)
        self._fault("oob_read", int(bad.sum()) * (out.numel() // max(index.numel(), 1)), "index_select")
        shape = [1] * out.dim()
        shape[dim] = index.numel()
        return out.masked_fill(bad.reshape(shape), OOB_READ_VALUE)

    def _index(self, func: Any, source: torch.Tensor, indices: list[torch.Tensor | None]) -> torch.Tensor:
        """``source[i0, i1, ...]``: integer index tensors checked against their dimension.

        Out-of-range elements are filled with :data:`OOB_READ_VALUE` when the index
        tensors lead (``t[rows, cols]``, the shape every builder here uses); the
        count is exact either way.
        """
        dim, checks = 0, []
        for idx in indices:
            if idx is None or idx.dtype in (torch.bool, torch.uint8):
                dim += 1 if idx is None else idx.dim()
                continue
            if not _in_range(idx, source.shape[dim]):
                checks.append((len(checks), dim))
            dim += 1
        if not checks:
            return func(source, indices)
        dim, fixed, bad, gap, leading = 0, [], None, False, True
        for idx in indices:
            if idx is None or idx.dtype in (torch.bool, torch.uint8):
                gap = True
                fixed.append(idx)
                dim += 1 if idx is None else idx.dim()
                continue
            leading = leading and not gap
            size = source.shape[dim]
            out_of_range = (idx >= size) | (idx < -size)
            bad = out_of_range if bad is None else bad | out_of_range
            fixed.append(idx.masked_fill(out_of_range, 0))
            dim += 1
        out = func(source, fixed)
        self._fault("oob_read", int(bad.sum()) * (out.numel() // max(bad.numel(), 1)), "index")
        if leading:
            out = out.masked_fill(bad.reshape(*bad.shape, *([1] * (out.dim() - bad.dim()))), OOB_READ_VALUE)
        return out


def _in_range(index: torch.Tensor, size: int) -> bool:
    """Whether every index lies in ``-size..size-1`` (one reduction, read back by the model)."""
    if index.numel() == 0:
        return True
    lo, hi = torch.aminmax(index)
    return int(lo) >= -size and int(hi) < size


_ACTIVE: list[DeviceAudit] = []


@contextlib.contextmanager
def kernel_launch(arguments: Any) -> Iterator[None]:
    """Run a kernel outside the audit's view (an interpreted Triton launch copies its
    arguments to the host, which no GPU launch does), then mark what it wrote: every
    tensor among ``arguments`` (nested lists, tuples, dicts) may now depend on what any
    of them read."""
    tensors = list(_tensors(arguments))
    audit = _ACTIVE[-1] if _ACTIVE else None
    if audit is None or audit._suspended:
        yield
        return
    audit._suspended = True
    try:
        yield
    finally:
        audit._suspended = False
    reads = _reads_of(tensors)
    for t in tensors:
        if is_device_resident(t) and reads:
            setattr(t, _READS, reads | _reads(t))


_CUDA = torch.cuda.is_available()


def _model_bookkeeping() -> contextlib.AbstractContextManager:
    """The device model's own checks read values back; keep them out of ``set_sync_debug_mode``."""
    return sync_debug_mode(0) if _CUDA else contextlib.nullcontext()


def _host_copy(out: Any, source: torch.Tensor) -> Any:
    """``.cpu()`` on CPU returns its argument; the host copy a device would make is a new tensor."""
    if isinstance(out, torch.Tensor) and out is source:
        out = out.clone()
        _mark(out, False, _reads(source))
    return out


def _to_device(args: tuple, kwargs: dict) -> bool:
    if kwargs.get("device") is not None:
        return True
    return any(isinstance(a, (str, torch.device)) for a in args[1:])


class _FunctionLayer(TorchFunctionMode):
    def __init__(self, audit: DeviceAudit) -> None:
        super().__init__()
        self.audit = audit

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return self.audit.on_function(func, args, kwargs or {})


class _DispatchLayer(TorchDispatchMode):
    def __init__(self, audit: DeviceAudit) -> None:
        super().__init__()
        self.audit = audit

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.audit.on_dispatch(func, args, kwargs or {})


def _caller_stage() -> str:
    """Name of the innermost builder function on the stack (outside torch and this module)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith(_TORCH_DIR) or filename == _THIS_FILE):
            return frame.f_code.co_name
        frame = frame.f_back
    return "<unknown>"


@contextlib.contextmanager
def sync_debug_mode(mode: str | int | None) -> Iterator[None]:
    """On a GPU, run the block under ``torch.cuda.set_sync_debug_mode(mode)``; ``None`` or no GPU: unchanged.

    ``"error"`` makes any implicit sync raise (P7 on a GPU); ``0`` lets the
    device model's own bookkeeping sync inside such a block.
    """
    if mode is None or not torch.cuda.is_available():
        yield
        return
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(previous)
