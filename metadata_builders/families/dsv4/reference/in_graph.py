"""What upstream's in-graph block adds to a target-verify or decode build, in pure Python.

Every step's metadata is finished by ``init_forward_metadata_in_graph`` (SGLang 0.5.23: in
the graph on the graph path, right after the entry point through the eager dispatcher).  It
reads the **forward batch**, not the metadata:

* ``swa_out_cache_loc = full_to_swa[out_cache_loc]`` (int32): where each token's SWA K is
  stored in the paged SWA pool (``translate_loc_from_full_to_swa``).  A pad token's
  ``out_cache_loc`` is 0 -- the graph runner pads with zeros, and the full pool's location 0
  is the reserved padding location its allocator never hands out -- so it stores at
  ``full_to_swa[0]``, the SWA pool's dummy slot (upstream's own words: "translates the
  zero-padded out_cache_loc to the dummy slot").  That is the rule P5 and P10 hold a pad to.
* with the V4.1 low ratios, ``low_ratio_pos_i64 = positions`` widened to int64 (read by the
  in-graph low-ratio work: each token's c2 state row and its RoPE) -- the forward batch's
  positions (:func:`forward_positions`), **not** the metadata's ``positions_casual``: a pad
  row's token is at position 0 there, at ``1 + j`` here.  ``low_ratio_req_indices`` is in
  :mod:`.low_ratios`.

Worked example -- uniform verify, slots ``[2, 1]``, ``seq_lens = [5, 3]``, 2 drafts, a graph
tier of 3 rows / 6 tokens, ``req_to_token[s][p] = 20 s + p`` (so ``out_cache_loc = [45, 46, 23, 24]``),
``full_to_swa[x] = 100 + x``::

    positions (forward batch)  = [5, 6, 3, 4, 0, 0]        # the pad row's two tokens: the runner's 0
    positions_casual           = [5, 6, 3, 4, 1, 2]        # the pad row: seq_len 1 + 2 drafts
    raw_out_loc                = [45, 46, 23, 24, 0, 0]
    swa_out_cache_loc          = [145, 146, 123, 124, 100, 100]   # pads: full_to_swa[0], the dummy slot
    low_ratio_pos_i64          = [5, 6, 3, 4, 0, 0]        # with the V4.1 low ratios
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = ["forward_positions", "swa_out_cache_loc"]


def forward_positions(batch: VerifyBatch, num_tokens: int) -> list[int]:
    """The forward batch's ``positions`` over ``num_tokens`` tokens: each real token's position, request after
    request, then 0 for every later token (pad rows, slack a real row absorbed, the uncovered tail: the runner's
    static buffer, slot policy ZERO).  ``seq_lens = [5, 3]``, 2 drafts, 6 tokens -> ``[5, 6, 3, 4, 0, 0]``."""
    real = list(batch.positions)
    return real[:num_tokens] + [0] * max(0, num_tokens - len(real))


def swa_out_cache_loc(full_to_swa: tuple[int, ...] | list[int], out_cache_loc: list[int]) -> list[int]:
    """The paged SWA store's target per token: ``full_to_swa[loc]`` (a zero-padded pad token's is the dummy slot
    ``full_to_swa[0]``; a ``-1`` mapping stays -1).  ``full_to_swa[x] = 100 + x``, ``[40, 0] -> [140, 100]``."""
    return [full_to_swa[loc] for loc in out_cache_loc]
