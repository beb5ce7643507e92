"""The strategies draw valid, replayable batches that pin what they are asked to and reach every boundary.

How often they reach the boundaries, how small they shrink, stale host mirrors and a DSpark draft worker's batches:
``test_strategies_coverage.py``.
"""

from __future__ import annotations

import types

import pytest
from _strategy_settings import FAST, FIND
from hypothesis import example, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import strategies
from metadata_builders import Divergence, Geometry, GraphTier, VerifyBatch, variants_for
from metadata_builders.families.dsv4.reference import tier_verify_lens
from strategies import (
    COVERAGE_EVENTS,
    DIVERGENCE_KINDS,
    HUGE_RING_SIZES,
    MAX_CONTEXT,
    boundary_hits,
    coverage_events,
    divergence_kind,
    divergences,
    geometries,
    graph_tiers,
    variants,
    verify_batches,
    verify_lens,
)


def _batch(**changes) -> VerifyBatch:
    """A hand-built three-request ragged batch (page 4, window 4, ring 5, draft 3)."""
    width = 12
    table = [[s * width + c for c in range(width)] for s in range(4)]
    base = dict(
        seq_lens=[3, 9, 1],
        req_pool_indices=[2, 1, 3],
        verify_lens=[2, 3, 1],
        num_draft_tokens=3,
        out_cache_loc=[table[2][3], table[2][4], table[1][9], table[1][10], table[1][11], table[3][1]],
        req_to_token=table,
        full_to_swa=list(range(100, 100 + 4 * width)) + [-1],
        geometry=Geometry(page_size=4, swa_window=4, ring_size=5, unified_swa_window=4, page_index_align=4),
        graph=GraphTier(padded_bs=5, graph_num_tokens=9),
    )
    base.update(changes)
    return VerifyBatch(**base)


WORKED_EXAMPLE = _batch()


def test_public_names_are_exactly_all():
    """``strategies.__all__`` is sorted and lists exactly the package's public names."""
    public = {
        name
        for name, value in vars(strategies).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    } - {"annotations"}
    assert strategies.__all__ == sorted(strategies.__all__)
    assert set(strategies.__all__) == public


@FAST
@given(verify_batches(divergence=None))
@example(WORKED_EXAMPLE)
def test_batches_are_valid_and_round_trip(batch):
    """Every drawn batch passes validation again and round-trips through JSON bit for bit."""
    assert VerifyBatch.from_dict(batch.to_dict()) == batch
    assert VerifyBatch.from_json(batch.to_json()) == batch
    assert batch.max_context <= MAX_CONTEXT
    assert batch.full_to_swa[-1] == -1


@FAST
@given(verify_batches(graph=True))
def test_every_graph_row_fits_the_table(batch):
    """Every real verify token and each pad row's share end within max_context; only absorbed slack may not (F2c)."""
    graph = batch.graph
    lens = (
        tier_verify_lens(batch.verify_lens, graph.padded_bs, graph.graph_num_tokens, graph.cap)
        if batch.is_ragged
        else [batch.num_draft_tokens] * graph.padded_bs
    )
    seq = list(batch.seq_lens) + [1] * (graph.padded_bs - batch.bs)
    own = list(batch.extend_lens) + lens[batch.bs :]
    assert max(s + e for s, e in zip(seq, own)) <= batch.max_context
    past = [b for b, (s, e) in enumerate(zip(seq, lens)) if s + e > batch.max_context]
    assert past in ([], [batch.bs - 1]) and (not past or graph.padded_bs == batch.bs)


@FAST
@given(verify_batches(compression=True))
def test_compressor_state_rings_serve_the_draft_count(batch):
    """Upstream's pool configurator refuses a ring that cannot keep a step's states resident
    (``get_compress_state_write_pad``): the strategies never draw one, so P10 judges every drawn write plan."""
    from metadata_builders.families.dsv4.kv_state import state_unfit

    if batch.geometry.compression is not None:  # a tier compression cannot take drops it (_fit_compression)
        assert state_unfit(batch, 4) is None and state_unfit(batch, 128) is None


@FAST
@given(st.data())
def test_drawn_variants_are_valid_for_the_batch(data):
    """``variants(batch)`` only draws variants listed by ``variants_for(batch)``."""
    batch = data.draw(verify_batches())
    assert data.draw(variants(batch)) in variants_for(batch)


