"""Upstream's DSA metadata kernels and helpers, in torch, on any device: what each stores, where.

=====================================  ========================================================  =========
here                                   upstream (0.5.23)                                         file:line
=====================================  ========================================================  =========
:func:`compute_cu_seqlens`             ``compute_cu_seqlens``                                    M:58
:func:`compute_dsa_seqlens`            ``compute_dsa_seqlens`` (``index_kpool <= 1``)            U:159
:func:`transform_table_1_to_real`      ``DeepseekSparseAttnBackend._transform_table_1_to_real``  B:1066
:func:`seqlens_expand_triton`          ``seqlens_expand_triton``                                 P:359
:func:`seqlens_expand_kernel`          ``seqlens_expand_kernel`` (Triton; stores through the     P:327
                                       family's device model, :mod:`..device_model`)
:func:`fused_dsa_decode_metadata`      ``fused_dsa_decode_metadata`` + its kernel                K:112, 15
:func:`fused_dsa_target_verify_metadata`  ``fused_dsa_target_verify_metadata`` + its kernel       K:344, 212
:func:`fused_dsa_draft_extend_metadata`   ``fused_dsa_draft_extend_metadata`` (static lengths)   K:617, 455
=====================================  ========================================================  =========

The fused kernels write each page-table row only over the column blocks of ``FUSED_BLOCK_N = 128`` that start
below the row's KV length (K:314-315, K:82-83, K:566-567): the tail keeps the previous replay's entries.  Their
torch models keep that: a masked store (``torch.where`` over the old values), never a full-width rewrite.
Worked example: a 384-column table, a row replayed with ``kv_len`` 200 then 8 keeps columns 128..383 of the
first replay (256 stale entries); the torch fallback rewrites all 384.
"""

from __future__ import annotations

import torch

from metadata_builders.families.dsa import device_model

__all__ = [
    "FUSED_BLOCK_N",
    "compute_cu_seqlens",
    "compute_dsa_seqlens",
    "fused_dsa_decode_metadata",
    "fused_dsa_draft_extend_metadata",
    "fused_dsa_target_verify_metadata",
    "next_power_of_2",
    "seqlens_expand_kernel",
    "seqlens_expand_triton",
    "transform_table_1_to_real",
]

_I32, _I64 = torch.int32, torch.int64

FUSED_BLOCK_N = 128
"""The fused kernels' column block (``block_n = 128``): a row is written block by block up to its KV length."""


def compute_cu_seqlens(seqlens: torch.Tensor) -> torch.Tensor:
    """``pad(cumsum(seqlens, dtype=int32), (1, 0))``; upstream asserts int32 input."""
    assert seqlens.dtype == _I32
    return torch.nn.functional.pad(torch.cumsum(seqlens, dim=0, dtype=_I32), (1, 0))


def compute_dsa_seqlens(original_seq_lens: torch.Tensor, dsa_index_topk: int) -> torch.Tensor:
    """``original_seq_lens.clamp(max=dsa_index_topk)`` (kpool 1)."""
    return original_seq_lens.clamp(max=dsa_index_topk)


def transform_table_1_to_real(page_table: torch.Tensor, page_size: int) -> torch.Tensor:
    """``page_table[:, arange(0, W, P)] // P``; the table itself when ``P == 1``."""
    if page_size == 1:
        return page_table
    strided = torch.arange(0, page_table.shape[1], page_size, device=page_table.device, dtype=_I32)
    return page_table[:, strided] // page_size


def next_power_of_2(n: int) -> int:
    """``triton.next_power_of_2``."""
    return 1 << max(n - 1, 0).bit_length()


def seqlens_expand_triton(extend_seq_lens: torch.Tensor, seq_lens: torch.Tensor, total_len: int,
                          max_q_len: int) -> torch.Tensor:
    """Per token of each row, its visible length; the output sized by the host's ``total_len`` (P:359-390)."""
    n = extend_seq_lens.numel()
    offsets = torch.zeros(n + 1, device=extend_seq_lens.device, dtype=_I32)
    offsets[1:] = torch.cumsum(extend_seq_lens, dim=0)
    output = torch.empty(total_len, device=extend_seq_lens.device, dtype=_I32)
    seqlens_expand_kernel(extend_seq_lens, seq_lens, offsets, output, n, next_power_of_2(max_q_len))
    return output


