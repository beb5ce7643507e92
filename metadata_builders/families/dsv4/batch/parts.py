"""The parts a batch is made of besides its tables: the backend's geometry, the graph tier, the divergence."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from metadata_builders.values import check_int, int_tuple, reject_unknown
from metadata_builders.errors import InvalidBatch

__all__ = ["LOW_RATIOS", "Compression", "Divergence", "Geometry", "GraphTier"]


@dataclass(frozen=True, slots=True)
class Compression:
    """The compressed-attention constants (DSV4 ratios 4 and 128); upstream values as defaults.

    A geometry with compression builds every group of DESIGN.md section 2: the
    c4/c128 lengths and store locations, the sparse c4 buffers, the indexer's
    lengths and the compress plans.  Upstream needs ``page_size % 128 == 0``.
    ``low_ratios`` adds the V4.1 ratio-1/ratio-2 counterparts (group ``low_ratios``,
    SGLang 0.5.22+); a replay file without the key has none.
    """

    index_topk: int = 512
    """Top-k of the c4 sparse attention: its lengths are clamped to it, its page indices are that wide."""
    c4_ring_size: int = 16
    """Rows per request of the c4 compress-state ring (upstream with speculation: 16)."""
    c128_ring_size: int = 256
    """Rows per request of the c128 compress-state ring (upstream with speculation: 256)."""
    unified_swa_pages: int = 1024
    """SWA pages in front of the compressed pages in the unified pool: ``unified.c*_out_loc`` add it."""
    low_ratios: tuple[int, ...] = ()
    """The V4.1 low ratios the pool has, a subset of ``(1, 2)``, ascending (upstream's order); ``()`` = none."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name != "low_ratios":
                check_int(f"geometry.compression.{f.name}", getattr(self, f.name), minimum=1)
        object.__setattr__(self, "low_ratios", _low_ratios(self.low_ratios))
        for name, ratio in (("c4_ring_size", 4), ("c128_ring_size", 128)):
            if getattr(self, name) % ratio:
                raise InvalidBatch(f"geometry.compression.{name}", None,
                                   f"a multiple of {ratio} (the planner's RuntimeCheck)", getattr(self, name))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Compression:
        reject_unknown("geometry.compression", d, {f.name for f in fields(cls)})
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """As a replay file holds it; ``low_ratios`` only when there are some (older files stay byte-identical)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "low_ratios"}
        if self.low_ratios:
            out["low_ratios"] = list(self.low_ratios)
        return out

    def ring_size(self, ratio: int) -> int:
        """The compress-state ring of ``ratio`` (4 or 128)."""
        return self.c4_ring_size if ratio == 4 else self.c128_ring_size


LOW_RATIOS: tuple[int, ...] = (1, 2)
"""The V4.1 low compression ratios (``DSV4AttnMetadata.low_ratios`` is a subset)."""


def _low_ratios(value: Any) -> tuple[int, ...]:
    """``value`` as an ascending tuple of distinct low ratios: ``[2, 1] -> (1, 2)``; anything else is rejected."""
    name = "geometry.compression.low_ratios"
    ratios = int_tuple(name, value)
    for i, ratio in enumerate(ratios):
        if ratio not in LOW_RATIOS:
            raise InvalidBatch(name, i, f"one of {LOW_RATIOS} (the V4.1 low ratios)", ratio)
        if ratio in ratios[:i]:
            raise InvalidBatch(name, i, "a ratio not already listed", ratio)
    return tuple(sorted(ratios))


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
    compression: Compression | None = None
    """``None``: compression off (only the core, unified and store groups); else its constants."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name != "compression":
                check_int(f"geometry.{f.name}", getattr(self, f.name), minimum=1)
        if self.compression is not None:
            if not isinstance(self.compression, Compression):
                raise InvalidBatch("geometry.compression", None, "a Compression or null", self.compression)
            if self.page_size % 128:
                raise InvalidBatch("geometry.page_size", None,
                                   "a multiple of 128 with compression (upstream asserts it for c128)", self.page_size)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Geometry:
        reject_unknown("geometry", d, {f.name for f in fields(cls)})
        d = dict(d)
        if d.get("compression") is not None:
            d["compression"] = Compression.from_dict(d["compression"])
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "compression"}
        if self.compression is not None:
            out["compression"] = self.compression.to_dict()
        return out


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
