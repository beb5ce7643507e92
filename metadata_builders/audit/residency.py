"""Where memory lives, and what it was computed from: residency and provenance on the tensor object.

On a GPU a tensor's device says where it lives.  On CPU the audit marks it: a
tensor the audit has placed carries ``_metadata_builders_provenance``, the pair
(device-resident, the names of the harness inputs it was computed from) -- one
attribute, read once per operand and written once per result on the hot path,
the pairs shared (:func:`_provenance`).
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

_PROVENANCE = "_metadata_builders_provenance"
_NO_READS: frozenset[str] = frozenset()
_UNPLACED = (False, _NO_READS)
"""The provenance of a tensor the audit never placed: host memory (on CPU), computed from no input."""
_ON_DEVICE: dict[frozenset[str], tuple[bool, frozenset[str]]] = {}
_ON_HOST: dict[frozenset[str], tuple[bool, frozenset[str]]] = {_NO_READS: _UNPLACED}


def _provenance(resident: bool, reads: frozenset[str]) -> tuple[bool, frozenset[str]]:
    """The shared ``(resident, reads)`` pair a tensor carries (one per distinct pair: no allocation per op)."""
    shared = _ON_DEVICE if resident else _ON_HOST
    provenance = shared.get(reads)
    if provenance is None:
        provenance = shared[reads] = (resident, reads)
    return provenance


def _input_reads(name: str) -> frozenset[str]:
    """``frozenset({name})``, shared per input name."""
    reads = _INPUTS.get(name)
    if reads is None:
        reads = _INPUTS[name] = frozenset((name,))
    return reads


_INPUTS: dict[str, frozenset[str]] = {}


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
        provenance = getattr(t, _PROVENANCE, None)
        return provenance is not None and provenance[0]
    return not t.is_meta


def _reads(t: torch.Tensor) -> frozenset[str]:
    provenance = getattr(t, _PROVENANCE, None)
    return _NO_READS if provenance is None else provenance[1]


def _reads_of(tensors: list[torch.Tensor] | tuple) -> frozenset[str]:
    reads = _NO_READS
    for t in tensors:
        provenance = getattr(t, _PROVENANCE, None)
        if provenance is not None and provenance[1] and provenance[1] is not reads:
            reads = _union(reads, provenance[1])
    return reads


def _union(reads: frozenset[str], more: frozenset[str]) -> frozenset[str]:
    """``reads | more``, one shared set per distinct union (remembered: a build asks for the same few)."""
    if not reads or reads is more:
        return more
    try:
        return _UNIONS[reads, more]
    except KeyError:
        pass
    union = more if reads <= more else reads if more <= reads else _SHARED.setdefault(reads | more, reads | more)
    _UNIONS[reads, more] = union
    return union


_UNIONS: dict[tuple[frozenset[str], frozenset[str]], frozenset[str]] = {}
_SHARED: dict[frozenset[str], frozenset[str]] = {}
"""Each union made, shared: its hash is computed once, and ``_ON_DEVICE`` finds it at once."""


def _mark(t: torch.Tensor, resident: bool, reads: frozenset[str]) -> None:
    """Place ``t`` (device memory or not) as computed from ``reads``."""
    setattr(t, _PROVENANCE, _provenance(resident, reads))


def _add_reads(t: torch.Tensor, reads: frozenset[str]) -> None:
    """``t`` was written into: it now also holds what ``reads`` names, wherever it lives."""
    provenance = getattr(t, _PROVENANCE, None)
    if provenance is None:
        setattr(t, _PROVENANCE, _provenance(False, reads))
    else:
        setattr(t, _PROVENANCE, _provenance(provenance[0], _union(provenance[1], reads)))


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
