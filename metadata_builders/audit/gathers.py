"""The HIP model's calls, vouched for at the function level: gathers and token maps.

``x[i]``, ``x[i, j]``, ``x[i, a:b:s]``, ``index_select``, ``gather`` and
``repeat_interleave`` over device memory go to the model (:mod:`.device_model`)
exactly as the dispatch level would hand it their aten ops -- but without
watching every op.  On CPU torch checks bounds itself, so an index it accepts
is in range and nothing is modelled; only what it refuses goes to the model.
Worked example, ``table`` a 2x6 device table::

    table[rows, cols]           aten.index(table, [rows, cols])        the model checks rows, cols
    table[rows, 1:7:2]          aten.index(table[:, 1:7:2], [rows])    the slices' view, then the model
    table[1, cols]              an int beside an index tensor          the dispatch level (torch's own)
    repeat_interleave(x, r, output_size=n)
                                the map of r (the model: n trusted), then x.index_select(0, map)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import torch

from metadata_builders.audit.calls import (
    INDEX_DTYPES,
    TENSORS,
    VIEW_INDICES,
    Kind,
    _Call,
    _plain_slice,
    _resident,
    scan,
)
from metadata_builders.audit.device_model import _model_bookkeeping
from metadata_builders.audit.residency import (
    _ON_DEVICE,
    _PROVENANCE,
    _UNPLACED,
    _mark,
    _provenance,
    _reads,
    _reads_of,
    _union,
)

__all__: list[str] = []

aten = torch.ops.aten
_INDEX = aten.index.Tensor
_TOKEN_MAP = aten.repeat_interleave.Tensor
_GATHERS = {"index_select": aten.index_select.default, "gather": aten.gather.default}
_VF = torch._C._VariableFunctions
"""torch's own functions, for calls the handlers make themselves: never a direct entry (:mod:`.shortcuts`)."""
_TENSOR = torch.Tensor
_ALL = slice(None)


