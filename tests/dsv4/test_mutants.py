"""The mutant catalogue: every mutant is real, documented, different from ``hip``, and killed.

Fast on purpose: each mutant meets one hand-sized witness batch (``run_all``,
deterministic), and only a few run under Hypothesis (``test_mutants_tools.py``).  The full ``ci``-profile
kill table is ``metadata-builders mutants``.
"""

from __future__ import annotations

import json
import pathlib

import pytest
from _examples import EXAMPLES, make_batch

from metadata_builders import (
    Compression,
    Divergence,
    Geometry,
    GraphTier,
    InvalidVariant,
    PropertyFailure,
    VerifyBatch,
    get_builder,
    variants_for,
)
from metadata_builders.cli import main as cli_main
from metadata_builders.families.dsv4.__main__ import SUBCOMMANDS, build_parser
from metadata_builders.families.dsv4.builders import AuditedBuilder
from metadata_builders.families.dsv4.hip import pipeline as hip_module
from metadata_builders.families.dsv4.mutants import (
    MUTANTS,
    MutantBuilder,
    MutantDoesNotApply,
    MutantSpec,
    mutant_builder,
    mutated_source,
)
from metadata_builders.families.dsv4.properties import (
    check_p1_reference,
    check_p5_graph_vs_eager,
    fewer_requests_batch,
    history_for,
    run_all,
    same_tier_batch,
)
from metadata_builders.families.dsv4.properties.state import play_history


EXTRA_BATCHES: dict[str, VerifyBatch] = {
    "dspark_host_mirror_run_ahead": EXAMPLES["single_request"].replace(is_dspark=True, divergence=Divergence((3,))),
    "stale_mirror_rows_swapped": EXAMPLES["uniform_eagle_batch_of_three"].replace(
        divergence=Divergence(None, (3, 5, 7))),
    "capped_tier_with_a_spare_slot": make_batch([5, 3], [2, 1], 3, verify_lens=[2, 1], num_slots=4,
                                                graph=GraphTier(3, 8, cap=2)),
    "uniform_dspark_tier_wider_than_its_rows": make_batch([5, 3, 7], [2, 1, 3], 3, graph=GraphTier(4, 14),
                                                          is_dspark=True),
    "compressed_tier_crossing_c128": make_batch([127, 5], [1, 2], 3, width=136, graph=GraphTier(3, 9)).replace(
        geometry=Geometry(page_size=128, swa_window=4, ring_size=6, unified_swa_window=4, page_index_align=64,
                          compression=Compression(index_topk=8, c4_ring_size=16, c128_ring_size=256,
                                                  unified_swa_pages=5))),
    "low_ratios_capped_tier_with_tail_pads": make_batch([1, 127], [2, 1], 3, width=136, verify_lens=[3, 1],
                                                        graph=GraphTier(3, 9, cap=3)).replace(
        geometry=Geometry(page_size=128, swa_window=4, ring_size=6, unified_swa_window=4, page_index_align=64,
                          compression=Compression(index_topk=8, c4_ring_size=16, c128_ring_size=256,
                                                  unified_swa_pages=5, low_ratios=(1, 2)))),
    "draft_extend_tier_with_pad_rows": make_batch([7, 3], [1, 2], 3, graph=GraphTier(4, 12)).replace(
        mode="draft_extend"),
    "draft_decode_tier_with_a_pad_row": make_batch([7, 3], [1, 2], 4).replace(
        mode="draft_decode", draft_step=1, out_cache_loc=[19, 20, 21, 27, 28, 29], graph=GraphTier(3, 3)),
    "decode_tier_with_a_pad_row": make_batch([7, 3], [1, 2], 4).replace(
        mode="decode", out_cache_loc=[19, 27], graph=GraphTier(3, 3)),
    "low_ratios_decode_tier_with_a_pad_row": make_batch([7, 127], [1, 2], 3, width=136).replace(
        mode="decode", out_cache_loc=[143, 399], graph=GraphTier(3, 3), geometry=Geometry(
            page_size=128, swa_window=4, ring_size=6, unified_swa_window=4, page_index_align=64,
            compression=Compression(index_topk=8, c4_ring_size=16, c128_ring_size=256, unified_swa_pages=5,
                                    low_ratios=(1, 2)))),
    "dspark_draft_block_verify": make_batch([5, 3, 7], [2, 1, 3], 3, is_dspark=True, graph=GraphTier(4, 12)).replace(
        speculative_num_draft_tokens=4),
    "eager_step_with_dp_pad_rows": make_batch([5, 3, 7], [2, 1, 3], 3).replace(dp_pad_rows=2),
}
"""Witnesses the shared examples do not cover (the draft-extend one: reference/draft_extend.py's worked example,
two real rows and two pad rows on a tier of 4): a diverging device length, a stale mirror with the same sum,
a capped tier a later, larger batch can fill (slot 3 is spare), a uniform DSpark tier two tokens wider than
its rows (an exact total below the buffer: the only tier pad_rows_only ever passes output_size on), a compressed
geometry whose first row crosses the first c4 and c128 group (positions 127..129) while pad rows have no compressed
entry yet, a ragged capped tier with both low ratios whose tail pads have ``seq_lens_casual = 1`` (a ratio-2 token with
no group yet) while the second request holds more than index_topk ratio-1 entries, and a decode tier with both low
ratios whose pad row (length 1) has no ratio-2 group yet while its second row completes the first c128 group."""

