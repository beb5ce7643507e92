"""The batch model's variants and modes: which variants apply to a batch, the modes of the MTP step (each a valid
batch that round-trips, built or said loudly not built), a DSpark draft worker's two draft counts.

Validation and JSON: ``test_batch.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from _examples import EXAMPLES, GEOMETRY, RAGGED, UNIFORM, kv_tables, make_batch

from metadata_builders import (
    Compression,
    Divergence,
    Geometry,
    GraphTier,
    InvalidBatch,
    InvalidVariant,
    Variant,
    VerifyBatch,
    get_builder,
    variants_for,
)


# -- variants --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("knob", "value"),
    [("path", "cuda_graph"), ("mirror", "pinned"), ("layout_total", "both"), ("gate", "eagle"), ("gate", None)],
)
def test_variant_rejects_unknown_knob_values(knob: str, value: Any) -> None:
    """A Variant knob outside its closed set raises InvalidVariant naming the knob and value."""
    with pytest.raises(InvalidVariant) as info:
        Variant(**{knob: value})
    assert (info.value.field, info.value.actual) == (knob, value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("ragged", "graph", "count"),
    [(False, False, 9), (True, False, 6), (False, True, 9 + 9), (True, True, 6 + 3)],
    ids=["eager_uniform", "eager_ragged", "graph_uniform", "graph_ragged"],
)
def test_variants_for_counts(ragged: bool, graph: bool, count: int) -> None:
    """Eager uniform has 9 variants, eager ragged 6; a tier adds 9 (uniform) or 3 (ragged), all distinct."""
    base = EXAMPLES[RAGGED if ragged else UNIFORM]
    batch = base if graph else base.replace(graph=None)
    variants = variants_for(batch)
    assert len(variants) == count
    assert len(set(variants)) == count
    assert [v.path for v in variants] == sorted(v.path for v in variants)  # eager first


NOT_APPLICABLE = [
    ("graph_path_without_tier", make_batch([5], [1], 2, num_slots=2), Variant(path="graph"), "path"),
    ("tolist_mirror_on_ragged", EXAMPLES[RAGGED], Variant(mirror="tolist"), "mirror"),
    ("device_mirror_on_ragged", EXAMPLES[RAGGED], Variant(mirror="device"), "mirror"),
    ("device_total_on_uniform", EXAMPLES[UNIFORM], Variant(layout_total="device"), "layout_total"),
    ("device_total_on_ragged_graph", EXAMPLES[RAGGED], Variant(path="graph", layout_total="device"), "layout_total"),
]


@pytest.mark.parametrize("builder", ["reference", "hip"])
@pytest.mark.parametrize(
    ("batch", "variant", "knob"), [c[1:] for c in NOT_APPLICABLE], ids=[c[0] for c in NOT_APPLICABLE]
)
def test_building_with_a_variant_that_does_not_apply_raises(
    builder: str, batch: VerifyBatch, variant: Variant, knob: str
) -> None:
    """Building along a variant not in variants_for(batch) raises InvalidVariant naming the knob."""
    assert variant not in variants_for(batch)
    with pytest.raises(InvalidVariant) as info:
        get_builder(builder).build(batch, variant)
    assert info.value.field == knob


# -- the modes of the MTP step (docs/DESIGN.md section 3, "Beyond target verify") ------------------------------


def _mode_batch(mode: str, **changes: Any) -> VerifyBatch:
    """Slots 2 and 1 with prefixes 5 and 3, three draft tokens (four in draft decode: three steps, two of which run
    a forward), on the 4 x 12 example tables."""

    table, full_to_swa = kv_tables(4, 12)
    draft, step = (4 if mode == "draft_decode" else 3), changes.pop("draft_step", 1 if mode == "draft_decode" else None)
    seq, slots = ([5, 3], [2, 1]) if mode != "idle" else ([], [])
    per_request = {"target_verify": 3, "draft_extend": 3, "decode": 1, "draft_decode": draft - 1, "idle": 0}[mode]
    # draft decode's buffer holds every step's location, request-major
    out = [slot * 12 + s + j for s, slot in zip(seq, slots) for j in range(per_request)]
    d = dict(seq_lens=seq, req_pool_indices=slots, verify_lens=None, num_draft_tokens=draft, out_cache_loc=out,
             req_to_token=table, full_to_swa=full_to_swa, geometry=GEOMETRY, mode=mode, draft_step=step,
             graph=GraphTier(4, 4) if mode == "idle" else None)
    d.update(changes)
    return VerifyBatch(**d)


@pytest.mark.parametrize("mode", ["target_verify", "draft_extend", "draft_decode", "decode", "idle"])
def test_each_mode_is_a_valid_batch_and_round_trips(mode: str) -> None:
    batch = _mode_batch(mode)
    assert VerifyBatch.from_json(batch.to_json()) == batch
    tokens = {"target_verify": 6, "draft_extend": 6, "draft_decode": 2, "decode": 2, "idle": 0}[mode]
    assert batch.num_real_tokens == tokens
    if mode == "draft_decode":  # step 1: one token each at seq_lens + 1; the buffer holds all three steps
        assert batch.first_positions == (6, 4) and batch.num_out_cache_loc == 6
        assert "draft decode step 1" in batch.describe()


def test_a_target_verify_file_has_no_mode_key_and_one_without_it_is_target_verify() -> None:
    """Replay files written before the modes existed read unchanged, and a target-verify batch writes none."""
    d = EXAMPLES[RAGGED].to_dict()
    assert "mode" not in d and "draft_step" not in d
    assert VerifyBatch.from_dict(d).mode == "target_verify"
    assert _mode_batch("draft_extend").to_dict()["mode"] == "draft_extend"


@pytest.mark.parametrize(("mode", "changes", "field"), [
    ("nosuch", {}, "mode"),
    ("decode", {"verify_lens": [1, 1]}, "verify_lens"),  # only target verify is ragged
    ("draft_extend", {"divergence": Divergence(seq_lens_cpu=(5, 4))}, "divergence"),
    ("draft_decode", {"draft_step": 2}, "draft_step"),  # four drafts: steps 0 and 1 run a forward, 2 does not
    ("draft_decode", {"num_draft_tokens": 2, "draft_step": 0, "out_cache_loc": [17, 3]}, "num_draft_tokens"),
    ("draft_decode", {"draft_step": None}, "draft_step"),
    ("decode", {"draft_step": 0}, "draft_step"),
    ("idle", {"graph": None}, "graph"),
    ("decode", {"seq_lens": [], "req_pool_indices": [], "out_cache_loc": []}, "seq_lens"),  # no request: idle
    ("decode", {"graph": GraphTier(4, 8)}, "graph.graph_num_tokens"),  # one token a row
    ("decode", {"out_cache_loc": [1, 2, 3]}, "out_cache_loc"),
])
def test_a_batch_its_mode_cannot_take_is_invalid_naming_the_field(mode: str, changes: dict, field: str) -> None:
    with pytest.raises(InvalidBatch) as info:
        if mode == "nosuch":
            _mode_batch("decode").replace(mode="nosuch")
        else:
            _mode_batch(mode, **changes)
    assert info.value.field == field, info.value


def test_every_mode_of_the_batch_model_is_built() -> None:
    from metadata_builders.families.dsv4.batch import MODES
    from metadata_builders.families.dsv4.variants import BUILT_MODES

    assert set(BUILT_MODES) == set(MODES)


def _idle_not_built(monkeypatch) -> None:
    """As when a mode reaches the batch model before its builders: ``idle`` taken out of the built modes."""
    import metadata_builders.families.dsv4.__main__ as family_cli
    import metadata_builders.families.dsv4.variants

    built = tuple(m for m in metadata_builders.families.dsv4.variants.BUILT_MODES if m != "idle")
    monkeypatch.setattr(metadata_builders.families.dsv4.variants, "BUILT_MODES", built)
    monkeypatch.setattr(family_cli, "BUILT_MODES", built)


def test_a_mode_no_builder_builds_yet_is_said_loudly_never_built_as_target_verify(monkeypatch) -> None:
    from metadata_builders.errors import ModeNotBuilt

    _idle_not_built(monkeypatch)
    batch = _mode_batch("idle")
    with pytest.raises(ModeNotBuilt, match="'idle' is not built yet") as info:
        variants_for(batch)
    assert info.value.field == "mode" and "draft_decode" in str(info.value)
    with pytest.raises(ModeNotBuilt):
        get_builder("reference").build(batch, Variant("graph"))
    with pytest.raises(ModeNotBuilt):
        get_builder("hip").build(batch, Variant("graph"))


def test_replaying_a_file_of_a_mode_not_built_yet_exits_2_naming_the_mode(tmp_path, capsys, monkeypatch) -> None:
    from metadata_builders.cli import main

    _idle_not_built(monkeypatch)
    path = tmp_path / "idle.json"
    path.write_text(_mode_batch("idle").to_json())
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "batch mode 'idle' is not built yet" in err and "FAILED" not in err


def test_an_idle_batch_is_built_on_its_graph_tier_only() -> None:
    """With MTP, upstream's ``init_forward_metadata`` returns early on an idle rank: only its decode graph replays."""
    batch = _mode_batch("idle")
    assert variants_for(batch) == [Variant("graph")]
    with pytest.raises(InvalidVariant) as info:
        get_builder("hip").build(batch, Variant("eager"))
    assert info.value.field == "path" and "idle" in str(info.value)


