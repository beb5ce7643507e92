"""Hypothesis strategies for target-verify batches (the public line; they live in the DSV4 family's package).

``verify_batches()`` draws whole batches aimed at every boundary of DESIGN.md;
``geometries()``, ``verify_lens()``, ``graph_tiers()``, ``variants()`` and
``divergences()`` and ``stale_mirrors()`` draw their parts.  ``boundary_hits(batch)`` names the
boundaries a batch reaches (the vocabulary is ``COVERAGE_EVENTS``).  The DSA family's strategies:
``metadata_builders.families.dsa.strategies``.
"""

from __future__ import annotations

from metadata_builders.families.dsv4 import strategies as _family
from metadata_builders.families.dsv4.strategies import *  # noqa: F403 - the public line re-exports the family's names

__all__ = list(_family.__all__)
