"""P5 as a graph runner runs it: the runner's tiers, its one set of buffers, and the checks that judge its replays.

The mutants ``ragged_tiers_keyed_by_bs`` and ``replay_keyed_by_live_requests`` (tests/test_mutants.py) and the
upstream plant ``RUNNER_KEY_PLANT`` (tests/test_sglang_graph.py) show the runner half red on a planted bug; here
the arithmetic, the capture geometry, and each check's own failure.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from _examples import EXAMPLES, make_batch

from metadata_builders import GraphTier, get_builder
from metadata_builders.errors import PropertyFailure
from metadata_builders.harness.graph_runner import GraphRunner, RunnerSpec
from metadata_builders.properties import check_p5_graph_vs_eager
from metadata_builders.properties.runner import _check_geometry, check_runner_replays, runner_sequence
from metadata_builders.tier import capture_verify_lens, ragged_capture_slots, runner_tiers
from metadata_builders.variants import variants_for

HIP = get_builder("hip")


def test_runner_tiers_are_upstreams_worked_example() -> None:
    """capture_bs 1..4, 3 draft tokens: ragged tiers share bs = 4 from 4 tokens on; uniform tiers are b x 3."""
    assert runner_tiers((1, 2, 3, 4), 3, ragged=True) == [(4, 12), (4, 9), (4, 6), (3, 3)]
    assert runner_tiers((1, 2, 3, 4), 3, ragged=False) == [(4, 12), (3, 9), (2, 6), (1, 3)]
    assert [capture_verify_lens(t, s, 3) for s, t in runner_tiers((1, 2, 3, 4), 3, ragged=True)] == [
        [3, 3, 3, 3], [3, 2, 2, 2], [2, 2, 1, 1], [1, 1, 1]]
    assert ragged_capture_slots(2, 4) == 2 and ragged_capture_slots(9, 4) == 4


def test_capture_geometry_refuses_what_no_runner_captures() -> None:
    with pytest.raises(ValueError, match="slots=4 <= tokens=3"):
        capture_verify_lens(3, 4, 3)
    with pytest.raises(ValueError, match="slots\\*width=6"):
        capture_verify_lens(7, 2, 3)


def test_the_spec_keys_ragged_tiers_by_tokens_and_picks_the_smallest_that_admits() -> None:
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]  # 3 requests, 6 tokens, 3 drafts
    spec = RunnerSpec.around(batch)
    assert spec == RunnerSpec((1, 2, 3, 4), 3, True)
    assert [spec.key(t) for t in spec.tiers()] == [12, 9, 6, 3]
    assert spec.tier_for(batch) == GraphTier(4, 6, 3)
    assert RunnerSpec.around(batch.replace(graph=None)) is None


def test_every_tier_is_captured_on_views_of_one_set_of_buffers() -> None:
    """The runner's tiers read the same memory (build_replay_fb_view's [:bs] and [:T]), largest captured first."""
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    spec, sequence = runner_sequence(batch)
    variant = next(v for v in variants_for(sequence[0]) if v.path == "graph")
    runner = GraphRunner(HIP, variant, spec, sequence[0]).capture()
    assert runner.order == spec.tiers()
    pointers = {runner.captured[t].inputs.seq_lens.data_ptr() for t in runner.order}
    assert len(pointers) == 1, pointers
    largest, smallest = runner.captured[runner.order[0]].inputs, runner.captured[runner.order[-1]].inputs
    assert largest.out_cache_loc.untyped_storage().data_ptr() == smallest.out_cache_loc.untyped_storage().data_ptr()
    assert smallest.verify_lens_cpu == [1, 1, 1]  # the runner's capture geometry, never the batch's
    replayed = runner.replay(sequence[1])
    assert replayed.fields == HIP.build(sequence[1], variant).fields


def test_the_runner_half_holds_on_hip_and_reference_examples() -> None:
    for name in ("ragged_tier_slack_spread_over_pad_rows", "uniform_eagle_batch_of_three", "capped_tier_uncovered_tail"):
        assert check_runner_replays(HIP, EXAMPLES[name]) == []


def test_an_eager_only_batch_has_no_runner() -> None:
    assert runner_sequence(EXAMPLES["single_request"].replace(graph=None)) == (None, [])


def _replayed(rows):
    return SimpleNamespace(fields={"extend_seq_lens": rows})


def test_the_geometry_check_fails_a_row_wider_than_the_captured_width() -> None:
    """A replayed layout with a row past captured_req_width (or another row count) is red, except the
    full_coverage convention, whose absorbing row is wider by definition (noted, F15)."""
    spec, tier = RunnerSpec((1, 2, 3, 4), 3, True), GraphTier(4, 9, 3)
    variant = variants_for(make_batch([5, 3], [1, 2], 3, verify_lens=[1, 2], graph=tier))[-1]
    _check_geometry(variant, spec, tier, _replayed([1, 2, 3, 3]), "replay", "pad_rows_only", [])
    with pytest.raises(PropertyFailure) as info:
        _check_geometry(variant, spec, tier, _replayed([1, 2, 6, 0]), "replay", "pad_rows_only", [])
    assert (info.value.check, info.value.index, info.value.actual) == ("p5.runner_geometry", (2,), 6)
    with pytest.raises(PropertyFailure, match="another number of rows"):
        _check_geometry(variant, spec, tier, _replayed([1, 2, 6]), "replay", "pad_rows_only", [])
    notes: list[str] = []
    _check_geometry(variant, spec, tier, _replayed([1, 2, 6, 0]), "replay", "full_coverage", notes)
    assert len(notes) == 1 and "F15" in notes[0]


def test_a_replay_that_returns_new_storage_is_red_on_the_runner(monkeypatch) -> None:
    """The second replay on a tier must write the storage the first replay on it wrote."""
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    real = GraphRunner.replay
    count = {"n": 0}

    def moving(self, other):
        md = real(self, other)
        count["n"] += 1
        if count["n"] == 3:  # the batch with other values, on the first tier again
            moved = dataclasses.replace(md.audit, storage={n: ptr + 1 for n, ptr in md.audit.storage.items()})
            md = dataclasses.replace(md, audit=moved)
        return md

    monkeypatch.setattr(GraphRunner, "replay", moving)
    with pytest.raises(PropertyFailure) as info:
        check_p5_graph_vs_eager(HIP, batch)
    assert info.value.check == "p5.runner_replay_storage", str(info.value)


def test_the_capture_geometry_of_sglang_34384_replays_exactly_f19() -> None:
    """FINDINGS F19: with captured_req_width 6 and max_bs 8 the 42-token tier is captured with min(42, 8) = 8 slots
    ([6, 6, 5, 5, 5, 5, 5, 5], SGLang PR #39257's reproduction); 7 requests of 6 tokens replay into it exactly as
    a fresh build -- the attention metadata is not what #34384 breaks."""
    import json
    import pathlib

    from metadata_builders import VerifyBatch
    from metadata_builders.tier import capture_verify_lens, ragged_capture_slots

    path = pathlib.Path(__file__).parent / "regressions" / "sglang" / "f19_capture_geometry_34384_replays_exactly.json"
    batch = VerifyBatch.from_dict(json.loads(path.read_text()))
    spec, sequence = runner_sequence(batch)
    assert spec == RunnerSpec(tuple(range(1, 9)), 6, True) and sequence[0].graph == GraphTier(8, 42, 6)
    assert capture_verify_lens(42, ragged_capture_slots(42, 8), 6) == [6, 6, 5, 5, 5, 5, 5, 5]
    assert check_runner_replays(HIP, batch) == []


class _EvenSplitCapture(type(HIP.inner)):  # the hip builder, with a runner that forgets the split's remainder
    def capture_verify_lens(self, graph_num_tokens: int, slots: int, width: int) -> list[int]:
        return [graph_num_tokens // slots] * slots


def test_a_builder_brings_its_runners_capture_layout_and_p5_holds_it_to_the_tier() -> None:
    """A builder with ``capture_verify_lens`` (the sglang adapter: upstream's ``build_capture_verify_lens``) captures
    on its own layout; one that does not cover the tier -- 9 tokens on 4 slots as ``[2, 2, 2, 2]`` -- is red on
    ``p5.capture_geometry`` even though every replay equals a fresh build (the out-graph re-pads it)."""
    from metadata_builders.builders import AuditedBuilder

    assert not HIP.capabilities.capture_layout
    builder = AuditedBuilder(_EvenSplitCapture(), "cpu", "even-split")
    assert builder.capabilities.capture_layout
    assert builder.capture_verify_lens(9, 4, 3) == [2, 2, 2, 2] and HIP.capture_verify_lens(9, 4, 3) == [3, 2, 2, 2]
    with pytest.raises(PropertyFailure) as info:
        check_runner_replays(builder, EXAMPLES["ragged_tier_slack_spread_over_pad_rows"])
    assert info.value.check == "p5.capture_geometry" and info.value.field == "verify_lens (capture)", str(info.value)
    assert "summing to" in str(info.value)


def test_what_the_runner_captured_sums_over_a_run_and_check_prints_it() -> None:
    """P5's runner half counts the tiers and keys it captured (``tally``) into the run that collects them; the
    check's own result never carries the counts (``check_p5_graph_vs_eager(...) == []`` stays a user's test)."""
    import hypothesis

    from metadata_builders.properties import PROPERTIES, collecting_tallies
    from metadata_builders.runs.report import runner_line
    from metadata_builders.runs.runner import run_property

    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    with collecting_tallies() as counts:
        assert check_runner_replays(HIP, batch) == []
    assert counts == {("P5 runner", "runners"): 1, ("P5 runner", "tiers"): 3, ("P5 runner", "keys"): 3,
                      ("P5 runner", "shared_bs"): 1, ("P5 runner", "replays"): 5}, counts
    assert check_runner_replays(HIP, batch) == []  # no collector open: nothing counted, nothing returned
    p5 = next(p for p in PROPERTIES if p.name == "P5")
    run = run_property(p5, HIP, hypothesis.settings(max_examples=6, deadline=None, derandomize=True, database=None))
    line = runner_line(run)
    assert run.passed and line is not None and line.startswith("P5 runner: ") and "tiers captured on" in line, line
    assert run.tallies[("P5 runner", "tiers")] >= 2 * run.tallies[("P5 runner", "runners")] > 0
