"""Mode ``draft_extend`` in pure Python: the draft model's extend over the step's tokens (docs/DESIGN.md section 3).

Upstream's ``init_forward_metadata_draft_extend`` is ``init_forward_metadata_prefill`` with every
request extending by ``n = num_tokens_per_req`` tokens, ``need_compress=False`` and
``max_seq_len = page_size`` ("draft extend attends only to SWA"): the core fields with a
one-column page table placeholder and the unified prefill mapping -- no compression, no
decode streams, no SWA ring store fields.  The stages are target verify's
(:mod:`.pipeline`); only the rows differ:

* the batch's ``seq_lens`` are the prefixes before the step, so a real row is
  ``seq_lens[i] + n`` long (upstream's ``seq_lens`` include the step);
* on the graph path the runner pads to the tier's ``padded_bs`` with ``seq_len = 1``
  (``get_cuda_graph_seq_len_fill_value``), slot 0, ``out_cache_loc`` 0 -- and that 1
  *includes* the pad row's ``n`` tokens, so its prefix is ``1 - n``: its tokens see
  ``seq_lens_casual = 2 - n + j``, zero or negative for ``n >= 2``.  The reference follows
  upstream's values (docs/FINDINGS.md L2: every HIP consumer reads them signed and the
  token's SWA index row is all ``-1``; the model's rule is that such a token reads nothing).

Worked example -- slots 1 and 2 with prefixes 7 and 3, ``n = 3``, a 4-row graph tier::

    seq_lens_casual    = [8, 9, 10, 4, 5, 6, -1, 0, 1, -1, 0, 1]
    swa_topk_lengths   = [8, 9, 10, 4, 5, 6, -1, 0, 1, -1, 0, 1]   # min(casual, window), no floor
    pf_state_slot      = [1, 1, 1, 2, 2, 2, 0, 0, 0, 0, 0, 0]
    pf_chunk_start     = [7, 7, 7, 3, 3, 3, -2, -2, -2, -2, -2, -2]
    pf_cu_q            = [0, 0, 0, 3, 3, 3, 6, 6, 6, 9, 9, 9]
    pf_final_pos       = [9, 9, 9, 5, 5, 5, 0, 0, 0, 0, 0, 0]
    page_table[t]      = [req_to_token[slot][0] // page_size]        # one column: max_seq_len = page_size

(upstream 0.5.23 gives exactly these: ``tests/dsv4/test_sglang_findings.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metadata_builders.families.dsv4.metadata import DRAFT_EXTEND_FIELD_NAMES, Audit, Decision, VerifyMetadata
from metadata_builders.families.dsv4.reference.pipeline import Rows, causal_expansion, core_metadata, \
    exclusive_cumsum, unified_prefill_meta

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch
    from metadata_builders.families.dsv4.variants import Variant

__all__ = ["FIELDS", "draft_extend_build", "draft_extend_fields", "draft_extend_rows"]

FIELDS: tuple[str, ...] = DRAFT_EXTEND_FIELD_NAMES
"""What a draft-extend build fills on the HIP backend (0.5.23): the rows, the core group and the unified prefill
mapping (:data:`~metadata_builders.families.dsv4.metadata.DRAFT_EXTEND_FIELD_NAMES`)."""


def draft_extend_rows(batch: VerifyBatch, graph: bool) -> Rows:
    """The rows upstream's prefill builder sees: ``seq_lens + n`` per request, then (graph) pad rows of length 1.

    ``num_tokens = n * rows`` is exact by construction, so the token map passes ``output_size``
    (``exact_num_tokens=True``, no gate); ``max_seq_len`` is the page size.
    """
    assert batch.mode == "draft_extend", batch.mode
    n = batch.num_draft_tokens
    seq_lens = [s + n for s in batch.seq_lens]
    slots = list(batch.req_pool_indices)
    out_cache_loc = list(batch.out_cache_loc)
    if graph:
        assert batch.graph is not None
        pad = batch.graph.padded_bs - batch.bs
        seq_lens += [1] * pad  # the runner's fill value: the length *with* the pad row's n tokens
        slots += [0] * pad
        out_cache_loc += [0] * (n * pad)
    extend = [n] * len(seq_lens)
    return Rows(seq_lens=seq_lens, slots=slots, extend_seq_lens=extend, extend_start_loc=exclusive_cumsum(extend),
                num_tokens=sum(extend), exact=True, used_output_size=True, max_seq_len=batch.geometry.page_size,
                out_cache_loc=out_cache_loc, total_from_device=False)


def draft_extend_fields(batch: VerifyBatch, graph: bool = False) -> dict[str, list]:
    """Every field of :data:`FIELDS` for a ``draft_extend`` batch, eager or on its graph tier."""
    rows = draft_extend_rows(batch, graph)
    casual, slots = causal_expansion(rows)
    fields: dict[str, list] = {"seq_lens": rows.seq_lens, "extend_seq_lens": rows.extend_seq_lens}
    fields.update(core_metadata(batch, rows, casual, slots))
    fields.update(unified_prefill_meta(batch, rows, slots))
    assert tuple(fields) == FIELDS, tuple(fields)
    return fields


def draft_extend_build(batch: VerifyBatch, variant: Variant) -> VerifyMetadata:
    """The reference's draft-extend build along ``variant`` (``eager`` or ``graph``; no other knob applies).

    The sync contract: none at all.  Every length the build reads is on the host (the mirror, ``n``), the token
    count ``n * rows`` is exact, so the token map passes ``output_size``; nothing faults (no count the device can
    contradict: the lengths are built on the device from ``n``, upstream's ``full_like``).
    """
    fields = draft_extend_fields(batch, variant.path == "graph")
    num_tokens = len(fields["seq_lens_casual"])  # n * rows: every token of every row, pads included
    return VerifyMetadata(fields, Decision(num_tokens, True, True, batch.geometry.page_size), Audit([], []))
