"""DESIGN.md section 6's worked example as a batch, per mode: the family's named shapes (tests, the coverage line).

``seq_lens [5, 3]``, slots ``[2, 1]``, ``N = 3``, ``P = 4``, top-k 8, ``req_to_token[s][c] = 16 s + c`` (4 slots x
``width`` columns, 16 by default).  ``out_cache_loc`` holds each request's step tokens at its prefix: target verify
``[37, 38, 39, 19, 20, 21]``, decode ``[37, 19]``.
"""

from __future__ import annotations

from typing import Any

from metadata_builders.families.dsa.batch import DSABatch, DSADivergence, DSAGraphTier

__all__ = ["worked_example"]


def worked_example(mode: str = "target_verify", *, padded_bs: int | None = None, capture_bs: tuple[int, ...] = (),
                   width: int = 16, seq_lens: tuple[int, ...] = (5, 3), divergence: DSADivergence | None = None,
                   **changes: Any) -> DSABatch:
    """The worked example in ``mode`` (``idle``: no request, tier 3 unless given); ``padded_bs``: a graph tier;
    ``changes``: any other field (``page_size``, ``index_topk``...)."""
    n = changes.pop("num_draft_tokens", 3)
    table = [[16 * s + c for c in range(width)] for s in range(4)]
    if mode == "idle":
        seq_lens, padded_bs = (), padded_bs or 3
    slots = [2, 1][: len(seq_lens)]
    per = {"target_verify": n, "draft_extend": n, "decode": 1, "draft_decode": n - 1, "idle": 0}[mode]
    loc = [table[s][p + j] for s, p in zip(slots, seq_lens) for j in range(per)]
    graph = None if padded_bs is None else DSAGraphTier(padded_bs, capture_bs)
    fields: dict[str, Any] = {"page_size": 4, "index_topk": 8, "mode": mode, "graph": graph,
                              "divergence": divergence, "draft_step": 0 if mode == "draft_decode" else None}
    fields.update(changes)
    return DSABatch(list(seq_lens), slots, table, loc, n, **fields)