BATCHES = {**EXAMPLES, **EXTRA_BATCHES}

WITNESSES: dict[str, str] = {
    "mirror_not_plumbed": "single_request",
    "debug_log_formats_device_tensor": "single_request",
    "dropped_dspark_gate": "single_request",
    "uncapped_tier_exact": "ragged_tier_slack_spread_over_pad_rows",
    "capped_tier_output_size_tier": "capped_tier_uncovered_tail",
    "max_seq_len_without_draft": "single_request",
    "inclusive_cumsum_start_loc": "uniform_eagle_batch_of_three",
    "uniform_total_item_sync": "single_request",
    "uniform_total_host_loop": "single_request",
    "device_total_as_slice_bound": "single_request",
    "seq_lens_updated_in_place": "single_request",
    "tier_slack_first_real_row": "tier_slack_absorbed_by_last_real_row",
    "tier_remainder_to_last_pad_rows": "ragged_tier_slack_spread_over_pad_rows",
    "tier_cap_ignored": "capped_tier_clamps_pad_row",
    "causal_start_off_by_one": "single_request",
    "pad_tokens_first_row_slot": "capped_tier_uncovered_tail",
    "pad_tokens_casual_zero": "capped_tier_uncovered_tail",
    "swa_topk_clamp_window_minus_one": "single_request",
    "page_table_floor_page_count": "page_boundary_one_past",
    "sentinel_clamp_negative_positions": "position_exactly_at_swa_window",
    "sentinel_minus1_reads_swa0": "req_to_token_minus_one_reads_sentinel",
    "zero_length_row_check": "single_request",
    "inclusive_cumsum_pf_cu_q": "uniform_eagle_batch_of_three",
    "pad_tokens_final_pos_zero": "capped_tier_uncovered_tail",
    "output_size_is_padded_tokens": "uniform_dspark_tier_wider_than_its_rows",
    "ring_modulo_by_window": "ring_wrap",
    "replay_refreshes_captured_rows_only": "uniform_eagle_batch_of_three",
    "replay_skips_pf_fields": "ragged_tier_slack_spread_over_pad_rows",
    "replay_asserts_on_graph_state": "uniform_eagle_batch_of_three",
    "tier_count_staged_in_graph": "capped_tier_uncovered_tail",
    "pad_row_branch_at_capture": "uniform_eagle_batch_of_three",
    "tier_padding_in_graph": "ragged_tier_slack_spread_over_pad_rows",
    "seq_lens_to_cpu_async_copy": "single_request",
    "mirror_validation_by_sum": "stale_mirror_rows_swapped",
    "async_staging_on_device_mirror": "dspark_host_mirror_run_ahead",
    "seq_lens_casual_int64": "single_request",
    "stateful_scratch_tail": "capped_tier_with_a_spare_slot",
    "compress_gate_on_position": "compressed_tier_crossing_c128",
    "c128_page_indices_inclusive": "compressed_tier_crossing_c128",
    "sparse_lengths_from_raw": "compressed_tier_crossing_c128",
    "sparse_page_indices_zero_filled": "compressed_tier_crossing_c128",
    "indexer_lengths_clamped": "compressed_tier_crossing_c128",
    "indexer_lengths_from_c128": "compressed_tier_crossing_c128",
    "host_plan_mirror_off_by_one": "compressed_tier_crossing_c128",
    "device_plan_drops_write_pad": "compressed_tier_crossing_c128",
    "c2_out_loc_zero_filled": "low_ratios_capped_tier_with_tail_pads",
    "low_ratio_indexer_prefill_lengths": "low_ratios_capped_tier_with_tail_pads",
    "low_ratio_indexer_table_not_expanded": "low_ratios_capped_tier_with_tail_pads",
    "low_ratio_sparse_lengths_unclamped": "low_ratios_capped_tier_with_tail_pads",
    "ragged_tiers_keyed_by_bs": "ragged_tier_slack_spread_over_pad_rows",
    "replay_keyed_by_live_requests": "uniform_eagle_batch_of_three",
    "replay_refreshes_the_last_capture": "ragged_tier_slack_spread_over_pad_rows",
    "capture_slots_from_uniform_width": "ragged_tier_slack_spread_over_pad_rows",
    "runner_slots_per_generating_request": "ragged_tier_slack_spread_over_pad_rows",
    "last_row_absorbs_the_slack": "tier_slack_absorbed_by_last_real_row",
    "low_ratio_map_uniform": "low_ratios_capped_tier_with_tail_pads",
    "draft_extend_count_real_rows": "draft_extend_tier_with_pad_rows",
    "draft_extend_prefix_plus_step": "draft_extend_tier_with_pad_rows",
    "draft_extend_full_page_table": "draft_extend_tier_with_pad_rows",
    "draft_extend_replay_keeps_captured_out_loc": "draft_extend_tier_with_pad_rows",
    "draft_decode_step_offset_off_by_one": "draft_decode_tier_with_a_pad_row",
    "draft_decode_step_slice_step_major": "draft_decode_tier_with_a_pad_row",
    "decode_replay_keeps_captured_out_loc": "draft_decode_tier_with_a_pad_row",
    "eager_decode_table_from_callers_length": "draft_decode_tier_with_a_pad_row",
    "stream_indptr_from_causal_lengths": "compressed_tier_crossing_c128",
    "draft_extend_pad_length_read_unsigned": "draft_extend_tier_with_pad_rows",
    "draft_decode_children_rerun_child0_slice": "draft_decode_tier_with_a_pad_row",
    "uniform_lengths_memo_by_rows": "uniform_dspark_tier_wider_than_its_rows",
    "staging_buffer_reused_across_steps": "uniform_dspark_tier_wider_than_its_rows",
    "draft_decode_children_refresh_live_rows": "draft_decode_tier_with_a_pad_row",
    "idle_keeps_a_bucket_of_its_own": "decode_tier_with_a_pad_row",
    "draft_step_kept_on_the_builder": "draft_extend_tier_with_pad_rows",
    "low_ratio_pos_from_lengths": "low_ratios_capped_tier_with_tail_pads",
    "paged_swa_pads_minus_one": "ragged_tier_slack_spread_over_pad_rows",
    "decode_low_ratio_prefill_lengths": "low_ratios_decode_tier_with_a_pad_row",
    "dspark_draft_verifies_configured_count": "dspark_draft_block_verify",
    "eager_plan_before_dp_pad": "eager_step_with_dp_pad_rows",
}
"""Each mutant's witness: a named batch on which it must differ from ``hip`` and fail a property."""

