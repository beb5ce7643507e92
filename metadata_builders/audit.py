"""Sync audit and HIP device model, applied *around* any builder.

:class:`DeviceAudit` is a ``TorchFunctionMode``: while it is active every torch
call of the builder passes through it, whoever wrote the builder (ours, an
installed SGLang, a user's).  It does three things:

1. **Models device residency on CPU.**  On a GPU a tensor's device says where it
   lives.  On CPU everything is ``cpu``, so residency is tracked: a tensor made
   by a factory given an explicit ``device=`` (``torch.tensor(x, device=dev)``,
   ``torch.arange(n, device=dev)``) or moved with ``.to(dev)`` is device-resident;
   anything computed from a device-resident tensor is too; tensors made without
   ``device=`` (host mirrors, pinned staging buffers) and results of ``.cpu()``
   are host tensors.  Python lists are never device-resident.
2. **Records every device-to-host sync** on a device-resident tensor: ``item``,
   ``tolist``, ``int()``/``bool()``/``float()``, ``cpu``/``numpy``, ``nonzero``,
   ``unique``, ``masked_select``, boolean-mask indexing, ``equal``/``allclose``,
   and ``repeat_interleave`` with tensor repeats but no ``output_size`` (its output
   size is ``repeats.sum().item()``).  Each record names the op and the builder
   function (pipeline stage) that called it.
3. **Applies HIP semantics to ``repeat_interleave(..., output_size=n)``**: no
   check.  Repeats summing to ``S > n`` is an out-of-bounds write of ``S - n``
   elements (``oob_write``; the kernel keeps the first ``n``), ``S < n`` leaves
   ``n - S`` elements uninitialised (``uninitialized_tail``; modelled as zeros).
   CPU torch would raise instead; CUDA would device-assert; ROCm faults.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

from metadata_builders.metadata import FaultRecord, SyncRecord

__all__ = ["DeviceAudit", "sync_debug_mode"]

_THIS_FILE = __file__
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))

_FACTORIES = frozenset(
    {
        "tensor", "as_tensor", "arange", "zeros", "ones", "full", "empty", "empty_strided",
        "randint", "rand", "randn", "linspace", "eye", "from_numpy",
    }
)
_SCALAR_SYNCS = frozenset({"item", "tolist", "__int__", "__float__", "__bool__", "__index__", "numpy", "cpu"})
_SHAPE_SYNCS = frozenset(
    {"nonzero", "argwhere", "unique", "unique_consecutive", "masked_select", "equal", "allclose", "bincount"}
)


def _tensors(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


def _op_name(func: Callable) -> str:
    name = getattr(func, "__name__", repr(func))
    qual = getattr(func, "__qualname__", "")
    if qual.startswith("TensorBase.") or qual.startswith("Tensor."):
        return f"Tensor.{name}"
    return name


class DeviceAudit(TorchFunctionMode):
    """Context manager: audit syncs and model HIP faults for one build.

    ``host_syncs`` and ``faults`` fill as the builder runs.  ``track`` marks a
    tensor the harness itself created as device-resident (an adapter's inputs).
    """

    def __init__(self) -> None:
        super().__init__()
        self.host_syncs: list[SyncRecord] = []
        self.faults: list[FaultRecord] = []
        self._resident: dict[int, torch.Tensor] = {}

    # -- residency -----------------------------------------------------------------

    def track(self, t: torch.Tensor) -> torch.Tensor:
        """Mark ``t`` device-resident and return it."""
        self._resident[id(t)] = t
        return t

    def resident(self, t: Any) -> bool:
        """Whether ``t`` is a device-resident tensor."""
        if not isinstance(t, torch.Tensor):
            return False
        if t.device.type not in ("cpu", "meta"):
            return True
        return id(t) in self._resident and self._resident[id(t)] is t

    def _mark(self, out: Any) -> None:
        for t in _tensors(out):
            self._resident[id(t)] = t

    # -- the mode -------------------------------------------------------------------

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        inputs = list(_tensors(args)) + list(_tensors(kwargs))
        on_device = any(self.resident(t) for t in inputs)

        if name == "repeat_interleave":
            return self._repeat_interleave(func, args, kwargs)
        if on_device and self._is_sync(name, args, kwargs):
            self._record(func, name)
        out = func(*args, **kwargs)
        if name in _SCALAR_SYNCS or name == "pin_memory":
            return out  # the result lives on the host
        if name in _FACTORIES:
            if kwargs.get("device") is not None:
                self._mark(out)
        elif name == "to" and self._to_device(args, kwargs):
            if out is args[0]:
                # On CPU ``.to(device)`` returns the same object; the copy a real device
                # makes is a new tensor, so keep the host original a host tensor.
                out = out.view_as(out)
            self._mark(out)
        elif on_device:
            self._mark(out)
        return out

    @staticmethod
    def _to_device(args: tuple, kwargs: dict) -> bool:
        if kwargs.get("device") is not None:
            return True
        return any(isinstance(a, (str, torch.device)) for a in args[1:])

    def _is_sync(self, name: str, args: tuple, kwargs: dict) -> bool:
        if name in _SCALAR_SYNCS or name in _SHAPE_SYNCS:
            return True
        if name == "__getitem__" and len(args) > 1:
            return any(t.dtype == torch.bool for t in _tensors(args[1]))
        return False

    def _record(self, func: Callable, name: str, op: str | None = None) -> None:
        self.host_syncs.append(SyncRecord(op or _op_name(func), _caller_stage(), "observed"))

    # -- HIP repeat_interleave ---------------------------------------------------------

    def _repeat_interleave(self, func, args: tuple, kwargs: dict):
        kw = dict(kwargs)
        output_size = kw.pop("output_size", None)
        positional = list(args)
        # Signatures: (repeats), (input, repeats, dim=None), Tensor.repeat_interleave(self, repeats, dim)
        repeats = kw.get("repeats", positional[1] if len(positional) > 1 else positional[0])
        on_device = self.resident(repeats) or any(self.resident(t) for t in _tensors(positional))
        if any(t.device.type == "meta" for t in _tensors(positional)):
            # Shapes only: nothing to sync on and no values to check.
            return func(*args, **kwargs)
        # The model's own bookkeeping may sync; keep it out of set_sync_debug_mode.
        with sync_debug_mode(0):
            out = func(*positional, **kw)  # the full map: what the device lengths really produce
        if on_device and output_size is None and isinstance(repeats, torch.Tensor):
            self._record(func, "repeat_interleave", "repeat_interleave(no output_size)")
        if output_size is not None:
            n = int(output_size)
            total = out.shape[0] if out.dim() else int(out)
            if total > n:
                self.faults.append(FaultRecord("oob_write", total - n, "repeat_interleave", _caller_stage(), n, total))
                out = out[:n]
            elif total < n:
                self.faults.append(
                    FaultRecord("uninitialized_tail", n - total, "repeat_interleave", _caller_stage(), n, total)
                )
                out = torch.cat([out, out.new_zeros(n - total)])
        if on_device:
            self._mark(out)
        return out


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
