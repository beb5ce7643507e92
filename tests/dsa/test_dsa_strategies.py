"""The DSA strategies draw valid, replayable batches that reach the family's boundaries and shrink small."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from metadata_builders.families.dsa.batch import MODES, DSABatch, DSAGraphTier
from metadata_builders.families.dsa.strategies import (
    CAPTURE_LADDER,
    dsa_batches,
    dsa_capture_lists,
    dsa_graph_tiers,
    dsa_variants,
)
from metadata_builders.families.dsa.variants import variants_for

_QUICK = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))


@_QUICK
@given(dsa_batches())
def test_batches_round_trip_through_json(batch: DSABatch) -> None:
    """Every drawn batch is valid and rebuilds bit for bit from its replay file."""
    assert DSABatch.from_json(batch.to_json()) == batch


@_QUICK
@given(dsa_capture_lists())
def test_capture_lists_are_the_runners(capture: tuple[int, ...]) -> None:
    """A capture list is upstream's ladder cut at max_running_requests, which it holds."""
    cap = max(capture)
    assert capture == tuple(sorted({b for b in CAPTURE_LADDER if b <= cap} | {cap}))


@_QUICK
@given(st.integers(0, 5).flatmap(lambda bs: st.tuples(st.just(bs), dsa_graph_tiers(bs))))
def test_tiers_pick_the_smallest_captured_size(drawn: tuple[int, DSAGraphTier]) -> None:
    """The runner replays on the smallest captured size that holds the batch."""
    bs, tier = drawn
    assert tier.padded_bs == min(t for t in tier.tiers if t >= max(bs, 1))


@_QUICK
@given(dsa_batches().flatmap(lambda b: st.tuples(st.just(b), dsa_variants(b))))
def test_variants_are_valid(drawn: tuple) -> None:
    """A drawn variant is one of the batch's."""
    batch, variant = drawn
    assert variant in variants_for(batch)


def test_batches_reach_the_family_boundaries() -> None:
    """Within 200 draws: every mode, a wide table, a pad row, a capture list of several sizes, a diverged and a stale
    batch, a top-k below a length, page sizes 1 and 64."""
    seen: Counter = Counter()

    @settings(max_examples=200, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(dsa_batches())
    def draw(batch: DSABatch) -> None:
        seen[batch.mode] += 1
        seen["wide"] += batch.width > 128
        seen["pad"] += batch.graph is not None and batch.graph.padded_bs > batch.bs
        seen["capture"] += batch.graph is not None and len(batch.graph.capture_bs) > 1
        seen["diverged"] += batch.diverged
        seen["stale"] += batch.stale_mirror
        seen["topk"] += any(s + batch.num_draft_tokens > batch.index_topk for s in batch.caller_seq_lens)
        seen[f"P{batch.page_size}"] += 1

    draw()
    for key in (*MODES, "wide", "pad", "capture", "diverged", "stale", "topk", "P1", "P64"):
        assert seen[key], key


def test_batches_shrink_towards_one_verify_request() -> None:
    """Among requests-carrying modes the simplest batch is one target-verify request, eager, nothing injected."""
    modes = [m for m in MODES if m != "idle"]
    batch = find(dsa_batches(modes=modes), lambda b: True, settings=settings(database=None, derandomize=True))
    assert (batch.mode, batch.bs, batch.graph, batch.divergence) == ("target_verify", 1, None, None)
