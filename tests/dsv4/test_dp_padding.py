"""The worker's eager verify step, DP-padded (issue 45 item 3): the batch model, the inputs, the reference, P1's
``p1.forward_tokens`` and the mutant that plans before the padding (docs/DESIGN.md section 3)."""

from __future__ import annotations

import json
import pathlib

import pytest
from _examples import make_batch
from hypothesis import given, settings
from hypothesis.errors import InvalidArgument

from metadata_builders import GraphTier, InvalidBatch, VerifyBatch, get_builder, variants_for
from metadata_builders.cli import main as cli_main
from metadata_builders.families.dsv4.batch import Divergence
from metadata_builders.families.dsv4.inputs import forward_num_tokens, make_inputs
from metadata_builders.families.dsv4.mutants import mutant_builder
from metadata_builders.families.dsv4.properties import check_p1_reference, focuses_for, run_all
from metadata_builders.families.dsv4.strategies._dp import check_dp_pad
from metadata_builders.families.dsv4.variants import Variant
from strategies import verify_batches

PADDED = make_batch([5, 3, 7], [2, 1, 3], 3).replace(dp_pad_rows=2)
"""Three uniform EAGLE requests of 3 tokens, and the two pad rows a DP rank appended to match another's five."""

REPLAY = pathlib.Path(__file__).parents[1] / "regressions" / "mutants" / "eager" / "eager_plan_before_dp_pad.json"


def test_dp_pad_rows_round_trip_and_are_written_only_when_set() -> None:
    assert VerifyBatch.from_json(PADDED.to_json()) == PADDED
    assert json.loads(PADDED.to_json())["dp_pad_rows"] == 2
    assert "dp_pad_rows" not in PADDED.replace(dp_pad_rows=0).to_json()
    assert "2 DP pad rows" in PADDED.describe() and "dp_pad_rows=2" in repr(PADDED)


@pytest.mark.parametrize("batch, change", [
    (make_batch([5, 3, 7], [2, 1, 3], 3, verify_lens=[3, 1, 2]), {"dp_pad_rows": 1}),  # ragged + DP: unverified
    (PADDED, {"graph": GraphTier(5, 15)}),
    (PADDED, {"divergence": Divergence(None, (5, 3, 6))}),
    (PADDED, {"dp_pad_rows": -1}),
], ids=["ragged", "graph", "divergence", "negative"])
def test_dp_padding_is_valid_only_on_an_eager_uniform_target_verify(batch: VerifyBatch, change: dict) -> None:
    with pytest.raises(InvalidBatch) as info:
        batch.replace(**change)
    assert info.value.field == "dp_pad_rows"


@pytest.mark.parametrize("fill", [1, 0])
def test_the_inputs_are_padded_as_pad_inputs_to_size_pads_them(fill: int) -> None:
    """``out_cache_loc`` and ``positions`` 0 to the padded token count, ``seq_lens`` and the mirror the fill value,
    ``req_pool_indices`` 0; ``bs`` the real requests, ``rows`` the padded batch."""
    inputs = make_inputs(PADDED, Variant("eager"), "cpu", fill=fill)
    assert inputs.seq_lens.tolist() == [5, 3, 7, fill, fill] and inputs.seq_lens_cpu == [5, 3, 7, fill, fill]
    assert inputs.req_pool_indices.tolist() == [2, 1, 3, 0, 0]
    assert inputs.out_cache_loc.tolist() == list(PADDED.out_cache_loc) + [0] * 6
    assert inputs.positions.tolist() == list(PADDED.positions) + [0] * 6
    assert (inputs.bs, inputs.rows, inputs.padded_num_tokens) == (3, 5, 15)
    assert forward_num_tokens(PADDED, Variant("eager")) == 15
    assert make_inputs(PADDED, Variant("eager", mirror="device"), "cpu").seq_lens_cpu is None


def test_the_reference_treats_dp_pad_rows_as_graph_pad_rows() -> None:
    """The padded eager build equals the graph build on a tier of exactly the padded shape, but for the page
    table's width (eager: ``max(seq_lens) + draft``; graph: the table's)."""
    reference = get_builder("reference")
    eager = reference.build(PADDED, Variant("eager"))
    graph = reference.build(PADDED.replace(dp_pad_rows=0, graph=GraphTier(5, 15)), Variant("graph"))
    assert eager.decision.num_tokens == 15 and len(eager.fields["raw_out_loc"]) == 15
    for name in ("positions_casual", "req_pool_indices_repeated", "raw_out_loc", "swa_loc", "pf_state_slot",
                 "seq_lens", "extend_seq_lens", "swa_page_indices", "swa_out_cache_loc"):
        assert eager.fields[name] == graph.fields[name], name
    assert eager.fields["positions_casual"][9:] == [1, 2, 3, 1, 2, 3]  # seq_len 1 and three tokens each


def test_the_bundled_builders_pass_every_property_on_a_padded_batch() -> None:
    for name in ("hip", "reference"):
        assert {p: r.failure for p, r in run_all(get_builder(name), PADDED).items() if r.failure} == {}


def test_a_plan_before_the_padding_fails_p1_forward_tokens() -> None:
    """The mutant plans the real requests (9 tokens) where the forward consumes the padded 15; unpadded, it is hip."""
    with pytest.raises(Exception) as info:
        check_p1_reference(mutant_builder("eager_plan_before_dp_pad"), PADDED)
    failure = info.value
    assert (failure.check, failure.field, failure.expected, failure.actual) == (
        "p1.forward_tokens", "len(positions_casual)", 15, 9)
    assert check_p1_reference(mutant_builder("eager_plan_before_dp_pad"), PADDED.replace(dp_pad_rows=0)) == []


def test_the_mutants_replay_file_is_red_on_it_and_green_on_hip(capsys) -> None:
    meta = json.loads(REPLAY.read_text())["meta"]
    assert meta["builder"].endswith("eager_plan_before_dp_pad") and meta["property"] == "P1"
    assert cli_main(["replay", str(REPLAY), "--builder", meta["builder"]]) == 1
    out = capsys.readouterr().out
    assert "P1 FAILED" in out and meta["field"] in out
    assert cli_main(["replay", str(REPLAY), "--builder", "hip"]) == 0


def test_p1_has_an_eager_dp_focus_and_no_other_focus_draws_pad_rows() -> None:
    kwargs = [dict(f.kwargs) for f in focuses_for("P1")]
    assert {"graph": False, "ragged": False, "dp_pad": None} in kwargs
    assert sum("dp_pad" in k for k in kwargs) == 1


@settings(max_examples=25, deadline=None)
@given(verify_batches(graph=False, ragged=False, dp_pad=True))
def test_dp_pad_true_always_pads(batch: VerifyBatch) -> None:
    assert 1 <= batch.dp_pad_rows <= 3 and batch.graph is None and not batch.is_ragged
    assert all(v.path == "eager" for v in variants_for(batch))


def test_dp_pad_true_needs_the_batch_it_pads_pinned() -> None:
    check_dp_pad(True, "target_verify", False, False, False, False, False)
    check_dp_pad(None, "target_verify", None, None, None, None, None)  # drawn: pads only what can take them
    with pytest.raises(InvalidArgument, match="dp_pad=True"):
        check_dp_pad(True, "target_verify", None, False, False, False, False)
    with pytest.raises(InvalidArgument, match="dp_pad=True"):
        check_dp_pad(True, "decode", False, False, False, False, False)