@FAST
@given(st.data())
def test_variants_respect_the_path(data):
    """``variants(batch, path=...)`` draws only variants of that path."""
    batch = data.draw(verify_batches(graph=True))
    assert data.draw(variants(batch, path="graph")).path == "graph"
    assert data.draw(variants(batch, path="eager")).path == "eager"


def test_graph_variants_need_a_tier():
    """Asking for graph variants of an eager-only batch is an argument error."""
    with pytest.raises(InvalidArgument):
        variants(_batch(graph=None), path="graph")


@pytest.mark.parametrize("graph", [True, False])
@pytest.mark.parametrize("ragged", [True, False])
def test_graph_and_ragged_pins_hold(graph, ragged):
    """``graph=`` forces or forbids a tier and ``ragged=`` fixes the verify layout."""

    @FAST
    @given(verify_batches(graph=graph, ragged=ragged))
    def check(batch):
        assert (batch.graph is not None) is graph
        assert batch.is_ragged is ragged
        if graph and not ragged:
            assert batch.graph.graph_num_tokens == batch.graph.padded_bs * batch.num_draft_tokens

    check()


@FAST
@given(verify_batches(is_dspark=True, num_draft_tokens=3, min_requests=2, max_requests=4, geometry=Geometry()))
def test_scalar_pins_hold(batch):
    """``is_dspark``, ``num_draft_tokens``, the request bounds and ``geometry`` are honoured."""
    assert batch.is_dspark
    assert batch.num_draft_tokens == 3
    assert 2 <= batch.bs <= 4
    assert batch.geometry == Geometry()


@FAST
@given(verify_batches(divergence=True))
def test_divergence_true_attaches_one(batch):
    """``divergence=True`` attaches a divergence of length bs or padded_bs whose sum or rows differ."""
    allowed = {batch.bs} | ({batch.graph.padded_bs} if batch.graph is not None else set())
    assert len(batch.divergence.extend_seq_lens) in allowed
    assert divergence_kind(batch) in DIVERGENCE_KINDS


@FAST
@given(verify_batches())
def test_divergence_defaults_to_none(batch):
    """Without ``divergence=True`` no divergence is attached."""
    assert batch.divergence is None


@pytest.mark.parametrize("kind", DIVERGENCE_KINDS)
def test_divergences_have_the_requested_kind(kind):
    """A drawn divergence is valid for its batch, and of the requested kind unless its rows cannot take it."""
    from metadata_builders.families.dsv4.strategies._divergences import _possible_kinds

    @FAST
    @given(st.data())
    def check(data):
        batch = data.draw(verify_batches())
        divergence = data.draw(divergences(batch, kind=kind))
        diverged = batch.replace(divergence=divergence)
        assert min(divergence.extend_seq_lens) >= (1 if batch.is_ragged else 0)
        if divergence_kind(diverged) != kind:
            host, lo, hi, ceiling = batch.divergence_bounds(len(divergence.extend_seq_lens))
            assert kind not in _possible_kinds(host, lo, hi, None if ceiling is None else ceiling - sum(host))

    check()


def test_divergences_cover_real_rows_and_tier_rows():
    """Divergences of batches with pad rows cover sometimes the bs real rows, sometimes every padded row."""
    seen: set[str] = set()

    @settings(deadline=None, database=None, derandomize=True, max_examples=100)
    @given(st.data())
    def collect(data):
        batch = data.draw(verify_batches(graph=True))
        divergence = data.draw(divergences(batch))
        if batch.graph.padded_bs > batch.bs:
            seen.add("padded" if len(divergence.extend_seq_lens) == batch.graph.padded_bs else "real")

    collect()
    assert seen == {"real", "padded"}


def test_divergence_kind_classifies_by_sum():
    """More tokens on the device run ahead, fewer fall behind, the same sum in other rows is permuted."""
    assert divergence_kind(WORKED_EXAMPLE) is None
    assert divergence_kind(_batch(divergence=Divergence((3, 3, 1)))) == "run_ahead"
    assert divergence_kind(_batch(divergence=Divergence((1, 3, 1)))) == "fall_behind"
    assert divergence_kind(_batch(divergence=Divergence((1, 3, 2)))) == "permuted"
    assert divergence_kind(_batch(divergence=Divergence((2, 3, 1)))) == "same"


