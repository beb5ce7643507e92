"""The batches P5 replays and P9 builds after: derived from one batch, on its tier (pure batch arithmetic).

Each returns a valid batch or None (or the batch itself, where said): a derived batch that the batch
model refuses is left out of a sequence, never a failure of the builder.  Worked example, ``seq_lens=[5,
3, 7]`` uniform with 2 drafts on a tier of 4 rows: :func:`fewer_requests_batch` drops the request in
slot 3 (its row becomes a pad row); :func:`same_tier_batch` shortens every prefix by one and reverses the
slots; :func:`filled_tier_batch` adds a request of prefix 1 in a spare slot, filling the fourth row.
"""

from __future__ import annotations

from metadata_builders.batch import GraphTier, VerifyBatch
from metadata_builders.errors import InvalidBatch
from metadata_builders.properties._common import _clean

__all__ = ["fewer_requests_batch", "filled_tier_batch", "other_draft_count_batch", "replay_sequence",
           "requests_in_spare_slots", "same_tier_batch"]


def same_tier_batch(batch: VerifyBatch) -> VerifyBatch:
    """A second batch for the same captured tier: each prefix one shorter, rows' lengths rotated.

    Falls back to the batch itself when the derived one would be invalid.
    """
    seq_lens = [max(1, s - 1) for s in batch.seq_lens]
    verify = None if batch.verify_lens is None else list(batch.verify_lens[1:]) + list(batch.verify_lens[:1])
    try:
        return batch.replace(
            seq_lens=seq_lens,
            verify_lens=verify,
            out_cache_loc=[x + 1 for x in batch.out_cache_loc],
            req_pool_indices=list(batch.req_pool_indices[::-1]),
        )
    except InvalidBatch:
        return batch


def other_draft_count_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """The same requests in the same rows (and tier), with another draft count: the values a cache keyed on the
    batch's shape (its rows, its tier) would wrongly reuse.

    One fewer draft token where the batch has two or more (draft decode: three, and a step that still runs a
    forward), else one more; ragged lengths clipped to the new count; every request's locations re-read from
    its ``req_to_token`` row (draft decode: its shared buffer of every step); a uniform mode other than target
    verify (draft extend) keeps its rows on a tier of ``padded_bs * n`` tokens, as its runner captures it.  Worked example:
    ``seq_lens=[5, 3]`` uniform with 3 drafts -> the same rows with 2 drafts, 4 locations instead of 6.  None for
    the decode modes' one-token steps (no draft count), or when no such batch is valid.
    """
    if batch.mode in ("decode", "idle"):
        return None
    for count in (batch.num_draft_tokens - 1, batch.num_draft_tokens + 1):
        other = _with_draft_count(batch, count)
        if other is not None:
            return other
    return None


def _with_draft_count(batch: VerifyBatch, count: int) -> VerifyBatch | None:
    """``batch`` with ``count`` draft tokens (:func:`other_draft_count_batch`), or None when invalid."""
    draft_decode = batch.mode == "draft_decode"
    if count < (3 if draft_decode else 1):
        return None
    verify = None if batch.verify_lens is None else [min(v, count) for v in batch.verify_lens]
    widths = [count - 1] * batch.bs if draft_decode else (verify or [count] * batch.bs)
    seq_lens = [min(s, batch.max_context - w) for s, w in zip(batch.seq_lens, widths)]
    if any(s < 1 for s in seq_lens):
        return None
    out = [batch.req_to_token[slot][s + j] for slot, s, w in zip(batch.req_pool_indices, seq_lens, widths)
           for j in range(w)]
    step = None if batch.draft_step is None else min(batch.draft_step, count - 3)
    graph = batch.graph
    tokens = graph is not None and (graph.graph_num_tokens != graph.padded_bs * count if batch.mode == "draft_extend"
                                    else batch.mode == "target_verify" and batch.verify_lens is None
                                    and graph.graph_num_tokens < graph.padded_bs * count)
    if tokens:  # a draft-decode tier is one token a row whatever the count; a ragged tier keeps its tokens
        graph = GraphTier(graph.padded_bs, graph.padded_bs * count, graph.cap)
    try:
        return batch.replace(num_draft_tokens=count, verify_lens=verify, seq_lens=seq_lens, out_cache_loc=out,
                             draft_step=step, graph=graph)
    except InvalidBatch:
        return None


def fewer_requests_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """The same tier with the last real request gone: its row becomes a pad row on replay.

    A replay that does not refill the rows a smaller batch leaves to padding keeps
    the first batch's values there; this second batch exposes it.  None when the
    batch has one request or the smaller one would be invalid.
    """
    if batch.bs < 2:
        return None
    keep = batch.num_real_tokens - batch.extend_lens[-1]
    try:
        return batch.replace(
            seq_lens=batch.seq_lens[:-1],
            req_pool_indices=batch.req_pool_indices[:-1],
            verify_lens=None if batch.verify_lens is None else batch.verify_lens[:-1],
            out_cache_loc=batch.out_cache_loc[:keep],
        )
    except InvalidBatch:
        return None


def filled_tier_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """The same tier with every pad row turned into a real request (as far as spare slots allow).

    Each new request has a prefix of 1 and verifies ``num_draft_tokens`` (uniform)
    or 1 token (ragged), in a slot no real request uses.  A replay that refreshes
    only the rows it captured leaves these rows stale.  None when the tier has no
    pad rows, the table no spare slot, or the result would be invalid.
    """
    g = batch.graph
    if g is None or g.padded_bs == batch.bs:
        return None
    return requests_in_spare_slots(batch, g.padded_bs - batch.bs, 1)


def requests_in_spare_slots(batch: VerifyBatch, limit: int | None, ragged_extend: int) -> VerifyBatch | None:
    """``batch`` with a new request (prefix 1) in each slot no request uses, at most ``limit`` of them.

    A new request verifies ``num_draft_tokens`` (uniform) or ``ragged_extend`` tokens
    (ragged).  None when the table has no spare slot or the result would be invalid.
    """
    used = set(batch.req_pool_indices)
    spare = [s for s in range(1, batch.num_slots) if s not in used][:limit]
    if not spare:
        return None
    extend = batch.num_draft_tokens if batch.verify_lens is None else ragged_extend
    if 1 + extend > batch.max_context:
        return None  # a new request's verify tokens would not fit the table
    added = [batch.req_to_token[slot][1 + j] for slot in spare for j in range(extend)]
    try:
        return batch.replace(
            seq_lens=list(batch.seq_lens) + [1] * len(spare),
            req_pool_indices=list(batch.req_pool_indices) + spare,
            verify_lens=None if batch.verify_lens is None else list(batch.verify_lens) + [extend] * len(spare),
            out_cache_loc=list(batch.out_cache_loc) + added,
        )
    except InvalidBatch:
        return None


def replay_sequence(batch: VerifyBatch) -> list[VerifyBatch]:
    """What P5 captures and replays on one tier: capture the first, replay all of them in order.

    Smallest first, so the replays grow (``batch``), fill the tier
    (:func:`filled_tier_batch`), shrink back and change every value
    (:func:`same_tier_batch`).  Batches that would be invalid are left out.
    """
    batch = _clean(batch)
    smaller = fewer_requests_batch(batch)
    sequence = [smaller or batch, batch, filled_tier_batch(batch), smaller, same_tier_batch(batch)]
    out: list[VerifyBatch] = []
    for b in sequence:
        if b is not None and (not out or b != out[-1]):
            out.append(b)
    return out
