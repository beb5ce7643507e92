"""Compressed attention, its sparse buffers and the indexer's lengths, in pure Python (no torch).

The groups ``compressed``, ``sparse`` and ``indexer`` of DESIGN.md section 2:
each is a function of the core metadata (``seq_lens_casual``, ``raw_out_loc``,
``page_table``) and the geometry's :class:`~metadata_builders.families.dsv4.batch.Compression`.
Upstream computes them in ``DSV4AttnMetadata.init_compression_metadata`` and
``init_flashmla_related`` (SGLang 0.5.23's HIP backend) and hands the c4
lengths to ``PagedIndexerMetadata``.

Worked example -- ``seq_lens_casual = [127, 128, 129]``, ``raw_out_loc =
[1000, 1001, 1024]``, page 256 (two c128 slots per page), ``page_table`` rows
``[7]``, ``index_topk = 512``, align 64, ``unified_swa_pages = 10``::

    c4_topk_lengths_raw    = [31, 32, 32]          # casual // 4
    c4_topk_lengths_clamp1 = [31, 32, 32]          # max(., 1)
    c4_out_loc             = [0, 250, 0]           # 1001 // 4 where casual % 4 == 0
    c128_topk_lengths_raw  = [0, 1, 1]
    c128_topk_lengths_clamp1 = [1, 1, 1]
    c128_out_loc           = [0, 7, 0]             # 1001 // 128 where casual % 128 == 0
    c128_page_indices[1]   = [14, -1, -1, ...]     # page 7 -> slots 14, 15; only slot 0 visible
    unified_c4_out_loc     = [10, 260, 10]         # + unified_swa_pages, every token
    c4_sparse_topk_lengths = [31, 32, 32]          # min(clamp1, index_topk)
    c4_sparse_page_indices = 512 x -1 per token    # filled at forward time by the top-k kernel
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import Compression, Geometry

__all__ = ["aligned", "compressed_attention", "indexer_metadata", "sparse_buffers"]

RATIOS: tuple[int, ...] = (4, 128)
"""The compression ratios of DSV4 (the V4.1 low ratios 1 and 2 are not modelled)."""


def aligned(width: int, align: int) -> int:
    """``width`` rounded up to a multiple of ``align`` (upstream's ``_pad_last_dim``): ``aligned(2, 64) == 64``."""
    return -(-width // align) * align


def _ratio_fields(ratio: int, casual: list[int], raw_out_loc: list[int]) -> dict[str, list[int]]:
    raw = [c // ratio for c in casual]
    return {
        f"c{ratio}_out_loc": [loc // ratio if c % ratio == 0 else 0 for c, loc in zip(casual, raw_out_loc)],
        f"c{ratio}_topk_lengths_raw": raw,
        f"c{ratio}_topk_lengths_clamp1": [max(r, 1) for r in raw],
    }


def c128_page_indices(geometry: Geometry, page_table: list[list[int]], raw: list[int]) -> list[list[int]]:
    """Compressed slot ``k`` of each token's c128 cache: visible below its raw length, else -1.

    ``page_size // 128`` c128 slots live in each page: slot ``k`` is
    ``page_table[t][k // per_page] * per_page + k % per_page``.  A row is as wide as
    its page table holds slots, right-padded with -1 to a multiple of ``page_index_align``.
    """
    per_page = geometry.page_size // 128
    out: list[list[int]] = []
    for pages, n in zip(page_table, raw):
        width = per_page * len(pages)
        row = [pages[k // per_page] * per_page + k % per_page if k < n else -1 for k in range(width)]
        out.append(row + [-1] * (aligned(width, geometry.page_index_align) - width))
    return out


def compressed_attention(geometry: Geometry, casual: list[int], raw_out_loc: list[int],
                         page_table: list[list[int]]) -> dict[str, list]:
    """Group ``compressed``: per-ratio store locations and top-k lengths, the c128 page indices, unified locations."""
    compression = geometry.compression
    assert compression is not None
    out: dict[str, list] = {}
    for ratio in RATIOS:
        out.update(_ratio_fields(ratio, casual, raw_out_loc))
    out["c128_page_indices"] = c128_page_indices(geometry, page_table, out["c128_topk_lengths_raw"])
    for ratio in RATIOS:
        out[f"unified_c{ratio}_out_loc"] = [loc + compression.unified_swa_pages for loc in out[f"c{ratio}_out_loc"]]
    return out


def sparse_buffers(geometry: Geometry, compressed: dict[str, list]) -> dict[str, list]:
    """Group ``sparse``: the c4 lengths clamped to ``index_topk``, and -1 page indices of ``index_topk`` columns.

    The page indices are what the top-k kernel fills during the forward; at
    metadata time every entry is -1 (``init_flashmla_related``).
    """
    compression: Compression | None = geometry.compression
    assert compression is not None
    topk = compression.index_topk
    width = aligned(topk, geometry.page_index_align)
    rows = len(compressed["c4_topk_lengths_raw"])
    return {
        "c4_sparse_topk_lengths": [min(n, topk) for n in compressed["c4_topk_lengths_clamp1"]],
        "c4_sparse_topk_lengths_raw": [min(n, topk) for n in compressed["c4_topk_lengths_raw"]],
        "c4_sparse_page_indices": [[-1] * width for _ in range(rows)],
    }


def indexer_metadata(compressed: dict[str, list]) -> dict[str, list[int]]:
    """Group ``indexer``: the c4 indexer ranks each token's compressed prefix, ``c4_topk_lengths_raw`` long.

    Upstream's ``PagedIndexerMetadata`` also holds the page table (the core
    field itself) and constants; on HIP it plans no DeepGEMM schedule.
    """
    return {"indexer_compressed_seq_lens": list(compressed["c4_topk_lengths_raw"])}
