"""One call's arguments: which entry point the gate knob calls, and upstream's ragged layout over the inputs.

Shared by the direct build (:mod:`.builder`) and the graph runner's two phases
(:mod:`.graph`), which call upstream with the same knob and the same layout.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from metadata_builders.errors import InvalidVariant

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.sglang.releases import Upstream

__all__ = ["PATCH_LOCK", "entry_and_is_dspark", "ragged_layout"]

PATCH_LOCK = threading.RLock()
"""Held while upstream's modules carry one build's patches (module constants, routes, stubs)."""


def entry_and_is_dspark(up: Upstream, inputs: VerifyInputs) -> tuple[str, bool]:
    """Which upstream entry point the gate knob calls, and the ``is_dspark`` it sets."""
    gate = inputs.variant.gate
    caps = up.capabilities
    if gate not in caps.gates(inputs.is_dspark):
        raise InvalidVariant("gate", f"one of {list(caps.gates(inputs.is_dspark))} on SGLang {up.release}", gate)
    if gate == "dspark" or not caps.exact_token_map:
        return "init_forward_metadata_target_verify", inputs.is_dspark
    if caps.gate:
        return "init_forward_metadata_target_verify_old", gate == "ungated"
    return "init_forward_metadata_target_verify_old", inputs.is_dspark


def ragged_layout(up: Upstream, inputs: VerifyInputs, padded: bool = True) -> Any:
    """Upstream's ``RaggedVerifyLayout`` over the harness's device lengths (None for a uniform batch).

    ``padded=False``: a graph tier's live layout before padding, as the planner
    hands it on ``spec_info`` (upstream's out-graph phase pads it itself).
    """
    if inputs.verify_lens is None:
        return None
    layout_cls = up.layout_cls
    if inputs.graph is None and inputs.verify_lens_cpu is None:
        # Eager, device-assembled: no host copy, no total (upstream reads verify_lens.sum().item()).
        return layout_cls.from_verify_lens_device(verify_lens=inputs.verify_lens,
                                                  graph_num_tokens=inputs.padded_num_tokens)
    assert inputs.verify_lens_cpu is not None
    total = sum(inputs.verify_lens_cpu)
    graph_num_tokens = inputs.graph.graph_num_tokens if inputs.graph is not None else total
    qo = up.ragged_kernels_module.BuildQoIndptr.execute(verify_lens=inputs.verify_lens)
    layout = layout_cls(
        verify_lens=inputs.verify_lens,
        graph_num_tokens=graph_num_tokens,
        extend_start_loc=qo.extend_start_loc,
        qo_indptr_device=qo.qo_indptr,
        verify_lens_cpu=list(inputs.verify_lens_cpu),
        total_verify_tokens=total,
    )
    if inputs.graph is not None and padded:
        # As upstream's graph runner hands the attention backend its layout, and as the backend's own
        # out-graph phase pads it at every replay: the cap ignored, every token of the tier covered
        # (full_coverage, docs/DESIGN.md section 2; the build and its recorded replay follow one convention).
        layout = layout.padded_to_bucket(padded_bs=inputs.rows, cap=None)
    return layout
