"""The DSA family's mutant catalogue as data: one-edit mistakes of the bundled builder, each with the property
that kills it.

A mutant is a one-place source edit (``find`` -> ``replace``, exactly once) of one stage of the bundled builder,
named ``<module>.<function>`` inside :mod:`metadata_builders.families.dsa.builder` (``eager``, ``graph``,
``kernels``, ``consumers``).  Nothing here imports torch or compiles a mutant (:mod:`.patching` does), so the
catalogue can be listed and diffed anywhere.  Worked example (``expand_no_floor``, sglang #30378): stage
``kernels.seqlens_expand_kernel``::

    - values = torch.clamp(start + offs, min=0)
    + values = start + offs

A draft-extend replay's pad row (``seq_len`` 1, ``N = 3``) then expands to ``[-1, 0, 1]``: ``dsa.p5.pad_negative``.
``modes`` are the modes the catalogue's run draws (the mutant's stage runs there); ``killed_by`` is the property
that kills it in ``ci``, the test checks it.  When the builder changes so a ``find`` no longer occurs exactly
once, :class:`~metadata_builders.errors.MutantDoesNotApply` says so; update the text here.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

__all__ = ["MUTANTS", "DSAMutantSpec"]


@dataclass(frozen=True, slots=True)
class DSAMutantSpec:
    """One mutant of the bundled DSA builder."""

    name: str
    """Identifier (``--only`` in the catalogue's run)."""
    stage: str
    """``<module>.<function>`` of :mod:`metadata_builders.families.dsa.builder`."""
    bug_class: str
    """The kind of bug, in a few words."""
    summary: str
    """What the edit does and what it breaks."""
    find: str
    """Source text of the stage, exactly once, that the mutant replaces."""
    replace: str
    """The buggy text put in its place."""
    modes: tuple[str, ...]
    """The modes the catalogue's run draws (where the stage runs)."""
    killed_by: str
    """The property that kills it in ``ci`` (``"P5"``)."""
    incident: str | None = None
    """The upstream tracker issue it re-creates, if one exists."""

    @property
    def diff(self) -> str:
        """The edit as a two-sided diff (``-`` original, ``+`` mutant), indentation stripped."""
        old = textwrap.dedent(self.find).strip("\n").splitlines() or [""]
        new = textwrap.dedent(self.replace).strip("\n").splitlines() or ["(line removed)"]
        return "\n".join([f"- {line}" for line in old] + [f"+ {line}" for line in new])


_SPEC = ("target_verify", "draft_extend")
_DECODES = ("decode", "draft_decode", "idle")
_ALL = ("target_verify", "draft_extend", "decode", "draft_decode", "idle")

MUTANTS: tuple[DSAMutantSpec, ...] = (
    # -- the tracker's bugs ------------------------------------------------------------------------------
    DSAMutantSpec(
        "expand_no_floor", "kernels.seqlens_expand_kernel", "negative length on pad rows",
        "seqlens_expand_kernel stores kv_len - qo_len + 1 + j without the floor at 0: a draft-extend replay's pad "
        "row (seq_len 1, N >= 2) gets a negative expanded length, read as uint32 by the top-k kernel.",
        "values = torch.clamp(start + offs, min=0)", "values = start + offs", ("draft_extend",), "P1",
        "sglang #30378 (negative seqlens_expanded on draft-extend pad rows)"),
    DSAMutantSpec(
        "fused_draft_extend_no_floor", "kernels.fused_dsa_draft_extend_metadata", "negative length, fused route",
        "The fused draft-extend kernel loses the same floor: the fused replay's pad rows go negative.",
        "expanded = torch.clamp(seq[req_row] - qo_len + local + 1, min=0).to(_I32)",
        "expanded = (seq[req_row] - qo_len + local + 1).to(_I32)", ("draft_extend",), "P1",
        "sglang #30378 (the fused kernel's K:537 floor)"),
    DSAMutantSpec(
        "draft_extend_replay_tolist", "graph.replay_draft_extend_torch", "host read in a replay",
        "The draft-extend replay sizes the expansion from the device lengths read back with .tolist(): a "
        "device-to-host sync inside every replay.",
        "    cache_seqlens = seq_lens.to(_I32)\n",
        "    total_extend_len = sum(extend_seq_lens.tolist())\n    cache_seqlens = seq_lens.to(_I32)\n",
        ("draft_extend",), "P7",
        "sglang #29413 (.tolist() in draft-extend replay)"),
    DSAMutantSpec(
        "draft_extend_replay_data_dependent_repeat", "graph.replay_draft_extend_torch",
        "data-dependent repeat_interleave in a replay",
        "The replay repeats the page rows by the device extend lengths (repeats=extend_seq_lens): an output shape "
        "that depends on device data, a sync no graph can capture.",
        "    page_indices = torch.repeat_interleave(page_indices, repeats=n, dim=0)\n"
        "    metadata[\"page_table_1\"][:, :max_seqlen_k].copy_(page_indices)\n"
        "    seqlens_expanded = kernels.seqlens_expand_triton(extend_seq_lens, cache_seqlens, total_extend_len, n)",
        "    page_indices = torch.repeat_interleave(page_indices, repeats=extend_seq_lens, dim=0)\n"
        "    metadata[\"page_table_1\"][:, :max_seqlen_k].copy_(page_indices)\n"
        "    seqlens_expanded = kernels.seqlens_expand_triton(extend_seq_lens, cache_seqlens, total_extend_len, n)",
        ("draft_extend",), "P7", "sglang #29413 (data-dependent repeat_interleave in draft-extend replay)"),
    DSAMutantSpec(
        "eager_fallback_assumes_mirror", "eager.max_seqlen_k_of", "eager fallback without a mirror crashes",
        "The eager width always comes from the host mirror: a caller without seq_lens_cpu (None) crashes the "
        "build instead of reading the device once.",
        "    if inputs.seq_lens_cpu is not None:\n"
        "        return int(inputs.seq_lens_cpu.max().item() + draft_token_num)",
        "    if True:\n        return int(inputs.seq_lens_cpu.max().item() + draft_token_num)",
        ("target_verify", "decode"), "P1", "sglang #29798 (the eager fallback with seq_lens_cpu=None)"),
    DSAMutantSpec(
        "kv_indptr_from_bs", "consumers.aiter_extend_prelude", "rows counted per request, not per token",
        "The consumer prelude launches get_valid_kv_indices over batch_size rows where there are batch_size * N "
        "query rows: every token row past the first bs reads an empty kv_indices segment.",
        "oob = get_valid_kv_indices(page_table, kv_indptr, kv_indices, num_tokens)",
        "oob = get_valid_kv_indices(page_table, kv_indptr, kv_indices, batch_size)", ("target_verify",), "P10",
        "sglang #38746, first bug (kv_indptr built from bs where there are bs*N rows)"),
    # -- eager -------------------------------------------------------------------------------------------
    DSAMutantSpec(
        "verify_cache_without_drafts", "eager.init_forward_metadata", "drafts left out of the KV length",
        "Eager target verify forgets the + N: cache_seqlens_int32 is the prefix, the drafts are never attended.",
        "draft_token_num = inputs.num_draft_tokens if inputs.mode == \"target_verify\" else 0",
        "draft_token_num = 0", ("target_verify",), "P1"),
    DSAMutantSpec(
        "fallback_width_off_by_one", "eager.max_seqlen_k_of", "device fallback one column short",
        "Without a mirror the width read from the device drops one column: the table is narrower than a consumer "
        "reads, only on the mirror-absent path.",
        "    return int(inputs.seq_lens.max().item()) + draft_token_num",
        "    return int(inputs.seq_lens.max().item()) + draft_token_num - 1", ("target_verify", "decode"), "P1"),
    DSAMutantSpec(
        "mirror_distrusted", "eager.max_seqlen_k_of", "a defensive read beside the mirror",
        "The width takes the larger of the mirror's and the device's max, 'in case the mirror is stale': every "
        "eager build reads the device back, the mirror path included.",
        "        return int(inputs.seq_lens_cpu.max().item() + draft_token_num)",
        "        return max(int(inputs.seq_lens_cpu.max().item()), int(inputs.seq_lens.max().item()))"
        " + draft_token_num",
        ("decode", "target_verify"), "P2"),
    DSAMutantSpec(
        "verify_expand_total_short", "eager.target_verify_branch", "host total one short",
        "The eager verify expansion is allocated one element short of what the device lengths store: the "
        "kernel's last store lands past its output (an out-of-bounds write on a GPU).",
        "cache_seqlens_int32, n * batch_size, n)", "cache_seqlens_int32, n * batch_size - 1, n)",
        ("target_verify",), "P1"),
    DSAMutantSpec(
        "decode_writes_caller_extend_list", "eager.decode_branch", "undeclared write to the caller",
        "Decode stores [1] * bs in the caller's extend_seq_lens_cpu, which no decode build may write.",
        "    return cu_seqlens_q, cache_seqlens_int32, [1] * batch_size",
        "    inputs.extend_seq_lens_cpu = [1] * batch_size\n"
        "    return cu_seqlens_q, cache_seqlens_int32, [1] * batch_size",
        ("decode",), "P8"),
    DSAMutantSpec(
        "topk_unclamped", "kernels.compute_dsa_seqlens", "top-k budget dropped",
        "dsa_cache_seqlens_int32 is not clamped to the indexer's top-k: the sparse attention selects more than "
        "the top-k buffer holds.",
        "return original_seq_lens.clamp(max=dsa_index_topk)", "return original_seq_lens", _ALL, "P1"),
    DSAMutantSpec(
        "real_page_table_not_divided", "kernels.transform_table_1_to_real", "token index where a page is read",
        "The real page table keeps the token locations instead of dividing by the page size.",
        "return page_table[:, strided] // page_size", "return page_table[:, strided]", _ALL, "P1"),
    # -- graph -------------------------------------------------------------------------------------------
    DSAMutantSpec(
        "verify_replay_stale_cu_seqlens_k", "graph.replay_verify_torch", "a replay forgets a prefix sum",
        "The torch verify replay does not refresh cu_seqlens_k: it keeps the capture's (or the previous "
        "replay's) sums.",
        "    metadata[\"cu_seqlens_k\"][1:].copy_(torch.cumsum(cache_seqlens, dim=0, dtype=_I32))\n"
        "    page_indices = inputs.req_to_token[req_pool_indices, :max_seqlen_k]\n"
        "    page_indices = torch.repeat_interleave(page_indices, repeats=n, dim=0)\n"
        "    metadata[\"page_table_1\"][:, :max_seqlen_k].copy_(page_indices)\n"
        "    extend_seq_lens",
        "    page_indices = inputs.req_to_token[req_pool_indices, :max_seqlen_k]\n"
        "    page_indices = torch.repeat_interleave(page_indices, repeats=n, dim=0)\n"
        "    metadata[\"page_table_1\"][:, :max_seqlen_k].copy_(page_indices)\n"
        "    extend_seq_lens",
        ("target_verify",), "P5"),
    DSAMutantSpec(
        "sparse_tail_skips_dsa_cu", "graph.refresh_sparse_tail", "a replay forgets the sparse prefix sum",
        "The torch route's epilogue skips dsa_cu_seqlens_k: the sparse attention's segments stay the capture's.",
        "    metadata[\"dsa_cu_seqlens_k\"][1: 1 + size].copy_(torch.cumsum(dsa_cache_seqlens, dim=0, dtype=_I32))\n",
        "", _SPEC + ("decode",), "P5"),
    DSAMutantSpec(
        "verify_replay_pageable_copy", "graph.replay_verify_torch", "pageable copy in a replay",
        "The verify replay builds its extend lengths from a Python list (torch.tensor(list, device=...)): a "
        "pageable host-to-device copy that blocks the host on every replay (upstream's B:1940 comment).",
        "    extend_seq_lens = torch.full((bs,), n, dtype=_I32, device=inputs.device)\n"
        "    seqlens_expanded = kernels.seqlens_expand_triton(extend_seq_lens, cache_seqlens, n * bs, n)",
        "    extend_seq_lens = torch.tensor([n] * bs, dtype=_I32, device=inputs.device)\n"
        "    seqlens_expanded = kernels.seqlens_expand_triton(extend_seq_lens, cache_seqlens, n * bs, n)",
        ("target_verify",), "P7"),
    DSAMutantSpec(
        "verify_replay_writes_seq_lens", "graph.replay_verify_torch", "a replay writes the caller's tensor",
        "The verify replay adds the drafts to seq_lens in place: the runner's input buffer changes under the "
        "caller.",
        "    cache_seqlens = (seq_lens + n).to(_I32)\n    metadata[\"cache_seqlens_int32\"]",
        "    cache_seqlens = seq_lens.add_(n).to(_I32)\n    metadata[\"cache_seqlens_int32\"]",
        ("target_verify",), "P8"),
    DSAMutantSpec(
        "fused_skips_partial_block", "kernels._fused_page_rows", "the partial last block skipped",
        "The fused kernels write only the column blocks that end below the KV length (floor, not ceil): a row's "
        "last, partial block keeps the previous replay's locations, which a consumer reads.",
        "live = (cols[None, :] // FUSED_BLOCK_N) * FUSED_BLOCK_N < kv_len.to(_I64)[:, None]",
        "live = (cols[None, :] // FUSED_BLOCK_N + 1) * FUSED_BLOCK_N <= kv_len.to(_I64)[:, None]", _ALL, "P1"),
    DSAMutantSpec(
        "draft_decode_copy_skips_cache_seqlens", "graph.copy_base_replay_buffers", "a child keeps its lengths",
        "Draft decode's copy of the precompute into each child forgets cache_seqlens_int32: every child attends "
        "with the capture's lengths.",
        "    metadata[\"cache_seqlens_int32\"].copy_(precomputed[\"cache_seqlens\"])\n", "", ("draft_decode",), "P5"),
)
"""The catalogue, by bug class: the tracker's first, then eager, then graph."""
