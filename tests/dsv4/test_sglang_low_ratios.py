"""With the V4.1 low ratios, the installed SGLang (0.5.22+) builds the c1/c2 metadata and the harness judges it.

Skipped unless SGLang is importable.  The adapter hands the geometry's
``low_ratios`` to upstream's backend; releases before 0.5.22 have none, and
there every low-ratio field is listed as not observable.
"""

from __future__ import annotations

import pytest
from _sglang_support import compressed, known_or_release_difference

from metadata_builders import GraphTier
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.batch import Compression
from metadata_builders.families.dsv4.metadata import FIELDS
from metadata_builders.families.dsv4.properties import check_p1_reference

pytestmark = pytest.mark.sglang

LOW = {"c1": (1,), "c2": (2,), "c1_c2": (1, 2)}
EXAMPLES = {
    "uniform_across_c128_and_page": lambda c: compressed([5, 126, 254], [1, 3, 2], 3, compression=c),
    "ragged_capped_tier_with_tail_pads": lambda c: compressed([5, 126], [1, 3], 3, verify_lens=[3, 1],
                                                              graph=GraphTier(3, 9, cap=3), compression=c),
}


def _low_fields(low_ratios: tuple[int, ...]) -> set[str]:
    return {n for n, spec in FIELDS.items() if spec.group == "low_ratios" and spec.ratio in low_ratios}


@pytest.mark.parametrize("low", list(LOW))
@pytest.mark.parametrize("name", list(EXAMPLES))
def test_low_ratio_batches_match_reference(sglang, upstream, name: str, low: str) -> None:
    """Every variant equals the reference on every group, the low ratios included (0.5.22+)."""
    batch = EXAMPLES[name](Compression(low_ratios=LOW[low]))
    try:
        check_p1_reference(sglang, batch)
    except PropertyFailure as failure:
        assert known_or_release_difference(upstream, batch, failure), str(failure)


def test_low_ratio_fields_are_judged_or_named(sglang, upstream) -> None:
    """0.5.22+ report every low-ratio field and the coverage counts 6 more per ratio; older releases name them."""
    from metadata_builders.families.dsv4.sglang.coverage import coverage_of  # imports SGLang: inside the test

    batch = EXAMPLES["uniform_across_c128_and_page"](Compression(low_ratios=(1, 2)))
    variant = sglang.variants_supported(batch)[0]  # 0.5.18-0.5.20 have no dspark gate
    result = sglang.build(batch, variant)
    low = _low_fields((1, 2))
    cov = coverage_of(sglang, batch, variant)
    if upstream.capabilities.low_ratios:
        assert low <= set(result.fields)
        assert "core_attn_metadata.c2_sparse_raw_indices" in cov.judged and "c1_indexer_metadata" in cov.judged
        # The eager build runs the in-graph block as the dispatcher does: its three fields judged with the rest.
        assert {"low_ratio_req_indices", "low_ratio_pos_i64", "core_attn_metadata.swa_out_cache_loc"} <= set(cov.judged)
        assert len(cov.produced) == len(cov.judged) == 48 and not cov.not_observable
        assert cov.line() == "coverage: 48 judged / 48 produced by upstream"
    else:
        assert low <= set(result.not_observable)
        assert not any(n.startswith(("c1_", "c2_", "core_attn_metadata.c1_", "core_attn_metadata.c2_"))
                       for n in cov.produced)


def test_indexer_on_another_page_is_not_observable(sglang, upstream) -> None:
    """Page 128: upstream's indexer asserts page 256, so the low-ratio indexers are named, the rest judged."""
    batch = compressed([5, 126], [1, 3], 3, page=128, compression=Compression(low_ratios=(2,)))
    result = sglang.build(batch, sglang.variants_supported(batch)[0])
    indexer = {"c2_indexer_compressed_seq_lens", "c2_indexer_page_table"}
    assert indexer <= set(result.not_observable)
    if upstream.capabilities.low_ratios:
        assert _low_fields((2,)) - indexer <= set(result.fields)


@pytest.mark.parametrize("low", list(LOW))
def test_low_ratio_graph_replays_run_upstreams_in_graph_block(sglang, upstream, low: str) -> None:
    """The recorded graph path with low ratios: upstream's in-graph phase adds the V4.1 token map and FP4
    workspaces (0.5.22+), which read the runner's ``spec_info.draft_token_num``, the pool's index pools and
    the model; the double hands them in, so P5, P7 and P9 judge the replay instead of crashing in the double.
    (Before the fix: every graph batch with a low ratio failed at both sides of the gate, hidden as pre-existing.)
    """
    from metadata_builders.families.dsv4.properties import (
        check_p5_graph_vs_eager,
        check_p7_capture_safety,
        check_p9_no_hidden_state,
    )

    batch = compressed([5, 126], [1, 3], 3, graph=GraphTier(4, 12), compression=Compression(low_ratios=LOW[low]))
    from metadata_builders.families.dsv4.runs.findings import known_finding

    for check in (check_p5_graph_vs_eager, check_p7_capture_safety, check_p9_no_hidden_state):
        try:
            check(sglang, batch)
        except PropertyFailure as failure:  # 0.5.18/0.5.19: F14, the replay rebinds swa_loc
            assert known_or_release_difference(upstream, batch, failure) or known_finding(failure, batch) is not None, \
                str(failure)


@pytest.mark.parametrize("ragged", [False, True], ids=["uniform", "ragged"])
def test_a_graph_replay_reads_the_live_positions_and_locations(sglang, upstream, ragged: bool) -> None:
    """As upstream's runner refills its static ``positions`` with the live batch's (pad 0) before every replay, the
    recorded in-graph block widens the replayed batch's positions into ``low_ratio_pos_i64`` -- not the zeros of a
    buffer never refilled (docs/research/sglang-runner-inputs.md D9) -- and translates its live ``out_cache_loc``
    into ``swa_out_cache_loc``, each pad token's 0 to the dummy slot ``full_to_swa[0]`` (100 here)."""
    if not upstream.capabilities.low_ratios:
        pytest.skip(f"SGLang {upstream.release} has no V4.1 low ratios")
    low = Compression(low_ratios=(1, 2))
    lens = {"verify_lens": [3, 1]} if ragged else {}
    first = compressed([5, 126], [1, 3], 3, graph=GraphTier(3, 9), compression=low, **lens)
    second = compressed([40, 9], [2, 1], 3, graph=GraphTier(3, 9), compression=low, **lens)
    variant = next(v for v in sglang.variants_supported(first) if v.path == "graph" and v.mirror == "host")
    replayed = sglang.replay(sglang.capture(first, variant), second)
    real = list(second.positions)
    assert replayed.fields["low_ratio_pos_i64"] == real + [0] * (9 - len(real))
    assert replayed.fields["swa_out_cache_loc"] == [100 + x for x in second.out_cache_loc] + [100] * (9 - len(real))