# -- a DSpark draft worker's block verify: two draft counts (issue 45) -------------------------------------------

DSPARK_DRAFT = make_batch([5, 3, 7], [2, 1, 3], 3, is_dspark=True, graph=GraphTier(4, 12)).replace(
    speculative_num_draft_tokens=4)
"""gamma 3 a request, configured 4 (upstream's DSpark draft worker), a tier with one pad row."""


def test_a_dspark_draft_worker_keeps_two_counts_and_writes_the_configured_one() -> None:
    """The configured count rides the file only when set, and round-trips; every other file is unchanged."""
    assert DSPARK_DRAFT.is_dspark_draft and DSPARK_DRAFT.extend_lens == (3, 3, 3)
    d = DSPARK_DRAFT.to_dict()
    assert d["speculative_num_draft_tokens"] == 4
    assert VerifyBatch.from_json(DSPARK_DRAFT.to_json()) == DSPARK_DRAFT
    twin = DSPARK_DRAFT.replace(speculative_num_draft_tokens=None)
    assert "speculative_num_draft_tokens" not in twin.to_dict() and not twin.is_dspark_draft
    del d["speculative_num_draft_tokens"]
    assert VerifyBatch.from_dict(d) == twin  # a file without the key is the target worker's batch
    assert "draft worker (configured 4)" in DSPARK_DRAFT.describe()
    assert "speculative_num_draft_tokens=4" in repr(DSPARK_DRAFT)


@pytest.mark.parametrize(("changes", "field", "actual"), [
    ({"is_dspark": False}, "speculative_num_draft_tokens", 4),  # EAGLE keeps one count
    ({"speculative_num_draft_tokens": 3}, "speculative_num_draft_tokens", 3),  # gamma + 1 or None
    ({"speculative_num_draft_tokens": 5}, "speculative_num_draft_tokens", 5),
    ({"speculative_num_draft_tokens": True}, "speculative_num_draft_tokens", True),
    ({"mode": "draft_extend", "graph": None}, "speculative_num_draft_tokens", 4),
    ({"geometry": Geometry(page_size=128, swa_window=4, ring_size=6, unified_swa_window=4, page_index_align=8,
                           compression=Compression(index_topk=8))}, "geometry.compression", None),
])
def test_a_configured_count_is_a_dspark_draft_workers_block_verify_only(changes: dict, field: str,
                                                                        actual: Any) -> None:
    """DSpark target verify, configured ``num_draft_tokens + 1``, a pool without compressed KV: else the error names
    the field."""
    with pytest.raises(InvalidBatch) as info:
        DSPARK_DRAFT.replace(**changes)
    assert info.value.field == field, info.value
    if actual is not None:
        assert info.value.actual == actual
