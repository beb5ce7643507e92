"""The parts a batch is made of besides its tables: the backend's geometry, the graph tier, the divergence."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from metadata_builders.batch.checks import check_int, int_tuple, reject_unknown
from metadata_builders.errors import InvalidBatch

__all__ = ["Divergence", "Geometry", "GraphTier"]


@dataclass(frozen=True, slots=True)
class Geometry:
    """Backend constants the metadata depends on (upstream values as defaults)."""

    page_size: int = 256
    """Tokens per KV page; ``page_table`` holds one entry per page."""
    swa_window: int = 128
    """Sliding-window width: columns of ``swa_page_indices`` before alignment."""
    ring_size: int = 129
    """Slots per request in the unified SWA ring (upstream: window + num_draft - 1)."""
    unified_swa_window: int = 128
    """The unified pool's window; pad tokens get it as ``pf_final_pos``."""
    page_index_align: int = 64
    """``swa_page_indices`` rows are right-padded with -1 to a multiple of this."""

    def __post_init__(self) -> None:
        for f in fields(self):
            check_int(f"geometry.{f.name}", getattr(self, f.name), minimum=1)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Geometry:
        reject_unknown("geometry", d, {f.name for f in fields(cls)})
        return cls(**d)

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class GraphTier:
    """The captured CUDA/HIP-graph bucket a graph-path batch is padded to."""

    padded_bs: int
    """Rows of the captured batch; rows ``bs..padded_bs-1`` are padding requests."""
    graph_num_tokens: int
    """Tokens of the captured batch (the tier); ``out_cache_loc`` is zero-padded to it."""
    cap: int | None = None
    """Per-row clamp of the tier slack given to pad rows; ``None`` = uncapped tier."""

    def __post_init__(self) -> None:
        check_int("graph.padded_bs", self.padded_bs, minimum=1)
        check_int("graph.graph_num_tokens", self.graph_num_tokens, minimum=1)
        if self.cap is not None:
            check_int("graph.cap", self.cap, minimum=1)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GraphTier:
        reject_unknown("graph", d, {"padded_bs", "graph_num_tokens", "cap"})
        for key in ("padded_bs", "graph_num_tokens"):
            if key not in d:
                raise InvalidBatch(f"graph.{key}", None, "present", None)
        return cls(d["padded_bs"], d["graph_num_tokens"], d.get("cap"))

    def to_dict(self) -> dict[str, int | None]:
        return {"padded_bs": self.padded_bs, "graph_num_tokens": self.graph_num_tokens, "cap": self.cap}


@dataclass(frozen=True, slots=True)
class Divergence:
    """Fault injection: device memory or the host mirror disagreeing with the truth.

    ``extend_seq_lens`` is what the device-resident extend lengths really hold when
    the device reads them (a stale or still-in-flight copy; P6).  The harness
    applies it, never a builder (DESIGN.md section 4):

    * **uniform** batches: to the builder's own asynchronous host-to-device copy of
      the extend lengths it staged on the host (``mirror=host``, and ``tolist``,
      which stages the same way after reading the mirror back).  One entry per real
      request (``bs``), or per row of the graph tier (``padded_bs``); on the graph
      path a ``bs``-long list leaves the pad rows at their true lengths, on the
      eager path a ``padded_bs``-long list contributes its first ``bs`` entries.
      Each entry is >= 0 and keeps its row's verify positions inside ``req_to_token``.
    * **ragged** batches: to the device-resident ``verify_lens`` the harness hands
      the builder (the device layout).  A stale layout is still a layout: ``bs``
      entries, each in ``1..num_draft_tokens``, fitting the table and the tier.

    ``seq_lens_cpu`` is a stale host mirror of ``seq_lens`` (``bs`` entries) that
    the caller passes where a mirror is passed (P2: mirror validation must catch it).
    At least one of the two is set.
    """

    extend_seq_lens: tuple[int, ...] | None = None
    """(bs,) or, uniform on a tier, (padded_bs,): device-side extend lengths; None = no divergence."""
    seq_lens_cpu: tuple[int, ...] | None = None
    """(bs,): the stale host mirror, each >= 1; None = the mirror is right."""

    def __post_init__(self) -> None:
        if self.extend_seq_lens is None and self.seq_lens_cpu is None:
            raise InvalidBatch("divergence", None, "to set extend_seq_lens or seq_lens_cpu", {})
        if self.extend_seq_lens is not None:
            object.__setattr__(
                self, "extend_seq_lens", int_tuple("divergence.extend_seq_lens", self.extend_seq_lens, minimum=0)
            )
        if self.seq_lens_cpu is not None:
            object.__setattr__(
                self, "seq_lens_cpu", int_tuple("divergence.seq_lens_cpu", self.seq_lens_cpu, minimum=1)
            )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Divergence:
        reject_unknown("divergence", d, {"extend_seq_lens", "seq_lens_cpu"})
        return cls(d.get("extend_seq_lens"), d.get("seq_lens_cpu"))

    def to_dict(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        if self.extend_seq_lens is not None:
            out["extend_seq_lens"] = list(self.extend_seq_lens)
        if self.seq_lens_cpu is not None:
            out["seq_lens_cpu"] = list(self.seq_lens_cpu)
        return out
