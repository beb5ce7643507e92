"""Builder ``"dsa-sglang"``: upstream's own DSA metadata code (the installed SGLang), on CPU, as a HIP server runs it.

==============  ===========================================================================================
phase           upstream, called as its runner calls it
==============  ===========================================================================================
``build``       ``DeepseekSparseAttnBackend.init_forward_metadata(forward_batch)`` (eager)
``graph_state`` ``init_cuda_graph_state(max_bs, max_num_tokens)``, once per runner bucket
``out_graph``   ``init_forward_metadata_out_graph(forward_batch, in_capture=...)``: capture, then replays into
                the captured ``DSAMetadata`` (route: the release's HIP condition, or the torch fallback)
``in_graph``    none (upstream has no in-graph metadata work): the captured metadata's tensors
``kv_prelude``  the HIP consumers' prelude with upstream's Triton ``get_valid_kv_indices`` (interpreted)
==============  ===========================================================================================

Not covered (named in every report): draft decode (the multi-step backend's children and precompute copies; the
bundled builder models them) -- ``modes`` says so.  The judged fields are read from upstream's ``DSAMetadata`` by
the family's field names (upstream's own), so a field upstream drops is reported missing, never defaulted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metadata_builders.families.dsa.adapter import double
from metadata_builders.families.dsa.adapter.loading import load, shims
from metadata_builders.families.dsa.fields import FIELDS

if TYPE_CHECKING:
    import torch

    from metadata_builders.families.dsa.inputs import DSAInputs

__all__ = ["SGLangDSABuilder"]


def _fused_on_hip(mods: Any) -> bool:
    """0.5.20+: HIP takes the fused replay kernels when ``kpool <= 1`` (``(is_cuda() or _is_hip) and ...``)."""
    import inspect

    source = inspect.getsource(mods.backend.DeepseekSparseAttnBackend._apply_cuda_graph_metadata)
    return "_is_hip) and self.dsa_index_kpool" in source


class SGLangDSABuilder:
    """The installed SGLang's ``DeepseekSparseAttnBackend`` behind the family's builder contract."""

    name = "dsa-sglang"
    family = "dsa"
    modes = ("target_verify", "draft_extend", "decode", "idle")
    """Draft decode is not run here (module docstring)."""
    routes = ("torch", "fused")

    def __init__(self, device: Any = "cpu") -> None:
        self.device = device
        self.mods = load()
        self.release = self.mods.version
        self.fused_on_hip = _fused_on_hip(self.mods)

    def _route_hip(self, route: str) -> bool:
        """The ``_is_hip`` flag giving ``route``: HIP's own route, and the other through the release's condition
        (0.5.18/0.5.19 run the fused kernels only off HIP, so the fused route there is CUDA's)."""
        return (route == "fused") == self.fused_on_hip

    def build(self, inputs: DSAInputs) -> dict[str, Any]:
        with shims(route_hip=True) as mods:
            backend = double.make_backend(mods, inputs)
            fb = double.forward_batch(mods, inputs)
            backend.init_forward_metadata(fb)
            double.write_back(fb, inputs)
            return _fields(backend.forward_metadata)

    def graph_state(self, inputs: DSAInputs) -> Any:
        runner = inputs.runner
        assert runner is not None
        if "sglang" not in runner.shared:
            with shims(route_hip=self._route_hip(inputs.variant.route)) as mods:
                backend = double.make_backend(mods, inputs)
                backend.init_cuda_graph_state(runner.max_bs, runner.max_num_tokens)
            runner.shared["sglang"] = backend
        return runner.shared["sglang"]

    def out_graph(self, state: Any, inputs: DSAInputs) -> dict[str, Any]:
        with shims(route_hip=self._route_hip(inputs.variant.route)) as mods:
            fb = double.forward_batch(mods, inputs)
            state.init_forward_metadata_out_graph(fb, in_capture=inputs.in_capture)
        fields = _fields(state.decode_cuda_graph_metadata[inputs.batch_size])
        return {name: value for name, value in fields.items() if not FIELDS[name].device or value is None}

    def in_graph(self, state: Any, inputs: DSAInputs) -> dict[str, torch.Tensor]:
        fields = _fields(state.decode_cuda_graph_metadata[inputs.batch_size])
        return {name: value for name, value in fields.items() if FIELDS[name].device and value is not None}

    def kv_prelude(self, page_table: torch.Tensor, batch_size: int) -> Any:
        """``_forward_aiter_extend``'s prelude with upstream's ``get_valid_kv_indices`` (Triton, interpreted)."""
        import torch

        from metadata_builders.families.dsa.builder.consumers import Prelude

        num_tokens, topk = page_table.shape
        counts = (page_table != -1).sum(dim=1)
        kv_indptr = torch.zeros(num_tokens + 1, dtype=torch.int32, device=page_table.device)
        kv_indptr[1:] = torch.cumsum(counts, dim=0)
        kv_indices = torch.zeros(num_tokens * topk + 1, dtype=torch.int32, device=page_table.device)
        guard = kv_indices[-1:]  # one element past kv_indices: a store there is counted, as the bundled model does
        with shims(route_hip=True):
            self.mods.triton_kernel.get_valid_kv_indices(page_table, kv_indptr, kv_indices[:-1], num_tokens)
        return Prelude(kv_indptr.tolist(), kv_indices[:-1].tolist(), int(guard.item() != 0))


def _fields(metadata: Any) -> dict[str, Any]:
    """The judged fields of upstream's ``DSAMetadata`` by name (a missing one stays missing: P1 says so)."""
    return {name: getattr(metadata, name) for name in FIELDS if hasattr(metadata, name)}
