"""The CPU graph recorder: capture records the in-graph work, replay re-executes it as a GPU does.

A recorded replay of a correct builder equals a fresh build; work frozen at capture
(host data staged then, a branch decided then, the capture's request geometry) is
caught; a read back inside the recording is a capture error; recorded work reading
host memory that is not graph state fails P7, and the bundled builder's does not.
"""

from __future__ import annotations

import pytest
import torch
from _examples import EXAMPLES
from hypothesis import example, given, settings

from metadata_builders import VerifyMetadata, get_builder, variants_for
from metadata_builders.audit import DeviceAudit
from metadata_builders.errors import BuilderContractError, CaptureSync, PropertyFailure
from metadata_builders.families.dsv4.builders import AuditedBuilder
from metadata_builders.families.dsv4.hip import HipBuilder, target_verify
from metadata_builders.families.dsv4.mutants import mutant_builder
from metadata_builders.families.dsv4.properties import (
    check_p5_graph_vs_eager,
    check_p7_capture_safety,
    replay_sequence,
    run_all,
)
from metadata_builders.harness.graph_recorder import GraphRecorder
from strategies import verify_batches

HIP = get_builder("hip")
GRAPH_EXAMPLES = [name for name, batch in EXAMPLES.items() if batch.graph is not None]


def _graph_variants(batch):
    return [v for v in variants_for(batch) if v.path == "graph"]


def _replays_equal_fresh_builds(builder, batch) -> int:
    """Capture the first batch of P5's sequence, replay every one, compare each with a fresh build."""
    sequence = replay_sequence(batch)
    for variant in _graph_variants(batch):
        captured = builder.capture(sequence[0], variant)
        assert captured.graph is not None and captured.graph.calls
        for other in sequence:
            assert builder.replay(captured, other).fields == builder.build(other, variant).fields, variant.label
    return len(sequence)


# -- a correct builder: a recorded replay equals a fresh build -------------------------------------


@pytest.mark.parametrize("name", GRAPH_EXAMPLES)
def test_a_recorded_replay_of_hip_equals_a_fresh_build(name: str) -> None:
    """Every graph variant, captured once, replays each batch of the tier's sequence as a fresh build makes it."""
    assert _replays_equal_fresh_builds(HIP, EXAMPLES[name]) >= 2


@settings(max_examples=12, deadline=None, derandomize=True, database=None)
@given(batch=verify_batches(graph=True, max_requests=4))
@example(batch=EXAMPLES["capped_tier_uncovered_tail"])
def test_recorded_replays_equal_fresh_builds_on_drawn_tiers(batch) -> None:
    """Drawn tiers (uniform and ragged, capped or not): P5 holds through the recorder, with no partial note."""
    assert check_p5_graph_vs_eager(HIP, batch) == []


def test_replay_runs_none_of_the_builders_in_graph_python() -> None:
    """in_graph runs once, at capture; every replay runs out_graph in Python and the recording."""
    calls = {"in_graph": 0, "out_graph": 0}

    class Counting(HipBuilder):
        def out_graph(self, state, inputs):
            calls["out_graph"] += 1
            return super().out_graph(state, inputs)

        def in_graph(self, state, inputs):
            calls["in_graph"] += 1
            return super().in_graph(state, inputs)

    builder = AuditedBuilder(Counting(), "cpu", "counting")
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    captured = builder.capture(batch, _graph_variants(batch)[0])
    for other in replay_sequence(batch):
        builder.replay(captured, other)
    assert calls == {"in_graph": 1, "out_graph": 1 + len(replay_sequence(batch))}


def test_a_dspark_draft_workers_capture_replays_its_own_batches_only() -> None:
    """The draft worker's runner is its own (its backend keeps gamma + 1 configured): its capture replays another
    draft-worker batch, and refuses the target worker's batch of the same tier, naming the count."""
    from _examples import make_batch

    from metadata_builders import GraphTier, InvalidBatch

    draft = make_batch([5, 3, 7], [2, 1, 3], 3, is_dspark=True, graph=GraphTier(4, 12)).replace(
        speculative_num_draft_tokens=4)
    builder = get_builder("hip")
    variant = _graph_variants(draft)[0]
    captured = builder.capture(draft, variant)
    for other in replay_sequence(draft):
        assert builder.replay(captured, other).fields == builder.build(other, variant).fields
    with pytest.raises(InvalidBatch) as info:
        builder.replay(captured, draft.replace(speculative_num_draft_tokens=None))
    assert info.value.field == "speculative_num_draft_tokens"


# -- the recorder's semantics, one call at a time -----------------------------------------------------


