"""Which boundaries a batch reaches: the coverage vocabulary of the strategies.

:func:`boundary_hits` is a pure function of a batch, so a test or the CLI can
measure how often generated batches reach each boundary without parsing
Hypothesis statistics; ``verify_batches()`` calls ``hypothesis.event`` with each
name it returns, so ``pytest --hypothesis-show-statistics`` shows the same table.

Positions follow DESIGN.md section 2: token ``j`` of real request ``b`` sits at
position ``seq_lens[b] + j`` (``positions_casual = seq_lens_casual - 1``).  With
``seq_lens = [5, 3]``, ``num_draft_tokens = 2`` and ``swa_window = 4`` the
positions are ``5, 6`` and ``3, 4``: position 3 is ``window - 1`` (the window
reaches back exactly to position 0) and 4 is ``window`` (no ``-1`` left), so the
batch hits ``swa_window_edge``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

from metadata_builders.families.dsv4.tier import absorbed_slack, tier_verify_lens

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = ["COVERAGE_EVENTS", "boundary_hits", "coverage_events", "divergence_kind", "host_extend_lens"]

_UPPER_HALF_INT32 = 2**30

COVERAGE_EVENTS: Mapping[str, str] = MappingProxyType(
    {
        # batch shape
        "bs=1": "a single request",
        "bs>=8": "eight or more requests",
        "uniform": "every request verifies num_draft_tokens",
        "ragged": "per-request verify lengths",
        "verify_len=1": "a request verifies a single token",
        "verify_len=full": "a request verifies num_draft_tokens tokens",
        "ragged_mixed": "a ragged batch with single-token and full-width rows (num_draft_tokens >= 2)",
        "dspark": "the DSpark algorithm",
        "eagle": "the EAGLE algorithm",
        "dspark_draft": "a DSpark draft worker's block verify (configured gamma + 1, active width gamma)",
        # prefixes and positions
        "short_prefix": "a request with seq_len 1",
        "long_prefix": "a request with seq_len >= max(2 * swa_window, 64)",
        "swa_window_edge": "a verify position in {window - 1, window, window + 1}",
        "swa_window_partial": "a verify position below window - 1 (the SWA row keeps -1 entries)",
        "swa_window_unaligned": "swa_window is not a multiple of page_index_align (right -1 padding)",
        "page_boundary": "max(seq_lens) + num_draft_tokens is a multiple of page_size, or one off",
        "max_seq_len_clamped": "max(seq_lens) + num_draft_tokens exceeds max_context (page table clamped)",
        "row_fills_context": "a row's last verify position is max_context - 1",
        "ring_wrap": "a verify position >= ring_size",
        "ring_wrap>=2": "a verify position >= 2 * ring_size",
        "swa_loc>=2**30": "a swa_loc (slot * ring_size + pos % ring_size) in int32's upper half",
        # tables
        "req_to_token_minus1": "a -1 entry in a real request's used req_to_token cells",
        "req_to_token_sentinel": "a used req_to_token entry equal to len(full_to_swa) - 1 (maps to -1)",
        "full_to_swa_hole": "a -1 in full_to_swa besides the sentinel",
        # graph tier
        "eager_only": "no graph tier",
        "graph_uniform": "a graph tier on a uniform batch",
        "graph_ragged": "a graph tier on a ragged batch",
        "pad_rows=0": "a graph tier without pad rows",
        "pad_rows=1": "a graph tier with one pad row",
        "pad_rows>=4": "a graph tier with four or more pad rows",
        "tier_exact": "a ragged tier equal to the real token count, no pad rows",
        "tier_slack_spread": "ragged tier slack spread over pad rows",
        "tier_slack_uneven": "tier slack not a multiple of the pad rows (first pad rows get one more)",
        "tier_slack_partial": "tier slack below the pad-row count (some pad rows get 0 tokens)",
        "tier_slack_absorbed": "tier slack absorbed by the last real row (no pad rows; capped or not)",
        "absorbed_past_width": "the absorbed slack runs past req_to_token's width "
                               "(F2c: a literal gather reads out of bounds)",
        "pad_row_zero_tokens": "a pad row with no verify tokens",
        "pad_rows_clamped": "the cap clamps a pad row's share",
        "capped_uncovered_tail": "a capped ragged tier leaves tokens past num_tokens",
        "capped_no_pad_rows": "a capped tier with slack and no pad rows (absorbed up to the cap, the rest uncovered)",
        "cap_not_binding": "a capped ragged tier whose cap clamps nothing",
        # geometry
        "page_size_small": "page_size <= 8",
        "page_size_upstream": "page_size 256",
        "swa_window_small": "swa_window <= 8",
        "swa_window_upstream": "swa_window 128",
        "page_index_align_small": "page_index_align <= 8",
        "page_index_align_upstream": "page_index_align 64",
        "ring_small": "ring_size <= 8",
        "ring_upstream": "ring_size == swa_window + num_draft_tokens - 1",
        "ring_huge": "ring_size >= 2**20 (LARGE_RING_SIZES)",
        "unified_swa_window_small": "unified_swa_window <= 8",
        "unified_swa_window_upstream": "unified_swa_window 128",
        # fault injection
        "divergence_run_ahead": "device extend lengths sum to more than the host believes",
        "divergence_fall_behind": "device extend lengths sum to less than the host believes",
        "divergence_permuted": "device extend lengths differ per row but keep the sum",
        "divergence_padded_len": "a divergence covering every row of the graph tier",
    }
)
"""Every name :func:`boundary_hits` can return, with a one-line meaning, in table order."""


def coverage_events() -> tuple[str, ...]:
    """The names of :data:`COVERAGE_EVENTS`, in table order."""
    return tuple(COVERAGE_EVENTS)


def _graph_rows(batch: VerifyBatch) -> tuple[list[int], list[int]]:
    """Seq lens and extend lens of every row of the graph build (pads: seq_len 1)."""
    graph = batch.graph
    assert graph is not None
    npad = graph.padded_bs - batch.bs
    seq = list(batch.seq_lens) + [1] * npad
    if batch.verify_lens is None:
        return seq, [batch.num_draft_tokens] * graph.padded_bs
    return seq, tier_verify_lens(batch.verify_lens, graph.padded_bs, graph.graph_num_tokens, graph.cap)


def host_extend_lens(batch: VerifyBatch, length: int) -> list[int]:
    """What the host believes the extend lengths are, for a list of ``length`` rows.

    ``bs`` rows: the real verify lengths; ``graph.padded_bs`` rows: the tier's
    lengths (pad rows' shares included).  When the two counts coincide the real
    lengths are meant (a capped tier without pad rows adds nothing to them).
    """
    if length == batch.bs or batch.graph is None:
        return list(batch.extend_lens)
    return _graph_rows(batch)[1]


def divergence_kind(batch: VerifyBatch) -> str | None:
    """``run_ahead``, ``fall_behind``, ``permuted`` or ``same``; ``None`` without diverging extend lengths.

    Compares ``batch.divergence.extend_seq_lens`` with :func:`host_extend_lens` of the
    same length: a larger sum runs ahead (the token map writes out of bounds), a
    smaller one falls behind (uninitialised tail), an equal sum with other rows is
    permuted (no fault, wrong rows).
    """
    if batch.divergence is None or batch.divergence.extend_seq_lens is None:
        return None
    device = list(batch.divergence.extend_seq_lens)
    host = host_extend_lens(batch, len(device))
    if sum(device) > sum(host):
        return "run_ahead"
    if sum(device) < sum(host):
        return "fall_behind"
    return "permuted" if device != host else "same"


def boundary_hits(batch: VerifyBatch) -> set[str]:
    """The :data:`COVERAGE_EVENTS` names this batch reaches (an idle batch, with no request, reaches none)."""
    hits: set[str] = set()
    if batch.bs == 0:
        return hits
    geo, draft, bs = batch.geometry, batch.num_draft_tokens, batch.bs
    window, ring, page = geo.swa_window, geo.ring_size, geo.page_size
    extend = batch.extend_lens

    if bs == 1:
        hits.add("bs=1")
    if bs >= 8:
        hits.add("bs>=8")
    hits.add("ragged" if batch.is_ragged else "uniform")
    hits.add("dspark" if batch.is_dspark else "eagle")
    if batch.is_dspark_draft:
        hits.add("dspark_draft")
    if 1 in extend:
        hits.add("verify_len=1")
    if draft in extend:
        hits.add("verify_len=full")
    if batch.is_ragged and draft >= 2 and 1 in extend and draft in extend:
        hits.add("ragged_mixed")

    positions = [s + j for s, e in zip(batch.seq_lens, extend) for j in range(e)]
    if 1 in batch.seq_lens:
        hits.add("short_prefix")
    if max(batch.seq_lens) >= max(2 * window, 64):
        hits.add("long_prefix")
    if any(window - 1 <= p <= window + 1 for p in positions):
        hits.add("swa_window_edge")
    if any(p < window - 1 for p in positions):
        hits.add("swa_window_partial")
    if window % geo.page_index_align:
        hits.add("swa_window_unaligned")
    max_seq_len = max(batch.seq_lens) + draft
    if max_seq_len % page in (0, 1, page - 1):
        hits.add("page_boundary")
    if max_seq_len > batch.max_context:
        hits.add("max_seq_len_clamped")
    last = max(positions)
    if last >= ring:
        hits.add("ring_wrap")
    if last >= 2 * ring:
        hits.add("ring_wrap>=2")
    slots = batch.req_pool_indices
    if max(slot * ring + (s + e - 1) % ring for slot, s, e in zip(slots, batch.seq_lens, extend)) >= _UPPER_HALF_INT32:
        hits.add("swa_loc>=2**30")

    sentinel = len(batch.full_to_swa) - 1
    for slot, s, e in zip(slots, batch.seq_lens, extend):
        used = batch.req_to_token[slot][: s + e]
        if -1 in used:
            hits.add("req_to_token_minus1")
        if sentinel in used:
            hits.add("req_to_token_sentinel")
    if -1 in batch.full_to_swa[:-1]:
        hits.add("full_to_swa_hole")

    ends = [s + e for s, e in zip(batch.seq_lens, extend)]
    if batch.graph is None:
        hits.add("eager_only")
    else:
        _graph_hits(batch, hits, ends)
    if batch.max_context in ends:
        hits.add("row_fills_context")

    _geometry_hits(batch, hits)
    kind = divergence_kind(batch)
    if kind is not None:
        hits.add(f"divergence_{kind}")
        if batch.graph is not None and len(batch.divergence.extend_seq_lens) == batch.graph.padded_bs != bs:
            hits.add("divergence_padded_len")
    return hits


def _graph_hits(batch: VerifyBatch, hits: set[str], ends: list[int]) -> None:
    graph = batch.graph
    assert graph is not None
    bs, npad = batch.bs, graph.padded_bs - batch.bs
    if npad in (0, 1):
        hits.add(f"pad_rows={npad}")
    if npad >= 4:
        hits.add("pad_rows>=4")
    seq, lens = _graph_rows(batch)
    ends.extend(s + e for s, e in zip(seq[bs - 1 :], lens[bs - 1 :]))
    if batch.verify_lens is None:
        hits.add("graph_uniform")
        return
    hits.add("graph_ragged")
    leftover = graph.graph_num_tokens - batch.num_real_tokens
    uncovered = graph.graph_num_tokens - sum(lens)
    if npad == 0:
        absorbed = absorbed_slack(batch.verify_lens, graph.padded_bs, graph.graph_num_tokens, graph.cap)
        if leftover == 0:
            hits.add("tier_exact")
        if absorbed:
            hits.add("tier_slack_absorbed")
            if seq[-1] + lens[-1] > batch.max_context:
                hits.add("absorbed_past_width")
        if leftover and graph.cap is not None:
            hits.add("capped_no_pad_rows")
    elif leftover > 0:
        hits.add("tier_slack_spread")
        if leftover % npad:
            hits.add("tier_slack_uneven")
        if leftover < npad:
            hits.add("tier_slack_partial")
    if npad and 0 in lens[bs:]:
        hits.add("pad_row_zero_tokens")
    if graph.cap is not None:
        if uncovered > 0:
            hits.add("capped_uncovered_tail")
        else:
            hits.add("cap_not_binding")
        if npad and -(-leftover // npad) > graph.cap:
            hits.add("pad_rows_clamped")


def _geometry_hits(batch: VerifyBatch, hits: set[str]) -> None:
    geo = batch.geometry
    for name, value, upstream in (
        ("page_size", geo.page_size, 256),
        ("swa_window", geo.swa_window, 128),
        ("page_index_align", geo.page_index_align, 64),
        ("unified_swa_window", geo.unified_swa_window, 128),
    ):
        if value <= 8:
            hits.add(f"{name}_small")
        if value == upstream:
            hits.add(f"{name}_upstream")
    if geo.ring_size <= 8:
        hits.add("ring_small")
    if geo.ring_size == geo.swa_window + batch.num_draft_tokens - 1:
        hits.add("ring_upstream")
    if geo.ring_size >= 2**20:
        hits.add("ring_huge")
