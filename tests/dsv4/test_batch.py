"""The batch model: validation names the broken field, JSON round-trips, variants apply.

Malformed batches are built from the plain dict of a valid one
(:func:`_ragged_dict` / :func:`_uniform_dict`, both on ``tests/_examples.py``'s
4-slot, 12-wide tables) with one field changed; each must raise
:class:`InvalidBatch` carrying the field, index and value.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _examples import EXAMPLES, GEOMETRY, kv_tables, make_batch

from metadata_builders import (
    SCHEMA,
    Compression,
    Divergence,
    Geometry,
    GraphTier,
    InvalidBatch,
    InvalidVariant,
    MetadataBuildersError,
    Variant,
    VerifyBatch,
    get_builder,
    variants_for,
)

RAGGED = "ragged_tier_slack_spread_over_pad_rows"
"""seq_lens [5, 3, 7], slots [2, 1, 3], verify [3, 1, 2], draft 3, tier 5 rows / 11 tokens."""
UNIFORM = "uniform_eagle_batch_of_three"
"""seq_lens [5, 3, 7], slots [2, 1, 3], draft 2, tier 4 rows / 8 tokens."""


def _ragged_dict(**changes: Any) -> dict[str, Any]:
    d = EXAMPLES[RAGGED].to_dict()
    d.update(changes)
    return d


def _uniform_dict(**changes: Any) -> dict[str, Any]:
    d = EXAMPLES[UNIFORM].to_dict()
    d.update(changes)
    return d


def _rejected(d: dict[str, Any]) -> InvalidBatch:
    with pytest.raises(InvalidBatch) as info:
        VerifyBatch.from_dict(d)
    return info.value


def _where(err: InvalidBatch) -> tuple[Any, Any, Any]:
    return err.field, err.index, err.actual


# -- validation: (description, malformed dict, (field, index, actual)) ----------------------

_TABLE, _FULL_TO_SWA = kv_tables(4, 12)


def _table_with(slot: int, column: int, value: int) -> list[list[int]]:
    table = [list(row) for row in _TABLE]
    table[slot][column] = value
    return table


MALFORMED = [
    ("req_pool_indices_too_short", _ragged_dict(req_pool_indices=[2, 1]), ("req_pool_indices", None, 2)),
    ("verify_lens_too_short", _ragged_dict(verify_lens=[3, 1]), ("verify_lens", None, 2)),
    ("out_cache_loc_too_short", _ragged_dict(out_cache_loc=[29, 30, 31, 15, 43]), ("out_cache_loc", None, 5)),
    ("out_cache_loc_too_long", _uniform_dict(out_cache_loc=[0] * 7), ("out_cache_loc", None, 7)),
    ("slot_0_used_by_a_real_request", _ragged_dict(req_pool_indices=[2, 0, 3]), ("req_pool_indices", 1, 0)),
    ("duplicate_slots", _ragged_dict(req_pool_indices=[2, 1, 2]), ("req_pool_indices", 2, 2)),
    ("slot_equal_to_num_slots", _ragged_dict(req_pool_indices=[2, 1, 4]), ("req_pool_indices", 2, 4)),
    ("negative_slot", _ragged_dict(req_pool_indices=[2, -1, 3]), ("req_pool_indices", 1, -1)),
    ("seq_len_zero", _ragged_dict(seq_lens=[5, 0, 7]), ("seq_lens", 1, 0)),
    ("seq_len_negative", _uniform_dict(seq_lens=[-2, 3, 7]), ("seq_lens", 0, -2)),
    ("empty_batch", _uniform_dict(seq_lens=[], req_pool_indices=[], out_cache_loc=[]), ("seq_lens", None, [])),
    ("verify_len_zero", _ragged_dict(verify_lens=[3, 0, 2], out_cache_loc=[0] * 5), ("verify_lens", 1, 0)),
    (
        "verify_len_above_num_draft",
        _ragged_dict(verify_lens=[3, 4, 2], out_cache_loc=[0] * 9),
        ("verify_lens", 1, 4),
    ),
    # Row 2 (seq_len 11) would verify positions 11, 12 of a 12-wide row.
    ("verify_position_beyond_row_uniform", _uniform_dict(seq_lens=[5, 3, 11], graph=None), ("seq_lens", 2, 11)),
    ("verify_position_beyond_row_ragged", _ragged_dict(seq_lens=[5, 3, 11], graph=None), ("seq_lens", 2, 11)),
    # One pad row (seq_len 1) given 18 - 6 = 12 tokens ends at position 12.
    (
        "pad_row_slack_beyond_row",
        _ragged_dict(graph={"padded_bs": 4, "graph_num_tokens": 18, "cap": None}),
        ("graph.graph_num_tokens", None, 18),
    ),
    (
        "graph_num_tokens_below_real_count",
        _ragged_dict(graph={"padded_bs": 5, "graph_num_tokens": 5, "cap": None}),
        ("graph.graph_num_tokens", None, 5),
    ),
    (
        "padded_bs_below_bs",
        _ragged_dict(graph={"padded_bs": 2, "graph_num_tokens": 11, "cap": None}),
        ("graph.padded_bs", None, 2),
    ),
    (
        "uniform_tier_below_padded_bs_times_num_draft",
        _uniform_dict(graph={"padded_bs": 4, "graph_num_tokens": 7, "cap": None}),
        ("graph.graph_num_tokens", None, 7),
    ),
    (
        "graph_padded_bs_zero",
        _ragged_dict(graph={"padded_bs": 0, "graph_num_tokens": 11}),
        ("graph.padded_bs", None, 0),
    ),
    (
        "graph_num_tokens_negative",
        _ragged_dict(graph={"padded_bs": 5, "graph_num_tokens": -1}),
        ("graph.graph_num_tokens", None, -1),
    ),
    ("graph_cap_zero", _ragged_dict(graph={"padded_bs": 5, "graph_num_tokens": 11, "cap": 0}), ("graph.cap", None, 0)),
    ("graph_missing_tier", _ragged_dict(graph={"padded_bs": 5}), ("graph.graph_num_tokens", None, None)),
    ("num_draft_tokens_zero", _uniform_dict(num_draft_tokens=0, graph=None), ("num_draft_tokens", None, 0)),
    ("full_to_swa_without_sentinel", _ragged_dict(full_to_swa=[*_FULL_TO_SWA[:-1], 7]), ("full_to_swa", 48, 7)),
    (
        "full_to_swa_below_minus_one",
        _ragged_dict(full_to_swa=[100, 101, -2, *_FULL_TO_SWA[3:]]),
        ("full_to_swa", 2, -2),
    ),
    ("req_to_token_below_minus_one", _ragged_dict(req_to_token=_table_with(1, 3, -2)), ("req_to_token[1]", 3, -2)),
    ("req_to_token_past_full_to_swa", _ragged_dict(req_to_token=_table_with(2, 0, 49)), ("req_to_token[2]", 0, 49)),
    (
        "divergence_of_wrong_length",
        _ragged_dict(divergence={"extend_seq_lens": [3, 1, 2, 1]}),
        ("divergence.extend_seq_lens", None, 4),
    ),
    (
        "divergence_padded_bs_long_without_graph",
        _ragged_dict(graph=None, divergence={"extend_seq_lens": [3, 1, 2, 2, 2]}),
        ("divergence.extend_seq_lens", None, 5),
    ),
    (
        "divergence_negative",
        _ragged_dict(divergence={"extend_seq_lens": [3, -1, 2]}),
        ("divergence.extend_seq_lens", 1, -1),
    ),
    # A stale ragged layout is still a layout: every row verifies 1..num_draft_tokens.
    ("divergence_ragged_row_zero", _ragged_dict(divergence={"extend_seq_lens": [3, 0, 2]}),
     ("divergence.extend_seq_lens", 1, 0)),
    ("divergence_ragged_row_above_num_draft", _ragged_dict(divergence={"extend_seq_lens": [3, 4, 2]}),
     ("divergence.extend_seq_lens", 1, 4)),
    (
        "divergence_ragged_sum_above_tier",
        _ragged_dict(graph={"padded_bs": 5, "graph_num_tokens": 6, "cap": None},
                     divergence={"extend_seq_lens": [3, 1, 3]}),
        ("divergence.extend_seq_lens", None, 7),
    ),
    # Row 2 (seq_len 7) holding 6 device tokens would reach position 12 of a 12-wide row.
    ("divergence_uniform_row_past_the_table", _uniform_dict(divergence={"extend_seq_lens": [2, 2, 6]}),
     ("divergence.extend_seq_lens", 2, 6)),
    # F2b: a cap below a real row's verify length would clamp its verify tokens away.
    ("graph_cap_below_a_real_verify_len", _ragged_dict(graph={"padded_bs": 5, "graph_num_tokens": 11, "cap": 2}),
     ("graph.cap", None, 2)),
    # F4: with 4 slots, slot 3's swa_loc reaches 3 * (2**31 - 1), far past int32.
    ("ring_leaves_int32", _ragged_dict(geometry={**GEOMETRY.to_dict(), "ring_size": 2**31 - 1}),
     ("geometry.ring_size", None, 2**31 - 1)),
    ("bool_seq_len", _ragged_dict(seq_lens=[5, True, 7]), ("seq_lens", 1, True)),
    ("float_verify_len", _ragged_dict(verify_lens=[3, 1.0, 2]), ("verify_lens", 1, 1.0)),
    ("str_slot", _ragged_dict(req_pool_indices=["2", 1, 3]), ("req_pool_indices", 0, "2")),
    ("str_seq_lens", _ragged_dict(seq_lens="537"), ("seq_lens", None, "537")),
    ("null_out_cache_loc", _ragged_dict(out_cache_loc=None), ("out_cache_loc", None, None)),
    ("bool_num_draft_tokens", _uniform_dict(num_draft_tokens=True), ("num_draft_tokens", None, True)),
    ("str_num_draft_tokens", _uniform_dict(num_draft_tokens="2"), ("num_draft_tokens", None, "2")),
    ("int_is_dspark", _ragged_dict(is_dspark=1), ("is_dspark", None, 1)),
    (
        "str_graph_padded_bs",
        _ragged_dict(graph={"padded_bs": "5", "graph_num_tokens": 11}),
        ("graph.padded_bs", None, "5"),
    ),
    ("bool_req_to_token_entry", _ragged_dict(req_to_token=_table_with(3, 1, False)), ("req_to_token[3]", 1, False)),
    ("missing_seq_lens", {k: v for k, v in _ragged_dict().items() if k != "seq_lens"}, ("seq_lens", None, None)),
    ("unknown_top_level_key", _ragged_dict(bogus=1), ("bogus", None, "unknown key")),
    (
        "unknown_geometry_key",
        _ragged_dict(geometry={**GEOMETRY.to_dict(), "window": 4}),
        ("geometry.window", None, "unknown key"),
    ),
    (
        "unknown_graph_key",
        _ragged_dict(graph={"padded_bs": 5, "graph_num_tokens": 11, "bucket": 1}),
        ("graph.bucket", None, "unknown key"),
    ),
    (
        "unknown_divergence_key",
        _ragged_dict(divergence={"extend_seq_lens": [3, 1, 2], "stale": True}),
        ("divergence.stale", None, "unknown key"),
    ),
    (
        "wrong_schema_tag",
        _ragged_dict(schema="metadata-builders/verify-batch@2"),
        ("schema", None, "metadata-builders/verify-batch@2"),
    ),
]


@pytest.mark.parametrize(("d", "where"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_batch_raises_invalid_batch_naming_field_index_and_value(d: dict, where: tuple) -> None:
    """A batch that breaks one precondition raises InvalidBatch with that field, index and value."""
    assert _where(_rejected(d)) == where


@pytest.mark.parametrize("name", ["page_size", "swa_window", "ring_size", "unified_swa_window", "page_index_align"])
@pytest.mark.parametrize("value", [0, -4])
def test_non_positive_geometry_field_is_rejected(name: str, value: int) -> None:
    """Every geometry field must be a positive int, directly and through from_dict."""
    with pytest.raises(InvalidBatch) as info:
        Geometry(**{name: value})
    assert _where(info.value) == (f"geometry.{name}", None, value)
    err = _rejected(_ragged_dict(geometry={**GEOMETRY.to_dict(), name: value}))
    assert _where(err) == (f"geometry.{name}", None, value)


def test_ragged_req_to_token_rows_are_rejected_at_the_short_row() -> None:
    """A req_to_token row narrower than row 0 is rejected with its row index and width."""
    table = [list(row) for row in _TABLE]
    table[2] = table[2][:11]
    err = _rejected(_ragged_dict(req_to_token=table))
    assert (err.field, err.index) == ("req_to_token", 2)
    assert err.actual == 11, f"actual should be the row's width as data, got {err.actual!r}"


def test_empty_full_to_swa_is_rejected() -> None:
    """A full_to_swa with no entries (so no sentinel) is rejected on full_to_swa."""
    assert _rejected(_ragged_dict(full_to_swa=[])).field == "full_to_swa"


def test_invalid_json_is_invalid_batch() -> None:
    """Text that is not JSON raises InvalidBatch on the pseudo-field ``json``."""
    with pytest.raises(InvalidBatch) as info:
        VerifyBatch.from_json("{")
    assert info.value.field == "json"


def test_undecodable_json_bytes_are_invalid_batch() -> None:
    """Bytes that are not UTF-8 JSON raise InvalidBatch, not UnicodeDecodeError."""
    with pytest.raises(InvalidBatch) as info:
        VerifyBatch.from_json(b"\xff{}")
    assert info.value.field == "json"


@pytest.mark.parametrize("text", ["[1, 2]", "3", "null"])
def test_json_that_is_not_an_object_names_a_field(text: str) -> None:
    """A JSON document that is not an object raises InvalidBatch naming a (non-empty) field."""
    with pytest.raises(InvalidBatch) as info:
        VerifyBatch.from_json(text)
    assert info.value.field, f"field is {info.value.field!r}"
    assert info.value.actual == json.loads(text)


def test_invalid_batch_is_a_value_error() -> None:
    """InvalidBatch is both the harness's error and a ValueError."""
    err = _rejected(_ragged_dict(seq_lens=[5, 0, 7]))
    assert isinstance(err, ValueError)
    assert isinstance(err, MetadataBuildersError)


