"""The V4.1 low ratios (group ``low_ratios``): the geometry's choice, the reference, the hip builder, the strategies."""

from __future__ import annotations

import dataclasses

import pytest
from _sglang_support import compressed
from hypothesis import HealthCheck, assume, find, given, settings
from hypothesis import strategies as st

from metadata_builders import GraphTier, get_builder, variants_for
from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsv4.batch import Compression, Geometry, VerifyBatch
from metadata_builders.families.dsv4.metadata import FIELDS, fields_for
from metadata_builders.families.dsv4.properties import check_p1_reference
from metadata_builders.families.dsv4.reference.low_ratios import indexer_page_table, low_ratio_groups
from strategies import LOW_RATIO_CHOICES, compressions, verify_batches

LOW = [choice for choice in dict.fromkeys(LOW_RATIO_CHOICES) if choice]


def _with_low_ratios(batch: VerifyBatch, low_ratios: tuple[int, ...]) -> VerifyBatch:
    geo = batch.geometry
    assert geo.compression is not None
    return batch.replace(geometry=dataclasses.replace(
        geo, compression=dataclasses.replace(geo.compression, low_ratios=low_ratios)))


def test_reference_worked_example() -> None:
    """The module docstring's example: c1 is raw_out_loc itself, c2 stores on even lengths, -1 elsewhere."""
    geo = Geometry(compression=Compression(low_ratios=(1, 2)))
    core = {"seq_lens_casual": [1, 2, 3], "raw_out_loc": [1000, 1001, 1002], "page_table": [[7]] * 3,
            "verify_store_state_slot": [4, 4, 0]}
    out = low_ratio_groups(geo, core, [0, 1, 0])
    assert out["low_ratio_req_indices"] == [4, 4, 0]  # the slot each token's stores go to
    assert out["low_ratio_pos_i64"] == [0, 1, 0]  # the forward batch's positions, as handed in
    assert out["c1_out_loc"] == [1000, 1001, 1002]
    assert out["c1_topk_lengths_clamp1"] == [1, 2, 3]
    assert out["c2_out_loc"] == [-1, 500, -1]
    assert out["c2_topk_lengths_clamp1"] == out["c2_sparse_topk_lengths"] == [1, 1, 1]
    assert out["c2_indexer_compressed_seq_lens"] == [1, 1, 1]
    assert out["c2_sparse_page_indices"] == out["c2_sparse_raw_indices"] == [[-1] * 512] * 3
    assert out["c1_indexer_page_table"] == [[28, 29, 30, 31]] * 3
    assert out["c2_indexer_page_table"] == [[14, 15]] * 3
    assert set(out) == {name for name, spec in FIELDS.items() if spec.group == "low_ratios"}


def test_sparse_lengths_clamp_to_index_topk() -> None:
    """A clamp-1 length past ``index_topk`` is clamped in the sparse lengths, not in the indexer's."""
    geo = Geometry(compression=Compression(index_topk=8, low_ratios=(1,)))
    out = low_ratio_groups(geo, {"seq_lens_casual": [5, 20], "raw_out_loc": [0, 1], "page_table": [[0], [0]],
                                 "verify_store_state_slot": [1, 2]}, [4, 19])
    assert out["c1_sparse_topk_lengths"] == [5, 8]
    assert out["c1_indexer_compressed_seq_lens"] == [5, 20]
    assert out["c1_sparse_page_indices"] == [[-1] * 64] * 2  # index_topk 8 aligned to 64


def test_indexer_page_table_expands_each_page() -> None:
    """Page ``p`` becomes ``page_size // R // 64`` indexer pages; one block per page keeps the table."""
    assert indexer_page_table(2, 256, [[7, 3]]) == [[14, 15, 6, 7]]
    assert indexer_page_table(2, 128, [[7, 3]]) == [[7, 3]]
    assert indexer_page_table(1, 128, [[5]]) == [[10, 11]]


def test_fields_follow_the_geometry() -> None:
    """Only the ratios the geometry lists are produced; none without compression or without low ratios."""
    names = set(fields_for(Geometry(compression=Compression(low_ratios=(2,)))))
    assert {n for n in names if n.startswith("c2_")} and not {n for n in names if n.startswith("c1_")}
    assert not {n for n in fields_for(Geometry(compression=Compression())) if FIELDS[n].group == "low_ratios"}
    assert not {n for n in fields_for(Geometry()) if FIELDS[n].group == "low_ratios"}


