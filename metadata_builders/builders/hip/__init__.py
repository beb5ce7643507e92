"""Builder ``"hip"``: the bundled torch builder, by group as the reference is (:mod:`metadata_builders.reference`).

=================  ==============================================================================
module             what it holds
=================  ==============================================================================
``pipeline``       the five stages of target verify and draft extend's entry, one function per upstream
                   stage (the docstring table maps each to its upstream function); :class:`HipBuilder`
``state``          the data between stages and across replays: ``Layout``, the graph states
``compression``    the compression groups (c4/c128 attention, sparse buffers, indexer) and plans
``low_ratios``     V4.1's c1/c2 groups
``streams``        the decode index streams
=================  ==============================================================================

The mutant catalogue edits these modules' functions by name (``metadata_builders/tools/mutants``):
a stage is called through its module's globals, so a mutated copy put in its place is what runs.
"""

from __future__ import annotations

from metadata_builders.builders.hip.pipeline import HipBuilder, draft_extend, target_verify
from metadata_builders.builders.hip.state import DraftExtendState, GraphState, Layout

__all__ = ["DraftExtendState", "GraphState", "HipBuilder", "Layout", "draft_extend", "target_verify"]
