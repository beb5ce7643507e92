"""The reference builder on named, hand-derived worked examples (DESIGN.md section 2).

Every expected list below is written out by hand from the pipeline of DESIGN.md
section 2, on the tables of ``tests/_examples.py``: with a table width ``W``,
slot ``s`` keeps position ``p`` at full location ``s*W + p``, whose page is
``(s*W + p) // 4`` and whose SWA location is ``100 + s*W + p``.  The geometry is
page_size 4, swa_window 4 (rows padded with -1 to 8 columns), ring_size 6,
unified_swa_window 9.  The hip builder is then checked against the reference on
every variant of every example.
"""

from __future__ import annotations

import pytest
from _examples import EXAMPLES, GEOMETRY, make_batch

from metadata_builders import GraphTier, ReferenceBuilder, Variant, get_builder, variants_for
from metadata_builders.families.dsv4.metadata import fields_for, first_difference

PAD4 = [-1, -1, -1, -1]
"""swa_window 4 right-padded to page_index_align 8."""

# -- hand-derived fields ---------------------------------------------------------------

EXPECTED: dict[str, dict[str, dict[str, list]]] = {
    # seq_lens [5], slot 1, draft 2, W 12.  max_seq_len 5+2 = 7 -> page columns 0, 4.
    # Tokens sit at positions 5, 6; position 6 wraps the ring of 6 (6 % 6 = 0).
    "single_request": {
        "eager": {
            "seq_lens": [7],
            "extend_seq_lens": [2],
            "extend_start_loc": [0],
            "seq_lens_casual": [6, 7],  # 7 - 2 + 1 + j
            "positions_casual": [5, 6],
            "req_pool_indices_repeated": [1, 1],
            "swa_topk_lengths": [4, 4],
            "page_table": [[3, 4], [3, 4]],  # (12 + 0)//4, (12 + 4)//4
            "swa_page_indices": [[117, 116, 115, 114, *PAD4], [118, 117, 116, 115, *PAD4]],
            "raw_out_loc": [17, 18],
            "pf_state_slot": [1, 1],
            "pf_chunk_start": [5, 5],  # 7 - 2
            "pf_cu_q": [0, 0],
            "pf_final_pos": [6, 6],  # 7 - 1
            "verify_store_state_slot": [1, 1],
            "swa_loc": [11, 6],  # 1*6 + 5 % 6, 1*6 + 6 % 6
            "swa_out_cache_loc": [117, 118],  # full_to_swa[raw_out_loc] = 100 + loc; a pad's 0 -> the dummy slot 100
        },
    },
    # seq_lens [5, 3, 7], slots [2, 1, 3], draft 2, W 12; tier 4 rows x 2 = 8 tokens.
    # Eager max_seq_len 7+2 = 9 -> columns 0, 4, 8; graph max_context+2 = 14 -> min(14, 12) -> same columns.
    "uniform_eagle_batch_of_three": {
        "eager": {
            "seq_lens": [7, 5, 9],
            "extend_seq_lens": [2, 2, 2],
            "extend_start_loc": [0, 2, 4],
            "seq_lens_casual": [6, 7, 4, 5, 8, 9],
            "positions_casual": [5, 6, 3, 4, 7, 8],
            "req_pool_indices_repeated": [2, 2, 1, 1, 3, 3],
            "swa_topk_lengths": [4, 4, 4, 4, 4, 4],
            "page_table": [[6, 7, 8], [6, 7, 8], [3, 4, 5], [3, 4, 5], [9, 10, 11], [9, 10, 11]],
            "swa_page_indices": [
                [129, 128, 127, 126, *PAD4],  # slot 2 (base 124), position 5
                [130, 129, 128, 127, *PAD4],
                [115, 114, 113, 112, *PAD4],  # slot 1 (base 112), position 3
                [116, 115, 114, 113, *PAD4],
                [143, 142, 141, 140, *PAD4],  # slot 3 (base 136), position 7
                [144, 143, 142, 141, *PAD4],
            ],
            "raw_out_loc": [29, 30, 15, 16, 43, 44],
            "pf_state_slot": [2, 2, 1, 1, 3, 3],
            "pf_chunk_start": [5, 5, 3, 3, 7, 7],
            "pf_cu_q": [0, 0, 2, 2, 4, 4],
            "pf_final_pos": [6, 6, 4, 4, 8, 8],
            "verify_store_state_slot": [2, 2, 1, 1, 3, 3],
            "swa_loc": [17, 12, 9, 10, 19, 20],  # 12+5, 12+0, 6+3, 6+4, 18+1, 18+2
            "swa_out_cache_loc": [129, 130, 115, 116, 143, 144],
        },
        # One pad row: seq_len 1, slot 0, 2 verify tokens at positions 1, 2.
        "graph": {
            "seq_lens": [7, 5, 9, 3],
            "extend_seq_lens": [2, 2, 2, 2],
            "extend_start_loc": [0, 2, 4, 6],
            "seq_lens_casual": [6, 7, 4, 5, 8, 9, 2, 3],
            "positions_casual": [5, 6, 3, 4, 7, 8, 1, 2],
            "req_pool_indices_repeated": [2, 2, 1, 1, 3, 3, 0, 0],
            "swa_topk_lengths": [4, 4, 4, 4, 4, 4, 2, 3],
            "page_table": [
                [6, 7, 8], [6, 7, 8], [3, 4, 5], [3, 4, 5], [9, 10, 11], [9, 10, 11], [0, 1, 2], [0, 1, 2],
            ],
            "swa_page_indices": [
                [129, 128, 127, 126, *PAD4],
                [130, 129, 128, 127, *PAD4],
                [115, 114, 113, 112, *PAD4],
                [116, 115, 114, 113, *PAD4],
                [143, 142, 141, 140, *PAD4],
                [144, 143, 142, 141, *PAD4],
                [101, 100, -1, -1, *PAD4],  # slot 0, position 1: positions 0, 1 only
                [102, 101, 100, -1, *PAD4],
            ],
            "raw_out_loc": [29, 30, 15, 16, 43, 44, 0, 0],
            "pf_state_slot": [2, 2, 1, 1, 3, 3, 0, 0],
            "pf_chunk_start": [5, 5, 3, 3, 7, 7, 1, 1],
            "pf_cu_q": [0, 0, 2, 2, 4, 4, 6, 6],
            "pf_final_pos": [6, 6, 4, 4, 8, 8, 2, 2],
            "verify_store_state_slot": [2, 2, 1, 1, 3, 3, 0, 0],
            "swa_loc": [17, 12, 9, 10, 19, 20, 1, 2],
            "swa_out_cache_loc": [129, 130, 115, 116, 143, 144, 100, 100],
        },
    },
    # seq_lens [5, 3, 7], slots [2, 1, 3], verify [3, 1, 2], draft 3; tier 5 rows / 11 tokens, no cap.
    # leftover 11 - 6 = 5 over 2 pad rows: base 2, the first 5 % 2 = 1 pad row gets 3 -> extend [3, 1, 2, 3, 2].
    "ragged_tier_slack_spread_over_pad_rows": {
        # Eager: max_seq_len 7+3 = 10 -> columns 0, 4, 8.
        "eager": {
            "seq_lens": [8, 4, 9],
            "extend_seq_lens": [3, 1, 2],
            "extend_start_loc": [0, 3, 4],
            "seq_lens_casual": [6, 7, 8, 4, 8, 9],
            "positions_casual": [5, 6, 7, 3, 7, 8],
            "req_pool_indices_repeated": [2, 2, 2, 1, 3, 3],
            "swa_topk_lengths": [4, 4, 4, 4, 4, 4],
            "page_table": [[6, 7, 8], [6, 7, 8], [6, 7, 8], [3, 4, 5], [9, 10, 11], [9, 10, 11]],
            "swa_page_indices": [
                [129, 128, 127, 126, *PAD4],
                [130, 129, 128, 127, *PAD4],
                [131, 130, 129, 128, *PAD4],
                [115, 114, 113, 112, *PAD4],
                [143, 142, 141, 140, *PAD4],
                [144, 143, 142, 141, *PAD4],
            ],
            "raw_out_loc": [29, 30, 31, 15, 43, 44],
            "pf_state_slot": [2, 2, 2, 1, 3, 3],
            "pf_chunk_start": [5, 5, 5, 3, 7, 7],
            "pf_cu_q": [0, 0, 0, 3, 4, 4],
            "pf_final_pos": [7, 7, 7, 3, 8, 8],
            "verify_store_state_slot": [2, 2, 2, 1, 3, 3],
            "swa_loc": [17, 12, 13, 9, 19, 20],
            "swa_out_cache_loc": [129, 130, 131, 115, 143, 144],
        },
        # Graph: pad rows seq_len 1 + 3 = 4 and 1 + 2 = 3, slot 0; 11 tokens, no uncovered tail.
        "graph": {
            "seq_lens": [8, 4, 9, 4, 3],
            "extend_seq_lens": [3, 1, 2, 3, 2],
            "extend_start_loc": [0, 3, 4, 6, 9],
            "seq_lens_casual": [6, 7, 8, 4, 8, 9, 2, 3, 4, 2, 3],
            "positions_casual": [5, 6, 7, 3, 7, 8, 1, 2, 3, 1, 2],
            "req_pool_indices_repeated": [2, 2, 2, 1, 3, 3, 0, 0, 0, 0, 0],
            "swa_topk_lengths": [4, 4, 4, 4, 4, 4, 2, 3, 4, 2, 3],
            "page_table": [
                [6, 7, 8], [6, 7, 8], [6, 7, 8], [3, 4, 5], [9, 10, 11], [9, 10, 11],
                [0, 1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 2],
            ],
            "swa_page_indices": [
                [129, 128, 127, 126, *PAD4],
                [130, 129, 128, 127, *PAD4],
                [131, 130, 129, 128, *PAD4],
                [115, 114, 113, 112, *PAD4],
                [143, 142, 141, 140, *PAD4],
                [144, 143, 142, 141, *PAD4],
                [101, 100, -1, -1, *PAD4],
                [102, 101, 100, -1, *PAD4],
                [103, 102, 101, 100, *PAD4],
                [101, 100, -1, -1, *PAD4],
                [102, 101, 100, -1, *PAD4],
            ],
            "raw_out_loc": [29, 30, 31, 15, 43, 44, 0, 0, 0, 0, 0],
            "pf_state_slot": [2, 2, 2, 1, 3, 3, 0, 0, 0, 0, 0],
            "pf_chunk_start": [5, 5, 5, 3, 7, 7, 1, 1, 1, 1, 1],
            "pf_cu_q": [0, 0, 0, 3, 4, 4, 6, 6, 6, 9, 9],
            "pf_final_pos": [7, 7, 7, 3, 8, 8, 3, 3, 3, 2, 2],
            "verify_store_state_slot": [2, 2, 2, 1, 3, 3, 0, 0, 0, 0, 0],
            "swa_loc": [17, 12, 13, 9, 19, 20, 1, 2, 3, 1, 2],
            "swa_out_cache_loc": [129, 130, 131, 115, 143, 144, 100, 100, 100, 100, 100],
        },
    },
    # seq_lens [5, 3], slots [2, 1], verify [2, 1], draft 3; tier 2 rows / 6 tokens, no cap, no pad rows:
    # the last real row absorbs the leftover 6 - 3 = 3 -> extend [2, 4].
    "tier_slack_absorbed_by_last_real_row": {
        # Eager: max_seq_len 5+3 = 8 -> columns 0, 4.
        "eager": {
            "seq_lens": [7, 4],
            "extend_seq_lens": [2, 1],
            "extend_start_loc": [0, 2],
            "seq_lens_casual": [6, 7, 4],
            "positions_casual": [5, 6, 3],
            "req_pool_indices_repeated": [2, 2, 1],
            "swa_topk_lengths": [4, 4, 4],
            "page_table": [[6, 7], [6, 7], [3, 4]],
            "swa_page_indices": [
                [129, 128, 127, 126, *PAD4],
                [130, 129, 128, 127, *PAD4],
                [115, 114, 113, 112, *PAD4],
            ],
            "raw_out_loc": [29, 30, 15],
            "pf_state_slot": [2, 2, 1],
            "pf_chunk_start": [5, 5, 3],
            "pf_cu_q": [0, 0, 2],
            "pf_final_pos": [6, 6, 3],
            "verify_store_state_slot": [2, 2, 1],
            "swa_loc": [17, 12, 9],
            "swa_out_cache_loc": [129, 130, 115],
        },
        # Graph: row 1 verifies positions 3..6 (its seq_len becomes 3 + 4 = 7).
        "graph": {
            "seq_lens": [7, 7],
            "extend_seq_lens": [2, 4],
            "extend_start_loc": [0, 2],
            "seq_lens_casual": [6, 7, 4, 5, 6, 7],
            "positions_casual": [5, 6, 3, 4, 5, 6],
            "req_pool_indices_repeated": [2, 2, 1, 1, 1, 1],
            "swa_topk_lengths": [4, 4, 4, 4, 4, 4],
            "page_table": [[6, 7, 8], [6, 7, 8], [3, 4, 5], [3, 4, 5], [3, 4, 5], [3, 4, 5]],
            "swa_page_indices": [
                [129, 128, 127, 126, *PAD4],
                [130, 129, 128, 127, *PAD4],
                [115, 114, 113, 112, *PAD4],
                [116, 115, 114, 113, *PAD4],
                [117, 116, 115, 114, *PAD4],
                [118, 117, 116, 115, *PAD4],
            ],
            "raw_out_loc": [29, 30, 15, 0, 0, 0],
            "pf_state_slot": [2, 2, 1, 1, 1, 1],
            "pf_chunk_start": [5, 5, 3, 3, 3, 3],
            "pf_cu_q": [0, 0, 2, 2, 2, 2],
            "pf_final_pos": [6, 6, 6, 6, 6, 6],  # row 1: 7 - 1 (eager has 3: the documented P5 exception)
            "verify_store_state_slot": [2, 2, 1, 1, 1, 1],
            "swa_loc": [17, 12, 9, 10, 11, 6],
            "swa_out_cache_loc": [129, 130, 115, 100, 100, 100],
        },
    },
    # Same requests, tier 2 rows / 6 tokens with cap 2 and no pad rows: the last row absorbs the
    # leftover 3 and is clamped back to the cap (F2: absorb, then clamp), so extend is [2, 2],
    # num_tokens = 4 (device sum) and tokens 4..5 are an uncovered tail.  Row 1's second token
    # (position 4) is absorbed slack: it has no out_cache_loc of its own (0).
    "capped_tier_uncovered_tail": {
        "graph": {
            "seq_lens": [7, 5],
            "extend_seq_lens": [2, 2],
            "extend_start_loc": [0, 2],
            "seq_lens_casual": [6, 7, 4, 5, 1, 1],  # tail: seq_lens_casual 1
            "positions_casual": [5, 6, 3, 4, 0, 0],
            "req_pool_indices_repeated": [2, 2, 1, 1, 1, 1],  # tail: slot of the last row (slot 1)
            "swa_topk_lengths": [4, 4, 4, 4, 1, 1],
            "page_table": [[6, 7, 8], [6, 7, 8], [3, 4, 5], [3, 4, 5], [3, 4, 5], [3, 4, 5]],
            "swa_page_indices": [
                [129, 128, 127, 126, *PAD4],
                [130, 129, 128, 127, *PAD4],
                [115, 114, 113, 112, *PAD4],
                [116, 115, 114, 113, *PAD4],
                [112, -1, -1, -1, *PAD4],  # slot 1, position 0
                [112, -1, -1, -1, *PAD4],
            ],
            "raw_out_loc": [29, 30, 15, 0, 0, 0],
            "pf_state_slot": [2, 2, 1, 1, 1, 1],  # tail keeps its repeated slot
            "pf_chunk_start": [5, 5, 3, 3, 0, 0],
            "pf_cu_q": [0, 0, 2, 2, 0, 0],
            "pf_final_pos": [6, 6, 4, 4, 9, 9],  # tail: unified_swa_window
            "verify_store_state_slot": [2, 2, 1, 1, 1, 1],
            "swa_loc": [17, 12, 9, 10, 6, 6],
            "swa_out_cache_loc": [129, 130, 115, 100, 100, 100],
        },
    },
    # Same requests, tier 3 rows / 8 tokens, cap 2: leftover 5 on the one pad row, clamped to 2,
    # extend [2, 1, 2], num_tokens 5, tokens 5..7 uncovered (last row is the pad row: slot 0).
    "capped_tier_clamps_pad_row": {
        "graph": {
            "seq_lens": [7, 4, 3],
            "extend_seq_lens": [2, 1, 2],
            "extend_start_loc": [0, 2, 3],
            "seq_lens_casual": [6, 7, 4, 2, 3, 1, 1, 1],
            "positions_casual": [5, 6, 3, 1, 2, 0, 0, 0],
            "req_pool_indices_repeated": [2, 2, 1, 0, 0, 0, 0, 0],
            "swa_topk_lengths": [4, 4, 4, 2, 3, 1, 1, 1],
            "page_table": [
                [6, 7, 8], [6, 7, 8], [3, 4, 5], [0, 1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 2],
            ],
            "swa_page_indices": [
                [129, 128, 127, 126, *PAD4],
                [130, 129, 128, 127, *PAD4],
                [115, 114, 113, 112, *PAD4],
                [101, 100, -1, -1, *PAD4],
                [102, 101, 100, -1, *PAD4],
                [100, -1, -1, -1, *PAD4],
                [100, -1, -1, -1, *PAD4],
                [100, -1, -1, -1, *PAD4],
            ],
            "raw_out_loc": [29, 30, 15, 0, 0, 0, 0, 0],
            "pf_state_slot": [2, 2, 1, 0, 0, 0, 0, 0],
            "pf_chunk_start": [5, 5, 3, 1, 1, 0, 0, 0],
            "pf_cu_q": [0, 0, 2, 3, 3, 0, 0, 0],
            "pf_final_pos": [6, 6, 3, 2, 2, 9, 9, 9],
            "verify_store_state_slot": [2, 2, 1, 0, 0, 0, 0, 0],
            "swa_loc": [17, 12, 9, 1, 2, 0, 0, 0],
            "swa_out_cache_loc": [129, 130, 115, 100, 100, 100, 100, 100],
        },
    },
    # seq_lens [2], slot 1, draft 3: seq_lens_casual 3, 4, 5 straddle swa_window 4;
    # position 3 is the first whose window reaches exactly back to position 0.
    "position_exactly_at_swa_window": {
        "eager": {
            "seq_lens": [5],
            "extend_seq_lens": [3],
            "extend_start_loc": [0],
            "seq_lens_casual": [3, 4, 5],
            "positions_casual": [2, 3, 4],
            "req_pool_indices_repeated": [1, 1, 1],
            "swa_topk_lengths": [3, 4, 4],
            "page_table": [[3, 4], [3, 4], [3, 4]],  # max_seq_len 5 -> columns 0, 4
            "swa_page_indices": [
                [114, 113, 112, -1, *PAD4],
                [115, 114, 113, 112, *PAD4],
                [116, 115, 114, 113, *PAD4],
            ],
            "raw_out_loc": [14, 15, 16],
            "pf_state_slot": [1, 1, 1],
            "pf_chunk_start": [2, 2, 2],
            "pf_cu_q": [0, 0, 0],
            "pf_final_pos": [4, 4, 4],
            "verify_store_state_slot": [1, 1, 1],
            "swa_loc": [8, 9, 10],
            "swa_out_cache_loc": [114, 115, 116],
        },
    },
    # seq_lens [10], slot 2, draft 3, W 16: positions 10, 11, 12 all >= ring_size 6.
    "ring_wrap": {
        "eager": {
            "seq_lens": [13],
            "extend_seq_lens": [3],
            "extend_start_loc": [0],
            "seq_lens_casual": [11, 12, 13],
            "positions_casual": [10, 11, 12],
            "req_pool_indices_repeated": [2, 2, 2],
            "swa_topk_lengths": [4, 4, 4],
            "page_table": [[8, 9, 10, 11]] * 3,  # max_seq_len 13 -> columns 0, 4, 8, 12 of base 32
            "swa_page_indices": [
                [142, 141, 140, 139, *PAD4],
                [143, 142, 141, 140, *PAD4],
                [144, 143, 142, 141, *PAD4],
            ],
            "raw_out_loc": [42, 43, 44],
            "pf_state_slot": [2, 2, 2],
            "pf_chunk_start": [10, 10, 10],
            "pf_cu_q": [0, 0, 0],
            "pf_final_pos": [12, 12, 12],
            "verify_store_state_slot": [2, 2, 2],
            "swa_loc": [16, 17, 12],  # 2*6 + (10 % 6, 11 % 6, 12 % 6)
            "swa_out_cache_loc": [142, 143, 144],
        },
    },
    # seq_lens [6], draft 2: max_seq_len 8 = 2 pages exactly -> columns 0, 4 (not 8).
    "page_boundary_exact": {
        "eager": {
            "seq_lens": [8],
            "extend_seq_lens": [2],
            "extend_start_loc": [0],
            "seq_lens_casual": [7, 8],
            "positions_casual": [6, 7],
            "req_pool_indices_repeated": [1, 1],
            "swa_topk_lengths": [4, 4],
            "page_table": [[3, 4], [3, 4]],
            "swa_page_indices": [[118, 117, 116, 115, *PAD4], [119, 118, 117, 116, *PAD4]],
            "raw_out_loc": [18, 19],
            "pf_state_slot": [1, 1],
            "pf_chunk_start": [6, 6],
            "pf_cu_q": [0, 0],
            "pf_final_pos": [7, 7],
            "verify_store_state_slot": [1, 1],
            "swa_loc": [6, 7],
            "swa_out_cache_loc": [118, 119],
        },
    },
    # seq_lens [7], draft 2: max_seq_len 9, one past 2 pages -> columns 0, 4, 8.
    "page_boundary_one_past": {
        "eager": {
            "seq_lens": [9],
            "extend_seq_lens": [2],
            "extend_start_loc": [0],
            "seq_lens_casual": [8, 9],
            "positions_casual": [7, 8],
            "req_pool_indices_repeated": [1, 1],
            "swa_topk_lengths": [4, 4],
            "page_table": [[3, 4, 5], [3, 4, 5]],
            "swa_page_indices": [[119, 118, 117, 116, *PAD4], [120, 119, 118, 117, *PAD4]],
            "raw_out_loc": [19, 20],
            "pf_state_slot": [1, 1],
            "pf_chunk_start": [7, 7],
            "pf_cu_q": [0, 0],
            "pf_final_pos": [8, 8],
            "verify_store_state_slot": [1, 1],
            "swa_loc": [7, 8],
            "swa_out_cache_loc": [119, 120],
        },
    },
    # Slot 1's row is [-1, 13, -1, 15, 16, 17, ...]: a -1 entry reads full_to_swa[-1], the -1 sentinel,
    # and pages as -1 // 4 = -1.  seq_lens [4], draft 2: positions 4, 5; max_seq_len 6 -> columns 0, 4.
    "req_to_token_minus_one_reads_sentinel": {
        "eager": {
            "seq_lens": [6],
            "extend_seq_lens": [2],
            "extend_start_loc": [0],
            "seq_lens_casual": [5, 6],
            "positions_casual": [4, 5],
            "req_pool_indices_repeated": [1, 1],
            "swa_topk_lengths": [4, 4],
            "page_table": [[-1, 4], [-1, 4]],
            "swa_page_indices": [[116, 115, -1, 113, *PAD4], [117, 116, 115, -1, *PAD4]],
            "raw_out_loc": [16, 17],
            "pf_state_slot": [1, 1],
            "pf_chunk_start": [4, 4],
            "pf_cu_q": [0, 0],
            "pf_final_pos": [5, 5],
            "verify_store_state_slot": [1, 1],
            "swa_loc": [10, 11],
            "swa_out_cache_loc": [116, 117],
        },
    },
}