@pytest.mark.parametrize(("value", "index", "actual"), [([3], 0, 3), ([1, 1], 1, 1), ([0, 2], 0, 0),
                                                          ("12", None, "12"), ([True], 0, True)])
def test_invalid_low_ratios_name_the_field(value, index, actual) -> None:
    """A ratio outside (1, 2), a repeated one or a non-list is rejected naming the field, index and value."""
    with pytest.raises(InvalidBatch) as info:
        Compression(low_ratios=value)
    assert (info.value.field, info.value.index, info.value.actual) == ("geometry.compression.low_ratios", index,
                                                                       actual)


def test_json_round_trip_and_old_files() -> None:
    """Low ratios survive JSON (ascending); a file without the key has none and writes none."""
    batch = compressed([5, 126], [1, 3], 3, compression=Compression(low_ratios=[2, 1]))
    assert batch.geometry.compression.low_ratios == (1, 2)
    again = VerifyBatch.from_json(batch.to_json())
    assert again == batch and again.to_dict()["geometry"]["compression"]["low_ratios"] == [1, 2]
    old = _with_low_ratios(batch, ()).to_dict()
    assert "low_ratios" not in old["geometry"]["compression"]
    assert VerifyBatch.from_dict(old).geometry.compression.low_ratios == ()


def test_compressions_draw_low_ratios_and_shrink_to_none() -> None:
    """The strategy draws each low-ratio choice; a failure shrinks towards none."""
    assert find(compressions(), lambda c: True).low_ratios == ()
    assert find(compressions(), lambda c: c.low_ratios == (1, 2)).low_ratios == (1, 2)


@pytest.mark.parametrize("low_ratios", LOW, ids=[str(r) for r in LOW])
@pytest.mark.parametrize("shape", ["uniform", "ragged_capped_tier"])
def test_hip_equals_reference_on_named_batches(low_ratios, shape) -> None:
    """Every variant, tail pads (``seq_lens_casual`` 1) included."""
    compression = Compression(low_ratios=low_ratios)
    if shape == "uniform":
        batch = compressed([5, 126, 254], [1, 3, 2], 3, compression=compression)
    else:
        batch = compressed([5, 126], [1, 3], 3, verify_lens=[3, 1], graph=GraphTier(3, 9, cap=3),
                           compression=compression)
    check_p1_reference(get_builder("hip"), batch)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(verify_batches(geometry=None, compression=True), st.sampled_from(LOW))
def test_hip_equals_reference_on_generated_batches(batch: VerifyBatch, low_ratios: tuple[int, ...]) -> None:
    """P1 on drawn compressed batches given each low-ratio choice."""
    assume(batch.geometry.compression is not None)  # a tier below padded_bs drops compression (the planner's check)
    batch = _with_low_ratios(batch, low_ratios)
    hip, reference = get_builder("hip"), get_builder("reference")
    for variant in variants_for(batch)[:2]:
        want, got = reference.build(batch, variant).fields, hip.build(batch, variant).fields
        for name in fields_for(batch.geometry):
            if FIELDS[name].group == "low_ratios":
                assert got[name] == want[name], f"{variant.label}: {name}"


def test_p5_compares_the_indexer_page_table_on_the_eager_builds_columns() -> None:
    """The graph sizes the page table by the tier, and the low-ratio indexer's table with it (found by the suite
    on a fresh clone: one request, one token, page 128, ratio 1); P5 compares eager's columns, as for page_table."""
    from _examples import make_batch

    from metadata_builders.families.dsv4.properties import check_p5_graph_vs_eager

    geometry = Geometry(page_size=128, swa_window=1, ring_size=1, unified_swa_window=1, page_index_align=64,
                        compression=Compression(index_topk=512, c4_ring_size=8, c128_ring_size=128,
                                                unified_swa_pages=1, low_ratios=(1,)))
    batch = make_batch([1], [1], 1, width=300, graph=GraphTier(1, 1, cap=1)).replace(geometry=geometry)
    check_p5_graph_vs_eager(get_builder("hip"), batch)