def seqlens_expand_kernel(extend_seq_lens: torch.Tensor, seq_lens: torch.Tensor, offsets: torch.Tensor,
                          output: torch.Tensor, n: int, block: int) -> None:
    """One program per row: ``max(kv_len - qo_len + 1 + offs, 0)`` stored at ``offsets[row] + offs`` where
    ``offs < qo_len`` (``offs < BLOCK``), with no bound against ``output`` (P:327-356; the floor is #30378's)."""
    with device_model.launch("seqlens_expand_kernel", output, (extend_seq_lens, seq_lens, offsets),
                             device_sum=lambda: int(offsets[n])) as store:
        qo_len = extend_seq_lens[:n].to(_I64)[:, None]
        start = seq_lens[:n].to(_I64)[:, None] - qo_len + 1
        offs = torch.arange(block, device=output.device, dtype=_I64)[None, :]
        mask = offs < qo_len
        values = torch.clamp(start + offs, min=0)
        index = offsets[:n].to(_I64)[:, None] + offs
        store(index[mask], values[mask])


def _fused_page_rows(req_to_token: torch.Tensor, slots: torch.Tensor, kv_len: torch.Tensor,
                     page_table_1: torch.Tensor, real_page_table: torch.Tensor | None, max_len: int,
                     page_size: int) -> None:
    """The page programs of the fused kernels: row ``r`` gets ``req_to_token[slots[r], c]`` for every column
    ``c < max_len`` of a block starting below ``kv_len[r]``; ``real_page_table[r, c // P] = value // P`` where
    ``c % P == 0``.  Columns of skipped blocks keep what they held."""
    rows = slots.shape[0]
    if rows == 0:
        return
    cols = torch.arange(max_len, device=page_table_1.device, dtype=_I64)
    live = (cols[None, :] // FUSED_BLOCK_N) * FUSED_BLOCK_N < kv_len.to(_I64)[:, None]
    vals = req_to_token[slots.to(_I64)][:, :max_len].to(_I32)
    target = page_table_1[:rows, :max_len]
    target.copy_(torch.where(live, vals, target))
    if real_page_table is not None and page_size > 1:
        real_cols = (max_len + page_size - 1) // page_size
        real_target = real_page_table[:rows, :real_cols]
        real_target.copy_(torch.where(live[:, ::page_size], vals[:, ::page_size] // page_size, real_target))


def _fused_lengths(expanded: torch.Tensor, cache: torch.Tensor, cache_seqlens: torch.Tensor,
                   cu_seqlens_k: torch.Tensor, seqlens_expanded: torch.Tensor | None, dsa_cache_seqlens: torch.Tensor,
                   dsa_cu_seqlens_k: torch.Tensor, dsa_index_topk: int) -> None:
    """Program 0 of the fused kernels: the per-row and per-token scalars and both prefix sums."""
    bs, rows = cache.shape[0], expanded.shape[0]
    dsa = torch.minimum(expanded, torch.full_like(expanded, dsa_index_topk))
    cache_seqlens[:bs].copy_(cache)
    cu_seqlens_k[:1].zero_()
    cu_seqlens_k[1:bs + 1].copy_(torch.cumsum(cache, dim=0, dtype=_I32))
    if seqlens_expanded is not None:
        seqlens_expanded[:rows].copy_(expanded)
    dsa_cache_seqlens[:rows].copy_(dsa)
    dsa_cu_seqlens_k[:1].zero_()
    dsa_cu_seqlens_k[1:rows + 1].copy_(torch.cumsum(dsa, dim=0, dtype=_I32))


def fused_dsa_decode_metadata(seq_lens: torch.Tensor, req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                              cache_seqlens: torch.Tensor, cu_seqlens_k: torch.Tensor, page_table_1: torch.Tensor,
                              dsa_cache_seqlens: torch.Tensor, dsa_cu_seqlens_k: torch.Tensor,
                              real_page_table: torch.Tensor | None, bs: int, max_len: int, dsa_index_topk: int,
                              physical_page_size: int) -> None:
    """Decode: ``cache = seq``, ``dsa = min(seq, topk)``; rows written up to ``seq`` (K:15-108)."""
    if bs == 0:
        cu_seqlens_k[:1].zero_()
        dsa_cu_seqlens_k[:1].zero_()
        return
    seq = seq_lens[:bs].to(_I32)
    _fused_lengths(seq, seq, cache_seqlens, cu_seqlens_k, None, dsa_cache_seqlens, dsa_cu_seqlens_k,
                   dsa_index_topk)
    _fused_page_rows(req_to_token, req_pool_indices[:bs], seq, page_table_1, real_page_table, max_len,
                     physical_page_size)


def fused_dsa_target_verify_metadata(seq_lens: torch.Tensor, req_pool_indices: torch.Tensor,
                                     req_to_token: torch.Tensor, cache_seqlens: torch.Tensor,
                                     cu_seqlens_k: torch.Tensor, page_table_1: torch.Tensor,
                                     seqlens_expanded: torch.Tensor, dsa_cache_seqlens: torch.Tensor,
                                     dsa_cu_seqlens_k: torch.Tensor, real_page_table: torch.Tensor | None, bs: int,
                                     max_seqlen_k: int, dsa_index_topk: int, physical_page_size: int,
                                     next_n: int) -> None:
    """Target verify: ``cache = seq + next_n``, token ``e`` of row ``e // next_n`` sees
    ``seq + e % next_n + 1``; rows written up to ``seq + next_n`` (K:212-340)."""
    seq = seq_lens[:bs].to(_I32)
    out_row = torch.arange(bs * next_n, device=seq.device, dtype=_I64)
    req_row = out_row // next_n
    expanded = (seq[req_row] + (out_row - req_row * next_n).to(_I32) + 1).to(_I32)
    _fused_lengths(expanded, seq + next_n, cache_seqlens, cu_seqlens_k, seqlens_expanded, dsa_cache_seqlens,
                   dsa_cu_seqlens_k, dsa_index_topk)
    kv_len = seq[req_row] + next_n
    _fused_page_rows(req_to_token, req_pool_indices[:bs][req_row], kv_len, page_table_1, real_page_table,
                     max_seqlen_k, physical_page_size)


def fused_dsa_draft_extend_metadata(seq_lens: torch.Tensor, extend_seq_lens: torch.Tensor,
                                    req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                    cache_seqlens: torch.Tensor, cu_seqlens_k: torch.Tensor,
                                    page_table_1: torch.Tensor, seqlens_expanded: torch.Tensor,
                                    dsa_cache_seqlens: torch.Tensor, dsa_cu_seqlens_k: torch.Tensor,
                                    real_page_table: torch.Tensor | None, bs: int, total_len: int,
                                    max_seqlen_k: int, dsa_index_topk: int, physical_page_size: int,
                                    max_extend_len: int) -> None:
    """Draft extend with ``static_extend_len=True`` (every row ``qo = extend_seq_lens[0]``): ``cache = seq``,
    token ``j`` of a row sees ``max(seq - qo + j + 1, 0)`` (the floor is #30378's, K:537); rows written up to
    ``seq`` (K:455-613)."""
    assert total_len <= bs * max_extend_len
    seq = seq_lens[:bs].to(_I32)
    qo_len = extend_seq_lens[:1].to(_I32)
    out_row = torch.arange(total_len, device=seq.device, dtype=_I64)
    req_row = torch.div(out_row, qo_len.to(_I64), rounding_mode="floor")
    local = (out_row - req_row * qo_len.to(_I64)).to(_I32)
    expanded = torch.clamp(seq[req_row] - qo_len + local + 1, min=0).to(_I32)
    _fused_lengths(expanded, seq, cache_seqlens, cu_seqlens_k, seqlens_expanded, dsa_cache_seqlens,
                   dsa_cu_seqlens_k, dsa_index_topk)
    _fused_page_rows(req_to_token, req_pool_indices[:bs][req_row], seq[req_row], page_table_1, real_page_table,
                     max_seqlen_k, physical_page_size)
