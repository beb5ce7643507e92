"""Host-to-device copies a build makes, as the driver sees them: pageable or pinned, blocking or not (P7).

A copy from **pageable** host memory (``torch.tensor(list, device=...)``, ``host.to(device)`` of a tensor not
made pinned) is staged by the driver before the call returns: it blocks the host thread, upstream's comment at
B:1940-1944 avoids exactly that in replay ("torch.tensor(list, device=cuda) does a pageable H2D copy that blocks
the host").  The core audit records device-to-host reads; this watch records the other direction.

:func:`watching` pushes a ``TorchFunctionMode`` *inside* an active :class:`~metadata_builders.audit.DeviceAudit`
(so the audit below places each result) and records each call whose result is device-resident while its data
came from the host: ``torch.tensor`` / ``torch.as_tensor`` of Python data or a host tensor, ``Tensor.to`` /
``Tensor.cuda`` of a host tensor, ``Tensor.copy_`` into device memory from a host tensor.  Worked example,
eager target verify::

    torch.tensor([3, 3], dtype=torch.int32, device=inputs.device)   -> one pageable copy, stage
                                                                       target_verify_branch
    torch.full((bs,), 3, dtype=torch.int32, device=inputs.device)  -> no copy (filled on the device)

**Core hook.**  This belongs with the core audit (any family's build makes such copies); it is here until the
core grows it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from metadata_builders.audit import is_device_resident
from metadata_builders.audit.streams import is_pinned

__all__ = ["CopyRecord", "caller_stage", "watching"]

_FACTORIES = frozenset({torch.tensor, torch.as_tensor})
_MOVES = frozenset({"to", "cuda"})


@dataclass(frozen=True, slots=True)
class CopyRecord:
    """One host-to-device copy."""

    op: str
    """The call (``torch.tensor``, ``Tensor.to``, ``Tensor.copy_``)."""
    stage: str
    """The builder function that made it."""
    pageable: bool
    """From pageable memory (Python data, or a host tensor not made pinned): the host blocks until it is staged."""
    non_blocking: bool
    """Asked to be asynchronous (from pageable memory it blocks all the same)."""


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_AUDIT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "audit")


def caller_stage(*skip: str) -> str:
    """The innermost function on the stack outside torch, the core audit, this module, contextlib and ``skip``."""
    prefixes = (_TORCH_DIR, _AUDIT_DIR, os.path.abspath(__file__).removesuffix("c"),
                contextlib.__file__.removesuffix("c"), *skip)
    frame = sys._getframe(1)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(prefixes):
            return frame.f_code.co_name
        frame = frame.f_back
    return "<unknown>"


class _CopyWatch(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[CopyRecord] = []
        self.paused = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not self.paused:
            source = self._source(func, args)
            if source is not None and is_device_resident(out if func is not torch.Tensor.copy_ else args[0]):
                self._note(func, source, bool(kwargs.get("non_blocking", False)))
        return out

    @staticmethod
    def _source(func: Any, args: tuple) -> Any:
        """What the call copies from, when it can be a host-to-device copy (None otherwise)."""
        if func in _FACTORIES:
            data = args[0] if args else None
            return data if not is_device_resident(data) else None
        name = getattr(func, "__name__", "")
        if name in _MOVES and args and isinstance(args[0], torch.Tensor) and not is_device_resident(args[0]):
            return args[0]
        if func is torch.Tensor.copy_ and len(args) > 1 and isinstance(args[1], torch.Tensor) \
                and not is_device_resident(args[1]):
            return args[1]
        return None

    def _note(self, func: Any, source: Any, non_blocking: bool) -> None:
        qual = getattr(func, "__qualname__", "")
        op = f"Tensor.{func.__name__}" if qual.startswith(("TensorBase.", "Tensor.")) else f"torch.{func.__name__}"
        pinned = isinstance(source, torch.Tensor) and is_pinned(source)
        self.records.append(CopyRecord(op, caller_stage(), not pinned, non_blocking))


_ACTIVE: list[_CopyWatch] = []


@contextlib.contextmanager
def watching() -> Iterator[list[CopyRecord]]:
    """Record the host-to-device copies made while the block runs (enter it inside the build's audit)."""
    watch = _CopyWatch()
    _ACTIVE.append(watch)
    try:
        with watch:
            yield watch.records
    finally:
        _ACTIVE.remove(watch)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The device model's own work (a kernel's bookkeeping) is no copy of the builder's."""
    for watch in _ACTIVE:
        watch.paused += 1
    try:
        yield
    finally:
        for watch in _ACTIVE:
            watch.paused -= 1
