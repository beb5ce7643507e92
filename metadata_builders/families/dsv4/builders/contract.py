"""The builder contract: what a builder offers, as ``typing.Protocol`` classes (no base class to inherit).

A builder is anything with ``build(inputs) -> VerifyMetadata`` (:class:`Builder`),
where ``inputs`` is the :class:`~metadata_builders.families.dsv4.inputs.VerifyInputs` the harness
made -- what upstream's caller hands ``init_forward_metadata_target_verify``.  A
builder that models CUDA/HIP-graph replay names the two phases upstream has
(:class:`GraphPhases`: ``graph_state``, ``out_graph``, ``in_graph``): the harness
records the in-graph work at capture and re-executes it at replay, as a GPU does
(:mod:`~metadata_builders.harness.graph_recorder`).  A 0.2 builder with ``capture(inputs)``
and ``replay(state, inputs)`` (:class:`GraphBuilder`) still runs: its Python replay
is called, and P5 says the recorded replay was not checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol, runtime_checkable

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.metadata import Decision, VerifyMetadata

__all__ = ["HISTORY", "JUDGED", "Builder", "GraphBuilder", "GraphPhases"]

HISTORY = 8
"""How many of its latest distinct batches an audited builder remembers (a replay file's history)."""

JUDGED = ("build", "capabilities", "name", "device", "history", "recent", "fresh", "can_be_made_afresh",
          "takes_batch", "can_replay", "records_graph", "capture", "capture_on", "replay", "can_validate_mirror",
          "with_mirror_validation", "variants_supported", "outside_switches", "unjudged_switches", "swa_store_rows",
          "capture_verify_lens", "ragged_capture_slots")
"""What the harness reads of a judged builder (an
:class:`~metadata_builders.families.dsv4.builders.AuditedBuilder`, or the memo properties share over one,
:class:`~metadata_builders.families.dsv4.builders.MemoBuilder`): the audited calls, what the builder
can be judged on, and what a replay file and P9 need (its history, a fresh twin).  A memo forwards these and nothing
else."""


@runtime_checkable
class Builder(Protocol):
    """The builder contract: metadata for one call's harness-made inputs; no state kept.

    ``fields`` maps every name of ``FIELD_NAMES`` to a tensor or a list; the
    decision reports ``num_tokens``, ``exact_num_tokens`` and ``max_seq_len``.
    """

    def build(self, inputs: VerifyInputs) -> VerifyMetadata: ...


@runtime_checkable
class GraphBuilder(Builder, Protocol):
    """A builder that models CUDA/HIP-graph replay of the graph path (P5).

    ``capture`` builds once and keeps its output buffers; ``replay`` rebuilds from
    the same input buffers, which the harness has refilled in place with the next
    batch, and writes into the captured outputs (same storage, same shapes).
    """

    def capture(self, inputs: VerifyInputs) -> Any: ...

    def replay(self, state: Any, inputs: VerifyInputs) -> VerifyMetadata: ...


@runtime_checkable
class GraphPhases(Builder, Protocol):
    """A builder whose graph replay is split as upstream's (P5's recorded replay, P7's in-graph rule).

    ``graph_state`` (optional) allocates once per capture, outside the graph;
    ``out_graph`` runs in Python before the capture and before every replay (the
    raw verify metadata into graph state, in place; the reads the sync contract
    allows) and returns the call's decision; ``in_graph`` is recorded at capture and
    re-executed at replay, and returns the fields (tensors) or a ``VerifyMetadata``
    whose decision is ignored (the decision is host data: out-graph work's).
    """

    def graph_state(self, inputs: VerifyInputs) -> Any: ...

    def out_graph(self, state: Any, inputs: VerifyInputs) -> Decision: ...

    def in_graph(self, state: Any, inputs: VerifyInputs) -> Mapping[str, Any] | VerifyMetadata: ...