# -- boundaries that are valid -------------------------------------------------------------


def test_verify_position_at_the_last_column_is_accepted() -> None:
    """A request whose last verify position is the row's last column (seq_len + verify_len == max_context) is valid."""
    batch = VerifyBatch.from_dict(_uniform_dict(seq_lens=[5, 3, 10], graph=None))
    assert batch.seq_lens[2] + batch.num_draft_tokens == batch.max_context == 12


def test_tier_slack_filling_the_row_exactly_is_accepted() -> None:
    """Tier slack that ends exactly at the row's last column is valid, for a real row and a pad row."""
    absorbed = VerifyBatch.from_dict(_ragged_dict(graph={"padded_bs": 3, "graph_num_tokens": 9, "cap": None}))
    pad = VerifyBatch.from_dict(_ragged_dict(graph={"padded_bs": 4, "graph_num_tokens": 17, "cap": None}))
    assert (absorbed.graph.graph_num_tokens, pad.graph.graph_num_tokens) == (9, 17)


def test_capped_tier_slack_is_not_held_to_the_row() -> None:
    """With a cap, slack that would overflow a pad row is clamped (and left uncovered), so the batch is valid."""
    batch = VerifyBatch.from_dict(_ragged_dict(graph={"padded_bs": 4, "graph_num_tokens": 30, "cap": 3}))
    assert batch.graph.cap == 3


