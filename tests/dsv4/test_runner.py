"""A property's run over its focuses (``runs/runner.py``): a failure in one mode of the MTP step never leaves the
other modes unjudged, and each mode's failure is kept."""

from __future__ import annotations

import hypothesis

from metadata_builders.families.dsv4.mutants import mutant_builder
from metadata_builders.families.dsv4.properties import PROPERTIES
from metadata_builders.families.dsv4.runs.runner import DRAFT_WORKER, build_of, run_property

P1 = PROPERTIES[0]
_QUICK = hypothesis.settings(max_examples=20, deadline=None, derandomize=True, database=None)


def test_a_failure_in_target_verify_leaves_the_other_modes_judged() -> None:
    """A target-verify-only bug (max_seq_len not advanced by the draft tokens: verify extension, which no other mode
    runs) fails P1 there; the draft-extend and decode focuses still run and hold -- a known upstream finding of
    target verify must not blind them -- and the DSpark draft worker's verify, on its own backend, is judged apart
    (the same stage: it fails there too, its own failure kept)."""
    run = run_property(P1, mutant_builder("max_seq_len_without_draft"), _QUICK)
    assert run.failure is not None and run.batch is not None and build_of(run.batch) == "target_verify"
    assert [build_of(found.batch) for found in run.later] == [DRAFT_WORKER]
    assert all(run.judged_by_mode[mode] > 0 for mode in ("draft_extend", "decode", "draft_decode")), run.judged_by_mode


def test_a_bug_every_mode_shares_fails_once_per_mode() -> None:
    """The window clamped one short (the core stage every mode calls): a failure per mode, each on a batch of its
    mode, shrunk in its own focus."""
    run = run_property(P1, mutant_builder("swa_topk_clamp_window_minus_one"), _QUICK)
    modes = [build_of(found.batch) for found in run.failures]
    assert modes[0] == "target_verify" and sorted(modes[1:]) == ["decode", "draft_decode", "draft_extend", "idle",
                                                                 DRAFT_WORKER], modes
    assert all(found.failure.field == "swa_topk_lengths" for found in run.failures)


def test_the_mutant_catalogue_stops_at_the_first_kill() -> None:
    run = run_property(P1, mutant_builder("swa_topk_clamp_window_minus_one"), _QUICK, stop_at_first=True)
    assert len(run.failures) == 1 and run.judged_by_mode["decode"] == 0


def test_a_draft_workers_bug_is_judged_past_a_finding_of_the_target_workers_verify() -> None:
    """The configured count read as the verify width fails only the DSpark draft worker's focus: the target worker's
    verify holds, and the modes table counts the draft worker's examples on a row of their own."""
    from metadata_builders.families.dsv4.runs.report import modes_table

    run = run_property(P1, mutant_builder("dspark_draft_verifies_configured_count"), _QUICK)
    assert [build_of(found.batch) for found in run.failures] == [DRAFT_WORKER], run.failures
    assert run.failure is not None and run.failure.check == "p1.active_width"
    table = modes_table([("P1", run.judged_by_mode)])
    assert table is not None and any(line.startswith(DRAFT_WORKER) for line in table.splitlines()), table
