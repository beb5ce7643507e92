"""The rules a :class:`~metadata_builders.families.dsa.batch.DSABatch` keeps across its fields.

Every precondition of the DSA builders is checked here, so no builder ever sees a batch that would
make it raise ``IndexError``: a broken one raises :class:`~metadata_builders.errors.InvalidBatch`
naming field, index and value, e.g. ``seq_lens[1]=14 must be such that its last position this step
(16) fits req_to_token's width 16``.  Worked example (the family's, target verify, ``N = 3``, a
4 x 16 table): ``seq_lens=[5, 3]`` is fine; ``seq_lens=[5, 14]`` is not (positions 14..16 of a
16-column table); ``req_pool_indices=[2, 0]`` is not (slot 0 is the pad rows').
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metadata_builders.values import check_int
from metadata_builders.errors import InvalidBatch

if TYPE_CHECKING:
    from metadata_builders.families.dsa.batch import DSABatch

__all__ = ["INT32_MAX", "validate"]

INT32_MAX = 2**31 - 1
"""``req_to_token`` is int32 upstream: every location must fit it."""


def validate(batch: DSABatch) -> None:
    """Every cross-field rule of ``batch``; the first one broken raises ``InvalidBatch``."""
    check_int("num_draft_tokens", batch.num_draft_tokens, minimum=1)
    check_int("page_size", batch.page_size, minimum=1)
    check_int("index_topk", batch.index_topk, minimum=1)
    _validate_mode(batch)
    _validate_table(batch)
    _validate_requests(batch)
    _validate_out_cache_loc(batch)
    if batch.graph is not None and batch.graph.padded_bs < batch.bs:
        raise InvalidBatch("graph.padded_bs", None, f">= bs={batch.bs} (the tier holds every real request)",
                           batch.graph.padded_bs)
    if batch.graph is not None:
        fits = [t for t in batch.graph.tiers if t >= max(batch.bs, 1)]
        if fits and fits[0] != batch.graph.padded_bs:
            raise InvalidBatch("graph.padded_bs", None, f"{fits[0]}, the smallest captured size holding bs={batch.bs} "
                               "(the runner's choice)", batch.graph.padded_bs)
    if batch.divergence is not None:
        _validate_divergence(batch)


def _validate_mode(batch: DSABatch) -> None:
    """What each mode takes: only idle has no request (and needs a tier); draft decode names its child."""
    mode, bs = batch.mode, len(batch.seq_lens)
    if mode == "idle":
        if bs:
            raise InvalidBatch("seq_lens", None, "empty for an idle batch (a DP rank with no request)",
                               list(batch.seq_lens))
        if batch.graph is None:
            raise InvalidBatch("graph", None, "a tier for an idle batch (an idle rank only replays the decode "
                               "graph)", None)
    elif not bs:
        raise InvalidBatch("seq_lens", None, f"non-empty for a {mode} batch (only an idle batch has no request)", [])
    if mode == "draft_decode":
        if batch.num_draft_tokens < 3:
            raise InvalidBatch("num_draft_tokens", None, ">= 3 for draft decode (the multi-step backend has "
                               "N - 2 children; N = 2 runs no draft forward)", batch.num_draft_tokens)
        step = batch.draft_step
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= batch.num_draft_tokens - 3:
            raise InvalidBatch("draft_step", None, f"an int in 0..{batch.num_draft_tokens - 3} (the children of "
                               "the multi-step backend)", step)
    elif batch.draft_step is not None:
        raise InvalidBatch("draft_step", None, f"None for a {mode} batch (only draft decode has a step)",
                           batch.draft_step)


def _validate_table(batch: DSABatch) -> None:
    table = batch.req_to_token
    if not table or not table[0]:
        raise InvalidBatch("req_to_token", None, "a non-empty table", [list(r) for r in table])
    width = len(table[0])
    for s, row in enumerate(table):
        if len(row) != width:
            raise InvalidBatch("req_to_token", s, f"a row of width {width} (the width of row 0)", len(row))
        if row and max(row) > INT32_MAX:
            c = row.index(max(row))
            raise InvalidBatch(f"req_to_token[{s}]", c, f"<= {INT32_MAX} (upstream's table is int32)", row[c])


def _validate_requests(batch: DSABatch) -> None:
    """Slots, and every position the step writes or reads inside the table."""
    bs, width = len(batch.seq_lens), len(batch.req_to_token[0])
    if len(batch.req_pool_indices) != bs:
        raise InvalidBatch("req_pool_indices", None, f"of length len(seq_lens)={bs}", len(batch.req_pool_indices))
    seen: dict[int, int] = {}
    for i, slot in enumerate(batch.req_pool_indices):
        if not 1 <= slot < len(batch.req_to_token):
            raise InvalidBatch("req_pool_indices", i, f"in 1..{len(batch.req_to_token) - 1} (slot 0 is the pad "
                               f"rows'; num_slots={len(batch.req_to_token)})", slot)
        if slot in seen:
            raise InvalidBatch("req_pool_indices", i, f"distinct (also at index {seen[slot]})", slot)
        seen[slot] = i
    reach = {"target_verify": batch.num_draft_tokens, "draft_extend": batch.num_draft_tokens, "decode": 1,
             "draft_decode": batch.num_draft_tokens - 1, "idle": 0}[batch.mode]
    for b, s in enumerate(batch.seq_lens):
        if s + reach > width:
            raise InvalidBatch("seq_lens", b, f"such that its last position this step ({s + reach - 1}) fits "
                               f"req_to_token's width {width}", s)


def _validate_out_cache_loc(batch: DSABatch) -> None:
    """``out_cache_loc`` is where the caller allocated the step's tokens: the table's entry at each position,
    request-major (draft decode: the shared buffer of every step, ``N - 1`` a request)."""
    per = batch.step_tokens
    if len(batch.out_cache_loc) != batch.bs * per:
        raise InvalidBatch("out_cache_loc", None, f"of length bs * {per}={batch.bs * per} ({batch.mode})",
                           len(batch.out_cache_loc))
    for b, (slot, s) in enumerate(zip(batch.req_pool_indices, batch.seq_lens)):
        for j in range(per):
            want = batch.req_to_token[slot][s + j]
            if batch.out_cache_loc[b * per + j] != want:
                raise InvalidBatch("out_cache_loc", b * per + j, f"req_to_token[{slot}][{s + j}]={want} (the "
                                   "location the table holds at the token's position)",
                                   batch.out_cache_loc[b * per + j])


def _validate_divergence(batch: DSABatch) -> None:
    div, bs, n = batch.divergence, len(batch.seq_lens), batch.num_draft_tokens
    assert div is not None
    if div.extend_seq_lens is not None:
        if batch.mode != "draft_extend":
            raise InvalidBatch("divergence.extend_seq_lens", None, f"None for a {batch.mode} batch (only eager "
                               "draft extend stores at device offsets sized by a host total)",
                               list(div.extend_seq_lens))
        if len(div.extend_seq_lens) != bs:
            raise InvalidBatch("divergence.extend_seq_lens", None, f"of length bs={bs}", len(div.extend_seq_lens))
        for i, v in enumerate(div.extend_seq_lens):
            if v > 2 * n:
                raise InvalidBatch("divergence.extend_seq_lens", i, f"in 0..2 * num_draft_tokens={2 * n}", v)
    if div.seq_lens_cpu is not None:
        if batch.mode == "idle":
            raise InvalidBatch("divergence.seq_lens_cpu", None, "None for an idle batch (no request, no mirror)",
                               list(div.seq_lens_cpu))
        if len(div.seq_lens_cpu) != bs:
            raise InvalidBatch("divergence.seq_lens_cpu", None, f"of length bs={bs}", len(div.seq_lens_cpu))
        for i, v in enumerate(div.seq_lens_cpu):
            if v < 1:
                raise InvalidBatch("divergence.seq_lens_cpu", i, ">= 1 (a sequence length)", v)
