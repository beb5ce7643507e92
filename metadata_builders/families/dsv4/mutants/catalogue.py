"""The mutant catalogue as data: each mutant's stage, bug class, summary, edit and incident.

Nothing here compiles or runs a mutant (that is :mod:`.patching` and
:mod:`.runner`); this module imports nothing of the harness, so the catalogue
can be read, listed and diffed without torch.

A mutant is a one-place source edit of one stage of :mod:`metadata_builders.families.dsv4.hip.pipeline` (or of
:mod:`metadata_builders.families.dsv4.hip.compression`, stage ``compression.<function>``, or of
:mod:`metadata_builders.families.dsv4.hip.low_ratios`, stage ``low_ratios.<function>``: their mutants are
in :mod:`.groups`; the other modes' of the MTP step, in :mod:`.modes`)
(``find`` -> ``replace`` in that function's source text).  Worked example
(``causal_start_off_by_one``): stage ``causal_expansion``::

    - casual = layout.seq_lens.to(_I64)[r] - extend[r] + 1 + (t - start[r])
    + casual = layout.seq_lens.to(_I64)[r] - extend[r] + (t - start[r])

A request with ``seq_lens=[5]`` verifying 2 tokens then reports
``seq_lens_casual = [5, 6]`` instead of ``[6, 7]``.  When ``hip.py`` changes so
that a ``find`` text no longer occurs exactly once, update it here.
"""

from __future__ import annotations

from metadata_builders.families.dsv4.mutants.groups import GROUP_SPECS
from metadata_builders.families.dsv4.mutants.modes import MODE_SPECS
from metadata_builders.families.dsv4.mutants.spec import MutantSpec

__all__ = ["MUTANTS", "MutantSpec"]


_AMD_FAULT = "the AMD MTP/EAGLE 'GPU memory access fault' after output_size=num_tokens was passed to repeat_interleave"
_TOLIST_STALL = "the seq_lens.tolist() D2H sync in init_forward_metadata_target_verify (2-xx ms decode bubbles)"

