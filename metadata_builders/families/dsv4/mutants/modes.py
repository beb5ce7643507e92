"""The mutants of the MTP step's other builds: draft extend and the decode modes (issue 26), the DSpark draft
worker's block verify (issue 45).

Each a bug a backend engineer could plant in the ``hip`` builder's build of that mode:
:mod:`metadata_builders.families.dsv4.hip.pipeline` (draft extend, the builder's graph phases) or
:mod:`metadata_builders.families.dsv4.hip.decode` (stage ``decode.<function>``); the catalogue
(:mod:`.catalogue`) lists them last.
"""

from __future__ import annotations

from metadata_builders.families.dsv4.mutants.spec import MutantSpec

__all__ = ["MODE_SPECS"]

MODE_SPECS: tuple[MutantSpec, ...] = (
    # -- mode draft_extend (init_forward_metadata_draft_extend) ------------------------------------------
    MutantSpec(
        "draft_extend_count_real_rows", "draft_extend_layout", "draft extend's host count misses the pad rows",
        "The token count draft extend passes as output_size is n * bs (the real requests) instead of n * rows: "
        "on a graph tier with pad rows the device lengths (n on every row) sum to more than the count the map "
        "trusts, and HIP writes past the token map.",
        "num_tokens=n * inputs.rows, exact_num_tokens=True",
        "num_tokens=n * inputs.bs, exact_num_tokens=True",
        "SGLang PR #29202: the sync-free token map entered through draft extend's shared prefill builder",
    ),
    MutantSpec(
        "draft_extend_prefix_plus_step", "draft_extend_layout", "draft extend adds the step's tokens twice",
        "Draft extend treats seq_lens as prefixes and adds n again, as target verify does: upstream's caller "
        "already counts the step's tokens, so every row reads n positions past its context.",
        "return Layout(seq_lens=inputs.seq_lens, extend_seq_lens=extend,",
        "return Layout(seq_lens=inputs.seq_lens + extend, extend_seq_lens=extend,",
    ),
    MutantSpec(
        "draft_extend_full_page_table", "draft_extend_layout", "draft extend's page table sized as verify's",
        "Draft extend's max_seq_len is the caller's (max_context on the graph path) instead of the page size: "
        "the placeholder page table is the width of the context (draft extend attends only to SWA; upstream "
        "matches CUDA's one-page allocation).",
        "exact_num_tokens=True, max_seq_len=inputs.geometry.page_size)",
        "exact_num_tokens=True, max_seq_len=inputs.max_seq_len)",
    ),
    MutantSpec(
        "draft_extend_pad_length_read_unsigned", "core_metadata",
        "a non-positive pad length read as unsigned",
        "The SWA window gather masks column w by w < swa_topk_lengths with the length loaded as an unsigned 32-bit "
        "int (as a kernel that keeps topk_length in a u32): identical for every real token (length >= 1), but a "
        "draft-extend graph pad row's length -1 or 0 reads as ~2**32, so nothing is masked and the pad token's "
        "negative positions index its slot's row from the end -- a live KV location in an index row whose length "
        "says it reads nothing.",
        "    invalid = (offsets < 0) | (offsets >= width)",
        "    lengths = torch.clamp(seq_lens_casual, max=geo.swa_window).to(_I64).unsqueeze(1) % 2**32  # a u32 load\n"
        "    invalid = (torch.arange(geo.swa_window, dtype=_I64, device=positions.device) >= lengths) | "
        "(offsets >= width)",
        "docs/FINDINGS.md L2 (upstream's draft-extend pad lengths are -1 and 0 on 0.5.23); vLLM #51593 (a -1 "
        "length read unsigned by a consumer: a hang)",
    ),
    MutantSpec(
        "draft_extend_replay_keeps_captured_out_loc", "HipBuilder._draft_extend_out_graph",
        "replay keeps the capture's store locations",
        "Out-graph work before a draft-extend replay refreshes every captured field but raw_out_loc: the graph "
        "stores the step's K at the locations of the capture (upstream pads the replay's out_cache_loc to the "
        "captured token count \"so raw_out_loc reflects the actual replay out_cache_loc\").",
        "        for name, value in built.fields.items():\n            state.fields[name].copy_(value)",
        "        for name, value in built.fields.items():\n            if name != \"raw_out_loc\":\n"
        "                state.fields[name].copy_(value)",
        "deepseek_v4_backend_hip_radix.py init_forward_metadata_out_graph, DRAFT_EXTEND bucket (0.5.23)",
    ),
    # -- the decode modes (issue 26) ------------------------------------------------------------------
    MutantSpec(
        "draft_decode_step_offset_off_by_one", "decode.from_raw_decode", "multi-step draft: step offset one short",
        "A draft-decode child adds speculative_step_id to seq_lens instead of speculative_step_id + 1: every step's "
        "token sits one position early -- the previous step's position, so it attends one token short, its SWA "
        "window and page lookups shift, and its compressor state overwrites the previous step's ring row.",
        "        seq_lens = seq_lens + (inputs.draft_step + 1)  # the child's speculative_step_id + 1",
        "        seq_lens = seq_lens + inputs.draft_step",
        "deepseek_v4_backend_hip_radix.py make_forward_metadata_from_raw_decode, \"seq_lens + "
        "self.speculative_step_id + 1\" (0.5.23)",
    ),
    MutantSpec(
        "draft_decode_step_slice_step_major", "decode.step_out_cache_loc",
        "multi-step draft: per-step out_cache_loc slice read step-major",
        "The child's slice of the shared out_cache_loc buffer is taken as if the buffer were step-major "
        "(view(steps, rows)[step]) while EAGLE lays it out request-major (per_step_draft_out_cache_loc: "
        "view(bs, topk, steps).permute(2, 0, 1)): each step stores its K at another request's (or another step's) "
        "location. Equal to the truth only with one request or one step.",
        "    return inputs.out_cache_loc.view(inputs.rows, -1)[:, step].contiguous()",
        "    return inputs.out_cache_loc.view(-1, inputs.rows)[step].contiguous()",
        "sglang/srt/speculative/eagle_utils.py per_step_draft_out_cache_loc (the layout's one source of truth)",
    ),
    MutantSpec(
        "draft_decode_children_rerun_child0_slice", "decode.refresh_children",
        "multi-step draft: children refreshed from child 0's slice at replay",
        "Before a replay the multi-step backend refreshes children 1 .. steps - 2 from child 0's out-graph work whole "
        "-- its slots, its lengths and its row of the shared out_cache_loc -- instead of giving each child its own "
        "row: every draft step after the first stores its K where step 0 stored its own (the eager build and the "
        "capture are right; only the replay is wrong).",
        "        out = first.out_cache_loc if inputs.mode == \"idle\" else step_out_cache_loc(inputs, step)\n",
        "        out = first.out_cache_loc if inputs.mode == \"idle\" else step_out_cache_loc(inputs, 0)\n",
        "SGLang 0.5.18/0.5.19 DeepseekV4MultiStepBackend.init_forward_metadata_out_graph (children got child 0's "
        "raw metadata; fixed in 0.5.20: docs/FINDINGS.md F23)",
    ),
    MutantSpec(
        "eager_decode_table_from_callers_length", "decode.from_raw_decode",
        "an eager decode page table sized by the caller's max_seq_len",
        "Eager decode sizes its page table by the caller's max_seq_len (the longest row of the forward batch) instead "
        "of MAX_SEQ_LEN_FOR_CAPTURE: narrower, which P1 allows where it covers every read (decision 2026-12-04) -- "
        "but draft decode's caller holds the rows before the child's step offset, so a step's token past the last "
        "page of its pre-step row finds no page for its newest positions.",
        "    layout = Layout(seq_lens, ones, torch.cumsum(ones, 0, dtype=_I32) - ones, None, None,\n"
        "                    int(inputs.req_to_token.shape[1]))  # MAX_SEQ_LEN_FOR_CAPTURE: a full-width page table",
        "    layout = Layout(seq_lens, ones, torch.cumsum(ones, 0, dtype=_I32) - ones, None, None,\n"
        "                    int(inputs.req_to_token.shape[1]) if inputs.graph is not None else inputs.max_seq_len)",
        "SGLang 0.5.18-0.5.21's draft-extend placeholder sized by the caller's max_seq_len (docs/FINDINGS.md F21)",
    ),
    MutantSpec(
        "decode_replay_keeps_captured_out_loc", "decode.copy_raw",
        "replay keeps the capture's store locations (decode)",
        "Out-graph work before a decode replay copies the replay's slots and lengths into the captured raw decode "
        "metadata but not its out_cache_loc: the recorded build stores every step's K at the capture's locations "
        "(upstream's DSV4RawDecodeMetadata.copy_ copies all three).",
        "    for name in (\"req_pool_indices\", \"seq_lens\", \"out_cache_loc\"):",
        "    for name in (\"req_pool_indices\", \"seq_lens\"):",
        "deepseek_v4_backend_hip_radix.py DSV4RawDecodeMetadata.copy_ (0.5.23)",
    ),
    # -- each mode replayed and remembered as upstream runs it (issue 41 item 7) ----------------------------
    MutantSpec(
        "draft_decode_children_refresh_live_rows", "decode.refresh_children",
        "multi-step draft: children refresh only the live rows",
        "Before a replay children 1 .. steps - 2 copy child 0's slots and lengths, and their own row of the shared "
        "buffer, for the live requests only ('pad rows never change'): after a replay with more requests, a "
        "request that left keeps its slot, length and locations in those children's pad rows, whose K then lands "
        "on the departed request's live ring rows.",
        "        copy_raw(state.children[step], DecodeState(first.req_pool_indices, first.seq_lens, out))\n",
        "        live = inputs.bs  # the pad rows' values never change\n"
        "        for name, value in ((\"req_pool_indices\", first.req_pool_indices), (\"seq_lens\", first.seq_lens),\n"
        "                            (\"out_cache_loc\", out)):\n"
        "            getattr(state.children[step], name)[:live].copy_(value[:live])\n",
        "DeepseekV4MultiStepBackend replay_cuda_graph_metadata_from (a copy_ of every row of the bucket)",
    ),
    MutantSpec(
        "idle_keeps_a_bucket_of_its_own", "_captured_tiers",
        "an idle rank's replay looks in its own bucket, not decode's",
        "The backend keeps an idle rank's captured metadata apart from decode's (a bucket per forward mode) while "
        "upstream's runner captures DECODE once and replays it as IDLE (the DECODE_OR_IDLE bucket): an idle replay's "
        "out-graph work refreshes a fresh state the recorded graph never reads, so the graph runs on the last decode "
        "step's rows.",
        "\"idle\": \"hip/decode_or_idle\"}",
        "\"idle\": \"hip/idle\"}",
        "upstream _GraphBucket.DECODE_OR_IDLE (deepseek_v4_backend_hip_radix.py, 0.5.23)",
    ),
    MutantSpec(
        "draft_step_kept_on_the_builder", "HipBuilder.build",
        "a draft step kept on the backend across modes",
        "The draft worker's backend remembers the speculative step of its last draft-decode call and applies it to "
        "its next draft extend ('the step the worker is on'): a draft extend after a draft decode sees every row "
        "step + 1 tokens longer. Each mode alone is right; only a history of other modes shows it, as one worker "
        "builds draft decode and draft extend on its backend every step.",
        "        if inputs.mode == \"draft_extend\":\n"
        "            return draft_extend(inputs, stages=self)\n"
        "        if inputs.mode in DECODE_MODES:\n",
        "        if inputs.mode == \"draft_extend\":\n"
        "            step = self.__dict__.get(\"_draft_step\")\n"
        "            if step is not None:  # the worker's current step\n"
        "                import dataclasses\n"
        "                inputs = dataclasses.replace(inputs, seq_lens=inputs.seq_lens + (step + 1))\n"
        "            return draft_extend(inputs, stages=self)\n"
        "        if inputs.mode in DECODE_MODES:\n"
        "            if inputs.draft_step is not None:\n"
        "                self._draft_step = inputs.draft_step\n",
        "speculative_step_id kept on a shared backend (DeepseekV4MultiStepBackend gives each step a child of its own)",
    ),
    MutantSpec(
        "decode_low_ratio_prefill_lengths", "decode.from_raw_decode", "prefill lengths on a decode step's low ratios",
        "A decode step builds its V4.1 low-ratio indexers with the prefill rows' raw lengths (casual // R) instead of "
        "the decode rows' clamp-1 ones: a graph pad row or an idle rank's row (length 1) gets a ratio-2 length of 0 "
        "where the decode rows' kernels take at least 1 (why upstream clamps, passing is_prefill=False); a real row "
        "(length 2 or more) is unchanged, so only a tier with pad rows shows it.",
        "hip_low_ratios.low_ratio_groups(inputs, fields, is_prefill=False)",
        "hip_low_ratios.low_ratio_groups(inputs, fields, is_prefill=True)",
        "make_forward_metadata_from_raw_decode's _init_low_ratio_indexer_metadata(core, is_prefill=False) "
        "(SGLang 0.5.22+)",
    ),
    # -- the DSpark draft worker's block verify: two draft counts (issue 45) -------------------------------------
    MutantSpec(
        "dspark_draft_verifies_configured_count", "verify_extension", "the configured draft count as the verify width",
        "Target verify reads the backend's configured draft count (speculative_num_draft_tokens) where it should read "
        "the active width (target_verify_num_draft_tokens): on a DSpark draft worker, configured gamma + 1 while the "
        "draft block verifies gamma a request, every request gets one verify token more than the draft forward has "
        "-- a position past its block, a location it never allocated, a token count the map trusts that the caller's "
        "out_cache_loc does not hold. The target worker's counts are one number, so only a draft worker's batch "
        "shows it.",
        "    draft = inputs.num_draft_tokens  # the active width: target_verify_num_draft_tokens\n",
        "    draft = inputs.speculative_num_draft_tokens or inputs.num_draft_tokens  # the configured count\n",
        "SGLang PR #31026 (open): 'Fix DeepSeek V4 HIP target-verify metadata to use the active DSpark draft token "
        "count instead of the static configured speculative token count'; #30964's review of the same split",
    ),
    # -- the worker's eager verify step: prepare -> DP pad -> forward (issue 45) ---------------------------------
    MutantSpec(
        "eager_plan_before_dp_pad", "target_verify", "the eager verify metadata planned before the DP padding",
        "The eager target-verify build plans the real requests only, as the verify batch stood before the worker's "
        "prepare_mlp_sync_batch padded it: the rows past inputs.bs (the DP pad rows, seq_len 1, slot 0) and their "
        "tokens are dropped, so the metadata has bs * num_draft_tokens token rows while the forward consumes the "
        "padded out_cache_loc. Identical on every batch the worker did not pad.",
        "    seq_lens_cpu = pipeline.host_mirror(inputs, check_mirror=check_mirror)\n",
        "    if inputs.graph is None and inputs.rows > inputs.bs:  # the verify batch before the worker's DP padding\n"
        "        import dataclasses\n"
        "        n, real = inputs.bs, inputs.bs * inputs.num_draft_tokens\n"
        "        mirror = None if inputs.seq_lens_cpu is None else inputs.seq_lens_cpu[:n]\n"
        "        inputs = dataclasses.replace(inputs, seq_lens=inputs.seq_lens[:n], seq_lens_cpu=mirror,\n"
        "                                     req_pool_indices=inputs.req_pool_indices[:n],\n"
        "                                     out_cache_loc=inputs.out_cache_loc[:real],\n"
        "                                     positions=inputs.positions[:real], max_seq_len=inputs.max_seq_len)\n"
        "    seq_lens_cpu = pipeline.host_mirror(inputs, check_mirror=check_mirror)\n",
        "SGLang PR #26244 (merged 2026-05-25): '[Spec] fix EAGLE v2 verify metadata init order on non-cuda-graph "
        "path' -- the metadata was initialised before prepare_mlp_sync_batch padded the batch, and the DSV4 "
        "indexer, whose shapes are baked in, crashed",
    ),
)
