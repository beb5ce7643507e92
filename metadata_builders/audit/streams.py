"""Asynchronous host-to-device copies as a stream orders them: the source is read when the stream gets there.

``h.to(device, non_blocking=True)`` from **pinned** (page-locked) memory returns at
once; the DMA reads ``h`` when the stream reaches the copy, which may be after the
host has written ``h`` again -- by this build or the next (an overlap scheduler
does not synchronise between steps).  The device then gets the later bytes: ROCm
ATOM PR #817's race, one pinned staging buffer reused every step.  A copy from
pageable memory is staged by the driver before the call returns, so rewriting its
source is safe; only pinned sources are tracked.

The model, per source: when the copy is issued the source's bytes are kept; at the
next synchronisation point (any device-to-host read the audit records) every copy
issued before it has been read, so they are dropped; at a sync and at the end of
each build a copy whose source no longer holds the bytes it held is a fault,
``stale_async_copy`` (the device got bytes the build did not mean).  A source
rewritten with the **same** bytes is no fault: the race cannot matter when the
staged values are constant from step to step.

Worked example -- a builder stages ``[3, 1]`` in a pinned buffer ``buf`` and copies
it up without a sync; the next build writes ``[2, 2]`` into ``buf`` before its first
sync: at that build's end the first copy's source differs, one fault (2 elements).
Writing ``[3, 1]`` again: none.

Pinned memory on CPU: CPU-only torch has no pinned allocator, so the audit strips
``pin_memory=True`` from a factory and remembers the tensor as pinned
(:func:`pinned`); the buffer is host memory either way.
"""

from __future__ import annotations

import weakref
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch

from metadata_builders.audit.device_model import _caller_stage

__all__ = ["Pending", "copy_issued", "counts", "drain", "is_pinned", "pinned", "stale"]

_PINNED: dict[int, weakref.ref] = {}
"""``id(tensor)`` -> a weak reference to a tensor made in pinned memory (tensors compare elementwise: no WeakSet)."""


@dataclass(slots=True)
class Pending:
    """An asynchronous copy the stream may not have read yet."""

    source: weakref.ref
    """The pinned tensor the memory belongs to (a view's base: a slice made for one copy dies with the call, the
    buffer it reads does not)."""
    held: torch.Tensor
    """The source's bytes when the copy was issued."""
    op: str
    stage: str
    region: tuple[tuple[int, ...], tuple[int, ...], int] | None = None
    """Where in ``source`` the copy read: ``(size, stride, storage_offset)`` of the view copied; None: all of it."""

    def now(self) -> torch.Tensor | None:
        """The copied memory as it holds now (None: the buffer was freed)."""
        source = self.source()
        if source is None or self.region is None:
            return source
        size, stride, offset = self.region
        return source.as_strided(size, stride, offset)


_PENDING: list[Pending] = []

_SEEN: Counter = Counter()
"""What the model has seen in this process: ``pinned_copies`` (asynchronous copies from pinned memory it tracked) and
``faults`` (those whose source held other bytes when the stream read it); ``check`` prints a run's share."""


def counts() -> Counter:
    """A copy of what the model has seen so far (:data:`_SEEN`); a run takes the difference over its span."""
    return Counter(_SEEN)


def pinned(t: torch.Tensor) -> torch.Tensor:
    """Remember ``t`` as pinned host memory; return it."""
    key = id(t)
    _PINNED[key] = weakref.ref(t, lambda _ref, key=key: _PINNED.pop(key, None))
    return t


def is_pinned(t: Any) -> bool:
    """``t`` (or the tensor it is a view of) was made in pinned memory."""
    while isinstance(t, torch.Tensor):
        ref = _PINNED.get(id(t))
        if ref is not None and ref() is t:
            return True
        t = t._base
    return False


def copy_issued(source: Any, op: str) -> None:
    """A ``non_blocking`` host-to-device copy of ``source`` was issued by ``op`` (tracked when the source is pinned;
    the stage that issued it is looked up only then: most copies come from pageable memory)."""
    if isinstance(source, torch.Tensor) and is_pinned(source):
        root = source
        while root._base is not None:
            root = root._base
        region = None if root is source else (tuple(source.shape), tuple(source.stride()), source.storage_offset())
        _PENDING.append(Pending(weakref.ref(root), source.detach().clone(), op, _caller_stage(), region))
        _SEEN["pinned_copies"] += 1


def stale() -> list[tuple[Pending, int]]:
    """The pending copies whose source was rewritten with other bytes, each with how many elements differ; they
    are dropped (reported once)."""
    out: list[tuple[Pending, int]] = []
    keep: list[Pending] = []
    for p in _PENDING:
        source = p.now()
        if source is None:
            continue  # freed: the caching host allocator keeps it until the copy completes
        same_shape = source.shape == p.held.shape
        if same_shape and torch.equal(source, p.held):
            keep.append(p)
        else:
            out.append((p, int((source != p.held).sum()) if same_shape else p.held.numel()))
    _PENDING[:] = keep
    _SEEN["faults"] += len(out)
    return out


def drain() -> None:
    """A synchronisation point -- or a new run -- : every copy issued so far has been read (or is forgotten)."""
    _PENDING.clear()
