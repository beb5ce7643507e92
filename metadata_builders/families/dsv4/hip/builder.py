"""The ``hip`` builder itself: the stages it runs (:class:`Stages`), the entry points that chain them, and
:class:`HipBuilder` with its graph phases.

The stage functions live in :mod:`.pipeline` and are called through that module (``pipeline.verify_extension``), so
the mutant catalogue's edits, put in their place there, are what runs; a subclass that overrides a method of
:class:`Stages` replaces that stage on the eager path and inside the recorded graph alike (docs/BUILDERS.md,
"Replacing one stage").  ``target_verify`` and ``HipBuilder.<method>`` mutants edit this module.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from metadata_builders.families.dsv4.batch import DECODE_MODES
from metadata_builders.families.dsv4.hip import compression, pipeline
from metadata_builders.families.dsv4.hip import decode as hip_decode
from metadata_builders.families.dsv4.hip.state import DecodeState, DraftExtendState, GraphState, Layout, MultiStepState
from metadata_builders.families.dsv4.metadata import Decision, VerifyMetadata

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.capabilities import GraphContract
    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.tier import CaptureGeometry, Padding

__all__ = ["HipBuilder", "Stages", "draft_extend", "target_verify"]

_I32 = torch.int32
_I64 = torch.int64
_log = logging.getLogger("metadata_builders.families.dsv4.hip.pipeline")


class Stages:
    """The stages of target verify a :class:`HipBuilder` runs, one method each: override one in a subclass to
    replace that stage, eager and in-graph alike (docs/BUILDERS.md, "Replacing one stage").

    ==================================================  ====================================  ==================
    method (arguments)                                  upstream                              returns
    ==================================================  ====================================  ==================
    ``verify_extension(inputs, seq_lens_cpu)``          ``init_forward_metadata_target_verify  :class:`Layout`
                                                        _old`` (``+ draft``, tier padding)
    ``causal_expansion(layout, inputs)``                ``ExpandPrefillCausally``             ``(seq_lens_casual,
                                                                                              slots)``, per token
    ``core_metadata(layout, inputs, casual, slots)``    ``make_core_attn_metadata``           the core fields
    ``unified_prefill_meta(layout, inputs, slots)``     ``_attach_unified_kv_prefill_meta``   the ``pf_*`` fields
                                                        (eager; in-graph: :func:`prefill_state`)
    ``decode_streams(inputs, layout, slots, pos)``      ``_attach_unified_kv_decode_streams``  ``swa_loc``,
                                                                                              ``verify_store_state_slot``
    ``compression_groups(layout, inputs, fields, cpu)``  the compression groups and plans      their fields
    ``index_streams(inputs, fields)``                   ``build_decode_streams``              the index streams
    ==================================================  ====================================  ==================

    Each returns tensors on the inputs' device, int32 where :data:`metadata.FIELDS` says so.  The bundled stages
    are the module functions of the same name (looked up when called, so the mutant catalogue's edits reach them).
    """

    def verify_extension(self, inputs: VerifyInputs, seq_lens_cpu: list[int] | None) -> Layout:
        return pipeline.verify_extension(inputs, seq_lens_cpu)

    def causal_expansion(self, layout: Layout, inputs: VerifyInputs) -> tuple[torch.Tensor, torch.Tensor]:
        return pipeline.causal_expansion(layout, inputs)

    def core_metadata(self, layout: Layout, inputs: VerifyInputs, seq_lens_casual: torch.Tensor,
                      slots: torch.Tensor) -> dict[str, torch.Tensor]:
        return pipeline.core_metadata(layout, inputs, seq_lens_casual, slots)

    def unified_prefill_meta(self, layout: Layout, inputs: VerifyInputs,
                             slots: torch.Tensor) -> dict[str, torch.Tensor]:
        return pipeline.unified_prefill_meta(layout, inputs, slots)

    def decode_streams(self, inputs: VerifyInputs, layout: Layout, slots: torch.Tensor,
                       positions: torch.Tensor) -> dict[str, torch.Tensor]:
        return pipeline.decode_streams(inputs, layout, slots, positions)

    def compression_groups(self, layout: Layout, inputs: VerifyInputs, fields: dict[str, torch.Tensor],
                           seq_lens_cpu: list[int] | None) -> dict[str, torch.Tensor]:
        return compression.compression_groups(layout, inputs, fields, seq_lens_cpu)

    def index_streams(self, inputs: VerifyInputs, fields: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return pipeline.index_streams(inputs, fields)


_STAGES = Stages()
"""The bundled stages (what :func:`target_verify` runs when no builder passes its own)."""


def target_verify(inputs: VerifyInputs, *, check_mirror: bool = False, stages: Stages | None = None) -> VerifyMetadata:
    """Entry point (``init_forward_metadata_target_verify``): the mirror fallback, then the five stages.

    ``stages``: whose stages run (a :class:`HipBuilder` subclass that replaces one passes itself); the bundled ones
    by default."""
    stages = stages or _STAGES
    seq_lens_cpu = pipeline.host_mirror(inputs, check_mirror=check_mirror)
    layout = stages.verify_extension(inputs, seq_lens_cpu)
    _log.debug("target verify %s: %d rows, %d tokens", inputs.variant.label, inputs.rows, layout.num_tokens)
    seq_lens_casual, slots = stages.causal_expansion(layout, inputs)
    fields = _core_fields(layout, inputs, seq_lens_casual, slots, stages)
    fields.update(stages.unified_prefill_meta(layout, inputs, slots))
    _downstream_fields(layout, inputs, fields, seq_lens_cpu, stages)
    return VerifyMetadata(fields, _decision(layout))


def draft_extend(inputs: VerifyInputs, *, stages: Stages | None = None) -> VerifyMetadata:
    """Entry point (``init_forward_metadata_draft_extend``): the prefill builder, every row extending by ``n``.

    ``seq_lens`` already hold the step's tokens (a graph pad row: 1, its ``n`` tokens included, so they see
    ``2 - n + j``: zero or negative lengths, upstream's values, reference ``draft_extend``).  ``need_compress=False``:
    the core fields with a one-column page table (``max_seq_len = page_size``) and the unified prefill mapping,
    nothing else.  No sync: the lengths are built on the device from ``n`` and the count ``n * rows`` is exact.
    """
    stages = stages or _STAGES
    layout = pipeline.draft_extend_layout(inputs)
    seq_lens_casual, slots = stages.causal_expansion(layout, inputs)
    fields = _core_fields(layout, inputs, seq_lens_casual, slots, stages)
    del fields["extend_start_loc"]  # upstream passes the prefill builder none (the kernel cumsums on the device)
    fields.update(stages.unified_prefill_meta(layout, inputs, slots))
    return VerifyMetadata(fields, _decision(layout))


def _decision(layout: Layout) -> Decision:
    assert layout.num_tokens is not None and layout.exact_num_tokens is not None
    return Decision(layout.num_tokens, layout.exact_num_tokens, layout.exact_num_tokens, layout.max_seq_len)


def _core_fields(layout: Layout, inputs: VerifyInputs, seq_lens_casual: torch.Tensor,
                 slots: torch.Tensor, stages: Stages | None = None) -> dict[str, torch.Tensor]:
    """Stage 1's values and stage 3's fields, in the order every build reports them."""
    return {
        "seq_lens": layout.seq_lens,
        "extend_seq_lens": layout.extend_seq_lens,
        "extend_start_loc": layout.extend_start_loc,
        **(stages or _STAGES).core_metadata(layout, inputs, seq_lens_casual, slots),
    }


def _downstream_fields(layout: Layout, inputs: VerifyInputs, fields: dict[str, torch.Tensor],
                       seq_lens_cpu: list[int] | None, stages: Stages | None = None) -> None:
    """After stage 4: the decode streams, the compression groups and the index streams, into ``fields``."""
    stages = stages or _STAGES
    fields.update(stages.decode_streams(inputs, layout, fields["req_pool_indices_repeated"],
                                        fields["positions_casual"]))
    fields["swa_out_cache_loc"] = pipeline.swa_out_cache_loc(inputs)  # what the in-graph block adds
    if inputs.geometry.compression is not None:
        fields.update(stages.compression_groups(layout, inputs, fields, seq_lens_cpu))
    if inputs.geometry.swa_window == inputs.geometry.unified_swa_window:
        fields.update(stages.index_streams(inputs, fields))


def _captured_tiers(inputs: VerifyInputs) -> dict[int, Any]:
    """The runner's captured tiers of the call's bucket by key (the backend's own room, ``inputs.runner.shared``),
    as upstream's ``cuda_graph_metadata_of_bucket_and_bs``: target verify's, draft extend's, ``DECODE_OR_IDLE``
    (decode and an idle rank share its captured metadata) and the draft runner's multi-step backend (draft decode
    and its idle replay)."""
    if inputs.runner is None:
        return {}
    buckets = {"target_verify": "hip", "draft_extend": "hip/draft_extend", "decode": "hip/decode_or_idle",
               "idle": "hip/decode_or_idle"}
    return inputs.runner.shared.setdefault("hip/draft_decode" if inputs.draft_runner else buckets[inputs.mode], {})




class HipBuilder(Stages):
    """Builder ``"hip"`` on one torch device; keeps no state between builds.

    Graph replay in two phases (the harness records ``in_graph`` at capture and
    re-executes it at replay, :mod:`metadata_builders.harness.graph_recorder`):
    ``graph_state`` allocates, ``out_graph`` refreshes it, ``in_graph`` materialises.
    Its graph path pads ``pad_rows_only`` (:func:`pad_verify_lens_to_bucket`).
    """

    # Its capabilities, declared (docs/BUILDERS.md, "Declaring capabilities"): a subclass inherits them, and one that
    # overrides a method behind one of them is judged on its methods unless it declares that capability again.
    name = "hip"
    graph_contract: ClassVar[GraphContract] = "phases"
    """Graph replay in two phases: ``graph_state``, ``out_graph``, ``in_graph`` (recorded, re-executed)."""
    mirror_validation: ClassVar[bool] = True
    """Offers ``with_mirror_validation()`` (P2's stale-mirror half)."""
    expresses_variants: ClassVar[bool] = False
    """Expresses every variant (no ``variants_supported``)."""
    capture_layout: ClassVar[bool] = False
    """Its runner's capture layout is the harness's model of upstream's (no ``capture_verify_lens``)."""
    capture_slots: ClassVar[bool] = True
    """Brings its runner's slot rule, :meth:`ragged_capture_slots`."""
    store_kernels: ClassVar[bool] = False
    """Runs no store kernel of its own: P10 models upstream's (no ``swa_store_rows``)."""
    seq_len_fill_value: ClassVar[int] = 1
    """A graph pad row's ``seq_len``: upstream's (``get_cuda_graph_seq_len_fill_value()``)."""
    padding_convention: ClassVar[Padding] = "pad_rows_only"
    """A real row never widens (docs/DESIGN.md section 2): the capability the harness judges it by."""
    modes: ClassVar[tuple[str, ...]] = ("target_verify", "draft_extend", "decode", "draft_decode", "idle")
    """The builds of the MTP step it implements (a builder that declares none is judged on target verify only)."""
    capture_geometry: ClassVar[CaptureGeometry] = "token_slots"
    """The runner serving it captures a compact ragged tier with ``min(T, max_bs)`` request slots: the released
    runner's rule (0.5.18-0.5.23), under which several tiers share ``bs = max_bs`` and the per-tier state must be
    keyed by token count (docs/DESIGN.md section 3, P5)."""

    def __init__(self, device: str | torch.device = "cpu", *, validate_mirror: bool = False) -> None:
        self.device = torch.device(device)
        self.validate_mirror = validate_mirror
        """Opt-in: check the host mirror against device ``seq_lens`` (one extra sync)."""

    def with_mirror_validation(self) -> HipBuilder:
        """The same builder with opt-in mirror validation on."""
        return HipBuilder(self.device, validate_mirror=True)

    def ragged_capture_slots(self, graph_num_tokens: int, max_bs: int, width: int) -> int:
        """The request slots its runner captures a compact ragged token tier with (upstream's
        ``_ragged_capture_slots``, 0.5.18-0.5.23): one per token up to ``max_bs``, whatever requests made the tier.
        P5 holds it to :attr:`capture_geometry`."""
        return min(graph_num_tokens, max_bs)

    def build(self, inputs: VerifyInputs) -> VerifyMetadata:
        if inputs.mode == "draft_extend":
            return draft_extend(inputs, stages=self)
        if inputs.mode in DECODE_MODES:
            return hip_decode.decode(inputs, self.core_metadata, self.index_streams)
        return target_verify(inputs, check_mirror=self.validate_mirror, stages=self)

    def graph_state(self, inputs: VerifyInputs) -> GraphState:
        """The tier's graph state (outside the graph), stored under :func:`graph_key` for the whole runner, as
        upstream's ``cuda_graph_metadata_of_bucket_and_bs``: a capture stores it, out-graph work finds it again."""
        graphs = _captured_tiers(inputs)
        key = pipeline.graph_key(inputs)
        if key not in graphs:
            graphs[key] = self._new_state(inputs)
        return graphs[key]

    def _new_state(self, inputs: VerifyInputs) -> GraphState | DraftExtendState | DecodeState | MultiStepState:
        """Device buffers and the host count of one tier (draft extend: one buffer per field; decode: the raw; draft
        decode: one raw per child)."""
        if inputs.mode == "draft_extend":
            return DraftExtendState({name: t.clone() for name, t in draft_extend(inputs, stages=self).fields.items()})
        if inputs.draft_runner:
            return hip_decode.multi_step_state(inputs)
        if inputs.mode in ("decode", "idle"):
            return hip_decode.captured_raw(inputs)
        rows, tokens, device = inputs.rows, inputs.padded_num_tokens, inputs.seq_lens.device
        return GraphState(
            seq_lens=torch.zeros(rows, dtype=_I32, device=device),
            extend_seq_lens=torch.zeros(rows, dtype=_I32, device=device),
            extend_start_loc=torch.zeros(rows, dtype=_I32, device=device),
            token_rows=torch.zeros(tokens, dtype=_I64, device=device),
            num_tokens_host=torch.zeros((), dtype=_I64),
            num_tokens=torch.zeros((), dtype=_I64, device=device),
            bs=inputs.bs,
        )

    def out_graph(self, state: GraphState, inputs: VerifyInputs) -> Decision:
        """Out-graph work (``init_forward_metadata_out_graph``): before the capture and every replay, in Python.

        As :func:`target_verify` up to the token map: the host mirror (or the
        ``tolist`` fallback), verify extension with its tier padding and token count
        (a capped tier reads it back), and the token map; every read the sync
        contract allows happens here, outside the graph.  All of it lands in
        ``state`` in place, so the addresses the graph recorded stay valid.
        """
        if inputs.mode == "draft_extend":
            return self._draft_extend_out_graph(inputs)
        if inputs.mode in DECODE_MODES:
            return self._decode_out_graph(inputs)
        graphs, key = _captured_tiers(inputs), pipeline.graph_key(inputs)
        if key not in graphs:  # upstream on a miss: a new metadata object, stored under the key
            graphs[key] = self._new_state(inputs)
        state = graphs[key]
        layout = self.verify_extension(inputs, pipeline.host_mirror(inputs, check_mirror=self.validate_mirror))
        state.seq_lens.copy_(layout.seq_lens)
        state.extend_seq_lens.copy_(layout.extend_seq_lens)
        state.extend_start_loc.copy_(layout.extend_start_loc)
        rows_of = pipeline.token_map(layout)
        n = min(rows_of.shape[0], state.token_rows.shape[0])
        state.token_rows.zero_()
        state.token_rows[:n] = rows_of[:n]
        state.num_tokens_host.fill_(layout.num_tokens)
        state.max_seq_len = layout.max_seq_len
        return _decision(layout)

    def _draft_extend_out_graph(self, inputs: VerifyInputs) -> Decision:
        """Draft extend's out-graph work: the whole build, copied into the tier's buffers (upstream's
        ``replay_cuda_graph_metadata_from`` into the ``DRAFT_EXTEND`` bucket, keyed by ``bs``)."""
        state, built = self.graph_state(inputs), draft_extend(inputs, stages=self)
        for name, value in built.fields.items():
            state.fields[name].copy_(value)
        return built.decision

    def _decode_out_graph(self, inputs: VerifyInputs) -> Decision:
        """The decode modes' out-graph work: the raw metadata copied into the tier's
        (``replay_cuda_graph_metadata_from`` into the ``DECODE_OR_IDLE`` bucket, keyed by ``bs``); draft decode: the
        multi-step backend's (:func:`~.decode.refresh_children`)."""
        hip_decode.refresh(self.graph_state(inputs), inputs)
        return Decision(inputs.rows, True, True, int(inputs.req_to_token.shape[1]))

    def in_graph(self, state: GraphState, inputs: VerifyInputs) -> dict[str, torch.Tensor]:
        """In-graph work (``init_forward_metadata_in_graph``): every field, materialised from graph state.

        Recorded once and re-executed at every replay: it reads graph state, the
        static inputs and the tier's constants only -- never ``inputs.bs``, the host
        mirror or ``inputs.verify_lens``, which change from call to call.
        """
        if isinstance(state, DraftExtendState):
            return dict(state.fields)  # upstream's in-graph work only reads the buffers out-graph work filled
        if isinstance(state, MultiStepState):  # the judged child's in-graph build (each child records its own)
            state = state.children[inputs.draft_step]
        if isinstance(state, DecodeState):
            return hip_decode.from_raw_decode(state, inputs, self.core_metadata, self.index_streams)
        state.num_tokens.copy_(state.num_tokens_host, non_blocking=True)
        layout = Layout(state.seq_lens, state.extend_seq_lens, state.extend_start_loc, None, None, state.max_seq_len)
        seq_lens_casual, slots = self.causal_expansion(layout, inputs)
        fields = _core_fields(layout, inputs, seq_lens_casual, slots, self)
        fields.update(pipeline.prefill_state(state, inputs, slots))
        _downstream_fields(layout, inputs, fields, None, self)
        return fields
