"""Builder ``"hip"``: the bundled torch builder, by group as the reference is
(:mod:`metadata_builders.families.dsv4.reference`).

=================  ==============================================================================
module             what it holds
=================  ==============================================================================
``pipeline``       the stages of target verify and draft extend, one function per upstream stage (the
                   docstring maps each to its upstream function)
``builder``        :class:`Stages` (one method per stage, for a subclass to replace one), the entry points
                   that chain them, :class:`HipBuilder` and its graph phases
``state``          the data between stages and across replays: ``Layout``, the graph states
``compression``    the compression groups (c4/c128 attention, sparse buffers, indexer) and plans
``low_ratios``     V4.1's c1/c2 groups
``streams``        the decode index streams
=================  ==============================================================================

The mutant catalogue edits these modules' functions by name (``metadata_builders/families/dsv4/mutants``):
a stage is called through its module's globals, so a mutated copy put in its place is what runs.
"""

from __future__ import annotations

from metadata_builders.families.dsv4.hip.builder import HipBuilder, Stages, draft_extend, target_verify
from metadata_builders.families.dsv4.hip.state import DraftExtendState, GraphState, Layout

__all__ = ["DraftExtendState", "GraphState", "HipBuilder", "Layout", "Stages", "draft_extend", "target_verify"]
