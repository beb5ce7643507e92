"""The mutants of the whole metadata's groups: compression (c4/c128, sparse, indexer, plans), the low ratios and the
decode index streams.

Two or more realistic mutants per group, each a bug a backend engineer could plant
in :mod:`metadata_builders.families.dsv4.hip.compression` (stage ``compression.<function>``),
:mod:`metadata_builders.families.dsv4.hip.low_ratios` (stage ``low_ratios.<function>``) or the pipeline's
``index_streams``; the catalogue (:mod:`.catalogue`) lists them after the core pipeline's.
"""

from __future__ import annotations

from metadata_builders.families.dsv4.mutants.spec import MutantSpec

__all__ = ["GROUP_SPECS"]

GROUP_SPECS: tuple[MutantSpec, ...] = (
    # The decode index streams (metadata_builders.families.dsv4.hip.pipeline.index_streams).
    MutantSpec(
        "stream_indptr_from_causal_lengths", "index_streams", "a stream indptr that no longer describes its buffer",
        "After build_decode_streams laid each token's window out by its window length, the SWA indptr is recomputed "
        "from the causal lengths (seq_lens_casual): indptr and indices no longer describe one another, and every "
        "token past its window's start gets a segment as long as its context -- the attention kernel reads past "
        "the buffer's end.",
        "    return decode_index_streams_torch(fields[\"req_pool_indices_repeated\"], fields[\"positions_casual\"],\n"
        "                                      fields[\"swa_topk_lengths\"], hca, csa, pages, csa_width=csa_width,\n"
        "                                      win=geo.unified_swa_window, ring_size=geo.ring_size, "
        "swa_pages=swa_pages)\n",
        "    out = decode_index_streams_torch(fields[\"req_pool_indices_repeated\"], fields[\"positions_casual\"],\n"
        "                                     fields[\"swa_topk_lengths\"], hca, csa, pages, csa_width=csa_width,\n"
        "                                     win=geo.unified_swa_window, ring_size=geo.ring_size, "
        "swa_pages=swa_pages)\n"
        "    out[\"swa_indptr\"] = F.pad(torch.cumsum(casual, 0, dtype=torch.int32), (1, 0))  "
        "# one segment per context\n"
        "    return out\n",
        "docs/FINDINGS.md F8: a stale extend length reaching build_decode_streams, whose indptr then describes "
        "segments outside its buffer",
    ),
    # The compression groups (metadata_builders.families.dsv4.hip.compression): two or more per group.
    MutantSpec(
        "compress_gate_on_position", "compression.compressed_attention", "positions for lengths",
        "A token compresses when its position, not its length, is a multiple of the ratio: every c4/c128 "
        "store location lands one token early (the token that completes a group stores nothing).",
        "        compress = torch.remainder(casual, ratio) == 0",
        "        compress = torch.remainder(casual - 1, ratio) == 0",
        "the seq_lens_casual vs positions_casual split of make_core_attn_metadata",
    ),
    MutantSpec(
        "c128_page_indices_inclusive", "compression.c128_page_indices", "off-by-one visibility bound",
        "The c128 page indices show slot k while k <= the raw length: one compressed slot not yet written "
        "becomes visible to attention.",
        "torch.where(k.unsqueeze(0) < raw.to(_I64).unsqueeze(1),",
        "torch.where(k.unsqueeze(0) <= raw.to(_I64).unsqueeze(1),",
    ),
    MutantSpec(
        "sparse_lengths_from_raw", "compression.sparse_buffers", "clamp-1 and raw lengths swapped",
        "The sparse top-k lengths clamp the raw c4 lengths instead of the clamp-1 ones: a token with no "
        "compressed entry yet gets length 0 where the FlashMLA kernel needs 1.",
        '        "c4_sparse_topk_lengths": clamp1.clamp(max=topk),',
        '        "c4_sparse_topk_lengths": compressed["c4_topk_lengths_raw"].clamp(max=topk),',
        "sparse_buffers in attn_glue_hip (c4_sparse_topk_lengths vs c4_sparse_topk_lengths_raw)",
    ),
    MutantSpec(
        "sparse_page_indices_zero_filled", "compression.sparse_buffers", "zeros for the -1 fill",
        "The sparse page-index buffer starts as zeros instead of -1: every column the top-k kernel does not "
        "fill points at page 0 instead of nowhere.",
        "_aligned(topk, geo.page_index_align)), -1,",
        "_aligned(topk, geo.page_index_align)), 0,",
    ),
    MutantSpec(
        "indexer_lengths_clamped", "compression.indexer_metadata", "clamp-1 lengths for the indexer",
        "The c4 indexer ranks clamp-1 lengths (what decode rows of the low ratios use) instead of the raw "
        "ones: a token with no compressed entry scores one phantom entry.",
        '    return {"indexer_compressed_seq_lens": compressed["c4_topk_lengths_raw"]}',
        '    return {"indexer_compressed_seq_lens": compressed["c4_topk_lengths_clamp1"]}',
        "init_forward_metadata_indexer (c4 raw vs the low ratios' clamp-1 lengths)",
    ),
    MutantSpec(
        "indexer_lengths_from_c128", "compression.indexer_metadata", "wrong ratio",
        "The indexer reads the c128 lengths instead of the c4 ones.",
        '    return {"indexer_compressed_seq_lens": compressed["c4_topk_lengths_raw"]}',
        '    return {"indexer_compressed_seq_lens": compressed["c128_topk_lengths_raw"]}',
    ),
    MutantSpec(
        "host_plan_mirror_off_by_one", "compression.compress_plans", "host-mirror arithmetic off by one",
        "The compress plan's host mirror adds one draft token too few (seq_lens_cpu + num_draft - 1): on an "
        "eager build with a host mirror every compression and state write lands one position early, while "
        "the device plan is right. The one GPU consumer of the mirror the CPU-mirror fix is about.",
        "[s + draft for s in seq_lens_cpu]",
        "[s + draft - 1 for s in seq_lens_cpu]",
        "the seq_lens_cpu + num_draft arithmetic of init_forward_metadata_target_verify_old (CPU-mirror fix)",
    ),
    MutantSpec(
        "device_plan_drops_write_pad", "compression.device_plan", "rollback tail not kept",
        "The device plan writes the state ring only from the last compressed group, ignoring the verified "
        "tail a rollback keeps (mtp_pad): after a rejected draft the ring lacks the tokens it must replay.",
        "    writes = real & (position >= torch.minimum(last_c, seq_lens[r] - pad))",
        "    writes = real & (position >= last_c)",
        "c_plan.cuh's mtp_pad (write plan keeps the verify batch's committed tail resident)",
    ),
    # The V4.1 low ratios (metadata_builders.families.dsv4.hip.low_ratios, stage low_ratios.<function>).
    MutantSpec(
        "c2_out_loc_zero_filled", "low_ratios.low_ratio_compression", "c4's fill value for the low ratios",
        "A token that completes no ratio-2 group gets store location 0 (c4's convention) instead of -1: the "
        "c2 store writes every odd-length token's latent over slot 0 of the c2 pool.",
        "torch.where(completes, loc, torch.full_like(loc, -1))",
        "torch.where(completes, loc, torch.zeros_like(loc))",
        "low_ratio_compression_metadata in attn_glue_hip (-1 for c1/c2, 0 for c4)",
    ),
    MutantSpec(
        "low_ratio_indexer_prefill_lengths", "compression.compression_groups", "prefill lengths on decode rows",
        "Target verify builds the low-ratio indexers with the prefill rows' raw lengths (casual // R) instead "
        "of the decode rows' clamp-1 ones: a token with no ratio-2 entry yet gets length 0.",
        "hip_low_ratios.low_ratio_groups(inputs, core, is_prefill=False)",
        "hip_low_ratios.low_ratio_groups(inputs, core, is_prefill=True)",
        "_init_low_ratio_indexer_metadata(is_prefill=not low_ratio_decode_rows)",
    ),
    MutantSpec(
        "low_ratio_indexer_table_not_expanded", "low_ratios.low_ratio_indexer", "c4's indexer paging",
        "The low-ratio indexer reuses the core page table as the c4 indexer does, as if its pool paged "
        "page_size // R slots: with 64-slot index pages every page past the first block reads the wrong block.",
        "    blocks = inputs.geometry.page_size // ratio // INDEX_PAGE_SIZE",
        "    blocks = 1",
        "expand_index_page_table (the low-ratio indexer-K pool pages at 64 slots, not page_size // ratio)",
    ),
    MutantSpec(
        "low_ratio_sparse_lengths_unclamped", "low_ratios.low_ratio_sparse", "missing index_topk clamp",
        "The low-ratio sparse top-k lengths are the clamp-1 lengths unclamped: past index_topk compressed "
        "entries the FlashMLA kernel reads more columns than the top-k buffer holds.",
        '        f"c{ratio}_sparse_topk_lengths": clamp1.clamp(max=topk),',
        '        f"c{ratio}_sparse_topk_lengths": clamp1,',
        "sparse_buffers in attn_glue_hip (min(clamp1, topk) for c1/c2)",
    ),
    MutantSpec(
        "low_ratio_map_uniform", "low_ratios.low_ratio_groups", "a uniform token map on a ragged layout",
        "The low-ratio states' token -> request map repeats every row num_draft times, right for uniform verify "
        "only: on a ragged layout a token is mapped to an earlier request, whose c1/c2 state it reads and writes.",
        '        out["low_ratio_req_indices"] = low_ratio_req_indices(core["verify_store_state_slot"])',
        '        out["low_ratio_req_indices"] = torch.repeat_interleave(inputs.req_pool_indices.to(_I64),\n'
        '                                                               inputs.num_draft_tokens)',
        "SGLang 0.5.22-0.5.23 token_req_indices (dsv41_sparse.py): repeat_interleave(req, draft_token_num) for "
        "target verify, read by init_forward_metadata_in_graph (FINDINGS.md F18)",
    ),
    MutantSpec(
        "low_ratio_pos_from_lengths", "low_ratios.low_ratio_groups", "lengths for positions",
        "The low-ratio sources' positions are widened from the metadata's seq_lens_casual (each token's visible "
        "length) instead of the forward batch's positions: every real token's V4.1 c2 state row and RoPE sit one "
        "position ahead, and a pad row's token takes its pad length where the runner hands 0.",
        '        out["low_ratio_pos_i64"] = low_ratio_positions(inputs)',
        '        out["low_ratio_pos_i64"] = core["seq_lens_casual"].to(_I64)',
        "init_forward_metadata_in_graph's low_ratio_pos_i64 = forward_batch.positions.to(int64) (SGLang 0.5.22+); "
        "the seq_lens_casual vs positions_casual split of make_core_attn_metadata",
    ),
    # The in-graph block's paged SWA target (metadata_builders.families.dsv4.hip.pipeline.swa_out_cache_loc).
    MutantSpec(
        "paged_swa_pads_minus_one", "swa_out_cache_loc", "a pad's store target marked -1 instead of the dummy slot",
        "The paged SWA store target of a pad token (out_cache_loc 0) is marked -1, 'store nothing', instead of "
        "translated to the dummy slot full_to_swa[0]: upstream's store takes every index it is handed, so the pad "
        "token's K lands in the SWA pool's last slot (a torch index) or before its first (a kernel's offset).",
        "    return inputs.full_to_swa[inputs.out_cache_loc].to(_I32)",
        "    return torch.where(inputs.out_cache_loc > 0, inputs.full_to_swa[inputs.out_cache_loc], -1).to(_I32)",
        "get_swa_out_cache_loc (SGLang 0.5.23): 'translates the zero-padded out_cache_loc to the dummy slot'",
    ),
)
