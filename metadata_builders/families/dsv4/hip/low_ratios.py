"""The ``hip`` builder's V4.1 low ratios (c1/c2): group ``low_ratios``, torch on any device, no host sync.

Shaped like upstream (SGLang 0.5.22+), one function per upstream piece:

===========================  ==================================================
``low_ratio_compression``    ``low_ratio_compression_metadata`` (called by
                             ``DSV4AttnMetadata.init_compression_metadata``)
``low_ratio_sparse``         ``sparse_buffers``' c1/c2 part and the -1
                             ``c{R}_sparse_raw_indices`` of ``init_flashmla_related``
``low_ratio_indexer``        ``init_forward_metadata_indexer(compress_ratio=R)`` on
                             decode rows (target verify, decode), ``expand_index_page_table``
``low_ratio_req_indices``,   the in-graph block's ``token_req_indices`` and
``low_ratio_positions``      ``positions.to(int64)`` (``low_ratio_pos_i64``)
===========================  ==================================================

:func:`low_ratio_groups` chains them for each ratio of
``geometry.compression.low_ratios``; :mod:`metadata_builders.families.dsv4.hip.compression`
calls it after the c4/c128 groups (target verify), :mod:`metadata_builders.families.dsv4.hip.decode`
after the decode plans.  Every shape depends on shapes and
constants only (``index_topk``, the page table's width), never on device values.
The specification is :mod:`metadata_builders.families.dsv4.reference.low_ratios`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.inputs import VerifyInputs

__all__ = ["INDEX_PAGE_SIZE", "low_ratio_compression", "low_ratio_groups", "low_ratio_indexer", "low_ratio_positions",
           "low_ratio_sparse"]

_I32 = torch.int32
_I64 = torch.int64
INDEX_PAGE_SIZE = 64
"""Slots per page of the low-ratio indexer-K pool on HIP (upstream's ``DSV41_INDEX_PAGE_SIZE``)."""


def low_ratio_groups(inputs: VerifyInputs, core: dict[str, torch.Tensor], *,
                     is_prefill: bool) -> dict[str, torch.Tensor]:
    """Every low-ratio field of the geometry's ``low_ratios`` (empty without any).

    ``is_prefill``: upstream's ``_init_low_ratio_indexer_metadata(is_prefill=...)``, False for one-token rows (target
    verify, decode: the clamp-1 lengths), True for prefill rows (the raw visible counts ``casual // R``, which a
    prefill kernel skips at 0); the maps ``low_ratio_req_indices``/``low_ratio_pos_i64`` are the in-graph block's.
    """
    compression = inputs.geometry.compression
    out: dict[str, torch.Tensor] = {}
    if compression is not None and compression.low_ratios:
        out["low_ratio_req_indices"] = low_ratio_req_indices(core["verify_store_state_slot"])
        out["low_ratio_pos_i64"] = low_ratio_positions(inputs)
    for ratio in () if compression is None else compression.low_ratios:
        fields = low_ratio_compression(ratio, core["seq_lens_casual"], core["raw_out_loc"])
        clamp1 = fields[f"c{ratio}_topk_lengths_clamp1"]
        fields.update(low_ratio_sparse(ratio, inputs, clamp1))
        lengths = torch.div(core["seq_lens_casual"], ratio, rounding_mode="floor").to(_I32) if is_prefill else clamp1
        fields.update(low_ratio_indexer(ratio, inputs, core["page_table"], lengths))
        out.update(fields)
    return out


def low_ratio_positions(inputs: VerifyInputs) -> torch.Tensor:
    """``low_ratio_pos_i64``: the forward batch's positions widened to int64 (``positions.to(int64)``), read where they
    live -- on the graph path the runner's static buffer, so a replay reads the live positions.  Not the metadata's
    ``positions_casual``: a pad row's token is at 0 in the forward batch."""
    assert inputs.positions is not None, "the harness hands every call its forward batch's positions"
    return inputs.positions.to(_I64)


def low_ratio_req_indices(store_slots: torch.Tensor) -> torch.Tensor:
    """The low-ratio states' token -> request map (upstream ``token_req_indices``): each token's own row's slot,
    as its ring stores take it, int64 -- never ``repeat_interleave(req, num_draft)`` on a ragged layout (L1)."""
    return store_slots.to(_I64)


def low_ratio_compression(ratio: int, casual: torch.Tensor, raw_out_loc: torch.Tensor) -> dict[str, torch.Tensor]:
    """``loc // R`` (int64) where ``casual % R == 0``, else -1; clamp-1 lengths ``max(casual // R, 1)`` (int32)."""
    completes = torch.remainder(casual, ratio) == 0
    loc = torch.div(raw_out_loc.to(_I64), ratio, rounding_mode="floor")
    return {
        f"c{ratio}_out_loc": torch.where(completes, loc, torch.full_like(loc, -1)),
        f"c{ratio}_topk_lengths_clamp1": torch.div(casual, ratio, rounding_mode="floor").clamp(min=1).to(_I32),
    }


def low_ratio_sparse(ratio: int, inputs: VerifyInputs, clamp1: torch.Tensor) -> dict[str, torch.Tensor]:
    """Lengths clamped to ``index_topk``; -1 page and raw indices ``index_topk`` wide, aligned (filled at forward)."""
    geo = inputs.geometry
    assert geo.compression is not None
    topk = geo.compression.index_topk
    width = -(-topk // geo.page_index_align) * geo.page_index_align
    shape = (clamp1.shape[0], width)
    return {
        f"c{ratio}_sparse_topk_lengths": clamp1.clamp(max=topk),
        f"c{ratio}_sparse_page_indices": torch.full(shape, -1, dtype=_I32, device=clamp1.device),
        f"c{ratio}_sparse_raw_indices": torch.full(shape, -1, dtype=_I32, device=clamp1.device),
    }


def low_ratio_indexer(ratio: int, inputs: VerifyInputs, page_table: torch.Tensor,
                      lengths: torch.Tensor) -> dict[str, torch.Tensor]:
    """The indexer metadata: ``lengths`` (decode rows: the clamp-1 ones), page ``p`` as ``b`` pages ``p * b + k``.

    ``b = page_size // R // 64``: page 256 gives 4 for c1, 2 for c2; ``b = 1`` is the table itself.
    """
    blocks = inputs.geometry.page_size // ratio // INDEX_PAGE_SIZE
    k = torch.arange(blocks, dtype=_I64, device=page_table.device)
    expanded = (page_table.to(_I64).unsqueeze(-1) * blocks + k).reshape(page_table.shape[0], -1)
    return {
        f"c{ratio}_indexer_compressed_seq_lens": lengths,
        f"c{ratio}_indexer_page_table": expanded.to(_I32),
    }
