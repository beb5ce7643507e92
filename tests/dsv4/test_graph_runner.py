"""P5 as a graph runner runs it: the runner's tiers, its one set of buffers, and the checks that judge its replays.

The mutants ``ragged_tiers_keyed_by_bs`` and ``replay_keyed_by_live_requests`` (tests/dsv4/test_mutants.py) and the
upstream plant ``RUNNER_KEY_PLANT`` (tests/dsv4/test_sglang_graph.py) show the runner half red on a planted bug; here
the arithmetic, the capture geometry, and each check's own failure.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from _examples import EXAMPLES, make_batch

from metadata_builders import GraphTier, get_builder
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.graph_runner import GraphRunner, RunnerSpec
from metadata_builders.families.dsv4.properties import check_p5_graph_vs_eager
from metadata_builders.families.dsv4.properties.runner import _check_geometry, check_runner_replays, runner_sequence
from metadata_builders.families.dsv4.tier import capture_verify_lens, ragged_capture_slots, runner_tiers
from metadata_builders.families.dsv4.variants import variants_for

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
    for name in ("ragged_tier_slack_spread_over_pad_rows", "uniform_eagle_batch_of_three",
                 "capped_tier_uncovered_tail"):
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
    from metadata_builders.families.dsv4.tier import capture_verify_lens, ragged_capture_slots

    path = (pathlib.Path(__file__).parents[1] / "regressions" / "sglang"
            / "f19_capture_geometry_34384_replays_exactly.json")
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
    from metadata_builders.families.dsv4.builders import AuditedBuilder

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

    from metadata_builders.families.dsv4.properties import PROPERTIES, collecting_tallies
    from metadata_builders.families.dsv4.runs.report import runner_line
    from metadata_builders.families.dsv4.runs.runner import run_property

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


# -- the capture geometry, a declared convention (docs/DESIGN.md section 3, P5; decision of 2026-12-04) ----------


def test_both_capture_geometries_are_the_worked_example_of_tier() -> None:
    """capture_bs 1..4, 3 drafts: the released rule's tiers share bs = 4; #39257's capture each tier with the
    requests that generate it, every row as wide as the captured request width."""
    assert runner_tiers((1, 2, 3, 4), 3, ragged=True, geometry="token_slots") == [(4, 12), (4, 9), (4, 6), (3, 3)]
    fixed = runner_tiers((1, 2, 3, 4), 3, ragged=True, geometry="request_slots")
    assert fixed == [(4, 12), (3, 9), (2, 6), (1, 3)]
    assert [capture_verify_lens(t, s, 3) for s, t in fixed] == [[3] * 4, [3] * 3, [3] * 2, [3]]
    assert ragged_capture_slots(42, 8, 6, "token_slots") == 8 and ragged_capture_slots(42, 8, 6, "request_slots") == 7
    with pytest.raises(ValueError, match="multiple of width=6"):
        ragged_capture_slots(40, 8, 6, "request_slots")
    with pytest.raises(ValueError, match="must be one of"):
        ragged_capture_slots(42, 8, 6, "one_per_request")  # type: ignore[arg-type]


_UPSTREAM_WIDTH, _UPSTREAM_BUCKETS = 6, (6, 192, 1152)
"""Upstream's regression test for #34384 (``TestRaggedVerifyCaptureGeometry`` in SGLang's
``test_decode_cuda_graph_runner.py``, on the fix branch of #34636/#39257): width 6, token buckets 6, 192, 1152,
``max_bs`` the largest bucket."""


def _upstreams_capture_geometry_test(geometry: str) -> None:
    """Upstream's three assertions, translated to the harness's reference of ``geometry``:

    * each tier is captured with its generating request geometry: tiers 192, 6, 1152 are made by 32, 1 and 192
      requests, captured with that many slots, each ``[6] * requests`` wide;
    * an admitted batch of 32 requests x 6 tokens (tier: the smallest bucket that holds 192 tokens) stages, padded to
      the tier and clamped to the width (upstream's ``pad_verify_lens_to_bucket`` + clamp: ``absorb_then_clamp``),
      exactly the captured layout;
    * 33 requests of 5 tokens (165 -> tier 192) are more requests than the tier's slots: refused.
    """
    from metadata_builders.families.dsv4.tier import tier_verify_lens

    width, max_bs = _UPSTREAM_WIDTH, _UPSTREAM_BUCKETS[-1]
    for requests, tier in ((32, 192), (1, 6), (192, 1152)):
        slots = ragged_capture_slots(tier, max_bs, width, geometry)
        assert slots == requests, (geometry, tier, slots)
        assert capture_verify_lens(tier, slots, width) == [width] * requests
    tier = min(b for b in _UPSTREAM_BUCKETS if b >= 32 * width)
    slots = ragged_capture_slots(tier, max_bs, width, geometry)
    assert slots >= 32
    staged = tier_verify_lens([width] * 32, slots, tier, width, "absorb_then_clamp")
    assert staged == capture_verify_lens(tier, slots, width)
    assert not 33 <= ragged_capture_slots(192, max_bs, width, geometry)


def test_upstreams_own_capture_geometry_test_holds_on_the_reference_of_the_fixed_rule() -> None:
    """Upstream's #34384 regression asserts the fixed rule (``request_slots``): it holds on that rule's reference,
    and fails on the released rule's, which captures tier 192 with 192 one-token slots -- the test tells them apart."""
    _upstreams_capture_geometry_test("request_slots")
    with pytest.raises(AssertionError, match="'token_slots', 192, 192"):
        _upstreams_capture_geometry_test("token_slots")


def test_pr_39257s_reproduction_is_the_released_rules_reference_and_its_fix_the_fixed_rules() -> None:
    """#39257: 42 tokens, width 6, max_bs 8 -- released: 8 requests [6, 6, 5, 5, 5, 5, 5, 5]; expected (the fix):
    7 requests [6] * 7."""
    released, fixed = (ragged_capture_slots(42, 8, 6, g) for g in ("token_slots", "request_slots"))
    assert capture_verify_lens(42, released, 6) == [6, 6, 5, 5, 5, 5, 5, 5]
    assert capture_verify_lens(42, fixed, 6) == [6] * 7


class _FixedRunnerHip(type(HIP.inner)):  # hip served by #39257's runner, and saying so
    capture_geometry = "request_slots"

    def ragged_capture_slots(self, graph_num_tokens: int, max_bs: int, width: int) -> int:
        return graph_num_tokens // width


class _UndeclaredFixedRunnerHip(type(HIP.inner)):  # #39257's runner, the declaration left at the released rule
    def ragged_capture_slots(self, graph_num_tokens: int, max_bs: int, width: int) -> int:
        return graph_num_tokens // width


class _StaleDeclarationHip(type(HIP.inner)):  # declares #39257's rule, its runner still the released one
    capture_geometry = "request_slots"


def test_p5s_runner_captures_with_the_declared_geometry() -> None:
    """A builder declaring ``request_slots`` is captured tier by tier with the requests that generate each tier --
    no two tiers share bs -- and ``hip``'s backend holds under that runner too; the default stays the released rule."""
    from metadata_builders.families.dsv4.builders import AuditedBuilder
    from metadata_builders.families.dsv4.properties import collecting_tallies

    assert HIP.capabilities.capture_geometry == "token_slots" and HIP.capabilities.capture_slots
    fixed = AuditedBuilder(_FixedRunnerHip(), "cpu", "fixed-runner")
    assert fixed.capabilities.capture_geometry == "request_slots"
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    spec, _ = runner_sequence(batch, "request_slots")
    assert spec.tiers() == [GraphTier(4, 12, 3), GraphTier(3, 9, 3), GraphTier(2, 6, 3), GraphTier(1, 3, 3)]
    with collecting_tallies() as counts:
        assert check_runner_replays(fixed, batch) == []
    assert counts[("P5 runner", "shared_bs")] == 0 and counts[("P5 runner", "tiers")] == 2, counts  # 9, 12
    with collecting_tallies() as counts:
        assert check_runner_replays(HIP, batch) == []
    assert counts[("P5 runner", "shared_bs")] == 1, counts


@pytest.mark.parametrize("cls, follows, declared", [(_UndeclaredFixedRunnerHip, "request_slots", "token_slots"),
                                                    (_StaleDeclarationHip, "token_slots", "request_slots")])
def test_a_runner_that_follows_one_rule_while_the_builder_declares_the_other_is_red(cls, follows, declared) -> None:
    """The builder's own runner rule (``ragged_capture_slots``) is held to its declaration on every tier of P5's
    runner, before anything is captured: ``p5.capture_convention``, naming the rule the runner follows."""
    from metadata_builders.families.dsv4.builders import AuditedBuilder

    builder = AuditedBuilder(cls(), "cpu", cls.__name__)
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]  # 3 drafts, max_bs 4: tiers 12, 9, 6, 3
    with pytest.raises(PropertyFailure) as info:
        check_p5_graph_vs_eager(builder, batch)
    failure = info.value
    assert failure.check == "p5.capture_convention" and failure.field == "ragged_capture_slots", str(failure)
    assert f"the {follows} rule" in str(failure) and f"capture_geometry = {declared!r}" in str(failure)
    assert failure.index == (9,) and (failure.expected, failure.actual) == (
        (4, 3) if declared == "token_slots" else (3, 4))
