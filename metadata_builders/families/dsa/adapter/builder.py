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

Draft decode runs upstream's ``DeepseekSparseAttnMultiStepBackend`` (``double.make_multi_step``: ``N - 2``
children) as the EAGLE worker and its draft graph runner call it: eager ``init_forward_metadata`` (every child
builds from the same ``DECODE`` batch); ``init_cuda_graph_state`` once per runner bucket; at capture
``init_forward_metadata_out_graph(in_capture=True)`` (upstream's ``build_inner_fb_view`` hands every child a
``DECODE`` view); at replay the same call without ``in_capture``: child 0's ``_precompute_replay_metadata`` once,
then the copies into every child.  The judged fields are child ``inputs.draft_step``'s (eager: its
``forward_metadata``; graph: its captured ``DSAMetadata``); ``in_graph`` returns every child's tensors as
``<child>/<field>``, of which the harness judges the named child's (the bundled builder's convention).

Which replay copy runs, per release (HIP, ``index_kpool`` 1, ``N <= 4`` as the family draws):

================  ===============================================================================================
release           draft decode replay
================  ===============================================================================================
0.5.18, 0.5.19    per-child ``init_forward_metadata_replay_cuda_graph_from_precomputed``; its copy is the torch
                  copies on HIP (``if not _is_hip`` guards the CUDA JIT copy); the fused route there is CUDA's
                  (``_is_hip`` False), whose JIT copy fails on CPU (shim 6) into upstream's own torch copies
0.5.20-0.5.23     the same, the copy in ``DSAMetadataManagementMixin._copy_base_replay_buffers`` (HIP: torch
                  copies); the k-pool branch (``experimental_kpool_metadata_fusion``: CUDA, ``kpool > 1``) is
                  never taken on HIP
================  ===============================================================================================

Not run, by the family's draw and by CPU: with ``N >= 5`` (more than 3 draft steps) upstream calls the JIT
``fused_metadata_copy_multi_cuda`` for children 0-2 on HIP and CUDA alike (CUDA/HIP C++, no CPU build); here it
raises (shim 6) and upstream's own fallback loop copies every child, so such a batch judges the fallback, not HIP's
kernel.  The family's strategies draw ``N <= 4`` in draft decode, so ``check`` never reaches it.  The judged fields
are read from upstream's ``DSAMetadata`` by the family's field names (upstream's own), so a field upstream drops is
reported missing, never defaulted.
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
    modes = ("target_verify", "draft_extend", "decode", "draft_decode", "idle")
    """Every mode of the family (draft decode: the multi-step backend, module docstring)."""
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
            fb = double.forward_batch(mods, inputs)
            if inputs.mode == "draft_decode":
                multi = double.make_multi_step(mods, inputs)
                multi.init_forward_metadata(fb)
                metadata = multi.attn_backends[_step(inputs)].forward_metadata
            else:
                backend = double.make_backend(mods, inputs)
                backend.init_forward_metadata(fb)
                metadata = backend.forward_metadata
            double.write_back(fb, inputs)
            return _fields(metadata)

    def graph_state(self, inputs: DSAInputs) -> Any:
        runner = inputs.runner
        assert runner is not None
        if "sglang" not in runner.shared:
            with shims(route_hip=self._route_hip(inputs.variant.route)) as mods:
                make = double.make_multi_step if inputs.mode == "draft_decode" else double.make_backend
                backend = make(mods, inputs)
                backend.init_cuda_graph_state(runner.max_bs, runner.max_num_tokens)
            runner.shared["sglang"] = backend
        return runner.shared["sglang"]

    def out_graph(self, state: Any, inputs: DSAInputs) -> dict[str, Any]:
        with shims(route_hip=self._route_hip(inputs.variant.route)) as mods:
            fb = double.forward_batch(mods, inputs)
            state.init_forward_metadata_out_graph(fb, in_capture=inputs.in_capture)
        fields = _fields(_captured(state, inputs)[_step(inputs)])
        return {name: value for name, value in fields.items() if not FIELDS[name].device or value is None}

    def in_graph(self, state: Any, inputs: DSAInputs) -> dict[str, torch.Tensor]:
        """The captured tensors; draft decode: every child's, named ``<child>/<field>``."""
        tensors = [{name: value for name, value in _fields(metadata).items()
                    if FIELDS[name].device and value is not None} for metadata in _captured(state, inputs)]
        if inputs.mode != "draft_decode":
            return tensors[0]
        return {f"{i}/{name}": value for i, child in enumerate(tensors) for name, value in child.items()}

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


def _step(inputs: DSAInputs) -> int:
    """The judged child: draft decode's ``draft_step``, else the one backend."""
    return (inputs.draft_step or 0) if inputs.mode == "draft_decode" else 0


def _captured(state: Any, inputs: DSAInputs) -> list[Any]:
    """The captured ``DSAMetadata`` of ``inputs``' batch size, per child (one backend: a list of one)."""
    backends = state.attn_backends if inputs.mode == "draft_decode" else [state]
    return [backend.decode_cuda_graph_metadata[inputs.batch_size] for backend in backends]


def _fields(metadata: Any) -> dict[str, Any]:
    """The judged fields of upstream's ``DSAMetadata`` by name (a missing one stays missing: P1 says so)."""
    return {name: getattr(metadata, name) for name in FIELDS if hasattr(metadata, name)}
