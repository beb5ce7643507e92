"""What a build is seen doing: the audit's records (host syncs, device faults, token maps, input writes), shared by
every backend family.

A family's build result (DSV4's ``VerifyMetadata``) carries one
:class:`Audit`; the audit (:mod:`metadata_builders.audit`) makes its records, the properties read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["PLANNER_OP", "Audit", "FaultKind", "FaultRecord", "InputChange", "ReadKind", "SyncRecord", "TokenMap"]

FaultKind = Literal["oob_write", "uninitialized_tail", "oob_read", "stale_async_copy"]
ReadKind = Literal["scalar", "copy", "shape"]
"""What the host learns from a device read: one number, a whole tensor, or a data-dependent size."""


@dataclass(frozen=True, slots=True)
class SyncRecord:
    """One device-to-host synchronisation: what forced it and in which stage."""

    op: str
    """The operation, e.g. ``Tensor.item``, ``repeat_interleave(no output_size)``."""
    stage: str
    """Pipeline stage (the builder function) that performed it."""
    reason: str = ""
    """Why the contract expects it (reference) or where it came from (audit)."""
    kind: ReadKind = "scalar"
    """``scalar`` (one number: ``item``, ``int()``, a slice bound, a map's size), ``copy``
    (a tensor: ``tolist``, ``cpu``, ``str``), ``shape`` (``nonzero``, a boolean mask)."""
    reads: tuple[str, ...] = ()
    """The harness inputs the value read depends on (``seq_lens``, ``verify_lens``, ...)."""

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "stage": self.stage, "reason": self.reason, "kind": self.kind,
                "reads": list(self.reads)}


PLANNER_OP = "plan_compress_prefill"
"""The compress planner's kernel as a fault record names it: its writes past its plan buffers (F9)."""


@dataclass(frozen=True, slots=True)
class FaultRecord:
    """One memory fault the HIP device model saw."""

    kind: FaultKind
    """``oob_write``: wrote past the buffer; ``uninitialized_tail``: left the tail unwritten;
    ``oob_read``: gathered past the end of a table; ``stale_async_copy``: an asynchronous copy's pinned source
    rewritten before the stream read it (``count`` elements the device got later bytes of: audit/streams.py)."""
    count: int
    """How many elements were written / read out of bounds or left uninitialised."""
    op: str = "repeat_interleave"
    """The kernel that faulted."""
    stage: str = "unified_prefill_meta"
    """Pipeline stage that launched it."""
    output_size: int | None = None
    """The ``output_size`` the kernel trusted."""
    device_sum: int | None = None
    """What the device-resident repeats really summed to."""

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ("kind", "count", "op", "stage", "output_size", "device_sum")}


@dataclass(frozen=True, slots=True)
class TokenMap:
    """One ``repeat_interleave`` over device-resident repeats: what it was told and what it found."""

    output_size: int | None
    """The ``output_size`` passed (None: torch read the total back, a sync)."""
    device_sum: int
    """What the device repeats really summed to."""
    stage: str = "unified_prefill_meta"
    """The builder function that launched it."""

    def to_dict(self) -> dict[str, Any]:
        return {"output_size": self.output_size, "device_sum": self.device_sum, "stage": self.stage}


@dataclass(frozen=True, slots=True)
class InputChange:
    """A harness input a build modified (P8)."""

    name: str
    """The input (``seq_lens``, ``seq_lens_cpu``, ...)."""
    index: tuple[int, ...] | None
    """First modified element; None when the shape, dtype or length changed."""
    before: Any
    after: Any

    def __str__(self) -> str:
        where = self.name if self.index is None else f"{self.name}{list(self.index)}"
        return f"{where}: {self.before!r} -> {self.after!r}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "index": None if self.index is None else list(self.index),
                "before": repr(self.before), "after": repr(self.after)}


@dataclass(frozen=True, slots=True)
class Audit:
    """What the harness saw during one build: host syncs, device faults, token maps, input writes."""

    host_syncs: list[SyncRecord] = field(default_factory=list)
    """Each device-to-host sync, in order."""
    faults: list[FaultRecord] = field(default_factory=list)
    """Each fault of the device model, in order."""
    token_maps: list[TokenMap] = field(default_factory=list)
    """Each ``repeat_interleave`` over device lengths (empty for the reference: it has no device)."""
    inputs_written: list[InputChange] = field(default_factory=list)
    """Harness inputs the build modified (P8: must stay empty)."""
    divergence_delivered: int = 0
    """Asynchronous copies that received the batch's divergence."""
    storage: dict[str, int] = field(default_factory=dict, compare=False)
    """Where each field the builder returned as a tensor lives (``data_ptr``): a graph replay must write the
    captured buffers, so its storage equals the first replay's (P5)."""

    def to_dict(self) -> dict[str, Any]:
        return {"host_syncs": [s.to_dict() for s in self.host_syncs], "faults": [f.to_dict() for f in self.faults],
                "token_maps": [t.to_dict() for t in self.token_maps],
                "inputs_written": [c.to_dict() for c in self.inputs_written],
                "divergence_delivered": self.divergence_delivered}
