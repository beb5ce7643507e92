"""The audit of one build: the two torch layers it watches from, the reads it records, the device it models.

:class:`DeviceAudit` watches a build at two levels of torch: the **function**
level (a ``TorchFunctionMode``, :mod:`.function_level`: every call; ``tolist``,
``cpu``, ``numpy``, ``np.asarray``, ``str``, f-strings, ``torch.tensor([t[0],
t[1]])``, ``.to(host)``, factories and ``.device``; and every call it can vouch
for) and, around the calls it cannot, the **dispatch** level (a
``TorchDispatchMode``: ``aten._local_scalar_dense`` behind ``item``, ``int()``,
``bool()``, ``0 in t``, slice bounds and sizes; device-to-host ``copy_``; ops
whose output shape depends on device data).  Each read becomes one :class:`~metadata_builders.records.SyncRecord`:
the op, its kind, the builder function, the harness inputs it depends on
(:mod:`.residency`).  A divergence is delivered to every asynchronous
host-to-device copy of the extend lengths it names; kernels follow the HIP model
(:mod:`.device_model`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
from torch.overrides import _pop_mode, _push_mode
from torch.utils._python_dispatch import TorchDispatchMode

from metadata_builders import session
from metadata_builders.audit import shortcuts, streams
from metadata_builders.audit.device_model import _caller_stage, _HipDeviceModel, _model_bookkeeping
from metadata_builders.audit.function_level import _FunctionLayer, _FunctionLevel
from metadata_builders.audit.residency import (
    _NO_READS,
    _add_reads,
    _flat,
    _input_reads,
    _mark,
    _non_blocking,
    _reads_of,
    _tensors,
    is_device_resident,
)
from metadata_builders.audit.triton import unwatch_launches, watch_launches
from metadata_builders.records import FaultRecord, ReadKind, SyncRecord, TokenMap

__all__ = ["DeviceAudit", "kernel_launch"]

aten = torch.ops.aten

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


def _op_name(func: Callable) -> str:
    name = getattr(func, "__name__", repr(func))
    qual = getattr(func, "__qualname__", "")
    if qual.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{name}"
    return f"torch.{name}"


_SCALAR, _SHAPE, _INDEX, _COPY, _GATHER, _REPEAT, _LIKE, _MUTATES, _OTHER = range(9)
_KINDS: dict[Any, int] = {}


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


class DeviceAudit(_FunctionLevel, _HipDeviceModel):
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
        self._current = None
        self._suspended = False
        self._direct = False
        self._dispatch_layer: _DispatchLayer | None = None
        """Made the first time a call goes through it."""

    def __enter__(self) -> DeviceAudit:
        # Once a build: the three contexts entered and left by hand (an ExitStack and two
        # generators cost about a tenth of what the audit adds to a small build).
        # Any builder's interpreted Triton launch runs inside kernel_launch (only if triton is loaded).
        watch_launches(kernel_launch)
        try:
            layer = _FunctionLayer(self)
            _push_mode(layer)
            self._direct = self.DIRECT
            if self._direct:
                try:
                    shortcuts.enter(layer)
                except BaseException:
                    _pop_mode()
                    raise
        except BaseException:
            unwatch_launches()
            raise
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stale_copies()  # no sync at a build's end: what is still pending stays pending for the next build
        _ACTIVE.remove(self)
        try:
            if self._direct:
                shortcuts.leave()
        finally:
            try:
                _pop_mode()
            finally:
                unwatch_launches()

    @classmethod
    def session(cls) -> contextlib.AbstractContextManager[None]:
        """For a run of many audits (a property's examples, a gate batch): the direct entries installed once.

        Nothing else changes: each build is still audited on its own, and torch is
        left as found when the block ends (:func:`.shortcuts.session`).  The asynchronous
        copies still pending (:mod:`.streams`) are forgotten at both ends: a run's builds
        are consecutive steps, one run is not the next run's past.
        """
        return _run(shortcuts.session() if cls.DIRECT else contextlib.nullcontext())

    def _new_dispatch_layer(self) -> _DispatchLayer:
        return _DispatchLayer(self)

    @staticmethod
    def mark_input(t: torch.Tensor, name: str) -> torch.Tensor:
        """Mark a harness input device-resident, reading the input ``name``; return it."""
        _mark(t, True, _input_reads(name))
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
        self._stale_copies()
        streams.drain()  # a device-to-host read waits for the stream: every copy issued before it has been read

    def _stale_copies(self) -> None:
        """The asynchronous copies whose pinned source was rewritten before the stream read it (:mod:`.streams`)."""
        for pending, changed in streams.stale():
            self.faults.append(FaultRecord("stale_async_copy", changed, pending.op, pending.stage))

    def _fault(self, kind: str, count: int, op: str, output_size: int | None = None,
               device_sum: int | None = None) -> None:
        self.faults.append(FaultRecord(kind, count, op, _caller_stage(), output_size, device_sum))  # type: ignore[arg-type]

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
            streams.copy_issued(args[1], "copy_")
            args = (args[0], self._delivered(args[1]), *args[2:])
        out = func(*args, **kwargs)
        if kind is _COPY or kind is _MUTATES:
            # In place (add_, copy_, index_put_, ...): the mutated tensor stays where it
            # lives and now also depends on what was written into it.
            reads = _reads_of(inputs)
            target = args[0] if isinstance(args[0], torch.Tensor) else None
            while target is not None and reads:
                # ``buf[:n] = x`` writes through a view: its base now holds x's data too.
                _add_reads(target, reads)
                target = target._base
        elif on_device:
            reads = _NO_READS if kind is _LIKE else _reads_of(inputs)
            if isinstance(out, torch.Tensor):
                _mark(out, True, reads)
            else:
                for t in _tensors(out):
                    _mark(t, True, reads)
        return out


_ACTIVE: list[DeviceAudit] = []


@contextlib.contextmanager
def _run(inner: contextlib.AbstractContextManager[None]) -> Iterator[None]:
    streams.drain()
    try:
        with inner:
            yield
    finally:
        streams.drain()


def auditing() -> bool:
    """A build is being audited now (an upstream stub may then run upstream's own code under the model)."""
    return bool(_ACTIVE)


@contextlib.contextmanager
def kernel_launch(arguments: Any) -> Iterator[None]:
    """Run a kernel outside the audit's view (an interpreted Triton launch copies its
    arguments to the host, which no GPU launch does), then mark what it wrote: every
    tensor among ``arguments`` (nested lists, tuples, dicts) may now depend on what any
    of them read.  Every active audit is suspended (nested audits see each other's ops);
    any builder's interpreted launch gets here (:mod:`metadata_builders.audit.triton`)."""
    tensors = list(_tensors(arguments))
    watching = [audit for audit in _ACTIVE if not audit._suspended]
    if not watching:
        yield
        return
    for audit in watching:
        audit._suspended = True
    try:
        yield
    finally:
        for audit in watching:
            audit._suspended = False
    reads = _reads_of(tensors)
    for t in tensors:
        if is_device_resident(t) and reads:
            _add_reads(t, reads)


def kernel_fault(kind: str, count: int, op: str, *, output_size: int | None = None,
                 device_sum: int | None = None) -> bool:
    """A kernel's model reports a device fault it commits (``oob_write`` of ``count`` elements by ``op``).

    For models of kernels that cannot run on CPU (a JIT extension): on a GPU the
    kernel writes past its buffer and goes on, so the model records the fault in
    every active audit -- suspended by its launch or not -- and goes on too.
    Returns False when no audit is active: the caller then raises, as a fault
    nobody records must not pass silently.
    """
    if not _ACTIVE:
        return False
    for audit in _ACTIVE:
        audit._fault(kind, count, op, output_size, device_sum)
    return True


class _DispatchLayer(TorchDispatchMode):
    def __init__(self, audit: DeviceAudit) -> None:
        super().__init__()
        self.audit = audit

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.audit.on_dispatch(func, args, kwargs or {})




session.on_session(DeviceAudit.session)  # every harness session installs the direct entries once
