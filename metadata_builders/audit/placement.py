"""Where memory goes: down to the host (a read), up to the device (a copy the divergence may hit), or nowhere.

The function level's half of the audit that decides placement, by spelling,
as on a GPU (:mod:`.residency` has the worked example)::

    x.to("cpu"), x.cpu(), x.tolist(), str(x)   down: one read of what x reads
    h.to(x.device, non_blocking=True)           up: a copy; the divergence may be what arrives
    x.to(x.device), x.to(torch.int64)           nowhere: device memory, no read
    torch.zeros(3, device=x.device)             device memory that reads nothing
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import torch

from metadata_builders.audit import streams
from metadata_builders.audit.residency import (
    _NO_READS,
    _host_copy,
    _mark,
    _non_blocking,
    _on_host_device,
    _placement,
    _reads,
    _tensors,
    is_device_resident,
)

if TYPE_CHECKING:
    from metadata_builders.records import ReadKind

__all__: list[str] = []

_HOST = "cpu"


class _Placement:
    """Reads down, copies up, device factories: the placement half of the function level."""

    divergence: tuple[list[int], list[int]] | None
    divergence_delivered: int
    _suspended: bool

    if TYPE_CHECKING:  # the records (.core) and running a call (.function_level), the other halves
        def _record(self, kind: ReadKind, sources: list[torch.Tensor], op: str | None = None) -> None: ...

        def _called(self, func: Callable, run: Callable, *args: Any, **kwargs: Any) -> Any: ...

    def _read_back(self, func: Callable, name: str, args: tuple, kwargs: dict) -> Any:
        """``cpu``, ``tolist``, ``numpy``, ``str``, ``.to(host)`` of a device tensor: one read, recorded."""
        first = args[0]
        self._record("scalar" if first.dim() == 0 else "copy", [first])
        self._suspended = True  # what formatting or the copy does inside is host work
        try:
            out = func(*args, **kwargs)
        finally:
            self._suspended = False
        return _host_copy(out, first) if name in ("cpu", "to") else out

    def _to(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """``x.to(...)``: down to the host is a read, up to the device a copy the divergence may hit."""
        where = _placement(args, kwargs)
        if is_device_resident(args[0]):
            if where == "host":
                return self._called(func, self._read_back, func, "to", args, kwargs)
            if where == "device":  # device to device: no copy, as on a GPU
                args, kwargs = _on_host_device(args, kwargs)
            out = func(*args, **kwargs)
            if out is not args[0]:
                _mark(out, True, _reads(args[0]))
            return out
        if where == "device":
            return self._host_to_device(func, args, kwargs)
        return func(*args, **kwargs)

    def _factory(self, func: Callable, name: str, args: tuple, kwargs: dict,
                 tensors: list[torch.Tensor] | None = None) -> Any:
        """A factory: with ``device=`` the device, device memory reading nothing; else host memory.

        ``tensors``: the tensors among the arguments, none of them device memory
        (scanned by the caller); None: not scanned, look for reads of device
        elements (``torch.tensor([t[0], t[1]])``).
        """
        if tensors is None and name in ("tensor", "as_tensor") and args and not isinstance(args[0], torch.Tensor):
            inside = [t for t in _tensors(args[0]) if is_device_resident(t)]
            if inside:
                self._record("copy", inside)
        device = kwargs.get("device")
        if kwargs.get("pin_memory"):
            if torch.cuda.is_available():
                return streams.pinned(func(*args, **kwargs))
            # CPU-only torch has no pinned allocator: host memory either way, remembered as pinned (.streams)
            return streams.pinned(func(*args, **{k: v for k, v in kwargs.items() if k != "pin_memory"}))
        if device is None:
            return func(*args, **kwargs)
        spelling = _spelling(device)
        if spelling is None:
            return func(*args, **kwargs)
        out = func(*args, **{**kwargs, "device": spelling})
        for t in _tensors(args) if tensors is None else tensors:
            if out is t:
                out = out.clone()  # a real device makes a copy; never mark the caller's host tensor
                break
        _mark(out, True, _NO_READS)
        return out

    def _host_to_device(self, func: Callable, args: tuple, kwargs: dict) -> torch.Tensor:
        src = args[0]
        if _non_blocking(args, kwargs):
            streams.copy_issued(src, "to")
            src = self._delivered(src)
        args, kwargs = _on_host_device(args, kwargs)
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


_SPELLINGS: dict[Any, Any] = {}


def _spelling(device: Any) -> Any:
    """What torch gets for a factory's ``device=`` naming the device (None: it names the host).

    The device on CPU is host memory underneath: ``"cpu:0"`` and ``torch.device("cpu", 0)``
    become ``"cpu"``; an accelerator stays as spelled.  Remembered per spelling.
    """
    try:
        return _SPELLINGS[device]
    except (KeyError, TypeError):
        pass
    if isinstance(device, int):
        spelling = device  # an accelerator ordinal
    else:
        where = torch.device(device)
        if where.type == "cpu":
            spelling = None if where.index is None else _HOST
        else:
            spelling = device
    if isinstance(device, (str, torch.device)):
        _SPELLINGS[device] = spelling
    return spelling
