"""The DSA family's variants: every way a builder assembles the same metadata for one batch.

A :class:`DSAVariant` picks a **path** (``eager``: upstream's ``init_forward_metadata``;
``graph``: the capture of the batch's tier, then ``init_forward_metadata_out_graph`` replaying it),
whether the caller passes the **host mirror** (``seq_lens_cpu``, and in draft extend
``extend_prefix_lens_cpu``) and, on the graph path, the **route** of the replay (upstream's
torch fallback, or the fused Triton kernels HIP runs from 0.5.20 when ``index_kpool <= 1``):

==========  =====================================  ==================================================
path        knobs that vary                        fixed
==========  =====================================  ==================================================
eager       mirror (given, absent)                 route=torch (eager has no fused kernel)
graph       mirror (given, absent) x route (2)     --
==========  =====================================  ==================================================

An idle batch has the graph path only (an idle rank replays the decode graph; upstream's eager
``max()`` over no row raises).  Upstream's ``extend_seq_lens_cpu`` is always given in draft extend
(its assert says so); target verify *writes* it (P8 declares the write).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from metadata_builders.errors import InvalidVariant

if TYPE_CHECKING:
    from metadata_builders.families.dsa.batch import DSABatch

__all__ = ["MIRRORS", "PATHS", "ROUTES", "DSAVariant", "Mirror", "Path", "Route", "check_variant", "variants_for"]

Path = Literal["eager", "graph"]
Mirror = Literal["given", "absent"]
Route = Literal["torch", "fused"]

PATHS: tuple[Path, ...] = get_args(Path)
MIRRORS: tuple[Mirror, ...] = get_args(Mirror)
ROUTES: tuple[Route, ...] = get_args(Route)


@dataclass(frozen=True, slots=True)
class DSAVariant:
    """One build recipe; every variant of a batch must give the same metadata where a consumer reads it."""

    path: Path = "eager"
    """``eager`` (the real requests) or ``graph`` (the batch's tier: capture, then replay)."""
    mirror: Mirror = "given"
    """The caller passes its host mirror (``given``) or None (``absent``: upstream reads the device back)."""
    route: Route = "torch"
    """The replay's route: upstream's torch fallback, or the ``fused_dsa_*_metadata`` kernels (graph only)."""

    def __post_init__(self) -> None:
        for name, allowed in (("path", PATHS), ("mirror", MIRRORS), ("route", ROUTES)):
            if getattr(self, name) not in allowed:
                raise InvalidVariant(name, f"one of {list(allowed)}", getattr(self, name))
        if self.path == "eager" and self.route != "torch":
            raise InvalidVariant("route", "'torch' on the eager path (no fused kernel runs eagerly)", self.route)

    @property
    def label(self) -> str:
        """``graph/mirror=absent/route=fused``."""
        return f"{self.path}/mirror={self.mirror}/route={self.route}"

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "mirror": self.mirror, "route": self.route}


def variants_for(batch: DSABatch) -> list[DSAVariant]:
    """Every valid variant of ``batch``: eager ones, then graph ones if it has a tier."""
    out: list[DSAVariant] = []
    if batch.mode != "idle":
        out += [DSAVariant("eager", m) for m in MIRRORS]
    if batch.graph is not None:
        out += [DSAVariant("graph", m, r) for r in ROUTES for m in MIRRORS]
    return out


def check_variant(batch: DSABatch, variant: DSAVariant) -> None:
    """Raise :class:`InvalidVariant` when ``variant`` is not one of ``variants_for(batch)``."""
    if variant.path == "graph" and batch.graph is None:
        raise InvalidVariant("path", "'eager' for a batch without a graph tier", variant.path)
    if variant.path == "eager" and batch.mode == "idle":
        raise InvalidVariant("path", "'graph' for an idle batch (an idle rank only replays the decode graph)",
                             variant.path)