HIP = get_builder("hip")


def _failures(builder, batch: VerifyBatch) -> dict[str, PropertyFailure]:
    return {name: r.failure for name, r in run_all(builder, batch).items() if r.failure is not None}


def _outcome(call, *args) -> object:
    """What a call shows from outside: fields and their dtypes, decision, syncs, faults and input writes, or the
    error it raised."""
    try:
        md = call(*args)
    except Exception as exc:  # noqa: BLE001 - raising where hip does not is itself a difference
        return ("raised", type(exc).__name__)
    return (md.fields, dict(md.dtypes), md.decision, sorted(s.op for s in md.audit.host_syncs),
            [(f.kind, f.count) for f in md.audit.faults], [str(c) for c in md.audit.inputs_written])


def _observable(builder, batch: VerifyBatch) -> list:
    """Every variant's build and, on the graph path, replays of a same-size and a smaller batch;
    with opt-in mirror validation; then every variant again after P9's history on a fresh builder (what a builder
    that keeps state shows: a memo filled by the history's first batch, not by this batch), in one harness session
    (the stream is not drained between steps)."""
    from metadata_builders.harness import harness_session

    with harness_session():
        return _looks(builder, batch)


def _looks(builder, batch: VerifyBatch) -> list:
    seen = _first_look(builder, batch)
    validating = builder.with_mirror_validation()
    seen += [(variant.label, "validating", _outcome(validating.build, batch, variant))
             for variant in variants_for(batch)]
    builder = builder.fresh()
    try:
        play_history(builder, history_for(batch))
    except Exception as exc:  # noqa: BLE001 - a history that raises where hip does not is a difference
        return seen + [("history", ("raised", type(exc).__name__))]
    seen += [(variant.label, "after history", _outcome(builder.build, batch, variant))
             for variant in variants_for(batch)]
    return seen


