"""Builder ``"hip"``: the bundled torch builder, by group as the reference is (:mod:`metadata_builders.reference`).

=================  ==============================================================================
module             what it holds
=================  ==============================================================================
``pipeline``       the five stages of target verify, one function per upstream stage (the docstring
                   table maps each to its upstream function); graph state and :class:`HipBuilder`
``compression``    the compression groups (c4/c128 attention, sparse buffers, indexer) and plans
``low_ratios``     V4.1's c1/c2 groups
``streams``        the decode index streams
=================  ==============================================================================

The mutant catalogue edits these modules' functions by name (``metadata_builders/tools/mutants``):
a stage is called through its module's globals, so a mutated copy put in its place is what runs.
"""

from __future__ import annotations

from metadata_builders.builders.hip.pipeline import GraphState, HipBuilder, Layout, target_verify

__all__ = ["GraphState", "HipBuilder", "Layout", "target_verify"]