# -- hand-derived decisions -------------------------------------------------------------

# Per path: (num_tokens, exact before the gate, max_seq_len after += draft, ragged total read from device).
# A ragged eager batch's exactness is the layout_total knob, so its entry leaves exact/device as None.
LAYOUTS: dict[str, dict[str, tuple[int, bool | None, int, bool | None]]] = {
    "single_request": {"eager": (2, True, 7, False)},
    "uniform_eagle_batch_of_three": {"eager": (6, True, 9, False), "graph": (8, True, 14, False)},
    "ragged_tier_slack_spread_over_pad_rows": {"eager": (6, None, 10, None), "graph": (11, False, 15, False)},
    "tier_slack_absorbed_by_last_real_row": {"eager": (3, None, 8, None), "graph": (6, False, 15, False)},
    "capped_tier_uncovered_tail": {"eager": (3, None, 8, None), "graph": (4, True, 15, True)},
    "capped_tier_clamps_pad_row": {"eager": (3, None, 8, None), "graph": (5, True, 15, True)},
    "position_exactly_at_swa_window": {"eager": (3, True, 5, False)},
    "ring_wrap": {"eager": (3, True, 13, False)},
    "page_boundary_exact": {"eager": (2, True, 8, False)},
    "page_boundary_one_past": {"eager": (2, True, 9, False)},
    "req_to_token_minus_one_reads_sentinel": {"eager": (2, True, 6, False)},
    "absorbed_slack_past_table_width": {"eager": (4, None, 12, None), "graph": (6, False, 15, False)},
}


