"""The DSA family's field table: what a build of ``DSAMetadata`` holds, by upstream's field name.

Worked example (the family's: ``seq_lens [5, 3]``, ``N = 3``, ``P = 4``, a 16-column table, eager
target verify, so ``rows = 2``, ``tokens = rows * N = 6``, ``width = max_seq_len_k = 8``)::

    cache_seqlens_int32      (rows,)                  [8, 6]
    cu_seqlens_k             (rows + 1,)              [0, 8, 14]
    cu_seqlens_q             (tokens + 1,)            [0, 1, 2, 3, 4, 5, 6]
    page_table_1             (tokens, width)          slot 2's first 8 entries x3, slot 1's x3
    real_page_table          (tokens, ceil(width/P))  [[8, 9]] x3, [[4, 5]] x3
    dsa_seqlens_expanded     (tokens,)                [6, 7, 8, 4, 5, 6]

``tokens`` is ``rows * N`` in target verify and draft extend, ``rows`` in the decode modes;
``rows`` is ``bs`` eager and ``padded_bs`` on the graph path, where ``width`` is the table's ``W``.
Every device field is int32 (upstream's ``DSAMetadata``; checked on the prototype's output) but
``indexer_seq_lens``, the caller's int64 ``seq_lens`` itself.  Host fields are Python values.
:data:`NOT_JUDGED` names each field upstream's dataclass has that no property judges, with why;
:data:`CALLER_WRITES` the caller's fields a build may write (P8).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["CALLER_WRITES", "FIELDS", "FIELD_NAMES", "GROUPS", "NOT_JUDGED", "READ_COLUMNS", "DSAFieldSpec"]

Group = Literal["lengths", "page_tables", "sparse", "host"]
GROUPS: tuple[Group, ...] = ("lengths", "page_tables", "sparse", "host")
"""``lengths``: the attention's per-row lengths; ``page_tables``: the two tables; ``sparse``: the indexer's and
the sparse attention's per-token lengths; ``host``: Python values and the caller's own tensors echoed back."""


@dataclass(frozen=True, slots=True)
class DSAFieldSpec:
    """One field of ``DSAMetadata``: where it lives, its shape, its dtype, its group."""

    name: str
    """Upstream's attribute name (``DSAMetadata.<name>``)."""
    shape: str
    """In the batch's terms (module docstring); ``()`` for a host scalar, ``list`` for a host list."""
    doc: str
    """One line: what it holds."""
    group: Group
    """Its group (:data:`GROUPS`)."""
    device: bool = True
    """A device tensor (else a host value: an int, a list, a host tensor or None)."""
    dtype: Literal["int32", "int64", "host"] = "int32"
    """The tensor's dtype as upstream's consumers take it; ``host`` for host values."""
    dims: int = 1
    """2 for the page tables."""


def _f(*specs: DSAFieldSpec) -> Mapping[str, DSAFieldSpec]:
    return MappingProxyType({s.name: s for s in specs})


FIELDS: Mapping[str, DSAFieldSpec] = _f(
    DSAFieldSpec("cache_seqlens_int32", "(rows,)", "the request's KV length: seq_lens (+ N in target verify)",
                 "lengths"),
    DSAFieldSpec("cu_seqlens_k", "(rows + 1,)", "[0] + cumsum(cache_seqlens_int32)", "lengths"),
    DSAFieldSpec("cu_seqlens_q", "(tokens + 1,)", "arange(tokens + 1): one query per row", "lengths"),
    DSAFieldSpec("page_table_1", "(tokens, width)", "the request's req_to_token row (page size 1), per token; "
                 "judged up to the row's read length (READ_COLUMNS)", "page_tables", dims=2),
    DSAFieldSpec("real_page_table", "(tokens, ceil(width / P))", "page_table_1[:, ::P] // P: the indexer's pages",
                 "page_tables", dims=2),
    DSAFieldSpec("dsa_seqlens_expanded", "(tokens,)", "per token: kv_len - extend + j + 1, floored at 0 "
                 "(seqlens_expand)", "sparse"),
    DSAFieldSpec("dsa_cache_seqlens_int32", "(tokens,)", "min(dsa_seqlens_expanded, index_topk)", "sparse"),
    DSAFieldSpec("dsa_cu_seqlens_k", "(tokens + 1,)", "[0] + cumsum(dsa_cache_seqlens_int32)", "sparse"),
    DSAFieldSpec("dsa_cu_seqlens_q", "(tokens + 1,)", "arange(len(dsa_cu_seqlens_k))", "sparse"),
    DSAFieldSpec("page_size", "()", "P", "host", device=False, dtype="host"),
    DSAFieldSpec("max_seq_len_q", "()", "1", "host", device=False, dtype="host"),
    DSAFieldSpec("max_seq_len_k", "()", "eager: max(seq_lens_cpu) (+ N in target verify), else the device's max; "
                 "graph: width", "host", device=False, dtype="host"),
    DSAFieldSpec("dsa_max_seqlen_q", "()", "1", "host", device=False, dtype="host"),
    DSAFieldSpec("dsa_extend_seq_lens_list", "list", "eager: [N] * rows (decode: [1] * rows); graph: [1] * tokens",
                 "host", device=False, dtype="host"),
    DSAFieldSpec("seq_lens_sum", "()", "eager: the caller's forward_batch.seq_lens_sum (None without a mirror); "
                 "graph: None", "host", device=False, dtype="host"),
    DSAFieldSpec("indexer_seq_lens_cpu", "(rows,) host", "eager: the caller's host mirror (or None); graph: None",
                 "host", device=False, dtype="host"),
    DSAFieldSpec("indexer_seq_lens", "(rows,)", "eager: the caller's seq_lens (int64, the same tensor); graph: None",
                 "host", dtype="int64"),
)
"""Every field a property judges, in upstream's dataclass order where it has one."""

