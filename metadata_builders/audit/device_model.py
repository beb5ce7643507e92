"""The HIP device model: what a kernel does with device memory where CPU torch would check or raise.

``repeat_interleave(..., output_size=n)`` trusts ``n`` (ROCm compiles device
asserts out): repeats summing to ``S > n`` write ``S - n`` elements past the
buffer (``oob_write``; the kernel keeps the first ``n``), ``S < n`` leave
``n - S`` uninitialised (``uninitialized_tail``; modelled as zeros).  A gather
(``index``, ``index_select``, ``gather``) from device memory past the end of a
dimension reads out of bounds (``oob_read``; modelled as :data:`OOB_READ_VALUE`).
Example: repeats ``[2, 2]`` with ``output_size=3`` give ``[0, 0, 1]`` and one
``oob_write``; ``table[[1], [7]]`` on a 2x6 table gives ``[-1]`` and one ``oob_read``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator

import torch

from metadata_builders.audit.residency import _mark, _reads
from metadata_builders.records import ReadKind, TokenMap

__all__ = ["OOB_READ_VALUE", "sync_debug_mode"]

OOB_READ_VALUE = -1
"""What the device model returns for an element gathered out of bounds."""

_AUDIT_DIR = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
aten = torch.ops.aten


class _HipDeviceModel:
    """The device model's half of :class:`~metadata_builders.audit.DeviceAudit`: faults and token maps."""

    token_maps: list[TokenMap]

    def _record(self, kind: ReadKind, sources: list[torch.Tensor], op: str | None = None) -> None:
        raise NotImplementedError

    def _fault(self, kind: str, count: int, op: str, output_size: int | None = None,
               device_sum: int | None = None) -> None:
        raise NotImplementedError

    def _repeat_interleave(self, func: Any, args: tuple, kwargs: dict) -> torch.Tensor:
        repeats = args[0]
        output_size = kwargs.get("output_size")
        n = None if output_size is None else int(output_size)
        out = None if n is None else _exact_map(func, repeats, n)
        if out is not None:
            total = n
        else:
            out = full = func(repeats)  # the map the device lengths really produce
            total = int(full.shape[0])
        self.token_maps.append(TokenMap(n, total, _caller_stage()))
        if n is None:
            self._record("scalar", [repeats], op="repeat_interleave(no output_size)")
        elif total > n:
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
        if source.is_cpu:  # CPU torch checks bounds: what it accepts is in range, nothing to model
            try:
                return func(*args, **kwargs)
            except (IndexError, RuntimeError):
                pass
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
        if source.is_cpu:  # CPU torch checks bounds: what it accepts is in range, nothing to model
            try:
                return func(source, indices)
            except (IndexError, RuntimeError):
                pass
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


def _exact_map(func: Any, repeats: torch.Tensor, n: int) -> torch.Tensor | None:
    """The token map when the lengths sum to the host's ``n``, else None.

    CPU torch checks the sum against ``output_size`` itself; elsewhere one reduction, read by the model.
    """
    if repeats.is_cpu:
        try:
            return func(repeats, output_size=n)
        except RuntimeError:
            return None
    return func(repeats, output_size=n) if int(repeats.sum()) == n else None


def _in_range(index: torch.Tensor, size: int) -> bool:
    """Whether every index lies in ``-size..size-1`` (one reduction, read back by the model)."""
    if index.numel() == 0:
        return True
    lo, hi = torch.aminmax(index)
    return int(lo) >= -size and int(hi) < size


def _caller_stage() -> str:
    """Name of the innermost builder function on the stack (outside torch and this module)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith(_TORCH_DIR) or filename.startswith(_AUDIT_DIR)):
            return frame.f_code.co_name
        frame = frame.f_back
    return "<unknown>"


_CUDA = torch.cuda.is_available()


def _model_bookkeeping() -> contextlib.AbstractContextManager:
    """The device model's own checks read values back; keep them out of ``set_sync_debug_mode``."""
    return sync_debug_mode(0) if _CUDA else contextlib.nullcontext()


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
