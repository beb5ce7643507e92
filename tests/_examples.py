"""Named, hand-sized target-verify batches shared by the tests.

Every batch uses the small :data:`GEOMETRY` (pages of 4, a window of 4, a ring
of 6) and a :func:`kv_tables` layout chosen so expectations can be derived by
hand: slot ``s`` keeps position ``c`` at full location ``s * width + c``, and
full location ``loc`` maps to SWA location ``100 + loc``.  So with ``width=12``
slot 2, position 5 lives at full location 29 and SWA location 129.
"""

from __future__ import annotations

from metadata_builders import Geometry, GraphTier, VerifyBatch

GEOMETRY = Geometry(page_size=4, swa_window=4, ring_size=6, unified_swa_window=9, page_index_align=8)
"""page_size 4, swa_window 4 (padded to 8 columns), ring 6 (= window + 3 drafts - 1), pad final_pos 9."""

SWA_BASE = 100
"""``full_to_swa[loc] = SWA_BASE + loc`` for every real location."""


def kv_tables(num_slots: int, width: int) -> tuple[list[list[int]], list[int]]:
    """``req_to_token[s][c] = s * width + c``; ``full_to_swa`` = ``100 + loc`` then the -1 sentinel."""
    req_to_token = [[s * width + c for c in range(width)] for s in range(num_slots)]
    full_to_swa = [SWA_BASE + loc for loc in range(num_slots * width)] + [-1]
    return req_to_token, full_to_swa


def make_batch(
    seq_lens: list[int],
    slots: list[int],
    num_draft_tokens: int,
    *,
    verify_lens: list[int] | None = None,
    num_slots: int = 4,
    width: int = 12,
    graph: GraphTier | None = None,
    is_dspark: bool = False,
    req_to_token: list[list[int]] | None = None,
) -> VerifyBatch:
    """A batch on :func:`kv_tables`; ``out_cache_loc`` is each verify position's full location."""
    table, full_to_swa = kv_tables(num_slots, width)
    if req_to_token is not None:
        table = req_to_token
    extend = verify_lens if verify_lens is not None else [num_draft_tokens] * len(seq_lens)
    out_cache_loc = [slot * width + seq + j for seq, slot, e in zip(seq_lens, slots, extend) for j in range(e)]
    return VerifyBatch(
        seq_lens=seq_lens,
        req_pool_indices=slots,
        verify_lens=verify_lens,
        num_draft_tokens=num_draft_tokens,
        out_cache_loc=out_cache_loc,
        req_to_token=table,
        full_to_swa=full_to_swa,
        is_dspark=is_dspark,
        geometry=GEOMETRY,
        graph=graph,
    )


def _sentinel_row() -> list[list[int]]:
    table, _ = kv_tables(2, 12)
    table[1][0] = -1
    table[1][2] = -1
    return table


EXAMPLES: dict[str, VerifyBatch] = {
    "single_request": make_batch([5], [1], 2, num_slots=2),
    "uniform_eagle_batch_of_three": make_batch([5, 3, 7], [2, 1, 3], 2, graph=GraphTier(4, 8)),
    "ragged_tier_slack_spread_over_pad_rows": make_batch(
        [5, 3, 7], [2, 1, 3], 3, verify_lens=[3, 1, 2], graph=GraphTier(5, 11)
    ),
    "tier_slack_absorbed_by_last_real_row": make_batch(
        [5, 3], [2, 1], 3, verify_lens=[2, 1], num_slots=3, graph=GraphTier(2, 6)
    ),
    "capped_tier_uncovered_tail": make_batch(
        [5, 3], [2, 1], 3, verify_lens=[2, 1], num_slots=3, graph=GraphTier(2, 6, cap=2), is_dspark=True
    ),
    "capped_tier_clamps_pad_row": make_batch(
        [5, 3], [2, 1], 3, verify_lens=[2, 1], num_slots=3, graph=GraphTier(3, 8, cap=2)
    ),
    "position_exactly_at_swa_window": make_batch([2], [1], 3, num_slots=2, is_dspark=True),
    "ring_wrap": make_batch([10], [2], 3, num_slots=3, width=16),
    "page_boundary_exact": make_batch([6], [1], 2, num_slots=2),
    "page_boundary_one_past": make_batch([7], [1], 2, num_slots=2),
    "req_to_token_minus_one_reads_sentinel": make_batch([4], [1], 2, num_slots=2, req_to_token=_sentinel_row()),
    # The last row's own tokens end at position 10; the 2 tokens of slack it absorbs reach
    # position 12, one past the table width (F2c: a literal window gather reads out of bounds).
    "absorbed_slack_past_table_width": make_batch(
        [5, 9], [2, 1], 3, verify_lens=[2, 2], num_slots=3, graph=GraphTier(2, 6)
    ),
}
"""Every named example, by name (the ``ids`` of parametrised tests)."""

RAGGED = "ragged_tier_slack_spread_over_pad_rows"
"""seq_lens [5, 3, 7], slots [2, 1, 3], verify [3, 1, 2], draft 3, tier 5 rows / 11 tokens."""
UNIFORM = "uniform_eagle_batch_of_three"
"""seq_lens [5, 3, 7], slots [2, 1, 3], draft 2, tier 4 rows / 8 tokens."""
