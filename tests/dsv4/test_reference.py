"""The reference builder on named, hand-derived worked examples (DESIGN.md section 2).

The expected fields are written out by hand in ``tests/_reference_expected.py`` from the pipeline of DESIGN.md
section 2, on the tables of ``tests/_examples.py``; the decisions and padding conventions below likewise.  The hip
builder is then checked against the reference on every variant of every example.
"""

from __future__ import annotations

import pytest
from _examples import EXAMPLES, GEOMETRY, make_batch
from _reference_expected import EXPECTED

from metadata_builders import GraphTier, ReferenceBuilder, Variant, get_builder, variants_for
from metadata_builders.families.dsv4.metadata import fields_for, first_difference


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
