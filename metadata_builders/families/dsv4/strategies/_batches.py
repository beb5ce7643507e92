"""Strategies for whole target-verify batches and their parts.

Every boundary of DESIGN.md is aimed at on purpose rather than hoped for: each
request's prefix is drawn from a menu of targeted constructions (position 1, the
SWA window edge, a page edge, a ring wrap-around, anything), the longest prefix
is sometimes snapped to a page edge, ``max_context`` is tight, loose or
page-rounded, and graph tiers are built by shape (no pad rows, one, many; slack
none, spread evenly or not, absorbed; cap absent, binding or loose).

Worked example of what ``verify_batches(ragged=True, graph=True)`` may draw::

    num_draft_tokens = 3, geometry page 4 / window 4 / ring 5
    seq_lens         = [3, 9, 1]         # "window_edge", "ring_wrap", "one"
    verify_lens      = [2, 3, 1]         # 6 real tokens
    graph            = padded_bs 5, graph_num_tokens 9, cap None
    tier lens        = [2, 3, 1, 2, 1]   # slack 3 over 2 pad rows: uneven
    max_context      = 12                # row 1 ends at 9 + 3 = 12: tight

Row 0's positions 3 and 4 straddle the window (window - 1, window), row 1's
positions 9..11 reach past ``2 * ring_size``, and the pad rows (seq_len 1, slot 0)
end at positions 2 and 1, well inside ``max_context``.

The cost of a batch is dominated by ``req_to_token`` (``num_slots * max_context``
ints); ``max_context`` stays below :data:`MAX_CONTEXT` (600) so upstream
geometries (page 256, window 128) remain cheap.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from hypothesis import assume, event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from metadata_builders.families.dsv4.batch import DECODE_MODES, Geometry, GraphTier, VerifyBatch
from metadata_builders.families.dsv4.strategies._arguments import (
    _check_batch_arguments,
    _check_count,
    _check_mode,
    _check_range,
)
from metadata_builders.families.dsv4.strategies._coverage import boundary_hits
from metadata_builders.families.dsv4.strategies._divergences import draw_divergence, stale_mirrors
from metadata_builders.families.dsv4.strategies._dp import draw_dp_pad
from metadata_builders.families.dsv4.strategies._geometry import HUGE_RING_SIZES, geometries
from metadata_builders.families.dsv4.strategies._modes import decode_mode_batch
from metadata_builders.families.dsv4.strategies._workers import check_dspark_draft, draw_worker, ragged_odds
from metadata_builders.families.dsv4.tier import tier_verify_lens
from metadata_builders.families.dsv4.variants import Path, Variant, variants_for

__all__ = [
    "MAX_CONTEXT",
    "graph_tiers",
    "variants",
    "verify_batches",
    "verify_lens",
]

MAX_CONTEXT = 600
"""Upper bound on ``max_context`` (the ``req_to_token`` width) of drawn batches."""

_PREFIX_KINDS = ("one", "small", "window_edge", "page_edge", "ring_wrap", "compress_edge", "any")
_MAX_REQUESTS = 16
_MAX_PAD_ROWS = 8

_ANY = 1 << 30

# (shape, fewest pad rows, most pad rows) of a ragged tier, in shrink order, in
# two groups drawn equally often: without pad rows, and with.
_RAGGED_TIER_SHAPES: tuple[tuple[tuple[str, int, int], ...], ...] = (
    (("exact", 0, 0), ("absorbed", 0, 0), ("capped_no_pad_rows", 0, 0)),
    (("spread", 1, _ANY), ("spread_partial", 2, _ANY), ("upstream", 1, _ANY)),
)


# Strategies are built once and reused: building one validates it, which costs
# more than drawing from it.
_DRAFT_TOKEN_COUNTS = st.one_of(st.integers(1, 4), st.integers(1, 8))
# A ragged layout can only diverge into another layout when a row has a choice.
_DIVERGENT_RAGGED_DRAFT_TOKEN_COUNTS = st.one_of(st.integers(2, 4), st.integers(2, 8))
# One absorbing tier in four runs past the table width (F2c).
_PAST_WIDTH = st.sampled_from((False, False, False, True))
_PREFIX_KIND = st.sampled_from(_PREFIX_KINDS)
_OFF_BY_ONE = st.sampled_from((-1, 0, 1))
_SPARE_SLOTS = st.one_of(st.just(0), st.integers(0, 4))
_TABLE_OVERRIDES = st.one_of(st.just(0), st.integers(1, 3))
_SWA_HOLES = st.one_of(st.just(0), st.integers(1, 2))
_PAD_ROW_MODES = st.sampled_from(("fewest", "one_more", "many", "any"))
# Binding caps twice: they make the capped layout (device total, uncovered tail) of P6.
_CAP_SHAPES = st.sampled_from(("none", "binding", "loose", "binding"))


@lru_cache(maxsize=None)
def _request_counts(lo: int, hi: int) -> st.SearchStrategy[int]:
    # Half the draws stay at a few requests, half spread over the whole range.
    return st.one_of(st.integers(lo, min(hi, lo + 3)), st.integers(lo, hi))


@st.composite
def verify_lens(
    draw: st.DrawFn,
    *,
    num_requests: int | None = None,
    num_draft_tokens: int | None = None,
    min_size: int = 1,
    max_size: int = _MAX_REQUESTS,
) -> list[int]:
    """Ragged verify lengths, each in ``1..num_draft_tokens``.

    ``num_requests`` pins the length (else drawn in ``min_size..max_size``).  Each
    row is a single token, a full-width row or anything in between, a third each,
    so ``[1, 3, 2]``-style mixtures are common.

    Shrinks towards one request verifying one token.
    """
    _check_count("num_requests", num_requests, 1)
    _check_count("num_draft_tokens", num_draft_tokens, 1)
    _check_range("min_size", min_size, "max_size", max_size, 1)
    draft = num_draft_tokens if num_draft_tokens is not None else draw(_DRAFT_TOKEN_COUNTS)
    n = num_requests if num_requests is not None else draw(_request_counts(min_size, max_size))
    return draw(_verify_len_lists(draft, n))


@lru_cache(maxsize=None)
def _verify_len_lists(draft: int, n: int) -> st.SearchStrategy[list[int]]:
    row = st.one_of(st.just(1), st.just(draft), st.integers(1, draft))
    return st.lists(row, min_size=n, max_size=n)


@st.composite
def graph_tiers(
    draw: st.DrawFn,
    *,
    num_draft_tokens: int,
    num_requests: int | None = None,
    verify_lens: Sequence[int] | None = None,
    min_pad_rows: int = 0,
    max_pad_rows: int = _MAX_PAD_ROWS,
) -> GraphTier:
    """A :class:`GraphTier` for a batch of ``verify_lens`` (ragged) or ``num_requests`` (uniform).

    Uniform: ``graph_num_tokens = padded_bs * num_draft_tokens`` (the only uniform
    tier upstream captures; a wider one, valid as an uncovered tail, is pinned by a
    named test instead); the cap, which a uniform build ignores, is sometimes set anyway.
    Ragged: the slack ``graph_num_tokens - sum(verify_lens)`` is none, the
    upstream tier's (``padded_bs * num_draft_tokens``), drawn as
    ``base * npad + rem`` (even when ``rem`` is 0, uneven otherwise) or below the
    pad-row count (some pad rows get no token); the cap is absent, binding (pad rows clamped, or all slack
    uncovered without pad rows) or loose.  Example: ``verify_lens=[3, 1, 2]``,
    two pad rows, slack 3, cap 1 gives tier lens ``[3, 1, 2, 1, 1]`` with one
    token uncovered.

    Shrinks towards no pad rows, no slack and no cap.
    """
    _check_count("num_draft_tokens", num_draft_tokens, 1, optional=False)
    _check_count("num_requests", num_requests, 1)
    _check_range("min_pad_rows", min_pad_rows, "max_pad_rows", max_pad_rows, 0)
    if verify_lens is not None and num_requests is not None and num_requests != len(verify_lens):
        raise InvalidArgument(f"num_requests={num_requests} must equal len(verify_lens)={len(verify_lens)}")
    plan = _draw_tier_plan(draw, verify_lens is not None, min_pad_rows, max_pad_rows)
    if verify_lens is not None:
        return _draw_tier(draw, plan, list(verify_lens), len(verify_lens), num_draft_tokens)
    bs = num_requests if num_requests is not None else draw(_request_counts(1, _MAX_REQUESTS))
    return _draw_tier(draw, plan, None, bs, num_draft_tokens)


@dataclass(frozen=True, slots=True)
class _TierPlan:
    """A tier's categorical choices, drawn before its numbers.

    Under Hypothesis's generation the odds of a choice hold best early in an
    example (measured: a coin flip drawn after the tables came out 72/28, drawn
    first 50/50), so ``verify_batches`` draws the plan right after its coin flips.
    """

    shape: str
    """``uniform``, or a ragged shape of ``_RAGGED_TIER_SHAPES``."""
    min_pad_rows: int
    """Fewest pad rows the shape allows (within the caller's bounds)."""
    max_pad_rows: int
    """Most pad rows the shape allows (within the caller's bounds)."""
    pad_rows: str
    """``fewest``, ``one_more``, ``many`` (at least four more) or ``any``."""
    cap: str
    """``none``, ``binding`` (clamps a pad row when it can) or ``loose``."""


def _draw_tier_plan(draw: st.DrawFn, ragged: bool, min_pad_rows: int, max_pad_rows: int) -> _TierPlan:
    if ragged:
        shape, lo, hi = draw(st.sampled_from(_tier_shapes(min_pad_rows, max_pad_rows)))
    else:
        shape, lo, hi = "uniform", min_pad_rows, max_pad_rows
    return _TierPlan(shape, lo, hi, draw(_PAD_ROW_MODES), draw(_CAP_SHAPES))


@lru_cache(maxsize=None)
def _tier_shapes(min_pad_rows: int, max_pad_rows: int) -> tuple[tuple[str, int, int], ...]:
    """The ragged shapes that fit the pad-row bounds, bounds clipped, repeated so each group weighs the same."""
    groups = []
    for group in _RAGGED_TIER_SHAPES:
        clipped = tuple((name, max(lo, min_pad_rows), min(hi, max_pad_rows)) for name, lo, hi in group)
        clipped = tuple(shape for shape in clipped if shape[1] <= shape[2])
        if clipped:
            groups.append(clipped)
    weight = math.lcm(*(len(group) for group in groups))
    return tuple(shape for group in groups for shape in group * (weight // len(group)))


def _draw_tier(draw: st.DrawFn, plan: _TierPlan, real: list[int] | None, bs: int, draft: int) -> GraphTier:
    """The tier of ``plan`` for ``real`` ragged lengths, or for ``bs`` uniform rows when None."""
    lo, hi = plan.min_pad_rows, plan.max_pad_rows
    if plan.pad_rows == "fewest":
        npad = lo
    elif plan.pad_rows == "one_more":
        npad = min(hi, lo + 1)
    else:
        npad = draw(st.integers(min(hi, lo + 4) if plan.pad_rows == "many" else lo, hi))
    padded_bs = bs + npad
    if real is None:
        cap = None if plan.cap == "none" else draw(st.integers(1, draft))
        return GraphTier(padded_bs, padded_bs * draft, cap)
    shape = plan.shape
    floor = max(real)  # F2b: a cap never clamps a real row's own verify tokens
    binding = plan.cap == "binding"
    if shape == "exact":
        slack = 0
    elif shape in ("absorbed", "capped_no_pad_rows"):
        slack = draw(st.integers(1, 2 * draft))
    elif shape == "upstream":
        slack = padded_bs * draft - sum(real)
    elif shape == "spread":
        # A binding cap needs a share above max(verify_lens) to clamp.
        base = draw(st.integers(floor + 1 if binding else 0, draft + 2))
        slack = base * npad + draw(st.integers(0, npad - 1))
    else:
        slack = draw(st.integers(1, npad - 1))
    # What the cap would clamp: a pad row's share, or the row that absorbs the slack.
    reach = -(-slack // npad) if npad else real[-1] + slack
    if shape == "absorbed" or (plan.cap == "none" and shape != "capped_no_pad_rows"):
        cap = None
    elif plan.cap == "loose":
        cap = draw(st.integers(max(floor, reach), max(floor, reach) + draft))
    else:
        cap = draw(st.integers(floor, max(floor, reach - 1)))
    return GraphTier(padded_bs, sum(real) + slack, cap)


def _draw_prefixes(
    draw: st.DrawFn, geo: Geometry, draft: int, real: list[int], lens: list[int], tier: GraphTier | None
) -> tuple[list[int], int]:
    """Each real request's prefix and the table width ``max_context``.

    A real row's graph-path length (tier slack included) bounds its prefix; the
    slack the last real row absorbed may run past the width (F2c), its own tokens not.
    """
    bs = len(real)
    fits = list(lens)
    past_width = tier is not None and tier.padded_bs == bs and lens[-1] > real[-1] and draw(_PAST_WIDTH)
    if past_width:
        fits[bs - 1] = real[-1]
    limits = [MAX_CONTEXT - e for e in fits[:bs]]
    seq_lens = [_draw_prefix(draw, geo, draft, e, limit) for e, limit in zip(real, limits)]
    if draw(st.booleans()):
        _snap_to_page_edge(draw, seq_lens, limits, geo, draft)
    need = max([s + e for s, e in zip(seq_lens, fits)] + [1 + e for e in fits[bs:]])
    max_context = _draw_max_context(draw, need, geo.page_size)
    if past_width:
        # The last row's own tokens end at the width or just before it; its absorbed slack goes past.
        room = max_context - real[-1]
        seq_lens[-1] = room - draw(st.integers(0, min(lens[-1] - real[-1], room) - 1))
    return seq_lens, max_context


def _draw_holes(
    draw: st.DrawFn, table: list[list[int]], full_to_swa: list[int], used: list[tuple[int, int]], geo: Geometry
) -> None:
    """A few ``-1`` / sentinel entries in the cells requests read, and ``-1`` holes in ``full_to_swa``.

    ``used`` is each real request's (slot, end of its verify positions).
    """
    sentinel = len(full_to_swa) - 1
    for _ in range(draw(_TABLE_OVERRIDES)):
        slot, end = used[draw(st.integers(0, len(used) - 1))]
        table[slot][_draw_column(draw, end, geo)] = draw(st.sampled_from((-1, sentinel)))
    for _ in range(draw(_SWA_HOLES)):
        slot, end = used[draw(st.integers(0, len(used) - 1))]
        location = table[slot][_draw_column(draw, end, geo)]
        if 0 <= location < sentinel:
            full_to_swa[location] = -1


def _draw_prefix(draw: st.DrawFn, geo: Geometry, draft: int, e_real: int, limit: int) -> int:
    """One request's accepted prefix, aimed at a boundary; always in ``1..limit``."""
    kind = draw(_PREFIX_KIND)
    window, page, ring = geo.swa_window, geo.page_size, geo.ring_size
    if kind == "one":
        seq = 1
    elif kind == "small":
        seq = draw(st.integers(1, 8))
    elif kind == "window_edge":
        # Some verify position seq + j lands on window - 1, window or window + 1.
        seq = window + draw(_OFF_BY_ONE) - draw(st.integers(0, e_real - 1))
    elif kind == "page_edge":
        k = draw(st.integers(1, max(1, min(4, (limit + draft) // page))))
        seq = k * page + draw(_OFF_BY_ONE) - draft
        seq += page * max(0, -(-(1 - seq) // page))
    elif kind == "ring_wrap" and ring <= limit:
        seq = draw(st.integers(1, min(3, limit // ring))) * ring + draw(st.integers(0, min(ring - 1, 8)))
    elif kind == "compress_edge" and geo.compression is not None:
        # Some verify position seq + j completes a c128 (or c4) group, or misses it by one.
        ratio = draw(st.sampled_from((128, 4)))
        k = draw(st.integers(1, max(1, min(4, (limit + draft) // ratio))))
        seq = max(1, k * ratio + draw(_OFF_BY_ONE) - draw(st.integers(1, e_real)))
    else:
        seq = draw(st.integers(1, max(1, min(limit, 2 * window + 16))))
    return min(max(seq, 1), limit)


def _snap_to_page_edge(draw: st.DrawFn, seq_lens: list[int], limits: list[int], geo: Geometry, draft: int) -> None:
    """Move the longest prefix so ``max(seq_lens) + draft`` is a page edge (or one off)."""
    b = max(range(len(seq_lens)), key=seq_lens.__getitem__)
    page = geo.page_size
    edge = -(-(seq_lens[b] + draft + 1) // page) * page
    seq = edge + draw(_OFF_BY_ONE) - draft
    if seq <= limits[b]:
        seq_lens[b] = seq


def _draw_max_context(draw: st.DrawFn, need: int, page: int) -> int:
    shape = draw(st.sampled_from(("tight", "loose", "page")))
    if shape == "loose":
        return min(MAX_CONTEXT, need + draw(st.integers(1, 8)))
    if shape == "page":
        width = -(-need // page) * page + draw(st.sampled_from((0, 1, -1)))
        if need <= width <= MAX_CONTEXT:
            return width
    return need


def _draw_column(draw: st.DrawFn, end: int, geo: Geometry) -> int:
    """A column of ``0..end-1`` a build reads: in the newest window, or a page start."""
    if draw(st.booleans()):
        return end - 1 - draw(st.integers(0, min(geo.swa_window, end) - 1))
    return draw(st.integers(0, (end - 1) // geo.page_size)) * geo.page_size


def _build_tables(
    draw: st.DrawFn, num_slots: int, max_context: int, geo: Geometry
) -> tuple[list[list[int]], list[int]]:
    """``req_to_token`` page by page from an affine page permutation, and ``full_to_swa``.

    Slot ``s``'s ``k``-th page lives at pool page ``(a * (s * pages_per_row + k) + b) % pool_pages``
    with ``a`` coprime to ``pool_pages``: distinct locations, contiguous within a
    page (as a paged allocator gives), and not an affine function of the position.
    """
    page = geo.page_size
    per_row = -(-max_context // page)
    pool_pages = num_slots * per_row + draw(st.integers(0, 3))
    a = draw(st.sampled_from((1, 3, 5, 7, 11, 13)))
    while math.gcd(a, pool_pages) != 1:
        a += 1
    b = draw(st.integers(0, pool_pages - 1))
    table: list[list[int]] = []
    for s in range(num_slots):
        row: list[int] = []
        for k in range(per_row):
            start = (a * (s * per_row + k) + b) % pool_pages * page
            row.extend(range(start, start + page))
        table.append(row[:max_context])
    pool = pool_pages * page
    offset = draw(st.integers(0, 1024))
    if draw(st.booleans()):
        full_to_swa = list(range(offset + pool - 1, offset - 1, -1))
    else:
        full_to_swa = list(range(offset, offset + pool))
    full_to_swa.append(-1)
    return table, full_to_swa


def variants(batch: VerifyBatch, *, path: Path | None = None) -> st.SearchStrategy[Variant]:
    """A :class:`Variant` from ``variants_for(batch)``, optionally only of ``path``.

    Shrinks towards the first listed variant (eager, host mirror, dspark gate).
    """
    options = [v for v in variants_for(batch) if path is None or v.path == path]
    if not options:
        raise InvalidArgument(f"path={path!r} has no variant for this batch (graph needs a graph tier)")
    return st.sampled_from(options)


def _tier_rows(draw: st.DrawFn, plan: _TierPlan, real: list[int], is_ragged: bool, draft: int,
               mode: str) -> tuple[GraphTier, list[int]]:
    """The tier of ``plan`` and every row's verify length on it (the pad rows' shares included)."""
    tier = _draw_tier(draw, plan, real if is_ragged else None, len(real), draft)
    if mode != "target_verify" and tier.cap is not None:
        tier = GraphTier(tier.padded_bs, tier.graph_num_tokens)  # the cap is ragged verify's
    if is_ragged:
        return tier, tier_verify_lens(real, tier.padded_bs, tier.graph_num_tokens, tier.cap)
    return tier, [draft] * tier.padded_bs


def _fit_compression(geo: Geometry, tier: GraphTier | None) -> Geometry:
    """F10: the compress planner needs a token per row of the tier; without one the geometry goes uncompressed."""
    if geo.compression is not None and tier is not None and tier.graph_num_tokens < tier.padded_bs:
        return dataclasses.replace(geo, compression=None)
    return geo


@st.composite
def verify_batches(
    draw: st.DrawFn,
    *,
    ragged: bool | None = None,
    graph: bool | None = None,
    geometry: Geometry | None = None,
    is_dspark: bool | None = None,
    divergence: bool | None = False,
    stale_mirror: bool | None = False,
    min_requests: int = 1,
    max_requests: int = _MAX_REQUESTS,
    num_draft_tokens: int | None = None,
    max_pad_rows: int = _MAX_PAD_ROWS,
    compression: bool | None = None,
    mode: str = "target_verify",
    equal_windows: bool = False,
    dspark_draft: bool | None = False,
    dp_pad: bool | None = False,
) -> VerifyBatch:
    """A valid :class:`VerifyBatch` of ``mode`` (any but target verify: uniform, no divergence or cap; the decode modes
    are drawn from draft-extend batches, :func:`~._modes.as_decode`); each ``None`` argument is drawn.
    ``ragged`` pins uniform/ragged, ``graph`` forces (``True``) or forbids (``False``) a graph tier, ``divergence=True``
    attaches one (:func:`divergences`; one a batch cannot take, say ragged with ``num_draft_tokens=1``, is rejected) and
    ``None`` draws whether to; ``stale_mirror=True`` gives the caller's host mirror a stale entry
    (:func:`stale_mirrors`), ``None`` draws whether to; ``compression`` forces or forbids a compressed geometry and
    ``equal_windows=True`` makes its two windows one (:func:`geometries`); ``dspark_draft=True`` draws a DSpark draft
    worker's block verify, ``None`` whether to (:func:`draw_worker`); ``dp_pad=True`` gives an eager uniform batch the
    worker's DP pad rows, ``None`` draws whether to (:mod:`._dp`). Every verify position (a pad row's too: seq_len 1,
    slot 0) fits the row width ``max_context``, except that one absorbing tier in four lets the slack the last real row
    absorbed run past it (F2c); slots are distinct and in ``1..num_slots-1``; ``req_to_token`` holds distinct pool
    locations except for a few deliberate ``-1`` entries and entries ``len(full_to_swa) - 1`` (which map to the ``-1``
    sentinel); ``full_to_swa`` sometimes has ``-1`` holes. Calls ``hypothesis.event`` for each name of
    :func:`boundary_hits`; shrinks towards one uniform eager EAGLE request, seq_len 1, one verify token, no padding or
    divergence, every geometry dimension 1."""
    _check_batch_arguments(min_requests, max_requests, num_draft_tokens, max_pad_rows, geometry, equal_windows)
    check_dspark_draft(dspark_draft, mode, is_dspark, compression, geometry)
    if mode != "target_verify":
        _check_mode(mode, num_draft_tokens, graph, ragged=ragged, divergence=divergence, stale_mirror=stale_mirror)
        ragged = divergence = stale_mirror = False
    if mode in DECODE_MODES:
        return decode_mode_batch(draw, verify_batches, mode, graph=graph, geometry=geometry, is_dspark=is_dspark,
                                 min_requests=min_requests, max_requests=max_requests, max_pad_rows=max_pad_rows,
                                 num_draft_tokens=num_draft_tokens, compression=compression,
                                 equal_windows=equal_windows)
    # The categorical choices come first, where their odds hold best (see _TierPlan).
    dspark, worker, compression = draw_worker(draw, is_dspark, dspark_draft, compression, geometry)
    attach = draw(st.booleans()) if divergence is None else divergence
    has_graph = draw(st.sampled_from((False, True, True, True))) if graph is None else graph
    is_ragged = draw(st.sampled_from(ragged_odds(worker, has_graph))) if ragged is None else ragged
    plan = _draw_tier_plan(draw, is_ragged, 0, max_pad_rows) if has_graph else None
    counts = _DIVERGENT_RAGGED_DRAFT_TOKEN_COUNTS if attach and is_ragged else _DRAFT_TOKEN_COUNTS
    draft = draw(counts) if num_draft_tokens is None else num_draft_tokens
    geo = geometry or draw(geometries(num_draft_tokens=draft, compression=compression, equal_windows=equal_windows))
    bs = draw(_request_counts(min_requests, max_requests))
    real = draw(verify_lens(num_requests=bs, num_draft_tokens=draft)) if is_ragged else [draft] * bs
    tier, lens = (None, list(real)) if plan is None else _tier_rows(draw, plan, real, is_ragged, draft, mode)
    geo = _fit_compression(geo, tier)
    seq_lens, max_context = _draw_prefixes(draw, geo, draft, real, lens, tier)
    spare_slots = draw(_SPARE_SLOTS)
    slots = draw(st.permutations(range(1, bs + spare_slots + 1)))[:bs]
    if geo.ring_size in HUGE_RING_SIZES:
        # As large as the table allows (F4: every swa_loc fits int32): the top slot's ring ends at 2**31 - 1.
        geo = dataclasses.replace(geo, ring_size=2**31 // (bs + spare_slots + 1) - draw(st.integers(0, 3)))
    table, full_to_swa = _build_tables(draw, bs + spare_slots + 1, max_context, geo)
    out_cache_loc = [table[slot][s + j] for slot, s, e in zip(slots, seq_lens, real) for j in range(e)]
    _draw_holes(draw, table, full_to_swa, [(slot, s + e) for slot, s, e in zip(slots, seq_lens, real)], geo)
    batch = VerifyBatch(seq_lens, slots, real if is_ragged else None, draft, out_cache_loc, table, full_to_swa,
                        dspark, geo, tier, mode=mode, speculative_num_draft_tokens=draft + 1 if worker else None)
    if attach:
        drawn_divergence, _ = draw_divergence(draw, batch, None)
        # divergence=True promises one: reject the rare batch that cannot take any.
        assume(drawn_divergence is not None or divergence is None)
        if drawn_divergence is not None:
            batch = batch.replace(divergence=drawn_divergence)
    if draw(st.booleans()) if stale_mirror is None else stale_mirror:
        batch = batch.replace(divergence=draw(stale_mirrors(batch)))
    batch = draw_dp_pad(draw, batch, dp_pad, mode, graph, ragged, divergence, stale_mirror, dspark_draft)
    for name in sorted(boundary_hits(batch)):
        event(name)
    return batch