def _expected_decision(name: str, variant: Variant) -> tuple[int, bool, bool, int, int]:
    """(num_tokens, exact_num_tokens, used_output_size, max_seq_len, host syncs) by DESIGN.md's rules."""
    batch = EXAMPLES[name]
    num_tokens, exact, max_seq_len, from_device = LAYOUTS[name][variant.path]
    if exact is None:
        exact = from_device = variant.layout_total == "device"
    gated = {"dspark": exact and batch.is_dspark, "ungated": exact, "always_sync": False}[variant.gate]
    syncs = int(not batch.is_ragged and variant.mirror == "tolist") + int(bool(from_device)) + int(not gated)
    return num_tokens, gated, gated, max_seq_len, syncs


CASES = [(name, path) for name, paths in EXPECTED.items() for path in paths]


@pytest.mark.parametrize(("name", "path"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_reference_fields_match_hand_derivation(name: str, path: str) -> None:
    """Every variant of the path gives, field by field, the hand-derived metadata (absorb_then_clamp's tiers)."""
    batch = EXAMPLES[name]
    expected = EXPECTED[name][path]
    assert set(expected) == set(fields_for(batch.geometry))
    reference = ReferenceBuilder("absorb_then_clamp")
    for variant in [v for v in variants_for(batch) if v.path == path]:
        fields = reference.build(batch, variant).fields
        for field in fields_for(batch.geometry):
            assert fields[field] == expected[field], f"{variant.label}: {field}"


@pytest.mark.parametrize("name", list(EXAMPLES), ids=list(EXAMPLES))
def test_reference_decision_and_sync_contract(name: str) -> None:
    """The decision and the audit's host-sync count follow the gate rule and the sync contract (absorb_then_clamp)."""
    batch = EXAMPLES[name]
    reference = ReferenceBuilder("absorb_then_clamp")
    for variant in variants_for(batch):
        result = reference.build(batch, variant)
        d = result.decision
        actual = (d.num_tokens, d.exact_num_tokens, d.used_output_size, d.max_seq_len, len(result.audit.host_syncs))
        assert actual == _expected_decision(name, variant), variant.label
        assert [f for f in result.audit.faults if f.kind != "oob_read"] == [], variant.label


def test_slack_absorbed_past_the_table_width_is_reported_as_an_out_of_bounds_read() -> None:
    """F2c: the model never gathers past req_to_token's width (-1 there) and counts what a literal gather reads.

    Row 1 (slot 1, seq_len 9) absorbs 2 tokens of slack on the 2-row, 6-token tier: positions 9..12 of
    a 12-wide row.  Position 12's window (4 columns: 12, 11, 10, 9) has one column past the width.
    """
    batch = EXAMPLES["absorbed_slack_past_table_width"]
    for padding in ("absorb_then_clamp", "full_coverage"):
        md = ReferenceBuilder(padding).build(batch, Variant("graph"))
        assert md.fields["positions_casual"][2:] == [9, 10, 11, 12]
        assert md.fields["swa_page_indices"][5][:4] == [-1, 100 + 23, 100 + 22, 100 + 21]
        assert [(f.kind, f.count) for f in md.audit.faults] == [("oob_read", 1)]
    assert get_builder("reference").build(batch, Variant("eager")).audit.faults == []
    # The specification's own convention never widens a real row: no read past the table, a 2-token tail.
    md = get_builder("reference").build(batch, Variant("graph"))
    assert md.audit.faults == [] and md.fields["positions_casual"] == [5, 6, 9, 10, 0, 0]


# (example, variant, (num_tokens, exact_num_tokens, used_output_size, max_seq_len, host syncs)), all by hand.
DECISION_TABLE = [
    # EAGLE uniform: exact, but the dspark gate refuses output_size -> the token map syncs.
    ("single_request", Variant("eager", "host", "host", "dspark"), (2, False, False, 7, 1)),
    ("single_request", Variant("eager", "host", "host", "ungated"), (2, True, True, 7, 0)),
    ("single_request", Variant("eager", "tolist", "host", "ungated"), (2, True, True, 7, 1)),
    ("single_request", Variant("eager", "tolist", "host", "always_sync"), (2, False, False, 7, 2)),
    ("single_request", Variant("eager", "device", "host", "always_sync"), (2, False, False, 7, 1)),
    ("uniform_eagle_batch_of_three", Variant("graph", "device", "host", "ungated"), (8, True, True, 14, 0)),
    ("uniform_eagle_batch_of_three", Variant("graph", "tolist", "host", "dspark"), (8, False, False, 14, 2)),
    # DSpark uniform: the gate lets output_size through; tolist is the only sync left.
    ("position_exactly_at_swa_window", Variant("eager", "tolist", "host", "dspark"), (3, True, True, 5, 1)),
    ("position_exactly_at_swa_window", Variant("eager", "host", "host", "dspark"), (3, True, True, 5, 0)),
    # Ragged eager: a host total is never exact; a device total costs an .item().
    ("ragged_tier_slack_spread_over_pad_rows", Variant("eager", "host", "host", "ungated"), (6, False, False, 10, 1)),
    ("ragged_tier_slack_spread_over_pad_rows", Variant("eager", "host", "device", "ungated"), (6, True, True, 10, 1)),
    ("ragged_tier_slack_spread_over_pad_rows", Variant("eager", "host", "device", "dspark"), (6, False, False, 10, 2)),
    # An uncapped tier carries its total: never output_size, whatever the gate.
    ("ragged_tier_slack_spread_over_pad_rows", Variant("graph", "host", "host", "ungated"), (11, False, False, 15, 1)),
    ("tier_slack_absorbed_by_last_real_row", Variant("graph", "host", "host", "ungated"), (6, False, False, 15, 1)),
    # A capped tier reads the device sum (.item()); DSpark then passes output_size.
    ("capped_tier_uncovered_tail", Variant("graph", "host", "host", "dspark"), (4, True, True, 15, 1)),
    ("capped_tier_uncovered_tail", Variant("graph", "host", "host", "always_sync"), (4, False, False, 15, 2)),
    ("capped_tier_clamps_pad_row", Variant("graph", "host", "host", "dspark"), (5, False, False, 15, 2)),
    ("capped_tier_clamps_pad_row", Variant("graph", "host", "host", "ungated"), (5, True, True, 15, 1)),
]


@pytest.mark.parametrize(
    ("name", "variant", "expected"), DECISION_TABLE, ids=[f"{n}-{v.label}" for n, v, _ in DECISION_TABLE]
)
def test_reference_decision_table(name: str, variant: Variant, expected: tuple) -> None:
    """Selected variants report the hand-derived decision and number of host syncs (absorb_then_clamp)."""
    result = ReferenceBuilder("absorb_then_clamp").build(EXAMPLES[name], variant)
    d = result.decision
    assert (d.num_tokens, d.exact_num_tokens, d.used_output_size, d.max_seq_len) == expected[:4]
    assert len(result.audit.host_syncs) == expected[4]


@pytest.mark.parametrize("name", list(EXAMPLES), ids=list(EXAMPLES))
def test_hip_equals_reference_on_every_variant(name: str) -> None:
    """The hip builder gives the reference's fields, decision, sync count and faults on every variant."""
    batch = EXAMPLES[name]
    reference, hip = get_builder("reference"), get_builder("hip")
    for variant in variants_for(batch):
        want, got = reference.build(batch, variant), hip.build(batch, variant)
        mismatch = first_difference(want.fields, got.fields)
        assert mismatch is None, f"{variant.label}: {mismatch}"
        assert got.decision == want.decision, variant.label
        assert len(got.audit.host_syncs) == len(want.audit.host_syncs), (
            variant.label, got.audit.host_syncs, want.audit.host_syncs
        )
        # The model counts a literal gather's out-of-bounds reads (F2c); hip guards them.
        assert got.audit.faults == [f for f in want.audit.faults if f.kind != "oob_read"], variant.label


def test_uniform_tier_wider_than_its_rows_leaves_an_inert_uncovered_tail():
    """A uniform tier with more tokens than padded_bs*num_draft pads the rest as inert tail tokens."""
    from metadata_builders.families.dsv4.properties import run_all

    batch = make_batch([5, 3, 7], [2, 1, 3], 3, graph=GraphTier(4, 14))
    md = get_builder("reference").build(batch, Variant("graph"))
    assert md.decision.num_tokens == 12
    assert md.fields["seq_lens_casual"][12:] == [1, 1]
    assert md.fields["pf_final_pos"][12:] == [GEOMETRY.unified_swa_window] * 2
    assert md.fields["req_pool_indices_repeated"][12:] == [0, 0]
    hip = get_builder("hip")
    assert all(r.failure is None for r in run_all(hip, batch).values())


# -- the three tier padding conventions, by hand (metadata_builders/families/dsv4/tier.py's table) ---------------------

# (example, convention) -> (extend_seq_lens, num_tokens, exact before the gate, ragged total read from the device)
CONVENTIONS = {
    # 2 real rows [2, 1], no pad rows, tier of 6 tokens: who takes the 3 left over?
    ("tier_slack_absorbed_by_last_real_row", "absorb_then_clamp"): ([2, 4], 6, False, False),
    ("tier_slack_absorbed_by_last_real_row", "full_coverage"): ([2, 4], 6, False, False),
    ("tier_slack_absorbed_by_last_real_row", "pad_rows_only"): ([2, 1], 3, False, False),
    # the same, capped at 2: clamped (and read back), ignored, or never reached a real row
    ("capped_tier_uncovered_tail", "absorb_then_clamp"): ([2, 2], 4, True, True),
    ("capped_tier_uncovered_tail", "full_coverage"): ([2, 4], 6, False, False),
    ("capped_tier_uncovered_tail", "pad_rows_only"): ([2, 1], 3, False, False),
    # 3 rows, 8 tokens, cap 2: the pad row takes 5, clamped to 2 -- except where the cap is ignored
    ("capped_tier_clamps_pad_row", "absorb_then_clamp"): ([2, 1, 2], 5, True, True),
    ("capped_tier_clamps_pad_row", "full_coverage"): ([2, 1, 5], 8, False, False),
    ("capped_tier_clamps_pad_row", "pad_rows_only"): ([2, 1, 2], 5, False, False),
}


@pytest.mark.parametrize(("name", "padding"), list(CONVENTIONS), ids=[f"{n}-{p}" for n, p in CONVENTIONS])
def test_each_padding_convention_pads_a_tier_as_derived_by_hand(name: str, padding: str) -> None:
    """absorb_then_clamp, full_coverage and pad_rows_only pad one tier three ways; real tokens map the same."""
    batch = EXAMPLES[name]
    extend, num_tokens, exact, from_device = CONVENTIONS[(name, padding)]
    variant = Variant("graph", "host", "host", "ungated")
    md = ReferenceBuilder(padding).build(batch, variant)
    assert md.fields["extend_seq_lens"] == extend and md.decision.num_tokens == num_tokens
    assert md.decision.exact_num_tokens == exact
    assert any(s.stage == "verify_extension" for s in md.audit.host_syncs) == from_device
    absorb = ReferenceBuilder("absorb_then_clamp").build(batch, variant).fields
    real = batch.num_real_tokens
    assert md.fields["req_pool_indices_repeated"][:real] == absorb["req_pool_indices_repeated"][:real]
    assert md.fields["positions_casual"][:real] == absorb["positions_casual"][:real]
    if num_tokens < len(md.fields["seq_lens_casual"]):  # an uncovered tail: inert
        assert set(md.fields["seq_lens_casual"][num_tokens:]) == {1}
        assert set(md.fields["pf_final_pos"][num_tokens:]) == {batch.geometry.unified_swa_window}


def test_the_draft_extend_reference_gives_its_worked_example() -> None:
    """reference/draft_extend.py's docstring: slots 1 and 2, prefixes 7 and 3, n = 3, a 4-row tier (two pad rows of
    length 1 *with* their three tokens: casual 2 - n + j)."""
    from _examples import kv_tables

    from metadata_builders import Geometry, GraphTier, VerifyBatch
    from metadata_builders.families.dsv4.reference.draft_extend import FIELDS, draft_extend_fields

    table, full_to_swa = kv_tables(4, 12)
    batch = VerifyBatch(seq_lens=[7, 3], req_pool_indices=[1, 2], verify_lens=None, num_draft_tokens=3,
                        out_cache_loc=[19, 20, 21, 27, 28, 29], req_to_token=table, full_to_swa=full_to_swa,
                        geometry=Geometry(), graph=GraphTier(4, 12), mode="draft_extend")
    graph = draft_extend_fields(batch, graph=True)
    assert tuple(graph) == FIELDS
    assert graph["seq_lens_casual"] == graph["swa_topk_lengths"] == [8, 9, 10, 4, 5, 6, -1, 0, 1, -1, 0, 1]
    assert graph["pf_chunk_start"] == [7, 7, 7, 3, 3, 3, -2, -2, -2, -2, -2, -2]
    assert graph["pf_final_pos"] == [9, 9, 9, 5, 5, 5, 0, 0, 0, 0, 0, 0]
    assert graph["raw_out_loc"] == [19, 20, 21, 27, 28, 29] + [0] * 6
    assert all(len(row) == 1 for row in graph["page_table"])  # max_seq_len = page_size: one column
    assert all(set(row) == {-1} for row in graph["swa_page_indices"][6:8])  # a length <= 0 reads nothing
    eager = draft_extend_fields(batch)
    assert eager["seq_lens_casual"] == [8, 9, 10, 4, 5, 6] and eager["pf_cu_q"] == [0, 0, 0, 3, 3, 3]


def test_the_in_graph_blocks_worked_example() -> None:
    """reference/in_graph.py's example: the forward batch's positions (a pad row's at 0, not its causal 1, 2) and the
    paged SWA targets (a pad's 0 translated to the dummy slot full_to_swa[0] = 100)."""
    from metadata_builders.families.dsv4.reference.in_graph import forward_positions, swa_out_cache_loc

    batch = make_batch([5, 3], [2, 1], 2, width=20, graph=GraphTier(3, 6))
    assert batch.out_cache_loc == (45, 46, 23, 24)
    assert forward_positions(batch, 6) == [5, 6, 3, 4, 0, 0] and forward_positions(batch, 4) == [5, 6, 3, 4]
    fields = ReferenceBuilder().build(batch, Variant("graph")).fields
    assert fields["positions_casual"] == [5, 6, 3, 4, 1, 2]
    assert fields["raw_out_loc"] == [45, 46, 23, 24, 0, 0]
    assert fields["swa_out_cache_loc"] == swa_out_cache_loc(batch.full_to_swa, fields["raw_out_loc"]) == \
        [145, 146, 123, 124, 100, 100]


def test_a_dspark_draft_worker_verifies_its_active_width_not_its_configured_count() -> None:
    """Upstream's DSpark draft worker configures gamma + 1 and verifies gamma a request: the reference and ``hip``
    build it as the target worker's batch of gamma drafts, on every variant (the configured count reads nothing)."""
    draft = make_batch([5, 3, 7], [2, 1, 3], 3, is_dspark=True, graph=GraphTier(4, 12)).replace(
        speculative_num_draft_tokens=4)
    twin = draft.replace(speculative_num_draft_tokens=None)
    for name in ("reference", "hip"):
        builder = get_builder(name)
        for variant in variants_for(draft):
            got, want = builder.build(draft, variant), builder.build(twin, variant)
            assert got.fields == want.fields and got.decision == want.decision, (name, variant)
            assert got.fields["extend_seq_lens"][:3] == [3, 3, 3]
            assert got.decision.num_tokens == 3 * len(got.fields["seq_lens"]), (name, variant)
