"""Graph-tier arithmetic: how ragged verify lengths are padded to a captured tier.

Pure Python and import-free so the batch model, the reference and the
strategies share one definition (the data model never imports a builder).

Worked example -- three real rows ``[3, 1, 2]`` (6 tokens):

=====================  ==============================  =========================
tier                   ``tier_verify_lens``            what happens
=====================  ==============================  =========================
5 rows, 10 tokens      ``[3, 1, 2, 2, 2]``             leftover 4 spread over 2 pad rows
5 rows, 10, cap 1      ``[3, 1, 2, 1, 1]``             pad rows clamped: 2 tokens uncovered
3 rows, 10 tokens      ``[3, 1, 6]``                   no pad rows: the last real row absorbs 4
3 rows, 10, cap 3      ``[3, 1, 3]``                   absorbs, then clamped (3 tokens uncovered)
=====================  ==============================  =========================

The last two rows are upstream's absorb-then-clamp (``padded_to_bucket`` in
``sglang/srt/speculative/ragged_verify.py``; DESIGN.md section 2, owner decision
F2).  A cap below ``max(verify_lens)`` would clamp real verify tokens away and
is rejected by the batch model (F2b), so the clamp only ever shortens pad rows
and the slack the last real row absorbed.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["absorbed_slack", "tier_verify_lens"]


def tier_verify_lens(verify_lens: Sequence[int], padded_bs: int, graph_num_tokens: int, cap: int | None) -> list[int]:
    """Ragged verify lengths padded to a graph tier (upstream ``pad_verify_lens_to_bucket`` + cap).

    ``leftover = graph_num_tokens - sum(real)``.  With pad rows it is spread over
    them: ``base = leftover // npad``, the first ``leftover % npad`` pad rows get
    one more.  With no pad rows the last real row absorbs it.  Then, when a cap is
    set, every row is clamped to ``cap``.
    """
    lens = list(verify_lens)
    npad = padded_bs - len(lens)
    leftover = graph_num_tokens - sum(lens)
    if npad > 0:
        base, rem = divmod(leftover, npad)
        lens += [base + (1 if i < rem else 0) for i in range(npad)]
    else:
        lens[-1] += leftover
    if cap is not None:
        lens = [min(v, cap) for v in lens]
    return lens


def absorbed_slack(verify_lens: Sequence[int], padded_bs: int, graph_num_tokens: int, cap: int | None) -> int:
    """Tokens of tier slack the last real row absorbed (0 when there are pad rows).

    ``[3, 1, 2]`` on 3 rows / 10 tokens absorbs 4; with cap 3 it absorbs 1.
    """
    if padded_bs > len(verify_lens):
        return 0
    return tier_verify_lens(verify_lens, padded_bs, graph_num_tokens, cap)[-1] - verify_lens[-1]
