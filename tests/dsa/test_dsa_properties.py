"""Each property of the DSA family holds on the bundled builder and catches a planted bug (a catalogue mutant)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsa.audited import DSASubject
from metadata_builders.families.dsa.batch import DSABatch, DSADivergence
from metadata_builders.families.dsa.builder import kernels
from metadata_builders.families.dsa.examples import worked_example
from metadata_builders.families.dsa.mutants.patching import mutant_builder
from metadata_builders.families.dsa.properties import (
    PROPERTIES,
    check_p4_gate,
    replay_sequence,
)
from metadata_builders.families.dsa.strategies import dsa_batches
from metadata_builders.families.dsa.variants import DSAVariant

_HOLDS = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))


def _fails(prop: str, mutant: str, batch: DSABatch) -> PropertyFailure:
    with pytest.raises(PropertyFailure) as info:
        PROPERTIES[prop](DSASubject(mutant_builder(mutant)), batch)
    assert info.value.prop == prop
    return info.value


@pytest.mark.parametrize("prop", sorted(PROPERTIES, key=lambda p: int(p[1:])))
def test_property_holds_on_the_bundled_builder(prop: str) -> None:
    """Every property holds on drawn batches of every mode (tiers, capture lists, divergences, stale mirrors)."""

    @_HOLDS
    @given(dsa_batches())
    def holds(batch: DSABatch) -> None:
        PROPERTIES[prop](DSASubject(), batch)

    holds()


def test_p1_catches_drafts_left_out() -> None:
    """P1: eager verify without the + N differs from the reference in cache_seqlens_int32."""
    failure = _fails("P1", "verify_cache_without_drafts", worked_example())
    assert (failure.check, failure.field, failure.expected, failure.actual) == (
        "dsa.p1.vs_reference", "cache_seqlens_int32", 8, 5)


def test_p2_catches_a_sync_beside_the_mirror() -> None:
    """P2: a build given the mirror that reads seq_lens back anyway fails dsa.p2.given_synced."""
    assert _fails("P2", "mirror_distrusted", worked_example("decode")).check == "dsa.p2.given_synced"


def test_p2_shows_what_a_stale_mirror_does() -> None:
    """P2: a low stale mirror narrows eager verify's table one column below what request 0 reads."""
    batch = worked_example(divergence=DSADivergence(seq_lens_cpu=(4, 3)))
    notes = PROPERTIES["P2"](DSASubject(), batch)
    assert any("max_seq_len_k=7" in n and "1 column(s) past the row" in n for n in notes)


def test_p3_catches_a_short_host_total() -> None:
    """P3: an expansion allocated one short of the device lengths' sum fails dsa.p3.host_total_vs_device."""
    failure = _fails("P3", "verify_expand_total_short", worked_example())
    assert (failure.check, failure.expected, failure.actual) == ("dsa.p3.host_total_vs_device", 6, 5)


def test_p4_says_why_it_does_not_apply() -> None:
    """P4 does not apply to the family and says so."""
    assert "does not apply" in check_p4_gate(DSASubject(), worked_example())[0]


def test_p5_catches_negative_pad_rows() -> None:
    """P5: without the floor a draft-extend replay's pad row goes negative (sglang #30378)."""
    failure = _fails("P5", "expand_no_floor", worked_example("draft_extend", padded_bs=3))
    assert (failure.check, failure.index, failure.actual) == ("dsa.p5.pad_negative", 6, -1)


def test_p5_catches_a_replay_that_forgets_a_prefix_sum() -> None:
    """P5: a replay keeping the capture's cu_seqlens_k differs from the eager build on the real rows."""
    failure = _fails("P5", "verify_replay_stale_cu_seqlens_k", worked_example(padded_bs=3))
    assert (failure.check, failure.field) == ("dsa.p5.graph_vs_eager", "cu_seqlens_k")


def test_p5_replays_several_sizes_on_one_backend() -> None:
    """P5's runner captures every size of the capture list on one backend and replays on more than one."""
    batch = worked_example(padded_bs=2, capture_bs=(1, 2, 3))
    tiers = {b.graph.padded_bs for b in replay_sequence(batch)}
    assert tiers == {1, 2}
    subject = DSASubject()
    runner = subject.runner_for(batch, DSAVariant("graph", "given", "fused"))
    assert runner.tiers == (3, 2, 1)
    PROPERTIES["P5"](subject, batch)