class _ModelCalls:
    """Gathers and token maps of device memory, for :class:`~.function_level._FunctionLevel`."""

    _current: _Call | None

    if TYPE_CHECKING:  # running a call (.function_level) and the HIP model (.device_model), the other halves
        def _through_dispatch(self, func: Callable, run: Callable, *args: Any, **kwargs: Any) -> Any: ...

        def _gather(self, func: Any, args: tuple, kwargs: dict) -> torch.Tensor: ...

        def _repeat_interleave(self, func: Any, args: tuple, kwargs: dict) -> torch.Tensor: ...

    def _getitem(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        """``x[...]``: ints, slices and None make a view; integer index tensors gather (the HIP model).

        ``x[i, a:b:s]`` is what torch makes of it: the slices' view, then
        ``aten.index(view, [i])``; a gather from device memory goes to the model.
        The three spellings builders use most (``x[a:b]``, ``x[a:b, None]``, ``x[rows]``
        from host memory) are handled inline, exactly as the general path would.
        """
        source, index = args
        if type(source) is not _TENSOR or kwargs:
            return self._through_dispatch(func, func, *args, **kwargs)
        index_type = type(index)
        provenance = getattr(source, _PROVENANCE, _UNPLACED)
        if (index_type is int or (index_type is slice and _plain_slice(index))
                or (index_type is tuple and len(index) == 2 and index[1] is None and type(index[0]) is slice
                    and _plain_slice(index[0]))):  # x[0], x[a:b], x[a:b, None]: a view
            out = func(source, index)
            if provenance[0] if source.is_cpu else not source.is_meta:
                setattr(out, _PROVENANCE, _ON_DEVICE.get(provenance[1]) or _provenance(True, provenance[1]))
            return out
        if index_type is _TENSOR:
            if index.dtype in INDEX_DTYPES and index.dim() and source.dim():  # x[i]
                found = getattr(index, _PROVENANCE, _UNPLACED)
                reads = provenance[1]
                if found[1] and found[1] is not reads:
                    reads = _union(reads, found[1]) if reads else found[1]
                if provenance[0] and source.is_cpu:
                    try:
                        out = func(source, index)  # CPU torch checks bounds: what it accepts is in range
                    except (IndexError, RuntimeError):
                        out = self._index_from(func, args, False)
                    setattr(out, _PROVENANCE, _ON_DEVICE.get(reads) or _provenance(True, reads))
                    return out
                return self._gather_by(func, args, reads, _resident(index), False)
        return self._getitem_parts(func, source, index)

    def _getitem_parts(self, func: Callable, source: torch.Tensor, index: Any) -> Any:
        """``x[i, a:b]``, ``x[i, j]``, ``x[None, 1:]``: each part of the index in turn."""
        args = (source, index)
        reads = getattr(source, _PROVENANCE, _UNPLACED)[1]
        gathers = sliced = other = resident = False
        for part in (index if type(index) is tuple else (index,)):
            part_type = type(part)
            if part_type is slice:
                if not _plain_slice(part):
                    return self._through_dispatch(func, func, *args)  # a device bound is a read
                sliced = sliced or part != _ALL
            elif part_type is _TENSOR:
                if part.dim() == 0 or part.dtype not in INDEX_DTYPES:
                    return self._through_dispatch(func, func, *args)  # a mask, or a 0-d index torch reads
                gathers = True
                resident = resident or _resident(part)
                found = getattr(part, _PROVENANCE, _UNPLACED)[1]
                if found and found is not reads:
                    reads = _union(reads, found)
            elif part_type in VIEW_INDICES:
                other = True
            else:
                return self._through_dispatch(func, func, *args)
        if gathers and (other or (len(index) if type(index) is tuple else 1) > source.dim()):
            return self._through_dispatch(func, func, *args)  # ints or None beside index tensors: torch's own
        if not gathers:
            out = func(source, index)
            if _resident(source):
                _mark(out, True, reads)
            return out
        return self._gather_by(func, args, reads, resident, sliced)

    def _gather_by(self, func: Callable, args: tuple, reads: frozenset[str], index_resident: bool,
                   sliced: bool) -> torch.Tensor:
        """``x[...]`` with index tensors: from device memory the model's gather; device memory either way."""
        if _resident(args[0]):
            out = self._index_from(func, args, sliced)
        elif index_resident:
            out = func(*args)
        else:
            return func(*args)
        _mark(out, True, reads)
        return out

    def _index_from(self, func: Callable, args: tuple, sliced: bool) -> torch.Tensor:
        """A gather from device memory: what CPU torch accepts is in range; the rest is the model's."""
        source, index = args
        if source.is_cpu:
            try:
                return func(*args)
            except (IndexError, RuntimeError):
                pass
        parts = index if type(index) is tuple else (index,)
        view = source[tuple(p if type(p) is slice else _ALL for p in parts)] if sliced else source
        positions = [None if type(p) is slice else p for p in parts]
        while positions[-1] is None:
            positions.pop()
        with _model_bookkeeping():
            return self._gather(_INDEX, (view, positions), {})

    def _gather_call(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        """``index_select(source, dim, index)``, ``gather(source, dim, index)``: the HIP model's gather."""
        found = scan(args, kwargs, 3)
        if (found is None or len(args) != 3 or kwargs or type(args[1]) is not int
                or type(args[2]) not in TENSORS or type(args[0]) not in TENSORS):
            return self._through_dispatch(func, func, *args, **kwargs)
        if not found[1]:
            return func(*args)
        return self._gather_from(func, kind.name, args)

    def _gather_from(self, func: Callable, name: str, args: tuple) -> torch.Tensor:
        source, _, index = args
        if not _resident(source):
            out = func(*args)
        elif source.is_cpu:
            try:
                out = func(*args)  # CPU torch checks bounds: what it accepts is in range
            except (IndexError, RuntimeError):
                with _model_bookkeeping():
                    out = self._gather(_GATHERS[name], args, {})
        else:
            with _model_bookkeeping():
                out = self._gather(_GATHERS[name], args, {})
        _mark(out, True, _reads_of(args[::2]))
        return out

    def _token_map(self, func: Callable, kind: Kind, args: tuple, kwargs: dict) -> Any:
        """``repeat_interleave(repeats)`` and ``repeat_interleave(x, repeats)`` of 1-D tensors: the HIP model's map.

        ``repeat_interleave(x, repeats, output_size=n)`` is what torch makes of it:
        the map ``repeat_interleave(repeats, output_size=n)``, then ``x.index_select(0, map)``.
        """
        found = scan(args, kwargs, 2)
        repeats = args[-1] if args else None
        source = args[0] if len(args) == 2 else None
        if (found is None or not 1 <= len(args) <= 2 or (kwargs and (len(kwargs) > 1 or "output_size" not in kwargs))
                or type(repeats) not in TENSORS or repeats.dim() != 1
                or (source is not None and (type(source) not in TENSORS or source.shape != repeats.shape))):
            return self._through_dispatch(func, func, *args, **kwargs)
        if not found[1]:
            return func(*args, **kwargs)
        self._current = _Call(func)
        try:
            if _resident(repeats):
                with _model_bookkeeping():
                    index = self._repeat_interleave(_VF.repeat_interleave, (repeats,), kwargs)
            else:
                index = _TOKEN_MAP(repeats, **kwargs)
        finally:
            self._current = None
        if source is None:
            return index
        return self._gather_from(_VF.index_select, "index_select", (source, 0, index))
