"""Modes ``decode`` and ``draft_decode`` in pure Python: one token per request (docs/DESIGN.md section 3).

Upstream (0.5.23) defers a decode build: ``init_forward_metadata_decode`` keeps the raw
inputs (``DSV4RawDecodeMetadata``: slots, ``seq_lens``, ``out_cache_loc``) and
``make_forward_metadata_from_raw_decode`` builds the metadata from them, in the graph on
the graph path (so every replay refreshes it from the copied raw buffers) and right after
on the eager path.  Each row is one token:

* ``decode``: the token at position ``seq_lens[i]`` (the batch's prefix), so the row is
  ``seq_lens[i] + 1`` long -- upstream's caller passes that length;
* ``draft_decode`` (EAGLE's multi-step draft, topk 1): step ``s``'s child backend adds
  ``s + 1`` to the forward batch's ``seq_lens`` (``speculative_step_id + 1``), so the token
  sits at ``seq_lens[i] + s``; its ``out_cache_loc`` is row ``s`` of the shared buffer
  (``per_step_draft_out_cache_loc``: entry ``i * steps + s``, request-major).

The core builder sees ``seq_lens_casual = `` the row length, ``max_seq_len =
MAX_SEQ_LEN_FOR_CAPTURE`` (``max_context``: a full-width page table), the slots themselves
as ``req_pool_indices_repeated``.  Then the index streams over the slots and the SWA ring
target (``swa_loc``, ``verify_store_state_slot``: ``_attach_unified_kv_decode_streams``), the
paged SWA store target ``swa_out_cache_loc = full_to_swa[out_cache_loc]`` (the in-graph
block), and in ``decode`` with compression the compressed groups (target verify's arithmetic
on one token per row), one decode plan per row and ratio (``plan_decode``,
:func:`decode_plans`) and the V4.1 low ratios (``_init_low_ratio_indexer_metadata(is_prefill=False)``:
decode rows, as target verify's; the in-graph block's ``low_ratio_req_indices`` -- the slots --
and ``low_ratio_pos_i64``, the forward batch's positions: the token's, 0 on a pad row) -- a
draft worker compresses nothing.  No token map, no prefill mapping; no host read at all.

On the graph path the runner pads to ``padded_bs`` rows of ``seq_len = 1`` (the fill value),
slot 0, ``out_cache_loc`` 0; a draft-decode child adds its ``s + 1`` to the pad rows as well.

Worked example -- ``draft_decode`` step 1 of 3 steps, slots 1 and 2 with prefixes 7 and 3,
``out_cache_loc = [70, 71, 72, 30, 31, 32]`` (request-major), a 3-row graph tier::

    seq_lens          = [9, 5, 3]          # 7 + 1 + 1, 3 + 1 + 1, pad 1 + 1 + 1
    positions_casual  = [8, 4, 2]
    raw_out_loc       = [71, 31, 0]        # entry i * 3 + 1; the pad row's 0
    swa_loc           = [1 * ring + 8 % ring, 2 * ring + 4 % ring, 0 * ring + 2 % ring]

(``decode`` with compression: a row of slot 1 and length 9 plans ``c4_decode_plan = [9, loc(8), loc(4) // 4,
loc(8) // 4]``, ``loc(q) = 1 * c4_ring + q % c4_ring``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from metadata_builders.families.dsv4.batch import DECODE_MODES
from metadata_builders.families.dsv4.metadata import Audit, Decision, VerifyMetadata, fields_for
from metadata_builders.families.dsv4.reference.compressed import (RATIOS, compressed_attention, indexer_metadata,
                                                                  sparse_buffers)
from metadata_builders.families.dsv4.reference.in_graph import forward_positions, swa_out_cache_loc
from metadata_builders.families.dsv4.reference.low_ratios import low_ratio_groups
from metadata_builders.families.dsv4.reference.pipeline import Rows, core_metadata, decode_streams, index_streams

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import Compression, VerifyBatch
    from metadata_builders.families.dsv4.variants import Variant

__all__ = ["DECODE_MODES", "decode_build", "decode_fields", "decode_plans", "decode_rows", "step_out_cache_loc"]



def step_out_cache_loc(batch: VerifyBatch) -> list[int]:
    """The step's ``out_cache_loc`` per request: the batch's own (decode), or row ``draft_step`` of draft decode's
    shared buffer (``view(bs, 1, steps).permute(2, 0, 1)``: entry ``i * steps + draft_step``;
    :attr:`~metadata_builders.families.dsv4.batch.VerifyBatch.step_out_cache_loc`)."""
    return list(batch.step_out_cache_loc)


def decode_rows(batch: VerifyBatch, graph: bool) -> Rows:
    """One row per request (then, on the graph path, pad rows), one token each: the length *with* the token."""
    assert batch.mode in DECODE_MODES, batch.mode
    offset = 1 + (batch.draft_step or 0)  # decode: the caller's +1; draft decode: the child's step_id + 1
    seq_lens = [s + offset for s in batch.seq_lens]
    slots = list(batch.req_pool_indices)
    out_cache_loc = step_out_cache_loc(batch)
    if graph:
        assert batch.graph is not None
        pad = batch.graph.padded_bs - batch.bs
        seq_lens += [1 + (batch.draft_step + 1 if batch.draft_runner else 0)] * pad  # a child adds step + 1
        slots += [0] * pad
        out_cache_loc += [0] * pad
    rows = len(seq_lens)
    return Rows(seq_lens=seq_lens, slots=slots, extend_seq_lens=[1] * rows, extend_start_loc=list(range(rows)),
                num_tokens=rows, exact=True, used_output_size=True, max_seq_len=batch.max_context,
                out_cache_loc=out_cache_loc, total_from_device=False)


def decode_plans(compression: Compression, slots: list[int], seq_lens: list[int]) -> dict[str, list[list[int]]]:
    """``plan_decode`` per ratio on the per-request ring (c128 always, c4 on the unified pool): one entry per row,
    ``[seq_len, loc(p), loc(max(p - r, 0)) // r, loc(p) // r]`` with ``p = seq_len - 1``."""
    out: dict[str, list[list[int]]] = {}
    for ratio in RATIOS:
        ring = compression.ring_size(ratio)
        plan = []
        for slot, seq_len in zip(slots, seq_lens):
            p = seq_len - 1
            write = slot * ring + p % ring
            plan.append([seq_len, write, (slot * ring + max(p - ratio, 0) % ring) // ratio, write // ratio])
        out[f"c{ratio}_decode_plan"] = plan
    return out


def decode_fields(batch: VerifyBatch, graph: bool = False) -> dict[str, list]:
    """Every field :func:`~metadata_builders.families.dsv4.metadata.fields_for` names for a decode-mode batch.

    Compression only in ``decode``: a draft-decode child is a draft worker (``need_compress=False``, its pool has no
    compressed layer), so its index streams carry the window alone, whatever the geometry.
    """
    rows = decode_rows(batch, graph)
    fields: dict[str, list] = {"seq_lens": list(rows.seq_lens)}
    fields.update(core_metadata(batch, rows, list(rows.seq_lens), list(rows.slots)))
    geo = batch.geometry
    compressed = not batch.draft_runner and geo.compression is not None
    if compressed:
        out = compressed_attention(geo, fields["seq_lens_casual"], fields["raw_out_loc"], fields["page_table"])
        out.update(sparse_buffers(geo, out))
        out.update(indexer_metadata(out))
        fields.update(out)
    if geo.swa_window == geo.unified_swa_window:
        fields.update(index_streams(batch if compressed else _uncompressed(batch), fields))
    fields.update(decode_streams(batch, list(rows.slots), fields["positions_casual"]))  # the SWA ring target
    fields["swa_out_cache_loc"] = swa_out_cache_loc(batch.full_to_swa, fields["raw_out_loc"])
    if compressed:
        assert geo.compression is not None
        fields.update(decode_plans(geo.compression, rows.slots, rows.seq_lens))
        fields.update(low_ratio_groups(geo, fields, forward_positions(batch, len(rows.seq_lens))))
    names = fields_for(geo, batch.mode, draft_runner=batch.draft_runner)
    assert set(fields) == set(names), sorted(set(fields) ^ set(names))
    return {name: fields[name] for name in names}


def _uncompressed(batch: VerifyBatch) -> VerifyBatch:
    """The batch as a draft worker's pool sees it: no compressed layer."""
    if batch.geometry.compression is None:
        return batch
    return batch.replace(geometry=dataclasses.replace(batch.geometry, compression=None))


def decode_build(batch: VerifyBatch, variant: Variant) -> VerifyMetadata:
    """The reference's build of a decode-mode batch along ``variant`` (``eager`` or ``graph``).

    The sync contract: none at all (the build reads device memory only; no token map, no count to trust).
    """
    fields = decode_fields(batch, variant.path == "graph")
    rows = len(fields["seq_lens"])
    return VerifyMetadata(fields, Decision(rows, True, True, batch.max_context), Audit([], []))