def test_a_host_buffer_is_read_as_it_is_at_replay() -> None:
    """A recorded host-to-device copy reads its host buffer at replay: refreshed in place it is seen, rebound it is
    not."""
    host = torch.tensor([3, 4], dtype=torch.int64)
    with DeviceAudit() as audit:
        with GraphRecorder(audit, [host]) as recorder:
            device = host.to("cpu:0", non_blocking=True)
            doubled = device * 2
        graph = recorder.graph({"doubled": doubled})
        host.copy_(torch.tensor([5, 6]))
        graph.replay()
        assert doubled.tolist() == [10, 12]
        host = torch.tensor([7, 8])  # a new buffer: the recording still reads the old one
        graph.replay()
    assert doubled.tolist() == [10, 12] and graph.host_reads == []


def test_host_memory_made_during_capture_is_a_host_read() -> None:
    """A host tensor made while recording and copied to the device is named: op, stage, tensor, origin."""

    def stage() -> torch.Tensor:
        staged = torch.tensor([1, 2, 3], dtype=torch.int32)
        return staged.to("cpu:0", non_blocking=True)

    with DeviceAudit() as audit, GraphRecorder(audit) as recorder:
        out = stage()
    graph = recorder.graph({"out": out})
    assert [str(r) for r in graph.host_reads] == [
        "Tensor.to in stage reads host tensor (3,) int32 made by torch.tensor in stage during capture"]


def test_a_sync_inside_capture_is_a_capture_error() -> None:
    """.item() of device memory while recording raises CaptureSync naming the call, the stage and the read."""
    inputs = torch.tensor([2, 5], dtype=torch.int32)
    with DeviceAudit() as audit:
        DeviceAudit.mark_input(inputs, "seq_lens")
        with pytest.raises(CaptureSync) as info, GraphRecorder(audit):
            int(inputs.sum().item())
    assert (info.value.op, info.value.kind, info.value.reads) == ("Tensor.item", "scalar", ("seq_lens",))
    assert "Tensor.item" in str(info.value) and "out-graph" in str(info.value)


# -- planted builders ------------------------------------------------------------------------------


class StagesMirrorAtCapture(HipBuilder):
    """Reports seq_lens from the host mirror, staged inside the in-graph work: right on every fresh build."""

    def build(self, inputs):
        md = target_verify(inputs)
        if inputs.seq_lens_cpu is not None and inputs.verify_lens is None:
            md.fields["seq_lens"] = self._staged(inputs)
        return md

    def in_graph(self, state, inputs):
        fields = super().in_graph(state, inputs)
        if inputs.seq_lens_cpu is not None and inputs.verify_lens is None:
            fields["seq_lens"] = self._staged(inputs)
        return fields

    @staticmethod
    def _staged(inputs) -> torch.Tensor:
        staged = torch.tensor([s + inputs.num_draft_tokens for s in inputs.seq_lens_cpu], dtype=torch.int32)
        return staged.to(inputs.seq_lens.device, non_blocking=True)


class SyncsInGraph(HipBuilder):
    """Checks, inside the in-graph work, that no row is empty: a read back while recording."""

    def in_graph(self, state, inputs):
        assert bool((state.extend_seq_lens >= 0).all())
        return super().in_graph(state, inputs)


class PythonReplay:
    """A 0.2 builder: capture()/replay() in Python, no phases."""

    def build(self, inputs):
        return target_verify(inputs)

    def capture(self, inputs):
        return {name: t.clone() for name, t in target_verify(inputs).fields.items()}

    def replay(self, outputs, inputs):
        md = target_verify(inputs)
        for name, t in md.fields.items():
            outputs[name].copy_(t)
        return VerifyMetadata(dict(outputs), md.decision)


def test_a_builder_that_stages_host_data_only_at_capture_fails_p5_and_p7() -> None:
    """Fresh builds are right (P1 holds); the recorded replay repeats the capture's mirror (P5); P7 names the read."""
    builder = AuditedBuilder(StagesMirrorAtCapture(), "cpu", "stages-mirror")
    batch = EXAMPLES["uniform_eagle_batch_of_three"]
    results = run_all(builder, batch)
    assert results["P1"].status == "held"
    assert results["P5"].failure.field == "seq_lens" and "vs a fresh build" in results["P5"].failure.message
    p7 = results["P7"].failure
    assert p7.field == "in_graph (_staged)" and p7.actual == "Tensor.to reads host tensor (4,) int32"
    assert "made by torch.tensor in _staged during capture" in p7.message


def test_the_host_memory_rule_holds_on_the_bundled_builder() -> None:
    """hip's recorded copy reads its graph state's host count (allowed), and nothing else of the host."""
    for name in GRAPH_EXAMPLES:
        batch = EXAMPLES[name]
        assert check_p7_capture_safety(HIP, batch) == []
        captured = HIP.capture(batch, _graph_variants(batch)[0])
        assert captured.graph.host_reads == []
        assert any(c.name == "Tensor.copy_" and c.args[1] is captured.state.num_tokens_host
                   for c in captured.graph.calls)