def test_p6_reports_the_fault_and_never_writes_past_the_buffer() -> None:
    """P6: device lengths [3, 4] against a host total of 6 are an oob_write of 1, modelled: the store past the
    output never happens (the guard behind the output keeps its sentinel)."""
    batch = worked_example("draft_extend", divergence=DSADivergence(extend_seq_lens=(3, 4)))
    notes = PROPERTIES["P6"](DSASubject(), batch)
    assert any("oob_write of 1 element(s)" in n for n in notes)
    build = DSASubject().build(batch, DSAVariant("eager"))
    assert [(f.kind, f.count) for f in build.faults] == [("oob_write", 1)]
    from metadata_builders.audit import DeviceAudit

    buffer = torch.full((8,), -7, dtype=torch.int32)
    extend, seq = torch.tensor([3, 4], dtype=torch.int32), torch.tensor([8, 6], dtype=torch.int32)
    offsets = torch.tensor([0, 3, 7], dtype=torch.int32)
    with DeviceAudit() as audit:
        kernels.seqlens_expand_kernel(extend, seq, offsets, buffer[:6], 2, 4)
    assert buffer[6:].tolist() == [-7, -7]
    assert [(f.kind, f.count) for f in audit.faults] == [("oob_write", 1)]


def test_p6_catches_a_fault_on_a_clean_batch() -> None:
    """P6: a clean verify build whose expansion is one short faults where the model predicts none."""
    assert _fails("P6", "verify_expand_total_short", worked_example()).check == "dsa.p6.fault_on_clean"


def test_p7_catches_a_sync_in_a_replay() -> None:
    """P7: draft extend's replay reading its lengths back (.tolist(), sglang #29413) syncs in a replay."""
    batch = worked_example("draft_extend", padded_bs=3)
    assert _fails("P7", "draft_extend_replay_tolist", batch).check == "dsa.p7.replay_synced"


def test_p7_catches_a_pageable_copy_in_a_replay() -> None:
    """P7: a replay building a device tensor from a Python list is a pageable host-to-device copy."""
    failure = _fails("P7", "verify_replay_pageable_copy", worked_example(padded_bs=3))
    assert failure.check == "dsa.p7.replay_pageable_copy"


def test_p8_catches_an_undeclared_caller_write() -> None:
    """P8: decode storing the caller's extend_seq_lens_cpu is a write no decode build may make."""
    failure = _fails("P8", "decode_writes_caller_extend_list", worked_example("decode"))
    assert (failure.check, failure.field) == ("dsa.p8.caller_write_undeclared", "extend_seq_lens_cpu")


def test_p8_declares_verify_s_caller_write() -> None:
    """P8: eager target verify stores [N] * bs in extend_seq_lens_cpu, declared, and says so."""
    notes = PROPERTIES["P8"](DSASubject(), worked_example())
    assert any("extend_seq_lens_cpu = [3, 3] (declared)" in n for n in notes)


def test_p8_catches_a_replay_writing_seq_lens() -> None:
    """P8: a replay adding the drafts to the runner's seq_lens in place writes the caller's device tensor."""
    failure = _fails("P8", "verify_replay_writes_seq_lens", worked_example(padded_bs=3))
    assert (failure.check, failure.field) == ("dsa.p8.input_written", "seq_lens")


def test_p9_catches_a_skipped_partial_block() -> None:
    """P9: fused kernels skipping a row's partial last block leave what the history wrote where a consumer reads."""
    batch = worked_example(padded_bs=2, width=300, seq_lens=(200, 3))
    assert _fails("P9", "fused_skips_partial_block", batch).check == "dsa.p9.vs_fresh_builder"


def test_p9_counts_the_fused_kernels_stale_tail() -> None:
    """P9: the fused route leaves the history's entries past the read lengths (measured on 0.5.23), noted."""
    notes = PROPERTIES["P9"](DSASubject(), worked_example(padded_bs=2, width=300, seq_lens=(5, 3)))
    assert any("stale tail" in n for n in notes)


def test_p10_catches_kv_indptr_from_bs() -> None:
    """P10: the consumer prelude over bs rows where there are bs * N leaves token rows empty (sglang #38746)."""
    failure = _fails("P10", "kv_indptr_from_bs", worked_example())
    assert (failure.check, failure.index) == ("dsa.p10.prelude_segment", 2)


def test_p10_catches_negative_lengths() -> None:
    """P10: a negative expanded length reaching a consumer (sglang #30378) fails dsa.p10.negative_length."""
    failure = _fails("P10", "expand_no_floor", worked_example("draft_extend", padded_bs=3))
    assert failure.check == "dsa.p10.negative_length"
