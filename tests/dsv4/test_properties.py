"""P1-P7 hold for the builder under test (``--builder``, default the bundled hip builder)."""

from __future__ import annotations

import pytest
from hypothesis import given

from metadata_builders.families.dsv4.properties import (
    Partial,
    check_p1_reference,
    check_p2_mirror,
    check_p3_sync_free,
    check_p4_gate,
    check_p5_graph_vs_eager,
    check_p6_fault_model,
    check_p7_capture_safety,
)
from strategies import verify_batches


@given(batch=verify_batches())
def test_p1_every_variant_equals_the_reference(builder, batch):
    """Every variant of every batch gives the reference's fields and decision."""
    assert check_p1_reference(builder, batch) == []


@given(batch=verify_batches(ragged=False))
def test_p2_mirrors_agree_and_only_tolist_syncs(builder, batch):
    """Host, device and tolist mirrors agree; only tolist reads seq_lens back."""
    assert check_p2_mirror(builder, batch) == []


@given(batch=verify_batches())
def test_p3_output_size_map_equals_synced_map(builder, batch):
    """A token map built with output_size equals the synced one and does not sync."""
    assert check_p3_sync_free(builder, batch) == []


@given(batch=verify_batches())
def test_p4_gate_decides_output_size(builder, batch):
    """used_output_size follows the gate table and gates do not change the metadata."""
    assert check_p4_gate(builder, batch) == []


@given(batch=verify_batches(graph=True))
def test_p5_graph_build_equals_eager_build_and_replays(builder, batch):
    """On real tokens the graph build equals the eager one; pads are inert; replay equals a fresh build."""
    notes = check_p5_graph_vs_eager(builder, batch)
    if builder.name == "hip":
        lost = [n for n in notes if isinstance(n, Partial) and n.about in ("replay", "recorded_replay")]
        assert not lost, f"the bundled builder must record and replay its graph: {lost}"


@given(batch=verify_batches(divergence=True))
def test_p6_faults_exactly_where_the_hip_model_says(builder, batch):
    """With diverging device lengths, exactly the maps that trusted output_size fault, by the model's count."""
    notes = check_p6_fault_model(builder, batch)
    assert all("no fault, but wrong metadata" in n for n in notes)


@given(batch=verify_batches())
def test_p7_sync_free_paths_do_not_sync(builder, batch):
    """Variants that claim to be sync-free perform zero host syncs; the sync contract holds on all."""
    assert check_p7_capture_safety(builder, batch) == []


@pytest.mark.gpu
@given(batch=verify_batches(graph=True, max_requests=4))
def test_p7_sync_free_paths_pass_cuda_sync_debug_mode(device, batch):
    """On a GPU, sync-free variants run under set_sync_debug_mode('error') without raising."""
    from metadata_builders import get_builder

    gpu_builder = get_builder("hip", device if device.startswith("cuda") else "cuda")
    assert check_p7_capture_safety(gpu_builder, batch) == []

