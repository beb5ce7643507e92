"""The decode modes' batches (``verify_batches(mode="decode" | "draft_decode" | "idle")``), drawn from draft-extend
ones."""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import assume, event
from hypothesis import strategies as st

from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsv4.batch import GraphTier, VerifyBatch
from metadata_builders.families.dsv4.strategies._coverage import boundary_hits

__all__ = ["as_decode", "as_idle", "decode_mode_batch"]

_DRAFT_DECODE_TOKEN_COUNTS = st.one_of(st.integers(4, 5), st.integers(3, 8))
"""Draft decode needs a step that runs a forward: ``steps = n - 1 >= 2``.  Shrinks towards 4 -- three steps, the
fewest where a replay *copies* a child (child 0 alone runs out-graph work) -- while 3 stays drawn."""


def decode_mode_batch(draw: st.DrawFn, batches: Callable[..., st.SearchStrategy[VerifyBatch]], mode: str,
                      **drawn: Any) -> VerifyBatch:
    """A batch of a decode mode (``decode``, ``draft_decode``, ``idle``), drawn from a draft-extend batch of
    ``batches`` (``verify_batches``) with the caller's pins ``drawn``: draft decode's draft tokens drawn ``>= 3`` unless
    pinned, an idle batch on a graph tier."""
    if mode == "draft_decode" and drawn.get("num_draft_tokens") is None:
        drawn["num_draft_tokens"] = draw(_DRAFT_DECODE_TOKEN_COUNTS)
    if mode == "idle":
        drawn["graph"] = True
    extend = draw(batches(mode="draft_extend", **drawn))
    return as_idle(extend) if mode == "idle" else as_decode(draw, extend, mode)


def as_idle(extend: VerifyBatch) -> VerifyBatch:
    """An idle batch from a draft-extend graph batch: its tables, geometry and tier's rows, no request (every row a
    pad row, one token each)."""
    assert extend.graph is not None
    batch = extend.replace(mode="idle", seq_lens=[], req_pool_indices=[], out_cache_loc=[],
                           graph=GraphTier(extend.graph.padded_bs, extend.graph.padded_bs))
    for name in sorted(boundary_hits(batch)):
        event(name)
    return batch


def as_decode(draw: st.DrawFn, extend: VerifyBatch, mode: str) -> VerifyBatch:
    """A decode-mode batch from a draft-extend one (its positions fit the tables): ``decode`` keeps each request's
    first location; ``draft_decode`` the first ``steps = n - 1`` of each (the shared buffer, request-major) and
    draws its step among those that run a forward, ``0 .. steps - 2``.  The tier keeps its rows, one token each."""
    n, locs = extend.num_draft_tokens, extend.out_cache_loc
    tier = None if extend.graph is None else GraphTier(extend.graph.padded_bs, extend.graph.padded_bs)
    if mode == "decode":
        out, step = [locs[i * n] for i in range(extend.bs)], None
    else:
        assert n >= 3, n  # verify_batches draws draft decode's draft-extend batch with a step that runs a forward
        out = [locs[i * n + j] for i in range(extend.bs) for j in range(n - 1)]
        step = n - 3 - draw(st.integers(0, n - 3))  # shrinks towards the last step that runs a forward: a copied child
    try:
        batch = extend.replace(mode=mode, out_cache_loc=tuple(out), graph=tier, draft_step=step)
    except InvalidBatch:
        assume(False)  # a pad row's position past a tiny table (draft decode's step + 1)
        raise
    for name in sorted(boundary_hits(batch)):
        event(name)
    return batch