def _first_look(builder, batch: VerifyBatch) -> list:
    seen = []
    for variant in variants_for(batch):
        seen.append((variant.label, _outcome(builder.build, batch, variant)))
        if variant.path == "graph":
            smaller = fewer_requests_batch(batch) or batch
            try:
                state = builder.capture(smaller, variant)
            except Exception as exc:  # noqa: BLE001 - a capture that raises where hip does not is a difference
                seen.append((variant.label, "capture", ("raised", type(exc).__name__)))
                continue
            for second in (batch, same_tier_batch(batch)):
                seen.append((variant.label, "replay", _outcome(builder.replay, state, second)))
            seen += _runner_look(builder, batch, variant)
    return seen


def _runner_look(builder, batch: VerifyBatch, variant) -> list:
    """Every tier of P5's runner captured on the builder, then its interleaved replays (what a backend shows
    only across tiers: the per-tier store and its keys)."""
    from metadata_builders.families.dsv4.graph_runner import GraphRunner
    from metadata_builders.families.dsv4.properties.runner import runner_sequence

    spec, sequence = runner_sequence(batch, builder.capabilities.capture_geometry)
    if not sequence:
        return []
    slots = [builder.ragged_capture_slots(t.graph_num_tokens, max(spec.capture_bs), spec.width)
             for t in spec.tiers() if spec.ragged]  # the runner's own rule: what the builder says it captures with
    try:
        runner = GraphRunner(builder, variant, spec, sequence[0]).capture(
            sorted({b.graph for b in sequence} | {spec.tiers()[0]}, key=lambda t: -t.graph_num_tokens))
    except Exception as exc:  # noqa: BLE001 - a capture that raises where hip does not is a difference
        return [(variant.label, "runner", ("raised", type(exc).__name__))]
    return [(variant.label, "runner slots", slots)] + [(variant.label, "runner", _outcome(runner.replay, other))
                                                        for other in sequence]


