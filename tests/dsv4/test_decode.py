"""Modes ``decode`` and ``draft_decode`` end to end: the reference's worked example, the bundled ``hip`` builder
against the reference on both paths, the field table, the harness's call (the shared per-step buffer), the
properties that judge them and why the others do not, and the strategies."""

from __future__ import annotations

import dataclasses

import pytest
from _examples import kv_tables
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import InvalidArgument

from metadata_builders import Compression, Geometry, GraphTier, VerifyBatch
from metadata_builders.errors import InvalidBatch, InvalidVariant, PropertyFailure
from metadata_builders.families.dsv4.builders import AuditedBuilder, get_builder
from metadata_builders.families.dsv4.hip import HipBuilder
from metadata_builders.families.dsv4.inputs import make_inputs, refill_inputs
from metadata_builders.families.dsv4.metadata import COMMON_FIELD_NAMES, fields_for
from metadata_builders.families.dsv4.properties import PROPERTIES, check_p1_reference, check_p5_graph_vs_eager
from metadata_builders.families.dsv4.properties.kv import check_p10_kv_state
from metadata_builders.families.dsv4.properties.spec import verdict
from metadata_builders.families.dsv4.reference.decode import decode_fields
from metadata_builders.families.dsv4.variants import Variant, check_variant, variants_for
from strategies import verify_batches

COMPRESSED = Geometry(page_size=128, swa_window=4, ring_size=6, unified_swa_window=4, page_index_align=64,
                      compression=Compression(index_topk=8, c4_ring_size=16, c128_ring_size=256, unified_swa_pages=5))


def _batch(mode: str = "draft_decode", graph: GraphTier | None = GraphTier(3, 3),
           geometry: Geometry = Geometry()) -> VerifyBatch:
    """reference/decode.py's worked example's shape: slots 1 and 2, prefixes 7 and 3, four draft tokens (three
    steps), step 1 (draft decode: the shared buffer request-major, each position's own location)."""
    width = 12 if geometry.compression is None else 136
    table, full_to_swa = kv_tables(4, width)
    steps = 3 if mode == "draft_decode" else 1
    out = [slot * width + s + j for slot, s in ((1, 7), (2, 3)) for j in range(steps)]
    return VerifyBatch(seq_lens=[7, 3], req_pool_indices=[1, 2], verify_lens=None, num_draft_tokens=4,
                       out_cache_loc=out, req_to_token=table, full_to_swa=full_to_swa, geometry=geometry, graph=graph,
                       mode=mode, draft_step=1 if mode == "draft_decode" else None)


