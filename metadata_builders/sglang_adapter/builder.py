"""The builder: one call of upstream's target-verify entry point on harness-made inputs.

Variant mapping (worked example: uniform EAGLE, ``seq_lens=[5, 3]``, 2 drafts,
SGLang 0.5.23)::

    mirror=host      seq_lens_cpu=[5, 3]              (the seed fix)
    mirror=device    seq_lens_cpu=None                (0.5.22+: device full_like lengths)
    mirror=tolist    seq_lens_cpu=seq_lens.tolist()   (the pre-fix caller: one D2H sync)
    gate=dspark      is_dspark=batch.is_dspark, public entry point
    gate=ungated     is_dspark=True,  ``..._old`` directly (0.5.21+)
    gate=always_sync is_dspark=False, ``..._old`` directly (0.5.21+)

The gate knob is the ``is_dspark`` flip because upstream's gate
``exact_num_tokens = exact_num_tokens and self.is_dspark`` reads nothing else,
and nothing else of ``..._old`` reads ``is_dspark`` on this path (fp8 grouped
streams are off).  Releases without the gate express only their own rule
(:meth:`~metadata_builders.sglang_adapter.releases.Capabilities.gates`).

Ragged layouts are built from the harness's **device** tensor
``inputs.verify_lens``, so the divergence it carries and its provenance reach
upstream: eager ``layout_total=host`` is the public constructor with
``verify_lens_cpu`` and the host total (``extend_start_loc``/``qo_indptr`` from
upstream's ``BuildQoIndptr``); ``layout_total=device`` is
``from_verify_lens_device``; the graph path is the host-total layout then
``padded_to_bucket(padded_bs=rows, cap=cap)``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from metadata_builders.errors import InvalidVariant
from metadata_builders.sglang_adapter.compression import unobservable
from metadata_builders.sglang_adapter.coverage import record
from metadata_builders.sglang_adapter.double import make_backend, upstream_patched
from metadata_builders.sglang_adapter.reading import read, streams_unobservable
from metadata_builders.sglang_adapter.releases import load_upstream
from metadata_builders.sglang_adapter.routing import ROUTES, Route, kernel_routes
from metadata_builders.variants import variants_for

if TYPE_CHECKING:
    import torch

    from metadata_builders.batch import VerifyBatch
    from metadata_builders.inputs import VerifyInputs
    from metadata_builders.metadata import VerifyMetadata
    from metadata_builders.sglang_adapter.releases import Upstream
    from metadata_builders.variants import Variant

__all__ = ["SGLangBuilder", "ragged_layout", "target_verify", "torch_route"]

_PATCH_LOCK = threading.RLock()


def _is_cpu(device: Any) -> bool:
    import torch

    return torch.device(device).type == "cpu"


class SGLangBuilder:
    """Builder ``"sglang"``: upstream's target-verify code on a backend double; keeps no state.

    ``kernels`` is the route (:mod:`~metadata_builders.sglang_adapter.routing`):
    ``"triton"`` (default) runs the Triton kernels a GPU runs (on CPU under the
    interpreter); ``"torch"`` keeps upstream's own dispatch, which on CPU tensors
    runs its torch fallbacks.  ``device`` is the harness's device handle, handed
    to upstream unchanged.
    """

    name = "sglang"

    def __init__(self, device: str | torch.device = "cpu", kernels: Route = "triton") -> None:
        if kernels not in ROUTES:
            raise InvalidVariant("kernels", " or ".join(repr(r) for r in ROUTES), kernels)
        self.device = device
        self.kernels: Route = kernels
        if kernels != "triton":
            self.name = f"sglang[{kernels}]"
        self.upstream = load_upstream(device)
        if _is_cpu(device) and not self.upstream.interpreter:
            raise RuntimeError(
                "SGLang's metadata kernels are triton-only on CPU and need TRITON_INTERPRET=1 before triton is "
                "first imported; import metadata_builders.sglang_adapter (or set the variable) first"
            )

    def variants_supported(self, batch: VerifyBatch) -> list[Variant]:
        """The variants of ``batch`` the installed release (and the route) can express.

        The torch route has no mirror-less uniform verify: upstream's CPU fallback
        of ``ExpandPrefillCausally`` asserts host mirrors (docs/FINDINGS.md F1).
        """
        caps = self.upstream.capabilities
        gates = caps.gates(batch.is_dspark)
        mirrorless = caps.mirrorless and (self.kernels == "triton" or batch.is_ragged)
        return [v for v in variants_for(batch) if v.gate in gates and (v.mirror != "device" or mirrorless)]

    def build(self, inputs: VerifyInputs) -> VerifyMetadata:
        with _PATCH_LOCK, upstream_patched(self.upstream, inputs), kernel_routes(self.upstream, inputs, self.kernels):
            return target_verify(self.upstream, inputs, self.device)


def torch_route(device: str | torch.device = "cpu") -> SGLangBuilder:
    """The ``torch`` route of the ``sglang`` builder (``--builder metadata_builders.sglang_adapter:torch_route``)."""
    return SGLangBuilder(device, kernels="torch")


# Function names below show up as stages in audit records, like upstream's own functions.


def _entry_and_is_dspark(up: Upstream, inputs: VerifyInputs) -> tuple[str, bool]:
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


def target_verify(up: Upstream, inputs: VerifyInputs, device: Any) -> VerifyMetadata:
    """One call of upstream's target-verify entry point on harness-made inputs."""
    variant = inputs.variant
    if variant.mirror == "device" and inputs.verify_lens is None and not up.capabilities.mirrorless:
        raise InvalidVariant("mirror", f"'host' or 'tolist' on SGLang {up.release} (mirror-less verify is 0.5.22+)",
                             variant.mirror)
    entry, is_dspark = _entry_and_is_dspark(up, inputs)
    seen: dict[str, dict[str, Any]] = {}
    backend = make_backend(up, inputs, device, is_dspark, seen)
    seq_lens_cpu = inputs.seq_lens_cpu
    if inputs.verify_lens is None and variant.mirror == "tolist":
        # The pre-fix caller: no host mirror kept, so read it back (one D2H sync).
        seq_lens_cpu = inputs.seq_lens.tolist()
    md = getattr(backend, entry)(
        max_seq_len=inputs.max_seq_len,
        req_pool_indices=inputs.req_pool_indices,
        seq_lens=inputs.seq_lens,
        seq_lens_cpu=seq_lens_cpu,
        out_cache_loc=inputs.out_cache_loc,
        use_prefill_cuda_graph=variant.path == "graph",
        ragged_layout=ragged_layout(up, inputs),
    )
    if not hasattr(md, "core_attn_metadata"):
        # DSpark's uniform graph build defers to the replay (DSV4RawVerifyMetadata).
        md = backend.make_forward_metadata_from_raw_verify(md)
    missing = unobservable(inputs.geometry, up.capabilities.low_ratios)
    metadata = read(md, seen, inputs.geometry, missing if inputs.geometry.compression is not None else None)
    record(md, metadata.fields, {**missing, **streams_unobservable(inputs.geometry, metadata.not_observable)})
    return metadata


def ragged_layout(up: Upstream, inputs: VerifyInputs) -> Any:
    """Upstream's ``RaggedVerifyLayout`` over the harness's device lengths (None for a uniform batch)."""
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
    if inputs.graph is not None:
        layout = layout.padded_to_bucket(padded_bs=inputs.rows, cap=inputs.graph.cap)
    return layout