def test_a_sync_in_graph_fails_p5_and_p7_as_a_capture_error() -> None:
    """A read back in in_graph is no replay at all: capture raises CaptureSync, P5 and P7 report it."""
    builder = AuditedBuilder(SyncsInGraph(), "cpu", "syncs-in-graph")
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    with pytest.raises(CaptureSync) as info:
        builder.capture(batch, _graph_variants(batch)[0])
    assert info.value.stage == "in_graph"
    for check in (check_p5_graph_vs_eager, check_p7_capture_safety):
        with pytest.raises(PropertyFailure) as failure:
            check(builder, batch)
        assert failure.value.field == "in_graph (in_graph)" and "cannot capture a sync" in failure.value.message


def test_a_builder_with_only_capture_and_replay_keeps_its_python_replay_and_p5_is_partial() -> None:
    """A 0.2 builder still replays (in Python); P5 says the recorded replay was not checked, never a silent held."""
    builder = AuditedBuilder(PythonReplay(), "cpu", "python-replay")
    assert builder.can_replay and not builder.records_graph and builder.capabilities.graph == "python_replay"
    batch = EXAMPLES["uniform_eagle_batch_of_three"]
    results = run_all(builder, batch)
    assert results["P5"].status == "partial" and "recorded replay not checked" in results["P5"].why
    assert results["P7"].status == "held"


# -- the mutants the recorder exists for -----------------------------------------------------------


@pytest.mark.parametrize(("name", "batch", "killers"), [
    ("tier_count_staged_in_graph", "capped_tier_uncovered_tail", {"P5", "P7"}),
    ("pad_row_branch_at_capture", "uniform_eagle_batch_of_three", {"P5"}),
    ("tier_padding_in_graph", "ragged_tier_slack_spread_over_pad_rows", {"P5"}),
])
def test_work_frozen_at_capture_is_killed_only_through_the_recorded_replay(name: str, batch: str,
                                                                            killers: set[str]) -> None:
    """Each mutant builds right (P1 holds) and dies on its recorded replay or its recorded host read."""
    results = run_all(mutant_builder(name), EXAMPLES[batch])
    assert results["P1"].status == "held"
    assert {p for p, r in results.items() if r.failure is not None} == killers


# -- the builder's own graph code is what is judged ---------------------------------------------------------


class ReplayRebindsOutputs(HipBuilder):
    """A 0.2-style subclass of the bundled builder: its own capture()/replay(), with a real bug.

    ``replay()`` returns a fresh build: new storage, not the captured buffers a graph
    would write.  It inherits ``out_graph``/``in_graph`` from ``HipBuilder``; judging those
    instead of its own ``replay()`` would hold P5 on code its author did not write.
    """

    def capture(self, inputs):
        return {name: t.clone() for name, t in super().build(inputs).fields.items()}

    def replay(self, outputs, inputs):
        return super().build(inputs)


class ReplaySkipsAField(HipBuilder):
    """Its replay refreshes every field but ``swa_loc``, which keeps the captured batch's slots."""

    def capture(self, inputs):
        return {name: t.clone() for name, t in super().build(inputs).fields.items()}

    def replay(self, outputs, inputs):
        md = super().build(inputs)
        for name, t in md.fields.items():
            if name != "swa_loc":
                outputs[name].copy_(t)
        return VerifyMetadata(dict(outputs), md.decision)


class ReplayWithoutCapture(HipBuilder):
    def replay(self, outputs, inputs):
        return super().build(inputs)


@pytest.mark.parametrize("cls", [ReplayRebindsOutputs, ReplaySkipsAField])
def test_a_subclass_that_overrides_replay_is_judged_on_its_own_replay(cls) -> None:
    """The most derived graph contract is judged: a buggy replay() of a HipBuilder subclass is red on P5."""
    builder = AuditedBuilder(cls(), "cpu", cls.__name__)
    assert builder.capabilities.graph == "python_replay"
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    with pytest.raises(PropertyFailure) as failure:
        check_p5_graph_vs_eager(builder, batch)
    assert failure.value.prop == "P5" and failure.value.check in ("p5.replay_storage", "p5.replay_vs_fresh")


def test_a_replay_without_capture_is_refused_naming_both_contracts() -> None:
    """replay() alone, with the two phases inherited: no contract to judge; the error names both ways out."""
    with pytest.raises(BuilderContractError) as info:
        AuditedBuilder(ReplayWithoutCapture(), "cpu", "half")
    assert "capture()" in str(info.value) and "out_graph()/in_graph()" in str(info.value)