def test_the_worked_example() -> None:
    f = decode_fields(_batch(), graph=True)
    assert f["seq_lens"] == [9, 5, 3]  # 7 + 1 + 1, 3 + 1 + 1, the pad row 1 + 1 + 1
    assert f["positions_casual"] == [8, 4, 2]
    assert f["raw_out_loc"] == [20, 28, 0]  # entry i * steps + step of [19, 20, 21, 27, 28, 29]; the pad row's 0
    assert f["req_pool_indices_repeated"] == [1, 2, 0]
    assert f["swa_out_cache_loc"] == [_batch().full_to_swa[x] for x in (20, 28, 0)]
    assert all(len(row) == -(-12 // Geometry().page_size) for row in f["page_table"])  # max_context wide
    decode = decode_fields(_batch("decode"), graph=False)
    assert decode["seq_lens"] == [8, 4] and decode["positions_casual"] == [7, 3] and decode["raw_out_loc"] == [19, 27]


def test_a_decode_step_builds_the_v41_low_ratios_as_decode_rows() -> None:
    """The decode step's V4.1 group (upstream ``_init_low_ratio_indexer_metadata(is_prefill=False)`` and the in-graph
    block): row lengths 8 and 4 and a pad row's 1 give clamp-1 ratio-2 lengths [4, 2, 1] (a prefill row's would be
    0 on the pad row); the state map is the slots, the positions the forward batch's (the pad row at 0); the bundled
    builder agrees on both paths; a draft child (no compressed pool) has none of it."""
    import dataclasses

    geo = dataclasses.replace(COMPRESSED, compression=dataclasses.replace(COMPRESSED.compression, low_ratios=(1, 2)))
    batch = _batch("decode", geometry=geo)
    f = decode_fields(batch, graph=True)
    assert f["c2_indexer_compressed_seq_lens"] == f["c2_topk_lengths_clamp1"] == [4, 2, 1]
    assert f["c1_indexer_compressed_seq_lens"] == [8, 4, 1] and f["c2_out_loc"] == [(136 + 7) // 2, (272 + 3) // 2, -1]
    assert f["low_ratio_req_indices"] == [1, 2, 0] and f["low_ratio_pos_i64"] == [7, 3, 0]
    for variant in variants_for(batch):
        assert get_builder("hip").build(batch, variant).fields == get_builder("reference").build(batch, variant).fields
    assert not {n for n in fields_for(geo, "draft_decode") if n.startswith(("c1_", "c2_", "low_ratio"))}


def test_the_decode_plans_write_each_rows_own_ring_at_its_position() -> None:
    f = decode_fields(_batch("decode", geometry=COMPRESSED), graph=True)
    # c4, ring 16: slot 1, seq_len 8 -> p = 7: write 16 + 7 = 23, pages (16 + 3) // 4 = 4 and 23 // 4 = 5.
    assert f["c4_decode_plan"][0] == [8, 23, 4, 5]
    # the pad row (slot 0, seq_len 1): its state stays in slot 0's ring
    assert f["c4_decode_plan"][2] == [1, 0, 0, 0] and f["c128_decode_plan"][2] == [1, 0, 0, 0]
    assert f["swa_loc"] == [1 * 6 + 7 % 6, 2 * 6 + 3 % 6, 0] and f["verify_store_state_slot"] == [1, 2, 0]


def test_a_draft_worker_compresses_nothing_whatever_the_geometry() -> None:
    """Upstream's draft backend has ``need_compress = not is_draft_worker``: no compressed field, and its index
    streams carry the window alone (empty compressed tails)."""
    f = decode_fields(_batch("draft_decode", geometry=COMPRESSED), graph=True)
    assert not any(name.startswith(("c4_", "c128_", "unified_c", "indexer_")) for name in f)
    assert set(f) == set(fields_for(COMPRESSED, "draft_decode"))
    assert f["hca_indptr"] == f["swa_indptr"]  # no c128 page in any token's stream


@pytest.mark.parametrize("mode", ["decode", "draft_decode"])
def test_a_decode_batch_has_the_path_as_its_only_knob(mode: str) -> None:
    batch = _batch(mode)
    assert variants_for(batch) == [Variant("eager"), Variant("graph")]
    with pytest.raises(InvalidVariant) as info:
        check_variant(batch, Variant("eager", mirror="tolist"))
    assert info.value.field == "mirror" and mode in str(info.value)


@pytest.mark.parametrize("geometry", [Geometry(), COMPRESSED], ids=["plain", "compressed"])
@pytest.mark.parametrize("mode", ["decode", "draft_decode"])
@pytest.mark.parametrize("path", ["eager", "graph"])
def test_the_hip_builder_builds_the_decode_modes_as_the_reference_does(path: str, mode: str,
                                                                      geometry: Geometry) -> None:
    batch, variant = _batch(mode, geometry=geometry), Variant(path)
    expected = get_builder("reference").build(batch, variant)
    actual = get_builder("hip").build(batch, variant)
    assert set(actual.fields) == set(fields_for(batch.geometry, mode)) >= set(COMMON_FIELD_NAMES)
    assert actual.fields == expected.fields
    assert actual.decision == expected.decision
    assert actual.audit.host_syncs == [] and actual.audit.faults == []  # the contract: no read back at all
    assert actual.audit.token_maps == []  # one token per row: no token map


def test_the_decode_fields_have_no_prefill_mapping_and_no_prefill_plan() -> None:
    names = fields_for(COMPRESSED, "decode")
    assert not {"extend_seq_lens", "extend_start_loc", "pf_state_slot", "c4_compress_plan"} & set(names)
    assert {"swa_loc", "verify_store_state_slot", "swa_out_cache_loc", "c4_decode_plan", "c128_decode_plan",
            "c128_page_indices"} <= set(names)
    assert "c4_decode_plan" not in fields_for(Geometry(), "decode")  # no compression, no plan
    assert "c4_decode_plan" not in fields_for(COMPRESSED)  # target verify plans the prefill way


def test_the_harness_hands_draft_decode_the_whole_shared_buffer() -> None:
    inputs = make_inputs(_batch(), Variant("graph"), "cpu")
    assert inputs.seq_lens.tolist() == [7, 3, 1]  # the forward batch's: the child adds its step + 1
    assert inputs.out_cache_loc.tolist() == [19, 20, 21, 27, 28, 29, 0, 0, 0]  # rows * steps, request-major
    assert inputs.draft_step == 1
    assert make_inputs(_batch("decode"), Variant("eager"), "cpu").seq_lens.tolist() == [8, 4]  # with the token


def test_a_replay_of_another_step_is_refused_naming_the_field() -> None:
    inputs = make_inputs(_batch(), Variant("graph"), "cpu")
    with pytest.raises(InvalidBatch) as info:
        refill_inputs(inputs, _batch().replace(draft_step=0))
    assert info.value.field == "draft_step"


@pytest.mark.parametrize("mode", ["decode", "draft_decode"])
def test_the_properties_judge_the_decode_modes_or_say_why_not(mode: str) -> None:
    hip = get_builder("hip")
    batch = _batch(mode, geometry=COMPRESSED)
    judged = {spec.name for spec in PROPERTIES if mode in spec.modes}
    assert judged == {"P1", "P5", "P7", "P8", "P9", "P10"}
    for spec in PROPERTIES:
        v = verdict(spec, hip, batch)
        if spec.name in judged:
            assert v.status == "held", (spec.name, v)
        else:
            assert v.status == "not applicable" and mode.replace("_", " ") in v.why, (spec.name, v)


def test_a_builder_that_declares_no_decode_mode_is_not_judged_on_one() -> None:
    """A builder written before the decode modes declares target verify and draft extend: on a draft-decode batch
    every property is ``not applicable``, never red."""
    from metadata_builders.families.dsv4.builders.audited import AuditedBuilder
    from metadata_builders.families.dsv4.hip import HipBuilder

    class NoDecode(HipBuilder):
        modes = ("target_verify", "draft_extend")

    builder = AuditedBuilder(NoDecode(), factory=NoDecode)
    for spec in PROPERTIES:
        assert verdict(spec, builder, _batch()).status == "not applicable"
    assert "does not build mode draft_decode" in verdict(PROPERTIES[0], builder, _batch()).why


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(batch=verify_batches(mode="draft_decode"))
def test_drawn_draft_decode_batches_build_alike(batch: VerifyBatch) -> None:
    assert batch.mode == "draft_decode" and 0 <= batch.draft_step <= batch.num_draft_tokens - 3
    assert len(batch.out_cache_loc) == batch.bs * batch.num_draft_steps
    if batch.graph is not None:
        assert batch.graph.graph_num_tokens == batch.graph.padded_bs
    for variant in variants_for(batch):
        assert get_builder("hip").build(batch, variant).fields == get_builder("reference").build(batch, variant).fields


@pytest.mark.parametrize("pin", [{"ragged": True}, {"divergence": True}, {"stale_mirror": True}])
def test_contradicting_pins_are_refused(pin: dict) -> None:
    @settings(max_examples=1, database=None)
    @given(batch=verify_batches(mode="decode", **pin))
    def draw(batch: VerifyBatch) -> None:
        pass

    with pytest.raises(InvalidArgument, match="decode"):
        draw()


# -- idle: a DP rank with no request ---------------------------------------------------------------------------


def _idle(geometry: Geometry = COMPRESSED) -> VerifyBatch:
    width = 12 if geometry.compression is None else 136
    table, full_to_swa = kv_tables(4, width)
    return VerifyBatch(seq_lens=[], req_pool_indices=[], verify_lens=None, num_draft_tokens=3, out_cache_loc=[],
                       req_to_token=table, full_to_swa=full_to_swa, geometry=geometry, graph=GraphTier(3, 3),
                       mode="idle")


def test_an_idle_rank_replays_the_decode_graph_on_pad_rows_alone() -> None:
    """Upstream's out-graph ``IDLE`` branch: every row ``seq_len`` 1, slot 0, location 0 -- the decode graph's pad
    rows, compressed like the target's decode (its plans in slot 0's ring)."""
    f = decode_fields(_idle(), graph=True)
    assert f["seq_lens"] == [1, 1, 1] and f["positions_casual"] == [0, 0, 0]
    assert f["req_pool_indices_repeated"] == [0, 0, 0] and f["raw_out_loc"] == [0, 0, 0] and f["swa_loc"] == [0, 0, 0]
    assert f["c4_decode_plan"] == [[1, 0, 0, 0]] * 3 and f["c4_out_loc"] == [0, 0, 0]
    assert set(f) == set(fields_for(COMPRESSED, "idle")) == set(fields_for(COMPRESSED, "decode"))


def test_the_properties_judge_an_idle_rank_or_say_why_not() -> None:
    hip = get_builder("hip")
    for spec in PROPERTIES:
        v = verdict(spec, hip, _idle())
        if "idle" in spec.modes:
            assert spec.name in {"P1", "P5", "P7", "P8", "P9", "P10"} and v.status == "held", (spec.name, v)
        else:
            assert v.status == "not applicable" and "idle" in v.why, (spec.name, v)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(batch=verify_batches(mode="idle"))
def test_drawn_idle_batches_build_alike(batch: VerifyBatch) -> None:
    assert batch.mode == "idle" and batch.bs == 0 and batch.graph is not None
    assert variants_for(batch) == [Variant("graph")]
    assert get_builder("hip").build(batch, Variant("graph")).fields == \
        get_builder("reference").build(batch, Variant("graph")).fields


def test_p10_judges_what_a_draft_step_stores_where_the_reference_would_too() -> None:
    """A draft-decode child that misses its step offset stores its token's K one position early: P10 sees the ring
    row the step's own token should hold left empty, whatever the reference says (``p10.live_row_lost``)."""
    from metadata_builders.errors import PropertyFailure
    from metadata_builders.families.dsv4.mutants import mutant_builder
    from metadata_builders.families.dsv4.properties.kv import check_p10_kv_state

    with pytest.raises(PropertyFailure) as info:
        check_p10_kv_state(mutant_builder("draft_decode_step_offset_off_by_one"), _batch())
    assert info.value.check == "p10.live_row_lost" and info.value.field == "swa_loc"
    check_p10_kv_state(get_builder("hip"), _batch())


class _EagerTableByCallersLength(HipBuilder):
    """Eager decode's page table sized by the caller's ``max_seq_len`` (the longest row the forward batch holds), the
    graph's by the captured width: narrower, and in mode ``decode`` it still covers every read."""

    def core_metadata(self, layout, inputs, seq_lens_casual, slots):
        if inputs.mode in ("decode", "draft_decode") and inputs.graph is None:
            layout = dataclasses.replace(layout, max_seq_len=int(inputs.max_seq_len))
        return super().core_metadata(layout, inputs, seq_lens_casual, slots)


class _NarrowGraphTable(HipBuilder):
    """On the graph path a captured width of two pages, narrower than ``MAX_SEQ_LEN_FOR_CAPTURE``'s; eager as hip."""

    def core_metadata(self, layout, inputs, seq_lens_casual, slots):
        if inputs.mode == "decode" and inputs.graph is not None:
            layout = dataclasses.replace(layout, max_seq_len=2 * inputs.geometry.page_size)
        return super().core_metadata(layout, inputs, seq_lens_casual, slots)


def test_an_eager_decode_page_table_that_covers_every_read_passes_p1() -> None:
    """An eager decode table's columns no token reads are no part of P1's contract (decision 2026-12-04): rows of 8
    and 4 tokens, page 4, read 2 and 1 columns; a 2-column table passes P1 against the reference's 3, and P10."""
    from _examples import GEOMETRY

    builder = AuditedBuilder(_EagerTableByCallersLength(), factory=_EagerTableByCallersLength)
    batch = _batch("decode", graph=None, geometry=GEOMETRY)
    eager = next(iter(variants_for(batch)))
    assert [len(r) for r in builder.build(batch, eager).fields["page_table"]] == [2, 2]
    assert [len(r) for r in decode_fields(batch, graph=False)["page_table"]] == [3, 3]
    assert check_p1_reference(builder, batch) == []
    assert check_p10_kv_state(builder, batch) == []


def test_an_eager_decode_page_table_that_misses_a_read_still_fails_p1() -> None:
    """Draft decode's caller holds the rows before the child's step offset (7 and 3 for rows of 9 and 5): a table
    that wide misses the page of position 8 -- P1 red on ``page_table`` for token 0, as P10 is."""
    from _examples import GEOMETRY

    builder = AuditedBuilder(_EagerTableByCallersLength(), factory=_EagerTableByCallersLength)
    batch = _batch("draft_decode", graph=None, geometry=GEOMETRY)
    with pytest.raises(PropertyFailure) as info:
        check_p1_reference(builder, batch)
    assert (info.value.check, info.value.field, info.value.index) == ("p1.vs_reference", "page_table", (0,))
    with pytest.raises(PropertyFailure) as info:
        check_p10_kv_state(builder, batch)
    assert info.value.check == "p10.page_read"


def test_a_graph_decode_page_tables_width_is_still_judged() -> None:
    """The equivalence is the eager build's only: a graph table narrower than the captured width (two pages where
    rows of 8 tokens read two: every read covered) fails P1 on the graph variant, and P5 on the eager build's columns
    (``graph_columns = "eager"``)."""
    from _examples import GEOMETRY

    builder = AuditedBuilder(_NarrowGraphTable(), factory=_NarrowGraphTable)
    batch = _batch("decode", graph=GraphTier(3, 3), geometry=GEOMETRY)
    with pytest.raises(PropertyFailure) as info:
        check_p1_reference(builder, batch)
    assert info.value.field == "page_table" and info.value.variant.startswith("graph"), str(info.value)
    with pytest.raises(PropertyFailure) as info:
        check_p5_graph_vs_eager(builder, batch)
    assert info.value.field == "page_table", str(info.value)