@FAST
@given(st.data())
def test_verify_lens_stay_in_range(data):
    """Ragged lengths have the requested count and lie in 1..num_draft_tokens."""
    draft = data.draw(st.integers(1, 8))
    n = data.draw(st.integers(1, 16))
    lens = data.draw(verify_lens(num_requests=n, num_draft_tokens=draft))
    assert len(lens) == n
    assert all(1 <= v <= draft for v in lens)


@FAST
@given(st.data())
def test_graph_tiers_cover_the_batch(data):
    """A tier has padded_bs >= bs, graph_num_tokens >= the real tokens and a cap of None or >= 1."""
    draft = data.draw(st.integers(1, 8))
    lens = data.draw(st.none() | verify_lens(num_draft_tokens=draft))
    bs = len(lens) if lens is not None else data.draw(st.integers(1, 16))
    tier = data.draw(graph_tiers(num_draft_tokens=draft, num_requests=bs, verify_lens=lens))
    assert tier.padded_bs >= bs
    assert tier.graph_num_tokens >= (sum(lens) if lens is not None else bs * draft)
    assert tier.cap is None or tier.cap >= 1
    if lens is None:
        assert tier.graph_num_tokens == tier.padded_bs * draft


@FAST
@given(geometries(page_size=5, swa_window=7, page_index_align=3))
def test_geometry_pins_hold(geometry):
    """Pinned geometry dimensions are kept; the rest are drawn."""
    assert (geometry.page_size, geometry.swa_window, geometry.page_index_align) == (5, 7, 3)


@pytest.mark.parametrize(
    "name, condition",
    [
        ("upstream", lambda g: g == Geometry()),
        ("small", lambda g: max(g.page_size, g.swa_window, g.page_index_align, g.ring_size) <= 8),
        ("huge_ring", lambda g: g.ring_size in HUGE_RING_SIZES),
    ],
)
def test_geometries_reach_small_upstream_and_huge(name, condition):
    """Upstream constants, all-small geometries and int32-overflowing rings are all drawn."""
    find(geometries(num_draft_tokens=2), condition, settings=FIND)


def test_bad_arguments_are_rejected():
    """Impossible bounds and unknown kinds raise InvalidArgument naming the argument."""
    with pytest.raises(InvalidArgument, match="max_requests"):
        find(verify_batches(min_requests=3, max_requests=2), bool, settings=FIND)
    with pytest.raises(InvalidArgument, match="kind"):
        find(divergences(WORKED_EXAMPLE, kind="sideways"), bool, settings=FIND)
    with pytest.raises(InvalidArgument, match="num_requests"):
        find(graph_tiers(num_draft_tokens=2, num_requests=3, verify_lens=[1, 2]), bool, settings=FIND)


@FAST
@given(st.data())
def test_equal_windows_draws_one_window_in_every_mode(data):
    """``equal_windows=True``: ``unified_swa_window == swa_window`` in every mode; pinned otherwise, refused."""
    mode = data.draw(st.sampled_from(("target_verify", "draft_extend", "decode")))
    geo = data.draw(verify_batches(mode=mode, equal_windows=True)).geometry
    assert geo.unified_swa_window == geo.swa_window


def test_equal_windows_refuses_a_geometry_whose_windows_differ():
    """A pinned geometry or unified window that contradicts ``equal_windows=True`` is an argument error."""
    from metadata_builders import Geometry

    with pytest.raises(InvalidArgument, match="equal_windows"):
        find(verify_batches(equal_windows=True, geometry=Geometry(unified_swa_window=7)), bool, settings=FIND)
    with pytest.raises(InvalidArgument, match="equal_windows"):
        find(geometries(swa_window=4, unified_swa_window=5, equal_windows=True), bool, settings=FIND)


def test_worked_example_hits_its_boundaries():
    """The docstring's batch straddles the window, wraps the ring twice and spreads slack unevenly."""
    hits = boundary_hits(WORKED_EXAMPLE)
    assert {"swa_window_edge", "ring_wrap>=2", "tier_slack_uneven", "row_fills_context", "graph_ragged"} <= hits
    assert hits <= set(COVERAGE_EVENTS)
    assert coverage_events() == tuple(COVERAGE_EVENTS)