_SPECS: tuple[MutantSpec, ...] = (
    # -- the entry point and the mirror -------------------------------------------------------------
    MutantSpec(
        "mirror_not_plumbed", "host_mirror", "host mirror dropped, fallback syncs",
        "The caller's seq_lens_cpu is ignored and the builder falls back to seq_lens.tolist() on the "
        "host-mirror path too, eager and out-graph alike: the regression the CPU-mirror fix removed.",
        "if inputs.verify_lens is None and inputs.variant.mirror == \"tolist\":",
        "if inputs.verify_lens is None and inputs.variant.mirror in (\"tolist\", \"host\"):",
        _TOLIST_STALL,
    ),
    MutantSpec(
        "debug_log_formats_device_tensor", "target_verify", "hidden sync in a log line",
        "A debug log line is rewritten as an f-string that prints the device-resident extend lengths: the "
        "f-string is formatted (a D2H copy) whether or not debug logging is on.",
        "_log.debug(\"target verify %s: %d rows, %d tokens\", inputs.variant.label, inputs.rows, layout.num_tokens)",
        "_log.debug(f\"target verify {inputs.variant.label}: extend_seq_lens={layout.extend_seq_lens}\")",
        "debug logging of tensors in hot paths (every f-string with a CUDA tensor is a cudaMemcpy + sync)",
    ),
    MutantSpec(
        "seq_lens_to_cpu_async_copy", "target_verify", "device-to-host copy spelled .to(\"cpu\")",
        "A host copy of seq_lens is taken with .to(\"cpu\", non_blocking=True) for a debug log: a device-to-host "
        "read on every path, the sync-free ones included (on CPU \"cpu\" and the device were once the same name).",
        "    layout = stages.verify_extension(inputs, seq_lens_cpu)\n"
        "    _log.debug(\"target verify %s: %d rows, %d tokens\", inputs.variant.label, inputs.rows, "
        "layout.num_tokens)",
        "    host_seq_lens = inputs.seq_lens.to(\"cpu\", non_blocking=True)\n"
        "    layout = stages.verify_extension(inputs, seq_lens_cpu)\n"
        "    _log.debug(\"target verify %s: %d rows, %d tokens, prefixes %s\", inputs.variant.label, inputs.rows,\n"
        "               layout.num_tokens, host_seq_lens)",
        "SGLang spells asynchronous device-to-host copies x.to(\"cpu\", non_blocking=True); the CPU gate once saw none",
    ),
    MutantSpec(
        "mirror_validation_by_sum", "validate_mirror", "stale-mirror check compares sums",
        "Opt-in mirror validation compares the sums of seq_lens and the host mirror: a stale mirror with two "
        "rows swapped, or one row ahead and another behind, passes silently.",
        "    for i, (want, got) in enumerate(zip(seq_lens.tolist(), seq_lens_cpu)):\n"
        "        if want != got:\n"
        "            raise StaleMirror(i, want, got)",
        "    device = seq_lens.tolist()\n"
        "    if sum(device) != sum(seq_lens_cpu):\n"
        "        i = next(i for i, (a, b) in enumerate(zip(device, seq_lens_cpu)) if a != b)\n"
        "        raise StaleMirror(i, device[i], seq_lens_cpu[i])",
        "cheap consistency checks (a sum, a max) guarding a host mirror of device lengths",
    ),
    # -- stage 1: verify extension --------------------------------------------------------------
    MutantSpec(
        "dropped_dspark_gate", "verify_extension", "gate dropped (ungated rule under gate=dspark)",
        "The fix `exact_num_tokens = exact_num_tokens and is_dspark` is lost: an exact EAGLE layout passes "
        "output_size and trusts the host count on HIP.",
        "exact_num_tokens=apply_gate(inputs.variant.gate, exact, inputs.is_dspark),",
        "exact_num_tokens=exact and inputs.variant.gate != \"always_sync\",",
        _AMD_FAULT,
    ),
    MutantSpec(
        "uncapped_tier_exact", "verify_extension", "host total trusted as exact",
        "A layout's host total (an uncapped graph tier's tier, an eager host sum) is marked exact, so the "
        "token map passes it as output_size whatever the device lengths hold.",
        "num_tokens, exact = inputs.num_tokens_cpu, False",
        "num_tokens, exact = inputs.num_tokens_cpu, True",
        _AMD_FAULT,
    ),
    MutantSpec(
        "capped_tier_output_size_tier", "verify_extension", "capped tier passes output_size=tier",
        "A graph tier's total is taken as the tier and marked exact instead of the host's count: where pad rows "
        "are clamped to the cap (or there are none) the rows sum to less, so the map leaves an uninitialised "
        "tail on HIP.",
        "        if inputs.num_tokens_cpu is not None:\n",
        "        if graph is not None:\n"
        "            num_tokens, exact = graph.graph_num_tokens, True\n"
        "        elif inputs.num_tokens_cpu is not None:\n",
        _AMD_FAULT,
    ),
    MutantSpec(
        "max_seq_len_without_draft", "verify_extension", "max_seq_len not advanced by the draft tokens",
        "max_seq_len misses `+ num_draft_tokens`: the page table ends one verify step early and the decision "
        "reports the pre-verify length.",
        "else inputs.max_seq_len + draft",
        "else inputs.max_seq_len",
        "F3 in docs/FINDINGS.md: SGLang's DSpark raw-verify path reports max_seq_len without + num_draft_tokens",
    ),
    MutantSpec(
        "inclusive_cumsum_start_loc", "verify_extension", "inclusive instead of exclusive cumsum",
        "extend_start_loc = cumsum(extend) without subtracting extend: every row starts at its own end.",
        "start = torch.cumsum(extend, 0, dtype=_I32) - extend",
        "start = torch.cumsum(extend, 0, dtype=_I32)",
    ),
    MutantSpec(
        "uniform_total_item_sync", "verify_extension", "hidden .item() in a sync-free path",
        "The uniform total is re-read from the device 'to be safe' instead of draft * rows: a D2H sync on "
        "the host-mirror path that claims to be sync-free (and breaks graph capture).",
        "num_tokens, exact = draft * rows, True",
        "num_tokens, exact = int(extend.sum().item()), True",
        _TOLIST_STALL,
    ),
    MutantSpec(
        "uniform_total_host_loop", "verify_extension", "hidden syncs in a helper loop",
        "The uniform total is summed in Python over the device extend lengths (`int(e)` per row): one D2H "
        "sync per request, spelled so no `.item()` appears.",
        "num_tokens, exact = draft * rows, True",
        "num_tokens, exact = sum(int(e) for e in extend), True",
        _TOLIST_STALL,
    ),
    MutantSpec(
        "device_total_as_slice_bound", "verify_extension", "'sync-free' total kept on the device",
        "The uniform total is kept as a device tensor to avoid a sync, then used as output_size, a slice "
        "bound and a pad length downstream: each use converts it to a Python int, a sync per use.",
        "num_tokens, exact = draft * rows, True",
        "num_tokens, exact = extend.sum(), True",
        "'keep it on the device' refactors whose tensor later meets int(), range() or a slice",
    ),
    MutantSpec(
        "seq_lens_updated_in_place", "verify_extension", "caller's seq_lens updated in place",
        "verify extension adds the draft tokens into the caller's seq_lens tensor instead of a new one: the "
        "metadata is right, but the caller's (the graph runner's) buffer now holds the extended lengths.",
        "seq_lens = inputs.seq_lens + extend",
        "seq_lens = inputs.seq_lens.add_(extend)",
        "in-place updates of forward_batch.seq_lens, the classic graph-replay corruption",
    ),
    MutantSpec(
        "async_staging_on_device_mirror", "verify_extension", "host staging where the lengths are built on the device",
        "Without a host mirror the uniform extend lengths are staged on the host and copied over asynchronously, "
        "like the mirror path, instead of full_like on the device: the copy can be stale or in flight, so the "
        "sync-free token map of mirror=device can fault where the model says it cannot.",
        "            extend = torch.full_like(inputs.seq_lens, draft)",
        "            staged = torch.full((rows,), draft, dtype=_I32)\n"
        "            extend = staged.to(device, non_blocking=True)",
        "upstream _move_to_device staging of host-built lengths; " + "the AMD fault needs only one stale async copy",
    ),
    # -- stage 1: tier padding (pad_verify_lens_to_bucket) ----------------------------------------
    MutantSpec(
        "tier_slack_first_real_row", "pad_verify_lens_to_bucket", "tier slack given to a real row",
        "With no pad rows a real row (the first) absorbs the leftover: a real row widens, which pad_rows_only "
        "forbids; its extra tokens get positions past the request's end.",
        "        return verify_lens.clone()\n",
        "        widened = verify_lens.clone()\n"
        "        widened[0] += (graph_num_tokens - verify_lens.to(_I64).sum()).to(_I32)\n"
        "        return widened\n",
        "F2 in docs/FINDINGS.md: which row absorbs tier slack (ragged_verify.py)",
    ),
    MutantSpec(
        "tier_remainder_to_last_pad_rows", "pad_verify_lens_to_bucket", "uneven slack spread the wrong way",
        "The leftover % npad extra tokens go to the last pad rows instead of the first.",
        "(torch.arange(npad, device=verify_lens.device) < rem)",
        "(torch.arange(npad, device=verify_lens.device) >= npad - rem)",
        "pad_verify_lens_to_bucket in sglang/srt/speculative/ragged_verify.py",
    ),
    MutantSpec(
        "tier_cap_ignored", "pad_verify_lens_to_bucket", "cap not applied",
        "Pad rows are not clamped to the tier's cap, so a capped tier covers slack it must leave uncovered (and "
        "its total changes).",
        "        pad = pad.clamp(max=cap)\n",
        "        pad = pad\n",
        "F2/F2b in docs/FINDINGS.md: where padded_to_bucket applies the cap (ragged_verify.py)",
    ),
    # -- stage 2: causal expansion -----------------------------------------------------------------
    MutantSpec(
        "causal_start_off_by_one", "causal_expansion", "off-by-one causal start",
        "seq_lens_casual drops the `+ 1`: every verify token sees one token too few.",
        "casual = layout.seq_lens.to(_I64)[r] - extend[r] + 1 + (t - start[r])",
        "casual = layout.seq_lens.to(_I64)[r] - extend[r] + (t - start[r])",
        "ExpandPrefillCausally's seq_len rule",
    ),
    MutantSpec(
        "pad_tokens_first_row_slot", "causal_expansion", "pad tokens given the wrong slot",
        "Tokens of a capped tier's uncovered tail take row 0's slot instead of the last row's, so their "
        "stores land in a real request's state.",
        "r = torch.where(is_real, r, torch.full_like(r, rows - 1))",
        "r = torch.where(is_real, r, torch.zeros_like(r))",
    ),
    MutantSpec(
        "pad_tokens_casual_zero", "causal_expansion", "pad tokens given the wrong seq_lens_casual",
        "Uncovered-tail tokens get seq_lens_casual 0 (position -1) instead of 1.",
        "casual = torch.where(is_real, casual, torch.ones_like(casual))",
        "casual = torch.where(is_real, casual, torch.zeros_like(casual))",
    ),
    MutantSpec(
        "seq_lens_casual_int64", "causal_expansion", "int64 where consumers take int32",
        "The causal expansion returns seq_lens_casual in int64 (the torch arithmetic's dtype) instead of the "
        "int32 the attention kernels take: same values, and positions_casual and swa_topk_lengths follow.",
        "    return casual.to(_I32), inputs.req_pool_indices[r]",
        "    return casual, inputs.req_pool_indices[r]",
        "int64 index tensors handed to kernels compiled for int32 (read as pairs of int32 on the device)",
    ),
    # -- stage 3: core metadata --------------------------------------------------------------------
    MutantSpec(
        "swa_topk_clamp_window_minus_one", "core_metadata", "clamp at window - 1",
        "swa_topk_lengths is clamped at swa_window - 1: a token past the window attends one SWA entry short.",
        "torch.clamp(seq_lens_casual, max=geo.swa_window)",
        "torch.clamp(seq_lens_casual, max=geo.swa_window - 1)",
    ),
    MutantSpec(
        "page_table_floor_page_count", "core_metadata", "page_table one column short",
        "The page count is max_seq_len // page_size (floor, not ceil): the last partial page is missing.",
        "page_table = inputs.req_to_token[slots, : layout.max_seq_len : geo.page_size]",
        "page_table = inputs.req_to_token[slots, : layout.max_seq_len // geo.page_size * geo.page_size "
        ": geo.page_size]",
    ),
    MutantSpec(
        "sentinel_clamp_negative_positions", "core_metadata", "-1 sentinel mishandled (negative positions)",
        "Positions before 0 are clamped to 0 and looked up, instead of reading the -1 sentinel: the SWA "
        "window of an early token repeats position 0's location.",
        "raw = inputs.req_to_token[slots.unsqueeze(1), offsets].to(_I64).masked_fill(invalid, -1)",
        "raw = inputs.req_to_token[slots.unsqueeze(1), offsets].to(_I64)",
    ),
    MutantSpec(
        "sentinel_minus1_reads_swa0", "core_metadata", "-1 sentinel mishandled (req_to_token holes)",
        "Indices are clamped to >= 0 before the full_to_swa lookup (as a kernel port without negative "
        "indexing would): a -1 hole in req_to_token maps to full_to_swa[0] instead of -1.",
        "swa = inputs.full_to_swa[raw].to(_I32)",
        "swa = inputs.full_to_swa[raw.clamp(min=0)].masked_fill(invalid, -1).to(_I32)",
    ),
    # -- stage 4: unified prefill meta (the token map) ---------------------------------------------
    MutantSpec(
        "zero_length_row_check", "unified_prefill_meta", "hidden sync in a membership test",
        "A guard for zero-length rows, `if 0 in ext:`, is added before the token map: Tensor.__contains__ "
        "reads the comparison back, a sync on every path that claims to be sync-free.",
        "    seq_lens = layout.seq_lens.to(_I64)\n",
        "    if 0 in ext:\n        ext = ext.clamp(min=0)\n    seq_lens = layout.seq_lens.to(_I64)\n",
        "defensive checks on device tensors (`if (x == 0).any():`) in graph-captured code",
    ),
    MutantSpec(
        "inclusive_cumsum_pf_cu_q", "unified_prefill_meta", "inclusive instead of exclusive cumsum",
        "pf_cu_q is recomputed as an inclusive cumsum (cu_seqlens without its leading 0).",
        "cu_q = layout.extend_start_loc.to(_I64)[bid]",
        "cu_q = torch.cumsum(ext, 0)[bid]",
    ),
    MutantSpec(
        "pad_tokens_final_pos_zero", "unified_prefill_meta", "pad tokens given the wrong pf_final_pos",
        "Uncovered-tail tokens get pf_final_pos 0 instead of unified_swa_window, so the SWA store's "
        "`pos <= final_pos - win` guard no longer skips them: they write into a real ring.",
        "final_pos = F.pad(final_pos, (0, pad), value=inputs.geometry.unified_swa_window)",
        "final_pos = F.pad(final_pos, (0, pad), value=0)",
    ),
    MutantSpec(
        "output_size_is_padded_tokens", "unified_prefill_meta", "output_size = buffer length",
        "The token map is given the padded buffer length as output_size instead of num_tokens: a capped "
        "tier's uncovered tail is left uninitialised and the pf_* fields come out too long.",
        "output_size=layout.num_tokens if layout.exact_num_tokens",
        "output_size=inputs.out_cache_loc.shape[0] if layout.exact_num_tokens",
        _AMD_FAULT,
    ),
    # -- stage 5: decode streams -------------------------------------------------------------------
    MutantSpec(
        "ring_modulo_by_window", "decode_streams", "ring size confused with the window",
        "Positions wrap modulo swa_window instead of ring_size (= window + num_draft - 1 upstream): draft "
        "tokens overwrite window entries still in use.",
        "torch.remainder(positions.to(_I64), ring)",
        "torch.remainder(positions.to(_I64), inputs.geometry.swa_window)",
    ),
    # -- graph replay --------------------------------------------------------------------------------
    MutantSpec(
        "stateful_scratch_tail", "HipBuilder.build", "hidden state: a scratch buffer reused across calls",
        "The per-token store slots go through a scratch buffer the builder grows lazily and reuses across calls, "
        "refilling only the tokens the rows cover: a padded tail keeps the slots of the last larger batch "
        "(a fresh builder's zeroed scratch happens to be right).",
        "        return target_verify(inputs, check_mirror=self.validate_mirror, stages=self)",
        "        md = target_verify(inputs, check_mirror=self.validate_mirror, stages=self)\n"
        "        slots = md.fields[\"verify_store_state_slot\"]\n"
        "        scratch = getattr(self, \"_scratch\", None)\n"
        "        if scratch is None or scratch.shape[0] < slots.shape[0]:\n"
        "            scratch = self._scratch = torch.zeros_like(slots)\n"
        "        n = md.decision.num_tokens\n"
        "        scratch[:n] = slots[:n]\n"
        "        md.fields[\"verify_store_state_slot\"] = scratch[: slots.shape[0]]\n"
        "        return md",
        "persistent buffers sized for the largest batch seen, refreshed only up to the real token count",
    ),
    MutantSpec(
        "replay_refreshes_captured_rows_only", "HipBuilder.out_graph", "replay refreshes only the captured rows",
        "After the capture, the out-graph refresh of the static layout buffers copies only as many rows as the "
        "captured batch had: when a larger batch replays the tier, its extra rows keep the captured pad rows' values.",
        "        state.seq_lens.copy_(layout.seq_lens)\n"
        "        state.extend_seq_lens.copy_(layout.extend_seq_lens)\n"
        "        state.extend_start_loc.copy_(layout.extend_start_loc)\n",
        "        rows = inputs.rows if state.max_seq_len == 0 else state.bs  # the capture fills every row\n"
        "        state.seq_lens[:rows].copy_(layout.seq_lens[:rows])\n"
        "        state.extend_seq_lens[:rows].copy_(layout.extend_seq_lens[:rows])\n"
        "        state.extend_start_loc[:rows].copy_(layout.extend_start_loc[:rows])\n",
        "SGLang's CudaGraphRunner.replay_prepare, which must refresh every row whenever bs != raw_bs",
    ),
    MutantSpec(
        "replay_skips_pf_fields", "HipBuilder.out_graph", "refresh misses the newer static buffer",
        "The out-graph refresh predates the unified-KV pf_* fields: it writes the token map's static buffer "
        "only when the capture first fills it, so every replay runs with the captured batch's prefill state.",
        "        state.token_rows.zero_()\n        state.token_rows[:n] = rows_of[:n]\n",
        "        if state.max_seq_len == 0:  # filled at capture\n"
        "            state.token_rows.zero_()\n            state.token_rows[:n] = rows_of[:n]\n",
        "DSV4AttnMetadata.copy_ (graph replay copies metadata into captured buffers field by field)",
    ),
    MutantSpec(
        "replay_asserts_on_graph_state", "HipBuilder.out_graph", "hidden sync on graph state",
        "Before each replay, out-graph work asserts that the captured seq_lens fit the table, reading the "
        "static buffer (graph state, not an input of this call) back to the host: a sync on every replay.",
        "        layout = self.verify_extension(inputs, pipeline.host_mirror(inputs, "
        "check_mirror=self.validate_mirror))\n"
        "        state.seq_lens",
        "        assert int(state.seq_lens[: state.bs].max()) <= inputs.req_to_token.shape[1]\n"
        "        layout = self.verify_extension(inputs, pipeline.host_mirror(inputs, "
        "check_mirror=self.validate_mirror))\n"
        "        state.seq_lens",
        "debug asserts on persistent CUDA-graph buffers (cudaStreamSynchronize before every replay)",
    ),
    # -- graph replay as a GPU does it: what recorded work froze at capture (issue 18) ---------------
    MutantSpec(
        "tier_count_staged_in_graph", "HipBuilder.in_graph", "async copy from a host buffer made at capture",
        "The in-graph work stages the tier's token count into a host buffer of its own (torch.tensor) and copies "
        "it over asynchronously, instead of copying the graph state's buffer out-graph work refreshes: the "
        "recorded copy reads that capture-time buffer at every replay, so a replay whose count differs (a capped "
        "tier) treats the wrong tokens as pads.",
        "        state.num_tokens.copy_(state.num_tokens_host, non_blocking=True)",
        "        staged = torch.tensor(int(state.num_tokens_host), dtype=_I64)\n"
        "        state.num_tokens.copy_(staged, non_blocking=True)",
        "stale plan offsets and lengths staged on the host inside a captured DSV4 verify graph (upstream issues)",
    ),
    MutantSpec(
        "pad_row_branch_at_capture", "prefill_state", "Python branch frozen at capture",
        "When the batch has pad rows, their tokens store into slot 0 without a gather: a Python branch on the "
        "batch size, decided once at capture.  Right on every fresh build; a replay with more real requests "
        "than the captured batch sends their tokens' prefill state to slot 0.",
        '        "pf_state_slot": torch.where(real, inputs.req_pool_indices[bid], slots),',
        '        "pf_state_slot": torch.where(real & (bid < inputs.bs), inputs.req_pool_indices[bid], 0)\n'
        '        if inputs.bs < inputs.rows else torch.where(real, inputs.req_pool_indices[bid], slots),',
        "host-side branches in graph-captured metadata code (a CUDA graph replays the branch it recorded)",
    ),
    MutantSpec(
        "tier_padding_in_graph", "HipBuilder.in_graph", "replay keeps the captured request geometry",
        "The in-graph work pads the call's own ragged lengths to the tier (inputs.verify_lens, a per-call "
        "tensor of bs rows) instead of reading the static buffer out-graph work refreshed: the graph keeps the "
        "captured batch's request count and widths, so a replay whose geometry differs runs on the capture's.",
        "        layout = Layout(state.seq_lens, state.extend_seq_lens, state.extend_start_loc, None, None,",
        "        extend = state.extend_seq_lens\n"
        "        if inputs.verify_lens is not None and inputs.graph is not None:\n"
        "            g = inputs.graph\n"
        "            extend = pipeline.pad_verify_lens_to_bucket(inputs.verify_lens, inputs.rows, g.graph_num_tokens, "
        "g.cap)\n"
        "        layout = Layout(state.seq_lens, extend, state.extend_start_loc, None, None,",
        "replays whose request geometry differed from the captured one (DSV4 MTP verify, upstream issues)",
    ),
    # -- the graph runner: every tier captured on one backend (issue 28) ------------------------------
    MutantSpec(
        "ragged_tiers_keyed_by_bs", "graph_key", "tiers that share bs collide in the per-tier store",
        "The backend keys a compact ragged tier's captured state by its rows, as it keys a uniform tier, instead "
        "of by its token count. Every ragged tier of at least max_bs tokens has bs = max_bs, so a runner's second "
        "such capture finds the first one's state under its key and records into it: two graphs share one set of "
        "buffers, sized for the first. Invisible with one tier per backend.",
        "    return inputs.graph.graph_num_tokens if inputs.verify_lens is not None else inputs.rows",
        "    return inputs.rows",
        "upstream's DSV4 HIP backend keys TARGET_VERIFY graphs by num_tokens only for compact ragged verify "
        "(graph_key = num_tokens_v); a key by bs makes tiers collide in cuda_graph_metadata_of_bucket_and_bs",
    ),
    MutantSpec(
        "replay_keyed_by_live_requests", "HipBuilder.out_graph", "replay looks up its tier by the live batch size",
        "Out-graph work keys a uniform tier's state by the live request count (the runner's raw_bs) instead of "
        "the tier's padded rows: a replay with fewer requests than the tier misses, stores a fresh state under "
        "its own key and refreshes that, while the recording reads the tier's captured buffers, untouched.",
        "        graphs, key = _captured_tiers(inputs), pipeline.graph_key(inputs)\n",
        "        graphs, key = _captured_tiers(inputs), (pipeline.graph_key(inputs) if inputs.verify_lens is not None\n"
        "                                                else inputs.bs)\n",
        "upstream's store-or-copy (cuda_graph_metadata_of_bucket_and_bs): a key missing at replay silently "
        "stores a new metadata object instead of failing",
    ),
    MutantSpec(
        "replay_refreshes_the_last_capture", "HipBuilder.out_graph", "backend-wide state one tier's capture overwrites",
        "Out-graph work refreshes the state of the tier captured last -- a backend-wide 'current graph state', as a "
        "backend that keeps one forward_metadata instead of one per key would -- instead of the state stored under "
        "the replayed tier's key. A runner captures largest first, so the last capture is its smallest tier: a "
        "replay of any other tier refreshes the smallest tier's buffers (or fails to fit them), while its own "
        "recording reads its own buffers, still holding the capture's batch. Invisible with one tier per backend.",
        "        state = graphs[key]\n        layout = self.verify_extension(",
        "        state = next(reversed(graphs.values()))  # the tier captured last\n"
        "        layout = self.verify_extension(",
        "upstream's per-tier store (cuda_graph_metadata_of_bucket_and_bs) exists because the backend's "
        "forward_metadata is overwritten by every capture; a replay that copies into it lands in the wrong tier",
    ),
    MutantSpec(
        "capture_slots_from_uniform_width", "HipBuilder._new_state", "a capture geometry other than the runner's",
        "The backend sizes a ragged tier's captured state from the uniform geometry, T // num_draft request rows "
        "(the runner's SGLANG_TEST_RAGGED_VERIFY_FORCE_UNIFORM_CAPTURE formula), instead of the rows the runner "
        "captured the tier with (min(T, max_bs) slots): on a compact tier below max_bs * num_draft tokens the "
        "runner stages more rows than the state holds.",
        "        rows, tokens, device = inputs.rows, inputs.padded_num_tokens, inputs.seq_lens.device\n",
        "        rows, tokens, device = inputs.rows, inputs.padded_num_tokens, inputs.seq_lens.device\n"
        "        if inputs.verify_lens is not None:\n"
        "            rows = max(1, tokens // inputs.num_draft_tokens)\n",
        "compact ragged CUDA graphs captured with another request-slot geometry than replay uses (SGLang #34384, "
        "#39173, PR #39257)",
    ),
    MutantSpec(
        "runner_slots_per_generating_request", "HipBuilder.ragged_capture_slots",
        "a runner rule its builder does not declare",
        "The runner serving the backend takes #39257's fix -- a compact ragged tier of T tokens is captured with "
        "the T // W requests of W tokens that generate it -- while the builder still declares capture_geometry = "
        "'token_slots' (min(T, max_bs) slots): every tier below the largest is captured with fewer request slots "
        "than the declared rule gives it, which the harness -- and a backend sizing its per-tier state by it -- "
        "assumes.",
        "        return min(graph_num_tokens, max_bs)\n",
        "        return graph_num_tokens // width\n",
        "SGLang PR #39257 (#34636) changing the runner's capture geometry under backends that assumed the released "
        "one (#34384, #39173)",
    ),
    # -- state kept between builds (P9) ----------------------------------------------------------------------
    MutantSpec(
        "uniform_lengths_memo_by_rows", "HipBuilder.build", "a per-shape cache keyed without the draft count",
        "The builder memoises a uniform batch's extend lengths by its row count, to skip building them each "
        "step: a later batch with the same rows and another draft count (DSpark's active count changes between "
        "steps) gets the first batch's lengths. Only a history that keeps the rows and changes the draft count "
        "shows it on one batch.",
        "        return target_verify(inputs, check_mirror=self.validate_mirror, stages=self)\n",
        "        built = target_verify(inputs, check_mirror=self.validate_mirror, stages=self)\n"
        "        if inputs.verify_lens is None:  # uniform: 'the same for every batch of these rows'\n"
        "            memo = self.__dict__.setdefault(\"_uniform_extend_by_rows\", {})\n"
        "            built.fields[\"extend_seq_lens\"] = memo.setdefault(inputs.rows, "
        "built.fields[\"extend_seq_lens\"])\n"
        "        return built\n",
        "upstream #31026: the configured draft count used where DSpark's active count changes from step to step",
    ),
    MutantSpec(
        "staging_buffer_reused_across_steps", "HipBuilder.verify_extension",
        "one pinned staging buffer reused every step",
        "The host-staged uniform extend lengths go through one pinned buffer the builder keeps from step to step "
        "(no allocation per step) and copy up without a sync: when the next step's draft count differs, its fill "
        "rewrites the buffer while the previous step's copy may not have read it yet. The fields agree; the device "
        "got the later bytes.",
        "        return pipeline.verify_extension(inputs, seq_lens_cpu)\n",
        "        layout = pipeline.verify_extension(inputs, seq_lens_cpu)\n"
        "        if inputs.verify_lens is None and seq_lens_cpu is not None:  # the host-staged uniform lengths\n"
        "            staged = self.__dict__.get(\"_staged\")\n"
        "            if staged is None or staged.shape[0] < inputs.rows:  # one pinned buffer for the most rows seen\n"
        "                staged = self._staged = torch.empty(inputs.rows, dtype=torch.int32, pin_memory=True)\n"
        "            staged[: inputs.rows].fill_(inputs.num_draft_tokens)\n"
        "            layout.extend_seq_lens = staged[: inputs.rows].to(inputs.seq_lens.device, non_blocking=True)\n"
        "        return layout\n",
        "ROCm ATOM PR #817: one pinned staging buffer reused every step, rewritten before the stream read it",
    ),
    # -- what the stores do (P10): a mistake the specification shares -----------------------------------
    MutantSpec(
        "last_row_absorbs_the_slack", "pad_verify_lens_to_bucket", "a real row widened to cover the tier",
        "The graph path pads full_coverage and declares it: with no pad rows the last real row absorbs every "
        "leftover token of the tier, uncapped. The reference of that convention agrees, so P1 and P5 hold; the "
        "absorbed tokens sit at positions past the request's end, and their SWA ring stores land on rows the "
        "request still reads (a row more than num_draft - 1 past its window's start).",
        "    if npad <= 0:\n"
        "        return verify_lens.clone()\n"
        "    leftover = graph_num_tokens - verify_lens.to(_I64).sum()\n"
        "    base = torch.div(leftover, npad, rounding_mode=\"floor\")\n"
        "    rem = leftover - base * npad\n"
        "    pad = base + (torch.arange(npad, device=verify_lens.device) < rem).to(_I64)\n"
        "    if cap is not None:\n"
        "        pad = pad.clamp(max=cap)\n",
        "    leftover = graph_num_tokens - verify_lens.to(_I64).sum()\n"
        "    if npad <= 0:\n"
        "        return torch.cat([verify_lens[:-1], verify_lens[-1:] + leftover.to(_I32)])\n"
        "    base = torch.div(leftover, npad, rounding_mode=\"floor\")\n"
        "    rem = leftover - base * npad\n"
        "    pad = base + (torch.arange(npad, device=verify_lens.device) < rem).to(_I64)\n",
        "SGLang 0.5.23's DSV4 out-graph phase pads the live layout with padded_to_bucket(cap=None) "
        "(FINDINGS.md F16); upstream's newer line: 'inflating the last real request past max_row_len is exactly "
        "what the cap forbids'",
        padding="full_coverage",
    ),
)

_SPECS += GROUP_SPECS  # the whole metadata's groups (compression, the low ratios)
_SPECS += MODE_SPECS  # the MTP step's other modes (draft extend, the decode modes)

MUTANTS: dict[str, MutantSpec] = {spec.name: spec for spec in _SPECS}
"""Every mutant by name, in pipeline order."""