FIELD_NAMES: tuple[str, ...] = tuple(FIELDS)

READ_COLUMNS: Mapping[str, str] = MappingProxyType({
    "page_table_1": "cache_seqlens_int32 of the row's request",
    "real_page_table": "ceil(cache_seqlens_int32 / P) of the row's request",
})
"""The 2-D fields P1 compares only up to each row's read length: no consumer reads past it (attention and the
indexer stay within ``cache_seqlens``, upstream's fused kernels' contract, ``fused_dsa_decode_metadata``'s
docstring).  Past it the fused kernels leave the previous replay's entries (stale) and the draft-decode
precompute ``torch.empty``'s: P9 counts what differs there, P10 proves no consumer reads it."""

NOT_JUDGED: Mapping[str, str] = MappingProxyType({
    "flashmla_metadata": "CUDA-only: FlashMLA's get_mla_metadata, built only with dsa_decode_impl='flashmla_kv' "
                         "(not a HIP impl)",
    "paged_mqa_schedule_metadata": "CUDA-only: DeepGEMM's paged-MQA schedule, built only when is_cuda() "
                                   "(torch.version.cuda), None on ROCm",
    "paged_mqa_ctx_lens_2d": "CUDA-only: DeepGEMM's 2-D context lengths, like paged_mqa_schedule_metadata",
    "topk_v2_plan": "a JIT extension's plan (sgl-kernel top-k v2, SGLANG_OPT_USE_TOPK_V2); None with the torch "
                    "top-k backend the family models",
    "pooled_index_kpool": "k-pooled indexer (index_kpool > 1, GLM-5.3-Flash, 0.5.20+): the family models kpool 1",
    "pooled_cache_seqlens_int32": "k-pooled indexer only (index_kpool > 1)",
    "pooled_real_page_table": "k-pooled indexer only (index_kpool > 1)",
    "pooled_paged_mqa_schedule_metadata": "k-pooled indexer only, and CUDA-only (DeepGEMM)",
    "kpool_extend_plan": "k-pooled indexer only (index_kpool > 1)",
    "kpool_write_plan": "k-pooled indexer only (index_kpool > 1)",
    "pooled_topk_v2_plan": "k-pooled indexer only (0.5.23)",
    "page_table_1_flattened": "prefill (EXTEND) only: None on the speculative path",
    "topk_indices_offset": "prefill (EXTEND, ragged transform) only: None on the speculative path",
    "indexer_k_start_end": "prefill only: _cal_indexer_k_start_end returns (None, None) for speculative modes",
    "token_to_batch_idx": "prefill only, like indexer_k_start_end",
    "indexer_logical_page_table": "kv-shard prefill only (0.5.23)",
})
"""Upstream's ``DSAMetadata`` fields no property judges, and why (named in every report, never skipped silently)."""

CALLER_WRITES: Mapping[str, Mapping[str, frozenset[str]]] = MappingProxyType({
    "target_verify": MappingProxyType({"eager": frozenset({"extend_seq_lens_cpu"})}),
    "draft_extend": MappingProxyType({"eager": frozenset({"seq_lens_cpu", "seq_lens_sum", "extend_prefix_lens_cpu"})}),
})
"""mode -> path -> the caller's (``forward_batch``'s) fields a build may write (P8; any other write fails):
eager target verify stores ``extend_seq_lens_cpu = [N] * bs`` (B:1178); eager draft extend without mirrors
stores the host copies it read back (B:1190-1197).  The graph path writes no caller field."""
