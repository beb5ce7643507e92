"""Where memory lives, and what it was computed from: residency and provenance on the tensor object.

On a GPU a tensor's device says where it lives.  On CPU the audit marks it: a
device-resident tensor carries ``_metadata_builders_resident``, and a tensor
computed from harness inputs carries their names (``_metadata_builders_reads``).
The device has a name of its own, :data:`DEVICE` (``cpu:0``), so a spelling says
where memory goes, as on a GPU: ``"cpu"`` and ``torch.device("cpu")`` are the host.
Worked example::

    x = inputs.seq_lens              # resident, reads {"seq_lens"}, x.device == cpu:0
    y = x.to(x.device)               # "device": y is x, no copy, no read
    z = x.to("cpu")                  # "host": one read of seq_lens; z is a host copy
    torch.zeros(3, device="cpu:0")   # device memory; device="cpu" would be host memory
"""

from __future__ import annotations

from typing import Any, Iterator

import torch

__all__ = ["DEVICE", "DEVICE_NAME", "device_handle", "is_device_resident"]

DEVICE = torch.device("cpu", 0)
"""The device on CPU: what a device-resident tensor's ``.device`` is while the audit runs."""

DEVICE_NAME = "cpu:0"
"""The device a builder is handed on CPU (``get_builder(..., device="cpu")``); the host is ``"cpu"``."""

_RESIDENT = "_metadata_builders_resident"
_READS = "_metadata_builders_reads"
_NO_READS: frozenset[str] = frozenset()


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


def _non_blocking(args: tuple, kwargs: dict) -> bool:
    """``x.to(device, non_blocking=True)`` / ``dst.copy_(src, True)``: the copy is asynchronous."""
    return bool(kwargs.get("non_blocking")) or (len(args) > 2 and args[2] is True)


def _host_copy(out: Any, source: torch.Tensor) -> Any:
    """``.cpu()`` on CPU returns its argument; the host copy a device would make is a new tensor."""
    if isinstance(out, torch.Tensor) and out is source:
        out = out.clone()
        _mark(out, False, _reads(source))
    return out


def device_handle(device: str) -> str:
    """What a builder is handed as its device: :data:`DEVICE_NAME` for ``"cpu"``, anything else unchanged."""
    return DEVICE_NAME if device == "cpu" else device


def _is_device(where: Any) -> bool:
    """Whether a ``device=`` argument names device memory: anything but the host, ``cpu`` without an index."""
    if isinstance(where, int):
        return True  # an accelerator ordinal
    if isinstance(where, str):
        where = torch.device(where)
    return not (where.type == "cpu" and where.index is None)


def _placement(args: tuple, kwargs: dict) -> str | None:
    """Where ``x.to(...)`` sends ``x``: ``"device"``, ``"host"``, or None (a dtype change only)."""
    where = kwargs.get("device")
    if where is None:
        for a in args[1:]:
            if isinstance(a, torch.Tensor):  # x.to(other): other's place
                return "device" if is_device_resident(a) else "host"
            if isinstance(a, (str, torch.device)):
                where = a
                break
    if where is None:
        return None
    return "device" if _is_device(where) else "host"


def _host_spelling(where: Any) -> Any:
    """The device argument torch gets on CPU: the modelled device is host memory underneath."""
    if isinstance(where, (str, torch.device)) and torch.device(where).type == "cpu":
        return "cpu"
    return where


def _on_host_device(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``x.to(DEVICE)`` with the device spelled as torch's CPU, so a tensor already there is not copied."""
    args = tuple(_host_spelling(a) if isinstance(a, (str, torch.device)) else a for a in args)
    if "device" in kwargs:
        kwargs = {**kwargs, "device": _host_spelling(kwargs["device"])}
    return args, kwargs