# -- the catalogue ---------------------------------------------------------------------------------


def test_catalogue_has_at_least_fifteen_documented_mutants() -> None:
    """At least 15 mutants, each with a stage, a bug class and a docstring on its factory."""
    from metadata_builders.families.dsv4 import mutants

    assert len(MUTANTS) >= 15
    for name, spec in MUTANTS.items():
        factory = getattr(mutants, name)
        assert spec.name == name and spec.bug_class and spec.summary
        assert factory.__doc__ and spec.bug_class in factory.__doc__ and spec.stage in factory.__doc__


def test_every_witness_names_a_mutant_and_a_batch() -> None:
    """The witness table covers exactly the catalogue, and every witness batch exists."""
    assert set(WITNESSES) == set(MUTANTS)
    assert set(WITNESSES.values()) <= set(BATCHES)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_mutant_is_one_edit_of_the_current_hip_source(name: str) -> None:
    """Each mutant's find text occurs once in its stage, and the edit changes the source."""
    import inspect
    import textwrap

    from metadata_builders.families.dsv4.mutants.patching import _original_stage

    spec = MUTANTS[name]
    assert mutated_source(spec) != textwrap.dedent(inspect.getsource(_original_stage(spec.stage)))


def test_every_builder_method_a_mutant_edits_is_one_the_mutant_builder_routes() -> None:
    """A ``HipBuilder.<method>`` mutant edits a method the mutant builder must route to its mutated copy; one it
    does not define itself runs the pristine method and the mutant survives without ever running."""
    from metadata_builders.families.dsv4.mutants.patching import mutant_builder_class

    routed = set(vars(mutant_builder_class()))
    unrouted = [m.name for m in MUTANTS.values() if m.stage.startswith("HipBuilder.")
                and m.stage.partition(".")[2] not in routed]
    assert not unrouted, unrouted


def test_a_mutant_that_no_longer_applies_fails_loudly() -> None:
    """A find text missing from hip.py raises MutantDoesNotApply naming the mutant and the stage."""
    stale = MutantSpec("stale", "core_metadata", "test", "test", "this text is not in hip.py", "")
    with pytest.raises(MutantDoesNotApply) as info:
        mutated_source(stale)
    assert (info.value.name, info.value.stage, info.value.occurrences) == ("stale", "core_metadata", 0)


# -- each mutant on its witness ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_mutant_differs_from_hip_on_its_witness(name: str) -> None:
    """No mutant is equivalent to hip: on its witness some field, decision, sync, fault or replay differs."""
    batch = BATCHES[WITNESSES[name]]
    assert _observable(mutant_builder(name), batch) != _observable(HIP, batch)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_mutant_is_killed_on_its_witness(name: str) -> None:
    """On its witness batch at least one property fails for the mutant and none fails for hip."""
    batch = BATCHES[WITNESSES[name]]
    assert _failures(HIP, batch) == {}
    assert _failures(mutant_builder(name), batch), f"{name} survives every property on {WITNESSES[name]}"


def test_rows_refreshed_only_up_to_the_captured_batch_are_caught_only_by_a_larger_replay() -> None:
    """A replay that refreshes as many rows as it captured passes a same-size replay; a larger batch kills it."""
    batch = EXAMPLES["uniform_eagle_batch_of_three"]
    stale = mutant_builder("replay_refreshes_captured_rows_only")
    variant = next(v for v in variants_for(batch) if v.path == "graph")
    same = stale.capture(batch, variant)
    assert stale.replay(same, same_tier_batch(batch)).fields == HIP.build(same_tier_batch(batch), variant).fields
    with pytest.raises(PropertyFailure) as info:
        check_p5_graph_vs_eager(stale, batch)
    assert info.value.field in ("seq_lens", "extend_seq_lens", "extend_start_loc")
    assert "captured with bs=2" in info.value.message