def test_req_to_token_may_point_at_the_sentinel_index() -> None:
    """The last full_to_swa index (the sentinel) and -1 are both valid req_to_token entries."""
    table = _table_with(1, 0, 48)
    table[1][1] = -1
    batch = VerifyBatch.from_dict(_ragged_dict(req_to_token=table))
    assert batch.req_to_token[1][:2] == (48, -1)


# -- JSON round trip -------------------------------------------------------------------------


def _with_divergence() -> VerifyBatch:
    return EXAMPLES[RAGGED].replace(divergence=Divergence([3, 1, 1]), is_dspark=True)


def test_schema_tag() -> None:
    """Batches serialise with the schema tag metadata-builders/verify-batch@1."""
    assert SCHEMA == "metadata-builders/verify-batch@1"
    assert EXAMPLES[RAGGED].to_dict()["schema"] == SCHEMA
    assert json.loads(EXAMPLES[RAGGED].to_json())["schema"] == SCHEMA


@pytest.mark.parametrize("name", list(EXAMPLES), ids=list(EXAMPLES))
def test_json_round_trip(name: str) -> None:
    """to_json/from_json and to_dict/from_dict rebuild an equal batch, graph tier included."""
    batch = EXAMPLES[name]
    assert VerifyBatch.from_json(batch.to_json()) == batch
    assert VerifyBatch.from_dict(batch.to_dict()) == batch


