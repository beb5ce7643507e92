"""The batches P5 replays and P9 builds after: derived from one batch, on its tier (pure batch arithmetic).

Each returns a valid batch or None (or the batch itself, where said): a derived batch that the batch
model refuses is left out of a sequence, never a failure of the builder.  Worked example, ``seq_lens=[5,
3, 7]`` uniform with 2 drafts on a tier of 4 rows: :func:`fewer_requests_batch` drops the request in
slot 3 (its row becomes a pad row); :func:`same_tier_batch` shortens every prefix by one and reverses the
slots; :func:`filled_tier_batch` adds a request of prefix 1 in a spare slot, filling the fourth row.
"""

from __future__ import annotations

from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsv4.batch import GraphTier, VerifyBatch
from metadata_builders.families.dsv4.properties._common import _clean

__all__ = ["busy_on_tier", "fewer_requests_batch", "filled_tier_batch", "idle_on_tier", "other_draft_count_batch",
           "other_modes_batches", "replay_sequence", "requests_in_spare_slots", "same_tier_batch", "with_draft_count"]


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
    batch's shape (its rows, its tier) would wrongly reuse, and a staging buffer reused step to step would be
    rewritten with (ATOM #817's race: a ``stale_async_copy`` where the copy was not read yet).

    Only where upstream changes the count between steps on one backend: DSpark's target verify, whose active
    draft count changes from step to step (upstream #31026 read the configured one instead); an EAGLE server's
    count is its configuration, the same every step.

    One fewer draft token where the batch has two or more (draft decode: three, and a step that still runs a
    forward), else one more; ragged lengths clipped to the new count; every request's locations re-read from
    its ``req_to_token`` row (draft decode: its shared buffer of every step); a uniform batch (target verify, draft
    extend) keeps its rows on a tier of ``padded_bs * n`` tokens, the one its runner captures.  Worked example:
    ``seq_lens=[5, 3]`` uniform DSpark with 3 drafts -> the same rows with 2 drafts, 4 locations instead of 6.  None
    for another mode or algorithm, a DSpark draft worker's block verify (its width is its configuration, gamma,
    every step), or when no such batch is valid.
    """
    if batch.mode != "target_verify" or not batch.is_dspark or batch.is_dspark_draft:
        return None
    for count in (batch.num_draft_tokens - 1, batch.num_draft_tokens + 1):
        other = with_draft_count(batch, count)
        if other is not None:
            return other
    return None


def with_draft_count(batch: VerifyBatch, count: int) -> VerifyBatch | None:
    """``batch`` with ``count`` draft tokens (:func:`other_draft_count_batch`; the gate's shrinker), or None when
    invalid: ragged lengths clipped, each request's locations re-read, draft extend's tier resized."""
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
    uniform = batch.mode == "draft_extend" or (batch.mode == "target_verify" and batch.verify_lens is None)
    if graph is not None and uniform and graph.graph_num_tokens != graph.padded_bs * count:
        # a uniform tier is padded_bs * n tokens, the only one upstream's runner captures (upstream's backend asserts
        # its locations fill the tier); a draft-decode tier is one token a row whatever the count, a ragged tier
        # keeps its tokens
        graph = GraphTier(graph.padded_bs, graph.padded_bs * count, graph.cap)
    configured = None if batch.speculative_num_draft_tokens is None else count + 1  # a draft worker keeps gamma + 1
    try:
        return batch.replace(num_draft_tokens=count, verify_lens=verify, seq_lens=seq_lens, out_cache_loc=out,
                             draft_step=step, graph=graph, speculative_num_draft_tokens=configured)
    except InvalidBatch:
        return None


def other_modes_batches(batch: VerifyBatch) -> list[VerifyBatch]:
    """The same requests (slots, prefixes, tables) in every other built mode of the MTP step, in the order a worker
    builds them each step -- draft decode (step 0), target verify (uniform), draft extend, decode -- each on a tier
    of the batch's rows where it has one: what one backend built before ``batch`` in a step.  Modes whose batch
    would be invalid (draft decode with fewer than three draft tokens) are left out; so is ``batch``'s own.  None
    at all for a DSpark draft worker's block verify: its backend runs no EAGLE draft step, draft extend or decode.

    Worked example: uniform target verify ``seq_lens=[5, 3]``, 3 drafts -> draft decode step 0 (locations of
    positions ``5, 6`` and ``3, 4``), draft extend (``5..7`` and ``3..5``), decode (``5`` and ``3``).
    """
    n, graph = batch.num_draft_tokens, batch.graph
    rows = None if graph is None else graph.padded_bs
    if batch.is_dspark_draft:
        return []
    out = []
    for mode, width, step, per_row in (("draft_decode", n - 1, 0, 1), ("target_verify", n, None, n),
                                       ("draft_extend", n, None, n), ("decode", 1, None, 1)):
        if mode == batch.mode or (mode == "draft_decode" and n < 3) or batch.mode == "idle" or \
                any(s + width > batch.max_context for s in batch.seq_lens):
            continue
        locations = [batch.req_to_token[slot][s + j] for slot, s in zip(batch.req_pool_indices, batch.seq_lens)
                     for j in range(width)]
        try:
            out.append(batch.replace(mode=mode, verify_lens=None, divergence=None, draft_step=step,
                                     out_cache_loc=locations,
                                     graph=None if rows is None else GraphTier(rows, rows * per_row)))
        except InvalidBatch:
            continue
    return out


def fewer_requests_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """The same tier with the last real request gone: its row becomes a pad row on replay.

    A replay that does not refill the rows a smaller batch leaves to padding keeps
    the first batch's values there; this second batch exposes it.  None when the
    batch has one request or the smaller one would be invalid.
    """
    if batch.bs < 2:
        return None
    keep = batch.num_out_cache_loc - batch.location_widths[-1]  # in the mode's units: draft decode's steps a row
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

    A new request verifies ``num_draft_tokens`` (uniform) or ``ragged_extend`` tokens (ragged); in a decode mode it
    takes its mode's locations (decode one, draft decode its row of every step).  None when the table has no spare
    slot or the result would be invalid.  An ``idle`` batch takes none (a rank with requests is not idle).
    """
    if batch.mode == "idle":
        return None
    used = set(batch.req_pool_indices)
    spare = [s for s in range(1, batch.num_slots) if s not in used][:limit]
    if not spare:
        return None
    extend = batch.num_draft_tokens if batch.verify_lens is None else ragged_extend
    width = {"decode": 1, "draft_decode": batch.num_draft_steps}.get(batch.mode, extend)
    if 1 + width + (batch.draft_step or 0) > batch.max_context:
        return None  # a new request's tokens would not fit the table
    added = [batch.req_to_token[slot][1 + j] for slot in spare for j in range(width)]
    try:
        return batch.replace(
            seq_lens=list(batch.seq_lens) + [1] * len(spare),
            req_pool_indices=list(batch.req_pool_indices) + spare,
            verify_lens=None if batch.verify_lens is None else list(batch.verify_lens) + [extend] * len(spare),
            out_cache_loc=list(batch.out_cache_loc) + added,
        )
    except InvalidBatch:
        return None


def idle_on_tier(batch: VerifyBatch) -> VerifyBatch | None:
    """An idle rank's batch on ``batch``'s tier, replayed in the graph ``batch``'s mode captured: decode's
    (upstream's ``DECODE_OR_IDLE`` bucket), or draft decode's on the draft runner (the same child's step: the
    multi-step backend's children copy child 0's idle metadata).  None for another mode or an eager batch."""
    if batch.graph is None or batch.mode not in ("decode", "draft_decode"):
        return None
    try:
        return batch.replace(mode="idle", seq_lens=[], req_pool_indices=[], out_cache_loc=[],
                             draft_step=batch.draft_step)
    except InvalidBatch:
        return None


def busy_on_tier(batch: VerifyBatch) -> VerifyBatch | None:
    """The batch that captured an idle rank's graph: one request (prefix 1, the first spare slot) on its tier, in
    decode, or draft decode on the draft runner.  None for a batch that is not idle, or when none fits."""
    if batch.mode != "idle" or batch.graph is None:
        return None
    mode = "draft_decode" if batch.draft_step is not None else "decode"
    width = batch.num_draft_steps if mode == "draft_decode" else 1
    slot = next((s for s in range(1, batch.num_slots)), None)
    if slot is None or 1 + width + (batch.draft_step or 0) > batch.max_context:
        return None
    try:
        return batch.replace(mode=mode, seq_lens=[1], req_pool_indices=[slot],
                             out_cache_loc=[batch.req_to_token[slot][1 + j] for j in range(width)])
    except InvalidBatch:
        return None


def replay_sequence(batch: VerifyBatch) -> list[VerifyBatch]:
    """What P5 captures and replays on one tier: capture the first, replay all of them in order.

    Smallest first, so the replays grow (``batch``), fill the tier
    (:func:`filled_tier_batch`), shrink back and change every value
    (:func:`same_tier_batch`), in the mode's own units (a decode row one location, a draft-decode request its row
    of every step).  A decode (or draft-decode) tier is also the one an idle rank replays
    (:func:`idle_on_tier`): after the shrunk batch, an idle replay, then the batch again, as a DP rank that
    goes idle and comes back.  An idle batch is replayed on a tier a busy batch captured (:func:`busy_on_tier`).
    Batches that would be invalid are left out.
    """
    batch = _clean(batch)
    if batch.mode == "idle":
        busy = busy_on_tier(batch)
        sequence = [busy, batch, None if busy is None else same_tier_batch(busy), batch]
    else:
        smaller = fewer_requests_batch(batch)
        sequence = [smaller or batch, batch, filled_tier_batch(batch), smaller, same_tier_batch(batch)]
        idle = idle_on_tier(batch)
        sequence += [idle, batch] if idle is not None else []
    out: list[VerifyBatch] = []
    for b in sequence:
        if b is not None and (not out or b != out[-1]):
            out.append(b)
    return out