def test_the_in_place_seq_lens_update_is_seen_only_by_p8() -> None:
    """Updating the caller's seq_lens in place leaves the metadata right: P8 alone objects on a build."""
    failures = _failures(mutant_builder("seq_lens_updated_in_place"), EXAMPLES["single_request"])
    assert set(failures) == {"P8"}
    assert (failures["P8"].field, failures["P8"].index) == ("seq_lens", (0,))


def test_the_dropped_gate_trusts_output_size_for_eagle() -> None:
    """Without the dspark gate an exact EAGLE layout passes output_size under gate=dspark."""
    batch = EXAMPLES["single_request"]
    assert not batch.is_dspark
    variant = next(v for v in variants_for(batch) if v.gate == "dspark" and v.mirror == "host")
    assert HIP.build(batch, variant).decision.used_output_size is False
    assert mutant_builder("dropped_dspark_gate").build(batch, variant).decision.used_output_size is True


def test_the_hidden_item_is_seen_by_the_sync_contract() -> None:
    """A .item() added to the uniform host-mirror path is a sync P7 reports; P2 does not: it reads no seq_lens."""
    failures = _failures(mutant_builder("uniform_total_item_sync"), EXAMPLES["single_request"])
    assert set(failures) == {"P7"}
    assert failures["P7"].field == "audit.host_syncs"
    assert "Tensor.item@verify_extension:scalar" in failures["P7"].actual


# -- the patch point -------------------------------------------------------------------------------------


def test_the_mutated_stage_is_restored_after_every_build() -> None:
    """The hip module's stage is the original again after a mutant's build, even a build that raises."""
    original = hip_module.core_metadata
    builder = mutant_builder("swa_topk_clamp_window_minus_one")
    builder.build(EXAMPLES["single_request"], variants_for(EXAMPLES["single_request"])[0])
    assert hip_module.core_metadata is original
    with pytest.raises(InvalidVariant):
        builder.build(EXAMPLES["single_request"], variants_for(EXAMPLES["uniform_eagle_batch_of_three"])[-1])
    assert hip_module.core_metadata is original
    raising = MutantSpec("core_raises", "core_metadata", "raises inside the patched stage", "a test of the restore",
                         find=MUTANTS["swa_topk_clamp_window_minus_one"].find,
                         replace='(_ for _ in ()).throw(RuntimeError("boom inside the mutated stage"))')
    with pytest.raises(RuntimeError, match="boom inside the mutated stage"):
        AuditedBuilder(MutantBuilder(raising), "cpu", "raising").build(
            EXAMPLES["single_request"], variants_for(EXAMPLES["single_request"])[0])
    assert hip_module.core_metadata is original


def test_mutants_load_as_module_attr_builders() -> None:
    """get_builder('metadata_builders.families.dsv4.mutants:<name>') gives the audited mutant, device passed through."""
    builder = get_builder("metadata_builders.families.dsv4.mutants:causal_start_off_by_one", device="cpu")
    assert isinstance(builder.inner, MutantBuilder)
    assert builder.inner.spec is MUTANTS["causal_start_off_by_one"]
    assert "P1" in _failures(builder, EXAMPLES["single_request"])


def test_the_random_baseline_never_kills_hip() -> None:
    """Baseline batches are valid and hip passes every property on them (no false kills in the benchmark)."""
    import random

    from metadata_builders.families.dsv4.tools.power import first_failure, random_batches

    batches = random_batches(random.Random(0), graph=True)
    for _ in range(3):
        batch = next(batches)
        assert batch.graph is not None
        assert first_failure(HIP, batch) is None


ISSUE_26_MUTANTS = ("draft_decode_step_offset_off_by_one", "draft_decode_step_slice_step_major",
                    "draft_decode_children_rerun_child0_slice", "draft_extend_pad_length_read_unsigned",
                    "draft_extend_count_real_rows")
