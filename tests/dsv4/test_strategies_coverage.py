"""The strategies reach the boundaries often and shrink small: hit-rate floors, minimal counterexamples, stale host
mirrors, a DSpark draft worker's block verify.

What a drawn batch is and what its pins hold: ``test_strategies.py``.
"""

from __future__ import annotations

from collections import Counter

import pytest
from _strategy_settings import FAST, FIND
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument, NoSuchExample

from metadata_builders import Geometry, get_builder
from metadata_builders.families.dsv4.metadata import first_difference
from strategies import STALE_MIRROR_KINDS, boundary_hits, stale_mirrors, variants, verify_batches


# Floors (per cent of 200 derandomized examples) for the boundaries the harness relies on.
HIT_RATE_FLOORS = {
    "bs=1": 8,
    "bs>=8": 8,
    "uniform": 15,
    "ragged": 15,
    "verify_len=1": 20,
    "verify_len=full": 20,
    "dspark": 20,
    "eagle": 20,
    "short_prefix": 20,
    "long_prefix": 8,
    "swa_window_edge": 30,
    "page_boundary": 30,
    "max_seq_len_clamped": 5,
    "row_fills_context": 20,
    "ring_wrap": 30,
    "ring_wrap>=2": 20,
    "swa_loc>=2**30": 5,
    "req_to_token_minus1": 8,
    "req_to_token_sentinel": 8,
    "eager_only": 5,  # 8 per cent since compressed geometries joined the draws (10 before)
    "graph_uniform": 8,
    "graph_ragged": 20,
    "pad_rows=0": 10,
    "pad_rows=1": 5,
    "pad_rows>=4": 5,
    "tier_slack_spread": 8,
    "tier_slack_uneven": 4,
    "tier_slack_partial": 3,
    "tier_slack_absorbed": 2,
    "tier_exact": 3,
    "pad_row_zero_tokens": 3,
    "pad_rows_clamped": 1,  # F2b: a cap may only clamp shares above max(verify_lens)
    "capped_uncovered_tail": 5,
    "capped_no_pad_rows": 2,
    "cap_not_binding": 5,
    "page_size_small": 20,
    "page_size_upstream": 20,
    "swa_window_small": 20,
    "swa_window_upstream": 20,
    "page_index_align_small": 20,
    "page_index_align_upstream": 20,
    "ring_small": 15,
    "ring_upstream": 15,
    "ring_huge": 10,
}


def test_key_boundaries_are_hit_often():
    """Over 200 derandomized examples each key boundary is reached at least as often as its floor."""
    counts: Counter[str] = Counter()

    @settings(deadline=None, database=None, derandomize=True, max_examples=200)
    @given(verify_batches())
    def collect(batch):
        counts["examples"] += 1
        counts.update(boundary_hits(batch))

    collect()
    rates = {name: 100 * counts[name] / counts["examples"] for name in HIT_RATE_FLOORS}
    low = {name: rate for name, rate in rates.items() if rate < HIT_RATE_FLOORS[name]}
    assert not low, f"boundaries below their floor (per cent): {low}"


def test_every_divergence_kind_is_drawn_often():
    """Over 100 derandomized examples each divergence kind, and tier-wide divergences, are drawn."""
    counts: Counter[str] = Counter()

    @settings(deadline=None, database=None, derandomize=True, max_examples=100)
    @given(verify_batches(divergence=True))
    def collect(batch):
        counts.update(boundary_hits(batch))

    collect()
    floors = {
        "divergence_run_ahead": 15,
        "divergence_fall_behind": 15,
        "divergence_permuted": 8,
        "divergence_padded_len": 3,
    }
    low = {name: counts[name] for name, floor in floors.items() if counts[name] < floor}
    assert not low, f"divergence kinds below their floor (of 100): {low}"


def test_shrinks_to_one_minimal_request():
    """The simplest batch is one uniform eager EAGLE request, seq_len 1, one token, geometry all 1."""
    batch = find(verify_batches(), lambda b: True, settings=FIND)
    assert batch.bs == 1
    assert batch.seq_lens == (1,)
    assert batch.num_draft_tokens == 1
    assert (batch.graph, batch.divergence, batch.verify_lens, batch.is_dspark) == (None, None, None, False)
    assert batch.geometry == Geometry(1, 1, 1, 1, 1)


def test_graph_batches_shrink_to_no_padding():
    """The simplest batch with a graph tier has at most one pad row."""
    batch = find(verify_batches(), lambda b: b.graph is not None, settings=FIND)
    assert batch.bs == 1
    assert batch.graph.padded_bs - batch.bs <= 1


def test_uncovered_tails_shrink_small():
    """The simplest capped tier with an uncovered tail has one request and at most one pad row."""
    batch = find(
        verify_batches(ragged=True, graph=True),
        lambda b: "capped_uncovered_tail" in boundary_hits(b),
        settings=FIND,
    )
    assert batch.bs == 1
    assert batch.graph.padded_bs - batch.bs <= 1


def test_divergences_shrink_to_one_token_on_one_row():
    """The simplest divergence moves one token on one row of a single request."""
    batch = find(verify_batches(divergence=True), lambda b: True, settings=FIND)
    assert batch.bs == 1
    assert abs(sum(batch.divergence.extend_seq_lens) - batch.num_real_tokens) == 1


