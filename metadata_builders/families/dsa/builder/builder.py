"""The bundled DSA builder: :class:`DSABuilder`, on any torch device, eager and in three graph phases.

The graph phases are the core graph recorder's (:mod:`metadata_builders.harness.graph_recorder`):

==============  =====================================================  ============================================
phase           upstream                                               here
==============  =====================================================  ============================================
``graph_state``  ``init_cuda_graph_state(max_bs, max_num_tokens)``,     the runner bucket's backend state (draft
                once per backend (runner)                              decode: one per child), kept in
                                                                       ``inputs.runner.shared``
``out_graph``   ``init_forward_metadata_out_graph``: at capture the     returns the host fields of the ``bs``'s
                capture build, at replay the copies into the           metadata (their values never change at
                captured metadata (both routes)                        replay, as upstream's)
``in_graph``    none: DSA has no in-graph metadata work                returns the captured tensors: nothing is
                                                                       recorded, a replay re-runs nothing
==============  =====================================================  ============================================

Draft decode is the multi-step backend's: capture every child's decode metadata; replay one precompute on
child 0 and copy it into every child (B:4205-4394); ``in_graph`` returns every child's tensors, named
``<child>/<field>``.  The builder keeps no state between builds but the runner's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from metadata_builders.families.dsa.builder import consumers, eager, graph

if TYPE_CHECKING:
    from metadata_builders.families.dsa.inputs import DSAInputs

__all__ = ["HOST_FIELDS", "DSABuilder", "tensor_fields"]

HOST_FIELDS = ("page_size", "max_seq_len_q", "max_seq_len_k", "dsa_max_seqlen_q", "dsa_extend_seq_lens_list",
               "seq_lens_sum", "indexer_seq_lens_cpu", "indexer_seq_lens")
"""The fields out-graph work returns (host values, and the one device echo that is None on the graph path)."""


def tensor_fields(metadata: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The metadata's device tensors (what in-graph work returns)."""
    return {name: value for name, value in metadata.items() if name not in HOST_FIELDS}


class DSABuilder:
    """Builder ``"dsa-torch"``: upstream's HIP path in torch; both replay routes (``inputs.variant.route``)."""

    name = "dsa-torch"
    family = "dsa"
    modes = ("target_verify", "draft_extend", "decode", "draft_decode", "idle")
    """The builds of the MTP step it implements."""
    routes = ("torch", "fused")
    """The graph replay routes it implements."""

    def __init__(self, device: str | torch.device = "cpu") -> None:
        self.device = device

    def build(self, inputs: DSAInputs) -> dict[str, Any]:
        """The eager build (``init_forward_metadata``; draft decode: the judged child's)."""
        if inputs.mode == "draft_decode":
            return eager.multi_step_init_forward_metadata(inputs)[inputs.draft_step or 0]
        return eager.init_forward_metadata(inputs)

    def graph_state(self, inputs: DSAInputs) -> Any:
        """The runner bucket's backend state, made once (``init_cuda_graph_state``) and kept by the runner."""
        runner = inputs.runner
        assert runner is not None, "the graph path runs on a runner (DSARunner)"
        if "dsa" not in runner.shared:
            children = inputs.num_draft_tokens - 2 if inputs.mode == "draft_decode" else 1
            runner.shared["dsa"] = [graph.init_cuda_graph_state(runner.max_bs, runner.max_num_tokens,
                                                                inputs.req_to_token, inputs.device)
                                    for _ in range(children)]
        return runner.shared["dsa"]

    def out_graph(self, state: Any, inputs: DSAInputs) -> dict[str, Any]:
        """Capture or replay (``init_forward_metadata_out_graph``); returns the judged metadata's host fields."""
        if inputs.mode == "draft_decode" and not inputs.in_capture and inputs.batch_size in state[0]["metadata"]:
            precomputed = graph.precompute_decode_mode(state[0], inputs)
            for child in state:
                graph.copy_base_replay_buffers(child["metadata"][inputs.batch_size], precomputed)
        else:
            for child in state:
                graph.init_forward_metadata_out_graph(child, inputs)
        metadata = state[self._child(inputs)]["metadata"][inputs.batch_size]
        return {name: metadata[name] for name in HOST_FIELDS}

    def in_graph(self, state: Any, inputs: DSAInputs) -> dict[str, torch.Tensor]:
        """Nothing to record: the captured tensors, every child's (``<child>/<field>``) in draft decode."""
        if inputs.mode == "draft_decode":
            return {f"{i}/{name}": t for i, child in enumerate(state)
                    for name, t in tensor_fields(child["metadata"][inputs.batch_size]).items()}
        return tensor_fields(state[0]["metadata"][inputs.batch_size])

    def kv_prelude(self, page_table: torch.Tensor, batch_size: int) -> consumers.Prelude:
        """The HIP consumers' prelude on the indexer's selection (``_forward_aiter_extend``'s ``kv_indptr`` /
        ``kv_indices``): not metadata, but what a consumer derives from it; P10 runs it on every build."""
        return consumers.aiter_extend_prelude(page_table, batch_size)

    @staticmethod
    def _child(inputs: DSAInputs) -> int:
        return (inputs.draft_step or 0) if inputs.mode == "draft_decode" else 0
