"""The DSV4 family's Hypothesis strategies: target-verify batches and every mode of the MTP step.

``verify_batches()`` draws whole batches aimed at every boundary of DESIGN.md;
``geometries()``, ``verify_lens()``, ``graph_tiers()``, ``variants()`` and
``divergences()`` and ``stale_mirrors()`` draw their parts.  ``boundary_hits(batch)`` names the
boundaries a batch reaches (the vocabulary is ``COVERAGE_EVENTS``).  The public names are the top-level
``strategies`` facade's.
"""

from __future__ import annotations

from metadata_builders.families.dsv4.strategies._batches import (
    MAX_CONTEXT,
    graph_tiers,
    variants,
    verify_batches,
    verify_lens,
)
from metadata_builders.families.dsv4.strategies._coverage import (
    COVERAGE_EVENTS,
    boundary_hits,
    coverage_events,
    divergence_kind,
    host_extend_lens,
)
from metadata_builders.families.dsv4.strategies._divergences import (
    DIVERGENCE_KINDS,
    STALE_MIRROR_KINDS,
    divergences,
    stale_mirrors,
)
from metadata_builders.families.dsv4.strategies._geometry import (
    COMPRESSED_PAGE_SIZES,
    HUGE_RING_SIZES,
    LOW_RATIO_CHOICES,
    UPSTREAM,
    compressions,
    geometries,
)

__all__ = [
    "COMPRESSED_PAGE_SIZES",
    "COVERAGE_EVENTS",
    "DIVERGENCE_KINDS",
    "HUGE_RING_SIZES",
    "LOW_RATIO_CHOICES",
    "MAX_CONTEXT",
    "STALE_MIRROR_KINDS",
    "UPSTREAM",
    "boundary_hits",
    "compressions",
    "coverage_events",
    "divergence_kind",
    "divergences",
    "geometries",
    "graph_tiers",
    "host_extend_lens",
    "stale_mirrors",
    "variants",
    "verify_batches",
    "verify_lens",
]
