"""The audit's function level: every torch call, handled here or under the dispatch layer.

The function level (a ``TorchFunctionMode``) sees every call a build makes and
handles the calls it can vouch for (:mod:`.calls`) as the dispatch layer would
have from their aten ops; it pushes the dispatch layer only around the rest,
where each aten op is then watched (about 10 µs an op, against 2 µs a call here).

==========================  ======================================  ========================================
call                        handled here when                       what the audit does
==========================  ======================================  ========================================
``x.device``                always                                  ``cpu:0`` for device memory on CPU
``cpu``, ``tolist``,        ``x`` is device memory                  one read (``copy``; ``scalar`` if 0-d)
``numpy``, ``str(x)``
``item``, ``int(x)``,       ``x`` is device memory, no argument     one ``scalar`` read
``bool(x)``
``x.to(...)``               plain arguments                         a read down, a copy up, a move in place
factories                   no device tensor (``*_like``: but the   device memory with ``device=``, reading
                            first)                                  nothing
``x[i]``, ``x[i, a:b]``     ints, slices, None; or integer index    a view; or the HIP model's gather
                            tensors (1-D and up) beside slices
``index_select``,           ``(source, dim, index)``                the HIP model's gather
``gather``
``repeat_interleave``       1-D tensors, ``output_size`` a number   the HIP model's token map (and gather)
elementwise, views,         device tensors only as operands         device memory reading their inputs
reductions, ``F.pad``
``add_``, ``scatter_``...   device tensors only as operands         the target (and its base) holds their reads
``x[i] = v``                ``x`` device memory; ints, slices       ``x``'s base holds what ``v`` reads
==========================  ======================================  ========================================

The gathers and token maps live in :mod:`.gathers`.  Everything else goes
through the dispatch layer: a device tensor where torch wants a number, a
boolean mask, ``nonzero``/``unique``, ``copy_``, ``out=``, ``torch.ops``, other
Python-level torch functions, an argument of another type.  A call without
device memory among plain arguments, writing nothing, reads nothing and runs
bare.  ``FAST = False`` sends every call through the dispatch layer (the tests
check that both agree, call by call and build by build).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from metadata_builders.audit.calls import (
    BUILTIN,
    DEVICE_GETTER,
    FACTORY,
    GATHER,
    GETITEM,
    HOST_RESULT,
    IN_PLACE,
    META,
    OPAQUE,
    OPERANDS,
    PAD,
    PLAIN,
    REPEAT,
    SCALAR_READ,
    SETITEM,
    TENSORS,
    TO,
    VIEW_GETTER,
    Kind,
    _Call,
    _plain_slice,
    _resident,
    kind_of,
    scan,
)
from metadata_builders.audit.gathers import _ModelCalls
from metadata_builders.audit.placement import _Placement
from metadata_builders.audit.shortcuts import original
from metadata_builders.audit.residency import (
    _NO_READS,
    _ON_DEVICE,
    _PROVENANCE,
    _UNPLACED,
    DEVICE,
    _add_reads,
    _mark,
    _provenance,
    _reads,
    _reads_of,
    _tensors,
    _union,
    is_device_resident,
)

if TYPE_CHECKING:
    from metadata_builders.records import ReadKind

__all__: list[str] = []

_TENSOR = torch.Tensor
_ALL = slice(None)
_NO_KWARGS: dict[str, Any] = {}  # shared: no handler writes into the keywords it is given
_DTYPE = torch.dtype


class _FunctionLayer(TorchFunctionMode):
    """The ``TorchFunctionMode`` an audit pushes: each call to its handler (the hot path, kept flat)."""

    def __init__(self, audit: _FunctionLevel) -> None:
        super().__init__()
        self.audit = audit
        self.entries, self.handlers = (_ENTRIES, _HANDLERS) if audit.FAST else (_SLOW_ENTRIES, _SLOW)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        audit = self.audit
        if audit._suspended:
            return func(*args, **(kwargs or {}))
        entry = self.entries.get(func) or self.entry(func)
        handler = entry[0]
        if handler is None:  # a getter or query (.shape, .dim()): nothing to see, not even a frame
            return func(*args, **kwargs) if kwargs else func(*args)
        return handler(audit, func, entry[1], args, kwargs or _NO_KWARGS)

    def entry(self, func: Callable) -> tuple[Callable[..., Any] | None, Kind]:
        """``func``'s handler and kind, sorted the first time it is seen.

        A direct entry's wrapper is sorted as its original: torch hands the mode
        an operator's method by name (``x + 1`` is ``Tensor.add``), the wrapper
        while the direct entries are installed.
        """
        kind = kind_of(original(func))
        entry = self.entries[func] = (self.handlers[kind.kind], kind)
        return entry


class _FunctionLevel(_ModelCalls, _Placement):
    """The function-level half of :class:`~metadata_builders.audit.DeviceAudit`."""

    FAST = True
    """Handle the calls :mod:`.calls` vouches for here; False: every call through the dispatch layer."""

    DIRECT = True
    """Give the hottest calls a direct entry (:mod:`.shortcuts`); False: every call through torch's mode."""

    _current: _Call | None
    _dispatch_layer: Any

    if TYPE_CHECKING:  # the records and the dispatch layer (.core), the other half
        def _record(self, kind: ReadKind, sources: list[torch.Tensor], op: str | None = None) -> None: ...

        def _new_dispatch_layer(self) -> Any: ...

    # -- running a call ------------------------------------------------------------------------

    def _called(self, func: Callable, run: Callable, *args: Any, **kwargs: Any) -> Any:
        """``run(...)`` as the handling of the call ``func`` (what a record made meanwhile names)."""
        self._current = _Call(func)
        try:
            return run(*args, **kwargs)
        finally:
            self._current = None

    def _through_dispatch(self, func: Callable, run: Callable, *args: Any, **kwargs: Any) -> Any:
        """``run(...)`` under the dispatch layer, which sees each of its aten ops."""
        if self._dispatch_layer is None:
            self._dispatch_layer = self._new_dispatch_layer()
        self._current = _Call(func)
        try:
            with self._dispatch_layer:
                return run(*args, **kwargs)
        finally:
            self._current = None

    def _dispatched(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        return self._through_dispatch(func, func, *args, **kwargs)

    def _device_getter(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        first = args[0]
        if first.is_cpu and getattr(first, _PROVENANCE, _UNPLACED)[0]:
            return DEVICE
        return func(*args, **kwargs)

    # -- calls vouched for -------------------------------------------------------------------------

    def _operands(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        """A function of its operands (:mod:`.calls`): its result is device memory reading theirs."""
        if len(args) < kind.min_args:
            return self._through_dispatch(func, func, *args, **kwargs)
        resident, reads, position, slots = False, _NO_READS, 0, kind.slots
        for value in args:  # scan() inlined for the common call, positional tensors and numbers: no allocation
            value_type = type(value)
            if value_type is _TENSOR:
                provenance = getattr(value, _PROVENANCE, _UNPLACED)
                if provenance[0] if value.is_cpu else not value.is_meta:
                    if position >= slots:
                        return self._through_dispatch(func, func, *args, **kwargs)
                    resident = True
                found = provenance[1]
                if found and found is not reads:
                    reads = _union(reads, found) if reads else found
            elif value_type not in PLAIN and not _numbers(value, value_type):
                return self._operands_scanned(func, kind, args, kwargs)
            position += 1
        if kwargs:
            for key, value in kwargs.items():  # numbers, dtypes, rounding modes; anything else is scanned
                if type(value) not in PLAIN or key == "out" or key == "inplace":
                    return self._operands_scanned(func, kind, args, kwargs)
            out = func(*args, **kwargs)
        else:
            out = func(*args)
        if not resident:
            return out
        if kind.reads_none:
            reads = _NO_READS
        if type(out) is not _TENSOR:
            _mark_out(out, args, reads)
            return out
        for value in args:
            if out is value:
                return out  # an input handed back keeps its own marks
        setattr(out, _PROVENANCE, _ON_DEVICE.get(reads) or _provenance(True, reads))
        return out

    def _operands_scanned(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        found = scan(args, kwargs, kind.slots, kind.operand_kwargs) if len(args) >= kind.min_args else None
        if found is None:
            return self._through_dispatch(func, func, *args, **kwargs)
        tensors, resident = found
        out = func(*args, **kwargs)
        if resident:
            _mark_out(out, tensors, _NO_READS if kind.reads_none else _reads_of(tensors))
        return out

    def _pad(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        if (len(args) < 3 or args[2] == "constant") and kwargs.get("mode", "constant") == "constant":
            return self._operands(func, kind, args, kwargs)
        return self._through_dispatch(func, func, *args, **kwargs)

    def _view_getter(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        out = func(*args, **kwargs)
        if type(args[0]) in TENSORS and _resident(args[0]) and isinstance(out, torch.Tensor):
            _mark(out, True, _reads(args[0]))
        return out

    def _scalar_read(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        """``item()``, ``int(x)``, ``bool(x)``: one ``scalar`` read of a device tensor."""
        found = scan(args, kwargs, 1)
        if found is None or (found[1] and (len(args) != 1 or kwargs)):
            return self._through_dispatch(func, func, *args, **kwargs)
        if not found[1]:
            return func(*args, **kwargs)
        self._current = _Call(func)
        try:
            self._record("scalar", [args[0]])
            return func(*args)
        finally:
            self._current = None

    def _host_result(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        if is_device_resident(args[0] if args else None):
            return self._called(func, self._read_back, func, kind.name, args, kwargs)
        return self._builtin(func, kind, args, kwargs)

    def _builtin(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        """Any other call: bare on host memory among plain arguments, else under the dispatch layer."""
        found = scan(args, kwargs)
        if found is None or found[1]:
            return self._through_dispatch(func, func, *args, **kwargs)
        return func(*args, **kwargs)

    def _to_call(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        source = args[0] if args else None
        if len(args) == 2 and not kwargs and type(args[1]) is _DTYPE and type(source) is _TENSOR:
            out = func(source, args[1])  # a dtype change: stays where it is
            if out is not source:
                provenance = getattr(source, _PROVENANCE, _UNPLACED)
                if provenance[0] if source.is_cpu else not source.is_meta:
                    setattr(out, _PROVENANCE, _ON_DEVICE.get(provenance[1]) or _provenance(True, provenance[1]))
            return out
        if not isinstance(source, torch.Tensor):
            return self._through_dispatch(func, func, *args, **kwargs)
        if type(source) not in TENSORS or scan(args, kwargs, 2) is None:
            return self._through_dispatch(func, self._to, func, args, kwargs)
        return self._to(func, args, kwargs)

    def _factory_call(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        if _all_plain(args, kwargs):  # torch.arange(n, dtype=..., device=...), torch.full((n,), -1, ...)
            return self._factory(func, kind.name, args, kwargs, ())
        found = scan(args, kwargs, kind.slots)
        if found is None or (found[1] and kind.slots == 0):
            return self._through_dispatch(func, self._factory, func, kind.name, args, kwargs)
        out = self._factory(func, kind.name, args, kwargs, found[0])
        if found[1] and type(out) in TENSORS:
            _mark(out, True, _NO_READS)  # like(x) on the device: a fresh device buffer that reads nothing
        return out

    # -- writes ----------------------------------------------------------------------------------------

    def _in_place(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        """``x.add_(y)``, ``buf.scatter_(0, i, src)``: no read; ``x`` (and what it views) now holds what they read."""
        found = scan(args, kwargs, kind.slots, kind.operand_kwargs)
        if found is None or not args or type(args[0]) is not _TENSOR:
            return self._through_dispatch(func, func, *args, **kwargs)
        for i in kind.numbers:
            if len(args) <= i or type(args[i]) is not int:
                return self._through_dispatch(func, func, *args, **kwargs)
        out = func(*args, **kwargs)
        reads = _reads_of(found[0])
        target = args[0]
        while target is not None and reads:
            _add_reads(target, reads)
            target = target._base
        return out

    def _setitem(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        """``x[i] = v``, ``x[a:b] = v`` into device memory: a copy into a view of ``x``; its base now holds v's reads.

        Into host memory (a read when ``v`` is device memory, or not, by torch's own
        spelling of the copy), with a tensor index, a mask or ``...``: the dispatch level.
        """
        target, index, value = args
        parts = index if type(index) is tuple else (index,)
        viewed = False  # an int or a partial slice: torch copies into a view, whose base is x's
        for part in parts:
            if type(part) is int:
                viewed = True
            elif type(part) is slice and _plain_slice(part):
                viewed = viewed or part != _ALL
            else:
                return self._through_dispatch(func, func, *args, **kwargs)
        value_type = type(value)
        if (kwargs or not viewed or type(target) is not _TENSOR or not _resident(target)
                or not (value_type is _TENSOR or value_type is int or value_type is float or value_type is bool)):
            return self._through_dispatch(func, func, *args, **kwargs)
        reads = _reads(target)
        if value_type is _TENSOR:
            if not _resident(value) and _reads(value):  # torch may copy from an unmarked view of it
                return self._through_dispatch(func, func, *args)
            reads = _union(reads, _reads(value))
        out = func(*args)
        if reads:
            _add_reads(target if target._base is None else target._base, reads)
        return out

    # -- every call through the dispatch layer ----------------------------------------------------

    def _slow_host_result(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        if is_device_resident(args[0] if args else None):
            return self._called(func, self._read_back, func, kind.name, args, kwargs)
        return self._through_dispatch(func, func, *args, **kwargs)

    def _slow_factory(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        return self._through_dispatch(func, self._factory, func, kind.name, args, kwargs)

    def _slow_to(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        if args and isinstance(args[0], torch.Tensor):
            return self._through_dispatch(func, self._to, func, args, kwargs)
        return self._through_dispatch(func, func, *args, **kwargs)


def _numbers(value: Any, value_type: type) -> bool:
    """A tuple or list of plain values (a shape, a padding): no tensor, no code of its own."""
    return (value_type is tuple or value_type is list) and PLAIN.issuperset(map(type, value))


def _all_plain(args: tuple, kwargs: dict) -> bool:
    """No tensor and nothing that runs code among the arguments, and no ``out=``."""
    for value in args:
        value_type = type(value)
        if value_type not in PLAIN and not _numbers(value, value_type):
            return False
    for key, value in kwargs.items():
        value_type = type(value)
        if key == "out" or (value_type not in PLAIN and not _numbers(value, value_type)):
            return False
    return True


def _mark_out(out: Any, inputs: tuple | list, reads: frozenset[str]) -> None:
    """Mark what a call returned as device memory reading ``reads``; an input handed back keeps its own marks."""
    if type(out) is _TENSOR:
        for t in inputs:
            if out is t:
                return
        setattr(out, _PROVENANCE, _provenance(True, reads))
        return
    for t in _tensors(out):
        if not any(t is x for x in inputs):
            _mark(t, True, reads)


_F = _FunctionLevel
_HANDLERS: dict[int, Callable[..., Any] | None] = {
    DEVICE_GETTER: _F._device_getter, META: None, VIEW_GETTER: _F._view_getter, HOST_RESULT: _F._host_result,
    SCALAR_READ: _F._scalar_read, FACTORY: _F._factory_call, TO: _F._to_call, GETITEM: _F._getitem,
    GATHER: _F._gather_call, REPEAT: _F._token_map, PAD: _F._pad, OPERANDS: _F._operands, IN_PLACE: _F._in_place,
    SETITEM: _F._setitem, BUILTIN: _F._builtin, OPAQUE: _F._dispatched,
}
"""What the function level does with each kind of call."""
_SLOW: dict[int, Callable[..., Any] | None] = {
    **dict.fromkeys(_HANDLERS, _F._dispatched), DEVICE_GETTER: _F._device_getter, META: None,
    HOST_RESULT: _F._slow_host_result, FACTORY: _F._slow_factory, TO: _F._slow_to,
}
"""The same with every call through the dispatch layer but where memory goes (``FAST = False``)."""
_ENTRIES: dict[Callable, tuple[Callable[..., Any] | None, Kind]] = {}
_SLOW_ENTRIES: dict[Callable, tuple[Callable[..., Any] | None, Kind]] = {}
"""Each function seen: its handler (None: call it as is) and its kind (the hot path's one lookup)."""
