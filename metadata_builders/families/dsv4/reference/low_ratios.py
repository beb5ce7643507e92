"""The V4.1 low ratios (c1/c2), in pure Python (no torch): group ``low_ratios`` of DESIGN.md section 2.

A geometry whose :class:`~metadata_builders.families.dsv4.batch.Compression` lists
``low_ratios`` (a subset of ``(1, 2)``) gets, per ratio ``R``, the counterparts
of the c4 metadata that SGLang 0.5.22+ fill on the target-verify path:
``init_compression_metadata`` (``low_ratio_compression_metadata``: store
locations and clamp-1 lengths), ``init_flashmla_related`` (``sparse_buffers``:
lengths clamped to ``index_topk``, -1 page and raw indices) and the indexer's
``c{R}_indexer_metadata``, which target verify builds as *decode rows*: the
clamp-1 lengths, and the page table expanded to the low-ratio indexer pool's
64-slot pages (``DSV41_INDEX_PAGE_SIZE`` on HIP).

Unlike c4 (0 where a token completes no group), a low-ratio store location is
``-1`` where ``seq_lens_casual % R != 0``.  Ratio 1 completes a group at every
token, so ``c1_out_loc`` is ``raw_out_loc`` itself.

Worked example -- ``seq_lens_casual = [1, 2, 3]``, ``raw_out_loc = [1000, 1001, 1002]``,
page 256, ``page_table`` rows ``[7]``, ``index_topk = 512``, align 64::

    c1_out_loc                  = [1000, 1001, 1002]   # every token completes a ratio-1 group
    c1_topk_lengths_clamp1      = [1, 2, 3]            # max(casual // 1, 1)
    c2_out_loc                  = [-1, 500, -1]        # 1001 // 2 where casual is even, else -1
    c2_topk_lengths_clamp1      = [1, 1, 1]            # max(casual // 2, 1): 0 -> 1
    c2_sparse_topk_lengths      = [1, 1, 1]            # min(clamp1, 512)
    c2_sparse_page_indices[t]   = 512 x -1             # and c2_sparse_raw_indices: filled at forward time
    c1_indexer_page_table[t]    = [28, 29, 30, 31]     # page 7, 256 // 1 // 64 = 4 blocks: 7 * 4 + k
    c2_indexer_page_table[t]    = [14, 15]             # 256 // 2 // 64 = 2 blocks: 7 * 2 + k
    c2_indexer_compressed_seq_lens = [1, 1, 1]         # the clamp-1 lengths (decode rows)
    low_ratio_pos_i64           = [0, 1, 2]            # the forward batch's positions (eager: positions_casual)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metadata_builders.families.dsv4.reference.compressed import aligned

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import Geometry

__all__ = ["INDEX_PAGE_SIZE", "indexer_page_table", "low_ratio_compression", "low_ratio_groups",
           "low_ratio_indexer", "low_ratio_sparse"]

INDEX_PAGE_SIZE = 64
"""Slots per page of the low-ratio indexer-K pool on HIP (upstream's ``DSV41_INDEX_PAGE_SIZE``: 64 without
DeepGEMM's paged sparse MQA logits, which ROCm does not have)."""


def low_ratio_compression(ratio: int, casual: list[int], raw_out_loc: list[int]) -> dict[str, list[int]]:
    """``c{R}_out_loc`` (``loc // R`` where ``casual % R == 0``, else -1) and ``c{R}_topk_lengths_clamp1``.

    ``seq_lens_casual = [3, 4]``, ``raw_out_loc = [9, 10]``, ``R = 2`` ->
    ``c2_out_loc = [-1, 5]``, ``c2_topk_lengths_clamp1 = [1, 2]``.
    """
    return {
        f"c{ratio}_out_loc": [loc // ratio if c % ratio == 0 else -1 for c, loc in zip(casual, raw_out_loc)],
        f"c{ratio}_topk_lengths_clamp1": [max(c // ratio, 1) for c in casual],
    }


def low_ratio_sparse(ratio: int, geometry: Geometry, clamp1: list[int]) -> dict[str, list]:
    """The sparse lengths (clamp-1 lengths clamped to ``index_topk``) and two -1 buffers ``index_topk`` wide (aligned).

    ``clamp1 = [3, 600]``, ``index_topk = 512`` -> ``c{R}_sparse_topk_lengths = [3, 512]``;
    the page and raw indices are what the top-k kernel fills during the forward.
    """
    compression = geometry.compression
    assert compression is not None
    topk = compression.index_topk
    width = aligned(topk, geometry.page_index_align)
    return {
        f"c{ratio}_sparse_topk_lengths": [min(n, topk) for n in clamp1],
        f"c{ratio}_sparse_page_indices": [[-1] * width for _ in clamp1],
        f"c{ratio}_sparse_raw_indices": [[-1] * width for _ in clamp1],
    }


def indexer_page_table(ratio: int, page_size: int, page_table: list[list[int]]) -> list[list[int]]:
    """Each page ``p`` of a row as the indexer pool's ``b = page_size // R // 64`` pages ``p * b + k`` (``k < b``).

    Page 256, ``R = 2``: ``b = 2``, so ``[[7, 3]] -> [[14, 15, 6, 7]]``; ``b = 1`` keeps the table.
    """
    blocks = page_size // ratio // INDEX_PAGE_SIZE
    return [[p * blocks + k for p in row for k in range(blocks)] for row in page_table]


def low_ratio_indexer(ratio: int, geometry: Geometry, page_table: list[list[int]],
                      clamp1: list[int]) -> dict[str, list]:
    """``c{R}_indexer_metadata`` as target verify builds it (decode rows): the clamp-1 lengths, the expanded table."""
    return {
        f"c{ratio}_indexer_compressed_seq_lens": list(clamp1),
        f"c{ratio}_indexer_page_table": indexer_page_table(ratio, geometry.page_size, page_table),
    }


def low_ratio_groups(geometry: Geometry, core: dict[str, list], positions: list[int]) -> dict[str, list]:
    """Group ``low_ratios``: every field of each ratio the geometry lists (none without compression).

    ``positions``: the forward batch's (:func:`~metadata_builders.families.dsv4.reference.in_graph.forward_positions`),
    which the in-graph block widens into ``low_ratio_pos_i64``.  Target verify and decode build the same group: their
    rows are one token each, so both take the decode rows' indexer inputs (the clamp-1 lengths).
    """
    compression = geometry.compression
    out: dict[str, list] = {}
    if compression is not None and compression.low_ratios:
        # The token -> request map of the low-ratio states: each token's own row (L1: never uniform on a ragged
        # layout), padding into slot 0 -- the slot its ring stores go to.
        out["low_ratio_req_indices"] = list(core["verify_store_state_slot"])
        out["low_ratio_pos_i64"] = list(positions)
    for ratio in () if compression is None else compression.low_ratios:
        fields = low_ratio_compression(ratio, core["seq_lens_casual"], core["raw_out_loc"])
        clamp1 = fields[f"c{ratio}_topk_lengths_clamp1"]
        fields.update(low_ratio_sparse(ratio, geometry, clamp1))
        fields.update(low_ratio_indexer(ratio, geometry, core["page_table"], clamp1))
        out.update(fields)
    return out
