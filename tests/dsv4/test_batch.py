"""The batch model: validation names the broken field, JSON round-trips.

Malformed batches are built from the plain dict of a valid one
(:func:`_ragged_dict` / :func:`_uniform_dict`, both on ``tests/_examples.py``'s
4-slot, 12-wide tables) with one field changed; each must raise
:class:`InvalidBatch` carrying the field, index and value.  Variants and the modes of the MTP step:
``test_batch_modes.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from _examples import EXAMPLES, GEOMETRY, RAGGED, UNIFORM, kv_tables

from metadata_builders import SCHEMA, Divergence, Geometry, GraphTier, InvalidBatch, MetadataBuildersError, VerifyBatch


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
