"""The DSA metadata of a batch, per mode and path, assembled from :mod:`.stages` (no torch).

:func:`reference_metadata` is the specification P1 compares every build with.  Worked example
(DESIGN.md section 6, target verify: ``seq_lens [5, 3]``, slots ``[2, 1]``, ``N = 3``, ``P = 4``, top-k 8,
``req_to_token[s][c] = 16 s + c``, 4 x 16)::

    eager                                            graph, padded_bs = 3 (pad row: seq_len 1, slot 0)
    cache_seqlens_int32      [8, 6]                  [8, 6, 4]
    cu_seqlens_k             [0, 8, 14]              [0, 8, 14, 18]
    cu_seqlens_q             arange(7)               arange(10)
    max_seq_len_k            8 (mirror max + N)      16 (the table's width W)
    page_table_1             slot 2's [32..39] x3,   slot 2's [32..47] x3, slot 1's [16..31] x3,
                             slot 1's [16..23] x3    slot 0's [0..15] x3
    real_page_table          [[8, 9]] x3,            [[8, 9, 10, 11]] x3, [[4, 5, 6, 7]] x3,
                             [[4, 5]] x3             [[0, 1, 2, 3]] x3
    dsa_seqlens_expanded     [6, 7, 8, 4, 5, 6]      [6, 7, 8, 4, 5, 6, 2, 3, 4]
    dsa_cache_seqlens_int32  = dsa_seqlens_expanded (top-k 8 clamps nothing)
    dsa_cu_seqlens_k         [0, 6, 13, 21, 25,      [0, 6, 13, 21, 25, 30, 36, 38, 41, 45]
                             30, 36]
    dsa_extend_seq_lens_list [3, 3]                  [1] * 9
    seq_lens_sum             8 (the mirror's sum)    None
    indexer_seq_lens(_cpu)   [5, 3]                  None

Draft extend (the caller's ``seq_lens`` ``[8, 6]`` already hold the drafts): eager as target verify without
the ``+ N`` (``cache [8, 6]``, the same expanded lengths); its graph pad row (``seq_len`` 1) expands to
``[0, 0, 1]`` (the floor at 0).  Decode (caller ``[6, 4]``): ``cache = expanded = [6, 4]``, one row a
request.  Draft decode: decode on the prefix ``[5, 3]``, the same for every step.  Idle: decode's graph on
pad rows only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metadata_builders.families.dsa.reference.stages import (
    ExpandResult,
    arange,
    cache_seqlens,
    compute_cu_seqlens,
    compute_dsa_seqlens,
    gather_page_table,
    max_seqlen_k,
    repeat_rows,
    seqlens_expand,
    transform_table_1_to_real,
)

if TYPE_CHECKING:
    from metadata_builders.families.dsa.batch import DSABatch
    from metadata_builders.families.dsa.variants import DSAVariant

__all__ = ["PAD_SEQ_LEN", "eager_metadata", "expand_of", "graph_metadata", "padded_inputs", "reference_metadata"]

PAD_SEQ_LEN = 1
"""A graph pad row's ``seq_len``: upstream's ``get_cuda_graph_seq_len_fill_value()`` (B:4035-4037)."""


def reference_metadata(batch: DSABatch, variant: DSAVariant) -> dict[str, Any]:
    """Every judged field (:data:`~metadata_builders.families.dsa.fields.FIELDS`) of ``batch`` built along
    ``variant``: plain lists (2-D for the page tables), ints, None.  Both graph routes give the same values
    wherever a consumer reads (the page tables up to each row's read length)."""
    if variant.path == "graph":
        return graph_metadata(batch)
    return eager_metadata(batch, variant.mirror == "given")


def padded_inputs(batch: DSABatch) -> tuple[list[int], list[int]]:
    """The graph path's ``seq_lens`` and slots: the caller's, then pad rows (``PAD_SEQ_LEN``, slot 0).

    Example: ``[5, 3]`` / ``[2, 1]`` target verify on ``padded_bs = 3``: ``[5, 3, 1]`` / ``[2, 1, 0]``.
    """
    rows = batch.rows("graph")
    pads = rows - batch.bs
    return list(batch.caller_seq_lens) + [PAD_SEQ_LEN] * pads, list(batch.req_pool_indices) + [0] * pads


def expand_of(batch: DSABatch, path: str) -> ExpandResult | None:
    """The step's ``seqlens_expand_triton`` call, as the path makes it (None: decode modes make none).

    Eager target verify: the host list ``[N] * bs``, total ``N * bs``.  Eager draft extend: the *device*
    ``extend_seq_lens`` (the divergence, when injected) against the host total ``sum(extend_seq_lens_cpu)``:
    the family's fault site.  Graph replays (the torch route; the fused kernels compute the same): the device
    ``full((rows,), N)``, total ``N * rows``.
    """
    n = batch.num_draft_tokens
    if batch.mode not in ("target_verify", "draft_extend"):
        return None
    if path == "graph":
        seq, _ = padded_inputs(batch)
        draft = n if batch.mode == "target_verify" else 0
        return seqlens_expand([n] * len(seq), cache_seqlens(seq, draft), n * len(seq), n)
    if batch.mode == "target_verify":
        return seqlens_expand([n] * batch.bs, cache_seqlens(batch.caller_seq_lens, n), n * batch.bs, n)
    return seqlens_expand(batch.device_extend_seq_lens, batch.caller_seq_lens, n * batch.bs, n)


def eager_metadata(batch: DSABatch, mirror: bool) -> dict[str, Any]:
    """``init_forward_metadata`` (B:1095-1425) for one mode; ``mirror``: the caller passed ``seq_lens_cpu``
    (and, in draft extend, ``extend_prefix_lens_cpu``)."""
    n, seq = batch.num_draft_tokens, list(batch.caller_seq_lens)
    host = list(batch.host_mirror) if mirror else None
    draft = n if batch.mode == "target_verify" else 0
    cache = cache_seqlens(seq, draft)
    max_k = max_seqlen_k(host, seq, draft)
    table = gather_page_table(batch.req_to_token, batch.req_pool_indices, min(max_k, batch.width))
    expand = expand_of(batch, "eager")
    if expand is not None:
        table, expanded, extend_list = repeat_rows(table, n), expand.values, [n] * batch.bs
    else:
        expanded, extend_list = list(cache), [1] * batch.bs
    fields = _common(batch, cache, table, expanded, extend_list, max_k)
    if mirror:
        seq_lens_sum: int | None = sum(host or ())
    else:  # draft extend reads the device back and stores the caller's seq_lens_sum (B:1195-1197)
        seq_lens_sum = sum(seq) if batch.mode == "draft_extend" else None
    fields.update(seq_lens_sum=seq_lens_sum, indexer_seq_lens_cpu=host, indexer_seq_lens=seq)
    return fields


def graph_metadata(batch: DSABatch) -> dict[str, Any]:
    """A replay of the batch's tier (``_apply_cuda_graph_metadata``, B:1828-2116, on metadata captured by
    ``_build_forward_metadata_cuda_graph``, B:1627-1795): pad rows ``seq_len`` 1 on slot 0, the table's full
    width, one query per row in ``dsa_extend_seq_lens_list``, no host echo."""
    n = batch.num_draft_tokens
    seq, slots = padded_inputs(batch)
    draft = n if batch.mode == "target_verify" else 0
    cache = cache_seqlens(seq, draft)
    table = gather_page_table(batch.req_to_token, slots, batch.width)
    expand = expand_of(batch, "graph")
    if expand is not None:
        table, expanded = repeat_rows(table, n), expand.values
    else:
        expanded = list(cache)
    fields = _common(batch, cache, table, expanded, [1] * len(expanded), batch.width)
    fields.update(seq_lens_sum=None, indexer_seq_lens_cpu=None, indexer_seq_lens=None)
    return fields


def _common(batch: DSABatch, cache: list[int], table: list[list[int]], expanded: list[int | None],
            extend_list: list[int], max_k: int) -> dict[str, Any]:
    """The epilogue both paths share (B:1353-1407): the sparse lengths, the real page table, the constants."""
    dsa_cache = compute_dsa_seqlens(expanded, batch.index_topk)
    dsa_cu_k = compute_cu_seqlens(dsa_cache)
    return {
        "cache_seqlens_int32": cache,
        "cu_seqlens_k": compute_cu_seqlens(cache),
        "cu_seqlens_q": arange(len(expanded) + 1),
        "page_table_1": table,
        "real_page_table": transform_table_1_to_real(table, batch.page_size),
        "dsa_seqlens_expanded": expanded,
        "dsa_cache_seqlens_int32": dsa_cache,
        "dsa_cu_seqlens_k": dsa_cu_k,
        "dsa_cu_seqlens_q": arange(len(dsa_cu_k)),
        "page_size": batch.page_size,
        "max_seq_len_q": 1,
        "max_seq_len_k": max_k,
        "dsa_max_seqlen_q": 1,
        "dsa_extend_seq_lens_list": extend_list,
    }
