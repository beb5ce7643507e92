"""The eager path: ``DeepseekSparseAttnBackend.init_forward_metadata`` (B:1095-1425), stage by stage.

=================================  ===================================================================  ===========
stage (this module)                upstream                                                             0.5.23 lines
=================================  ===================================================================  ===========
:func:`init_forward_metadata`      ``init_forward_metadata`` (entry; the prologue below, a mode branch,
                                   the epilogue)                                                        B:1095
:func:`max_seqlen_k_of`            the mirror's ``seq_lens_cpu.max().item()``, or the device's           B:1107-1115
                                   ``int(seq_lens.max().item())`` without one (the eager sync)
:func:`decode_branch`              ``is_decode_or_idle()``: one query a row, expanded = cache            B:1163-1167
:func:`target_verify_branch`       ``is_target_verify()``: writes ``extend_seq_lens_cpu``, the pageable  B:1168-1188
                                   H2D ``torch.tensor(list, device=)``, ``seqlens_expand_triton``
:func:`draft_extend_branch`        ``is_draft_extend_v2()``: the host copies read back without mirrors   B:1189-1235
                                   (#29798's fallback), ``seqlens_expand_triton`` on the *device*
                                   lengths with the *host* total (the family's fault site)
:func:`dsa_epilogue`               ``compute_dsa_seqlens``, ``compute_cu_seqlens``, the arange,           B:1350-1407
                                   ``_transform_table_1_to_real``, ``DSAMetadata(...)``
:func:`multi_step_init_forward_metadata`  ``DeepseekSparseAttnMultiStepBackend.init_forward_metadata``:  B:4197-4199
                                   every child the same ``DECODE`` build
=================================  ===================================================================  ===========

Stages are called through this module's globals, so the family's mutant catalogue replaces one by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from metadata_builders.families.dsa.builder import kernels

if TYPE_CHECKING:
    from metadata_builders.families.dsa.inputs import DSAInputs

__all__ = ["decode_branch", "draft_extend_branch", "dsa_epilogue", "init_forward_metadata", "max_seqlen_k_of",
           "multi_step_init_forward_metadata", "target_verify_branch"]

_I32 = torch.int32


def init_forward_metadata(inputs: DSAInputs) -> dict[str, Any]:
    """One backend's eager build: every ``DSAMetadata`` field the family judges, by upstream's name."""
    draft_token_num = inputs.num_draft_tokens if inputs.mode == "target_verify" else 0
    cache_seqlens_int32 = (inputs.seq_lens + draft_token_num).to(_I32)
    cu_seqlens_k = kernels.compute_cu_seqlens(cache_seqlens_int32)
    max_seqlen_k = max_seqlen_k_of(inputs, draft_token_num)
    page_table = inputs.req_to_token[inputs.req_pool_indices, :max_seqlen_k]
    indexer_seq_lens_cpu, indexer_seq_lens = inputs.seq_lens_cpu, inputs.seq_lens
    if inputs.mode == "target_verify":
        cu_seqlens_q, seqlens_expanded, page_table, extend_list = target_verify_branch(inputs, cache_seqlens_int32,
                                                                                        page_table)
    elif inputs.mode == "draft_extend":
        cu_seqlens_q, seqlens_expanded, page_table, extend_list = draft_extend_branch(inputs, cache_seqlens_int32,
                                                                                       page_table)
    else:
        cu_seqlens_q, seqlens_expanded, extend_list = decode_branch(inputs, cache_seqlens_int32)
    fields = {"cache_seqlens_int32": cache_seqlens_int32, "cu_seqlens_k": cu_seqlens_k, "cu_seqlens_q": cu_seqlens_q,
              "max_seq_len_k": max_seqlen_k}
    fields.update(dsa_epilogue(inputs, seqlens_expanded, page_table, extend_list))
    fields.update(seq_lens_sum=inputs.seq_lens_sum, indexer_seq_lens_cpu=indexer_seq_lens_cpu,
                  indexer_seq_lens=indexer_seq_lens)
    return fields


def max_seqlen_k_of(inputs: DSAInputs, draft_token_num: int) -> int:
    """The page table's width: from the host mirror, else one device-to-host read (the eager path's sync)."""
    if inputs.seq_lens_cpu is not None:
        return int(inputs.seq_lens_cpu.max().item() + draft_token_num)
    return int(inputs.seq_lens.max().item()) + draft_token_num


def decode_branch(inputs: DSAInputs, cache_seqlens_int32: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor,
                                                                                   list[int]]:
    """Decode (and draft decode's children): one query a row; expanded lengths are the cache lengths."""
    batch_size = inputs.batch_size
    cu_seqlens_q = torch.arange(batch_size + 1, dtype=_I32, device=inputs.device)
    return cu_seqlens_q, cache_seqlens_int32, [1] * batch_size


def target_verify_branch(inputs: DSAInputs, cache_seqlens_int32: torch.Tensor,
                         page_table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """Target verify: ``N`` queries a request; stores ``[N] * bs`` in the caller's ``extend_seq_lens_cpu``."""
    n, batch_size = inputs.num_draft_tokens, inputs.batch_size
    cu_seqlens_q = torch.arange(0, batch_size * n + 1, 1, dtype=_I32, device=inputs.device)
    extend_seq_lens_cpu = [n] * batch_size
    inputs.extend_seq_lens_cpu = extend_seq_lens_cpu
    seqlens_expanded = kernels.seqlens_expand_triton(
        torch.tensor(extend_seq_lens_cpu, dtype=_I32, device=inputs.device), cache_seqlens_int32, n * batch_size, n)
    page_table = torch.repeat_interleave(page_table, repeats=n, dim=0)
    return cu_seqlens_q, seqlens_expanded, page_table, extend_seq_lens_cpu


def draft_extend_branch(inputs: DSAInputs, cache_seqlens_int32: torch.Tensor,
                        page_table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """Draft extend (``DRAFT_EXTEND_V2``): every request extends by ``N``; without mirrors the host copies are
    read back and stored in the caller's fields (#29798's fallback); the expanded lengths take the device's
    ``extend_seq_lens`` and the host's total."""
    if inputs.extend_prefix_lens_cpu is None:
        assert inputs.extend_prefix_lens is not None
        inputs.extend_prefix_lens_cpu = inputs.extend_prefix_lens.cpu().tolist()
    if inputs.seq_lens_cpu is None:
        inputs.seq_lens_cpu = inputs.seq_lens.cpu()
        inputs.seq_lens_sum = int(inputs.seq_lens_cpu.sum())
    assert (inputs.extend_seq_lens_cpu is not None and inputs.extend_seq_lens is not None
            and inputs.extend_prefix_lens_cpu is not None), "All of them must not be None"
    extend_seq_lens_cpu = inputs.extend_seq_lens_cpu
    n = inputs.num_draft_tokens
    cu_seqlens_q = torch.arange(0, sum(extend_seq_lens_cpu) + 1, 1, dtype=_I32, device=inputs.device)
    seqlens_expanded = kernels.seqlens_expand_triton(inputs.extend_seq_lens, cache_seqlens_int32,
                                                     sum(extend_seq_lens_cpu), n)
    page_table = torch.repeat_interleave(page_table, repeats=n, dim=0)
    return cu_seqlens_q, seqlens_expanded, page_table, extend_seq_lens_cpu


def dsa_epilogue(inputs: DSAInputs, seqlens_expanded: torch.Tensor, page_table: torch.Tensor,
                 extend_list: list[int]) -> dict[str, Any]:
    """The sparse lengths, the real page table and the constants every mode shares."""
    dsa_cache_seqlens_int32 = kernels.compute_dsa_seqlens(seqlens_expanded, inputs.index_topk)
    dsa_cu_seqlens_k = kernels.compute_cu_seqlens(dsa_cache_seqlens_int32)
    dsa_cu_seqlens_q = torch.arange(len(dsa_cu_seqlens_k), dtype=_I32, device=inputs.device)
    return {
        "page_table_1": page_table,
        "real_page_table": kernels.transform_table_1_to_real(page_table, inputs.page_size),
        "dsa_seqlens_expanded": seqlens_expanded,
        "dsa_cache_seqlens_int32": dsa_cache_seqlens_int32,
        "dsa_cu_seqlens_k": dsa_cu_seqlens_k,
        "dsa_cu_seqlens_q": dsa_cu_seqlens_q,
        "page_size": inputs.page_size,
        "max_seq_len_q": 1,
        "dsa_max_seqlen_q": 1,
        "dsa_extend_seq_lens_list": extend_list,
    }


def multi_step_init_forward_metadata(inputs: DSAInputs) -> list[dict[str, Any]]:
    """Draft decode: each of the ``N - 2`` children builds the same decode metadata from the same batch."""
    return [init_forward_metadata(inputs) for _ in range(inputs.num_draft_tokens - 2)]
