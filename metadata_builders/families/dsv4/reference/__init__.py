"""The specification in code: the whole target-verify metadata in pure Python, by group.

This package never imports torch (``tests/dsv4/test_reference_no_torch.py`` runs it
where importing torch fails).  Where DESIGN.md is silent it follows upstream
``deepseek_v4_backend_hip_radix.py`` and says so in the docstring.

===============  ===========================================================================
module           what it specifies
===============  ===========================================================================
``pipeline``     stages 1-5 (verify extension, causal expansion, core, unified prefill,
                 store), the sync contract, the fault model; start here
``builder``      :class:`ReferenceBuilder`: the stages chained, per mode
``compressed``   groups ``compressed`` (c4/c128 lengths, store locations, c128 page
                 indices, unified locations), ``sparse`` and ``indexer``
``plans``        group ``plans``: the c4/c128 compress and write plans
``low_ratios``   group ``low_ratios``: the V4.1 c1/c2 store locations, lengths, sparse
                 buffers and indexer metadata
``streams``      group ``streams``: the decode index streams (swa/hca/csa)
``in_graph``     what the in-graph block reads off the forward batch: the forward positions
                 (``low_ratio_pos_i64``) and the paged SWA store's target ``swa_out_cache_loc``
``draft_extend`` mode ``draft_extend`` of the MTP step: the core and unified prefill fields of
                 the draft model's extend, eager and on the graph runner's pad rows
``decode``       modes ``decode``, ``draft_decode`` and ``idle``: one token per row
===============  ===========================================================================
"""

from __future__ import annotations

from metadata_builders.families.dsv4.reference import pipeline
from metadata_builders.families.dsv4.reference.builder import ReferenceBuilder
from metadata_builders.families.dsv4.reference.pipeline import *  # noqa: F403 - the package's face is the pipeline's

__all__ = sorted([*pipeline.__all__, "ReferenceBuilder"])
