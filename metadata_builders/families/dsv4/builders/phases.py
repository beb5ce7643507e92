"""The DSV4 builder's graph phases run as a GPU runs them (DESIGN.md section 3, P5): ``graph_state`` once,
``out_graph`` in Python at capture and at every replay, ``in_graph`` recorded once by the core's
:class:`~metadata_builders.harness.graph_recorder.GraphRecorder` and re-executed at each replay."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metadata_builders.audit import DeviceAudit
from metadata_builders.families.dsv4.metadata import Decision, VerifyMetadata
from metadata_builders.harness.graph_recorder import GraphRecorder, RecordedGraph

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.inputs import VerifyInputs

__all__ = ["capture_graph", "replay_graph"]


def capture_graph(builder: Any, inputs: VerifyInputs) -> tuple[Any, RecordedGraph, Decision]:
    """Capture on harness-made ``inputs``: allocate graph state, run out-graph work, record in-graph work.

    Runs under its own :class:`DeviceAudit` (so memory the builder allocates is
    placed); raises :class:`~metadata_builders.errors.CaptureSync` for a read back
    inside the recording.  Returns (graph state, the recording, out-graph's decision).
    """
    make = getattr(builder, "graph_state", None)
    with DeviceAudit() as audit:
        state = make(inputs) if callable(make) else None
        known = [state, inputs.tensors()]  # graph state is what exists before any phase ran
        recorder = GraphRecorder(audit, known)
        decision = builder.out_graph(state, inputs)
        with recorder:
            result = builder.in_graph(state, inputs)
    fields, not_observable = ((result.fields, result.not_observable) if isinstance(result, VerifyMetadata)
                              else (dict(result), ()))
    return state, recorder.graph(fields, not_observable), decision


def replay_graph(builder: Any, state: Any, inputs: VerifyInputs, graph: RecordedGraph) -> VerifyMetadata:
    """One replay: out-graph work in Python, then the recording re-executed (call it under the audit)."""
    decision = builder.out_graph(state, inputs)
    graph.replay()
    return VerifyMetadata(dict(graph.fields), decision, not_observable=graph.not_observable)