@settings(deadline=None, max_examples=100, database=None)
@given(st.data())
def test_reference_and_hip_agree_on_drawn_batches(data):
    """The reference and the HIP builder give identical fields and decisions on every drawn case."""
    batch = data.draw(verify_batches())
    variant = data.draw(variants(batch))
    ref = get_builder("reference").build(batch, variant)
    hip = get_builder("hip").build(batch, variant)
    assert first_difference(ref.fields, hip.fields) is None, (batch.to_json(), variant)
    assert ref.decision == hip.decision, (batch.to_json(), variant)


# -- stale host mirrors ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", STALE_MIRROR_KINDS)
def test_stale_mirrors_have_the_requested_kind(kind):
    """A stale mirror differs from seq_lens; one_row_off in one row by one, swapped and same_sum keep the sum."""

    @FAST
    @given(st.data())
    def check(data):
        batch = data.draw(verify_batches(divergence=None))
        div = data.draw(stale_mirrors(batch, kind=kind))
        mirror, truth = list(div.seq_lens_cpu), list(batch.seq_lens)
        assert mirror != truth and min(mirror) >= 1 and len(mirror) == batch.bs
        assert div.extend_seq_lens == (None if batch.divergence is None else batch.divergence.extend_seq_lens)
        batch.replace(divergence=div)  # valid
        off = [i for i in range(batch.bs) if mirror[i] != truth[i]]
        possible = kind == "one_row_off" or (kind == "swapped" and len(set(truth)) >= 2) or (
            kind == "same_sum" and batch.bs >= 2 and max(truth) >= 2)
        one_off = len(off) == 1 and abs(mirror[off[0]] - truth[off[0]]) == 1
        if kind == "one_row_off":
            assert one_off
            return
        if not possible:  # replaced by a kind the batch can take: one row off, or (two rows) the same sum
            assert one_off or (sum(mirror) == sum(truth) and len(off) == 2), (truth, mirror)
            return
        assert sum(mirror) == sum(truth) and len(off) == 2
        if kind == "swapped":
            assert sorted(mirror) == sorted(truth)

    check()


def test_every_stale_mirror_kind_is_drawn_often():
    """Over 100 derandomized examples of P2's stale focus, each kind of stale mirror is drawn at least 5 times."""
    counts: Counter[str] = Counter()

    @settings(deadline=None, database=None, derandomize=True, max_examples=100)
    @given(st.data())
    def collect(data):
        batch = data.draw(verify_batches(stale_mirror=True))
        div = batch.divergence
        off = [i for i, (a, b) in enumerate(zip(div.seq_lens_cpu, batch.seq_lens)) if a != b]
        same_sum = sum(div.seq_lens_cpu) == sum(batch.seq_lens)
        swapped = sorted(div.seq_lens_cpu) == sorted(batch.seq_lens)
        counts["swapped" if swapped else "same_sum" if same_sum else "one_row_off"] += 1
        assert off

    collect()
    low = {kind: counts[kind] for kind in STALE_MIRROR_KINDS if counts[kind] < 5}
    assert not low, f"stale mirror kinds below 5 of 100: {dict(counts)}"


def test_stale_mirrors_shrink_to_one_row_one_token_ahead():
    """The simplest stale mirror is the first row one token ahead, on a single request."""
    batch = find(verify_batches(stale_mirror=True), lambda b: True, settings=FIND)
    assert batch.bs == 1 and batch.divergence.seq_lens_cpu == (batch.seq_lens[0] + 1,)


@FAST
@given(verify_batches(dspark_draft=True))
def test_dspark_draft_draws_a_draft_workers_block_verify(batch):
    """``dspark_draft=True``: DSpark target verify, configured ``num_draft_tokens + 1``, no compressed KV, the
    ``dspark_draft`` boundary named."""
    assert batch.is_dspark and batch.speculative_num_draft_tokens == batch.num_draft_tokens + 1
    assert batch.geometry.compression is None and "dspark_draft" in boundary_hits(batch)


def test_dspark_draft_reaches_uniform_and_ragged_eager_and_graph_and_only_when_asked():
    """Both verify shapes on both paths; the default never draws a draft worker, ``None`` draws one for DSpark."""
    for ragged in (False, True):
        for graph in (False, True):
            find(verify_batches(dspark_draft=True, ragged=ragged, graph=graph), bool, settings=FIND)
    with pytest.raises(NoSuchExample):
        find(verify_batches(is_dspark=True), lambda b: b.is_dspark_draft, settings=FAST)
    find(verify_batches(dspark_draft=None), lambda b: b.is_dspark_draft, settings=FIND)


@pytest.mark.parametrize("pins", [{"is_dspark": False}, {"compression": True}, {"mode": "draft_extend"}])
def test_dspark_draft_refuses_a_pin_that_contradicts_it(pins):
    """A draft worker's block verify is DSpark target verify on an uncompressed pool: a contrary pin is refused."""
    with pytest.raises(InvalidArgument, match="dspark_draft"):
        find(verify_batches(dspark_draft=True, **pins), bool, settings=FIND)