def test_json_round_trip_keeps_graph_and_divergence() -> None:
    """The graph tier (with its cap) and the divergence survive a JSON round trip as plain data."""
    batch = _with_divergence().replace(graph=GraphTier(5, 11, cap=3))
    d = json.loads(batch.to_json())
    assert d["graph"] == {"padded_bs": 5, "graph_num_tokens": 11, "cap": 3}
    assert d["divergence"] == {"extend_seq_lens": [3, 1, 1]}
    assert d["is_dspark"] is True
    again = VerifyBatch.from_json(batch.to_json())
    assert again == batch
    assert again.divergence == Divergence([3, 1, 1])


def test_absorbed_slack_past_the_table_width_is_valid_input() -> None:
    """F2c: the slack a real row absorbs may run past req_to_token's width; its own verify tokens may not.

    No pad rows, no cap: row 2 (seq_len 7, 2 verify tokens) absorbs 10 - 6 = 4 more, ending at
    position 12 of a 12-wide row.  The batch is valid; the reference reports the literal gather's
    out-of-bounds read (tests/dsv4/test_reference.py).
    """
    batch = VerifyBatch.from_dict(_ragged_dict(graph={"padded_bs": 3, "graph_num_tokens": 10, "cap": None}))
    assert batch.graph == GraphTier(3, 10, None)


def test_json_notes_are_accepted_and_ignored() -> None:
    """``why`` and ``meta`` notes written by to_json do not change the batch read back."""
    batch = _with_divergence()
    text = batch.to_json(why="P6 counterexample", meta={"property": "P6"})
    assert json.loads(text)["why"] == "P6 counterexample"
    assert VerifyBatch.from_json(text) == batch


def test_schema_tag_is_optional_on_input() -> None:
    """A dict without the schema tag still reads (the tag is checked only when present)."""
    d = EXAMPLES[UNIFORM].to_dict()
    del d["schema"]
    assert VerifyBatch.from_dict(d) == EXAMPLES[UNIFORM]


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
    from _examples import kv_tables

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
