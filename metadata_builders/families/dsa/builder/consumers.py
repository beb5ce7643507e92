"""The consumers' prelude on HIP: how the attention derives ``kv_indptr`` / ``kv_indices`` from the metadata.

With ``--dsa-decode-backend aiter`` a target-verify or draft-extend step runs ``_forward_aiter_extend``
(B:3703-3761): the indexer's top-k positions of each query row (``[rows, topk]``, -1 = none) become KV
locations through ``page_table_1`` (``transform_index_page_table_prefill``, B:2312-2324), then::

    counts = (page_table != -1).sum(1)
    kv_indptr = zeros(num_tokens + 1); kv_indptr[1:] = cumsum(counts)          # num_tokens = q_all.shape[0]
    kv_indices = zeros(num_tokens * topk)
    get_valid_kv_indices(page_table, kv_indptr, kv_indices, num_tokens)       # T:7-63

``get_valid_kv_indices`` runs one program per row: it loads ``topk`` entries at ``row * topk`` and stores the
valid ones at ``kv_indptr[row] + prefix``, with no bound against ``kv_indices``.  Here it is modelled in torch
with the same stores (never past the buffer: a store that would land there is counted, not made).

Worked example (the family's batch, eager target verify, top-k 8): the top-k rows select every position below
``dsa_cache_seqlens`` ``[6, 7, 8, 4, 5, 6]``; ``kv_indptr = [0, 6, 13, 21, 25, 30, 36]`` (= ``dsa_cu_seqlens_k``),
row 0's segment ``[32, ..., 37]``.  P10 runs this prelude on every build and judges what it derives.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Prelude", "aiter_extend_prelude", "get_valid_kv_indices", "topk_page_table"]

_I32, _I64 = torch.int32, torch.int64


def topk_page_table(page_table_1: torch.Tensor, dsa_cache_seqlens: torch.Tensor, dsa_seqlens_expanded: torch.Tensor,
                    topk: int) -> torch.Tensor:
    """The indexer's selection as KV locations, ``[rows, topk]``, -1 padded: row ``t`` picks
    ``dsa_cache_seqlens[t]`` positions below ``dsa_seqlens_expanded[t]`` -- the latest ones (any selection
    reads inside the same range; the latest reach furthest into the row) -- through ``page_table_1``.
    A position past the table's width reads -1 here; P10 reports it before this runs."""
    rows, width = page_table_1.shape[0], page_table_1.shape[1]
    k = dsa_cache_seqlens[:rows].to(_I64).clamp(min=0)
    hi = dsa_seqlens_expanded[:rows].to(_I64).clamp(min=0)
    j = torch.arange(topk, dtype=_I64, device=page_table_1.device)[None, :]
    pos = hi[:, None] - k[:, None] + j
    valid = (j < k[:, None]) & (pos >= 0) & (pos < width)
    gathered = torch.gather(page_table_1.to(_I64), 1, pos.clamp(0, max(width - 1, 0)))
    return torch.where(valid, gathered, torch.full_like(gathered, -1)).to(_I32)


@dataclass(frozen=True)
class Prelude:
    """What the prelude derived."""

    kv_indptr: list[int]
    """(num_tokens + 1,): each row's segment start."""
    kv_indices: list[int]
    """(num_tokens * topk,): the compacted locations (0 where no row stored)."""
    oob_stores: int
    """Stores ``get_valid_kv_indices`` would have made past ``kv_indices`` (never made)."""


def get_valid_kv_indices(page_table: torch.Tensor, kv_indptr: torch.Tensor, kv_indices: torch.Tensor,
                         bs: int) -> int:
    """One program per row ``< bs``: the row's non-(-1) entries at ``kv_indptr[row] + prefix`` (T:7-63).
    Returns the stores that would land past ``kv_indices`` (not made)."""
    topk = page_table.shape[1]
    rows = page_table.reshape(-1)[: bs * topk].reshape(bs, topk)
    mask = rows != -1
    dst = kv_indptr[:bs].to(_I64)[:, None] + torch.cumsum(mask.to(_I64), dim=1) - 1
    inside = mask & (dst < kv_indices.numel()) & (dst >= 0)
    kv_indices[dst[inside]] = rows[inside].to(kv_indices.dtype)
    return int((mask & ~inside).sum())


def aiter_extend_prelude(page_table: torch.Tensor, batch_size: int) -> Prelude:
    """``_forward_aiter_extend``'s prelude over every query row (``num_tokens = q_all.shape[0]``); ``batch_size``
    is the forward batch's, which upstream has at hand and #38746's first bug used in its place."""
    num_tokens, topk = page_table.shape[0], page_table.shape[1]
    counts = (page_table != -1).sum(dim=1)
    kv_indptr = torch.zeros(num_tokens + 1, dtype=_I32, device=page_table.device)
    kv_indptr[1:] = torch.cumsum(counts, dim=0)
    kv_indices = torch.zeros(num_tokens * topk, dtype=_I32, device=page_table.device)
    oob = get_valid_kv_indices(page_table, kv_indptr, kv_indices, num_tokens)
    return Prelude(kv_indptr.tolist(), kv_indices.tolist(), oob)
