"""The reference builder's metadata on the named examples, written out by hand (tests/dsv4/test_reference.py).

Every expected list below is written out by hand from the pipeline of DESIGN.md
section 2, on the tables of ``tests/_examples.py``: with a table width ``W``,
slot ``s`` keeps position ``p`` at full location ``s*W + p``, whose page is
``(s*W + p) // 4`` and whose SWA location is ``100 + s*W + p``.  The geometry is
page_size 4, swa_window 4 (rows padded with -1 to 8 columns), ring_size 6,
unified_swa_window 9.
"""

from __future__ import annotations

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