"""The MTP step's mutants the whole-step issue names: a step offset off by one, a shifted per-step slice, a child
re-running out-graph work at replay, a negative pad length reaching a consumer, draft extend's host count that can
diverge from its device lengths."""


ISSUE_41_MUTANTS = ("runner_slots_per_generating_request", "stream_indptr_from_causal_lengths",
                    "eager_decode_table_from_callers_length")
"""Issue 41's mutants: a runner following the fixed capture geometry while its builder declares the released one; a
stream whose segments leave their buffer (``p1.stream_out_of_bounds``); an eager decode table narrower than P1 allows
(one that misses a read)."""


ISSUE_45_MUTANTS = ("dspark_draft_verifies_configured_count",)
"""Issue 45's mutant: the configured draft count (a DSpark draft worker's gamma + 1) read as the verify width."""


def test_the_configured_count_as_the_verify_width_is_named_by_p1_on_a_draft_worker_only() -> None:
    """Every request of the draft worker's batch verifies gamma + 1 tokens: P1 names both counts
    (``p1.active_width``); the target worker's twin, one count for both, holds every property."""
    mutant = mutant_builder("dspark_draft_verifies_configured_count")
    draft = BATCHES["dspark_draft_block_verify"]
    with pytest.raises(PropertyFailure) as info:
        check_p1_reference(mutant, draft)
    assert (info.value.check, info.value.field, info.value.actual) == ("p1.active_width", "extend_seq_lens", 4)
    assert not _failures(mutant, draft.replace(speculative_num_draft_tokens=None))


@pytest.mark.parametrize("name", ISSUE_26_MUTANTS + ISSUE_41_MUTANTS + ISSUE_45_MUTANTS)
def test_each_mtp_step_mutant_has_a_replay_file_that_reproduces(tmp_path, capsys, name: str) -> None:
    """Its witness written as a replay file: ``replay`` exits 1 on the mutant and 0 on ``hip``."""
    from metadata_builders.cli import main

    path = tmp_path / f"{name}.json"
    path.write_text(BATCHES[WITNESSES[name]].to_json())
    assert main(["replay", str(path), "--builder", f"metadata_builders.families.dsv4.mutants:{name}"]) == 1
    assert "FAILED" in capsys.readouterr().out
    assert main(["replay", str(path), "--builder", "hip"]) == 0


ISSUE_41_FILES = sorted(pathlib.Path(__file__).parents[1].joinpath("regressions", "mutants").glob("*.json"))
"""The ``ci`` profile's counterexample of each mutant of the in-graph block's fields (``check --builder
metadata_builders.families.dsv4.mutants:NAME --profile ci``'s replay file): a pad's paged SWA target marked -1, the
low-ratio
positions taken from the lengths, a decode step's low ratios with prefill lengths."""


def test_the_in_graph_fields_mutants_each_have_a_replay_file() -> None:
    """One file per mutant of issue 41's fields, each naming its mutant and the property that killed it."""
    assert {p.stem for p in ISSUE_41_FILES} == {"paged_swa_pads_minus_one", "low_ratio_pos_from_lengths",
                                                "decode_low_ratio_prefill_lengths"}
    assert all(json.loads(p.read_text())["meta"]["builder"].endswith(p.stem) for p in ISSUE_41_FILES)


@pytest.mark.parametrize("path", ISSUE_41_FILES, ids=[p.stem for p in ISSUE_41_FILES])
def test_each_in_graph_fields_mutant_replays_red_and_hip_green(capsys, path: pathlib.Path) -> None:
    """``replay FILE --builder <mutant>`` exits 1 with the killing property failed on the file's field; ``hip`` 0."""
    meta = json.loads(path.read_text())["meta"]
    assert cli_main(["replay", str(path), "--builder", meta["builder"]]) == 1
    out = capsys.readouterr().out
    assert f"{meta['property']} FAILED" in out and meta["field"] in out
    assert cli_main(["replay", str(path), "--builder", "hip"]) == 0
