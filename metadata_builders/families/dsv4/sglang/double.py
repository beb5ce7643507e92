"""The backend double: ``object.__new__`` of upstream's backend and KV pool, with only what target verify reads.

No GPU and no model: :func:`make_backend` sets the attributes the target-verify
methods read (the survey's attribute table in docs/SGLANG.md), and
:func:`upstream_patched` applies the stubs of one build -- compression, the
indexer and the FlashMLA schedule off, the unified-KV gate on, module constants
from the batch's geometry -- each with its reason in docs/SGLANG.md.  Thin spies
on three backend methods record the arguments upstream passes between stages
(:mod:`~metadata_builders.families.dsv4.sglang.reading` reads them).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from metadata_builders.families.dsv4.sglang.compression import (
    compression_attributes,
    compression_patched,
    empty_sparse_buffers,
)
from metadata_builders.families.dsv4.sglang.routing import patched

if TYPE_CHECKING:
    import torch

    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.sglang.releases import Upstream

__all__ = ["make_backend", "upstream_patched"]


def _no_flashmla_schedule() -> None:
    """What upstream's ``_create_flashmla_metadata`` returns on HIP."""
    return None


def _no_compressor_data(**_: Any) -> None:
    """Stub of ``create_paged_compressor_data`` (0.5.18-0.5.20 only: compression is forced on there)."""
    return None


def _empty_compression(core: Any, *_: Any, **__: Any) -> None:
    """Stub of ``DSV4AttnMetadata.init_compression_metadata`` (0.5.18-0.5.20): no c4/c128 entries.

    The decode streams of those releases read these fields unguarded; zero lengths
    and zero-width page indices give them the empty compressed tail 0.5.21+
    substitute themselves.
    """
    import torch

    n, dev = core.seq_lens_casual.shape[0], core.seq_lens_casual.device
    core.c4_topk_lengths_raw = core.c4_topk_lengths_clamp1 = torch.zeros(n, dtype=torch.int32, device=dev)
    core.c128_topk_lengths_raw = core.c128_topk_lengths_clamp1 = torch.zeros(n, dtype=torch.int32, device=dev)
    core.c128_page_indices = torch.empty((n, 0), dtype=torch.int32, device=dev)


def _no_indexer(*_: Any, **__: Any) -> None:
    """Stub of ``init_forward_metadata_indexer`` (compression forced on, 0.5.18-0.5.20)."""
    return None


def _streams_not_built(**_: Any) -> tuple[None, None, None, None, None, None]:
    """Stub of ``build_decode_streams`` for geometries its kernel cannot take (``swa_window > unified_swa_window``)."""
    return (None,) * 6


def _unified_kv_on() -> bool:
    return True


def _unified_kv_fp8_off() -> bool:
    return False


def _move_to_device_unpinned(device: Any, x: list[int]) -> torch.Tensor:
    """Upstream's ``_move_to_device`` less ``pin_memory=True`` (no pinned allocator without a GPU).

    The ``non_blocking`` host-to-device copy stays: it is where the harness
    delivers a uniform divergence.
    """
    import torch

    staged = torch.tensor(x, dtype=torch.int32)
    return staged.to(device, non_blocking=True)


def _move_to_device_where_it_runs(backend: Any, device: Any, x: list[int]) -> torch.Tensor:
    """Upstream's ``_move_to_device`` itself under the audit (its pinned staging judged by the stream model), the
    unpinned stub outside one."""
    from metadata_builders.audit import auditing

    if auditing():
        return type(backend)._move_to_device(backend, x)
    return _move_to_device_unpinned(device, x)


def _decode_streams_run(geometry: Any) -> bool:
    """Whether upstream's ``build_decode_streams`` runs for this geometry (else it is stubbed).

    Its index kernel writes ``min(pos + 1, unified_swa_window)`` entries per token
    into segments sized ``min(pos + 1, swa_window)``; upstream has both at 128.
    With ``swa_window > unified_swa_window`` the last segments start past the
    buffer's ``N * unified_swa_window`` capacity and the write leaves it.
    """
    return geometry.swa_window <= geometry.unified_swa_window


@contextlib.contextmanager
def upstream_patched(up: Upstream, inputs: VerifyInputs) -> Iterator[None]:
    """The stubs and module constants of one build (docs/SGLANG.md "Stubs, and why"), restored afterwards."""
    geo = inputs.geometry
    with contextlib.ExitStack() as stack:
        enter = stack.enter_context
        enter(patched(up.backend_module, "SWA_WINDOW", geo.swa_window))
        enter(patched(up.backend_module, "PAGE_INDEX_ALIGNED_SIZE", geo.page_index_align))
        enter(patched(up.backend_module, "_create_flashmla_metadata", _no_flashmla_schedule))
        if hasattr(up.backend_module, "build_low_ratio_decode_workspaces"):  # 0.5.22+, read by in-graph work only
            enter(patched(up.backend_module, "build_low_ratio_decode_workspaces", _no_fp4_workspaces))
        for module in (up.gate_module, up.backend_module):
            if hasattr(module, "is_unified_kv_triton"):
                enter(patched(module, "is_unified_kv_triton", _unified_kv_on))
            if hasattr(module, "is_unified_kv_fp8"):
                enter(patched(module, "is_unified_kv_fp8", _unified_kv_fp8_off))
        if not _decode_streams_run(geo):
            enter(patched(up.runtime_module, "build_decode_streams", _streams_not_built))
        if geo.compression is not None:
            if up.compression_missing is not None:
                raise up.compression_missing
            enter(compression_patched(up, inputs))
        elif up.capabilities.forced_compression:
            enter(patched(up.backend_module, "create_paged_compressor_data", _no_compressor_data))
            if up.attn_metadata_cls is not None:
                enter(patched(up.attn_metadata_cls, "init_compression_metadata", _empty_compression))
                enter(patched(up.attn_metadata_cls, "init_flashmla_related", empty_sparse_buffers))
        yield


def _no_fp4_workspaces(metadata_by_ratio: Any, **kwargs: Any) -> dict[int, Any]:
    """V4.1's in-graph FP4 low-ratio decode workspaces (AITER/HIP kernels, no field the harness models):
    none, as with the FP4 indexer off."""
    return {}


def make_backend(up: Upstream, inputs: VerifyInputs, device: Any, is_dspark: bool,
                 seen: dict[str, dict[str, Any]]) -> Any:
    """``object.__new__(DeepseekV4HipRadixBackend)`` plus the attributes target verify reads (any release).

    ``device`` is the handle the harness gave the builder, handed on unchanged (the
    model runner's ``device``): on CPU only that handle names device memory.
    """
    import torch

    geo = inputs.geometry
    pool = object.__new__(up.pool_cls)
    pool.full_to_swa_index_mapping = inputs.full_to_swa
    pool.unified_swa_window = geo.unified_swa_window
    pool.unified_swa_ring_size = geo.ring_size
    pool.unified_swa_pages = 0
    pool.request_window = None

    backend = object.__new__(up.backend_cls)
    backend.device = device
    backend.page_size = geo.page_size
    backend.swa_page_size = geo.swa_window  # 0.5.18-0.5.20 assert swa_page_size == SWA_WINDOW
    backend.cuda_int32_kwargs = {"device": device, "dtype": torch.int32}
    backend.req_to_token = inputs.req_to_token
    backend.MAX_SEQ_LEN_FOR_CAPTURE = inputs.req_to_token.shape[1]
    backend.token_to_kv_pool = pool
    _draft_counts(backend, inputs)
    backend.is_dspark = is_dspark
    backend.is_dsv41 = False
    backend.need_compress = False  # 0.5.21+: compression and the indexer off (compression_attributes: on)
    backend.has_c4 = False
    backend.has_c128 = False
    backend.low_ratios = ()  # compression_attributes: the geometry's low ratios
    backend.c4_topk = 512  # 0.5.18-0.5.20
    backend.index_topk = 512  # 0.5.21+
    backend.encoder_replay = False
    backend._fp4_graph_row_limit = None
    backend._fp8_decode_num_heads = 0
    backend._fp8_verify_epi = "bf16"
    if geo.compression is None:
        backend.init_forward_metadata_indexer = _no_indexer
    else:
        compression_attributes(backend, pool, geo)
    if torch.device(device).type == "cpu" and not torch.cuda.is_available():
        # Upstream's own _move_to_device stages in pinned memory, which CPU-only torch cannot allocate: under the
        # audit it runs as it is (the audit makes the buffer and tracks it as pinned: audit/streams.py); outside one
        # (a bare timing) the unpinned stub stands in.
        backend._move_to_device = functools.partial(_move_to_device_where_it_runs, backend, device)
    for name in ("init_forward_metadata_prefill", "make_core_attn_metadata", "_attach_unified_kv_prefill_meta"):
        setattr(backend, name, _spy(backend, getattr(up.backend_cls, name), name, seen))
    return backend


def _draft_counts(backend: Any, inputs: VerifyInputs) -> None:
    """The two draft counts upstream's ``__init__`` leaves on the backend, and whose worker it is.

    The target worker: ``speculative_num_draft_tokens`` (the server argument) is also the verify width.  A DSpark
    draft worker (``is_draft_worker`` and DSpark: ``is_dspark_draft``, every release 0.5.18+) keeps the configured
    gamma + 1 and verifies ``target_verify_num_draft_tokens = gamma`` (``need_compress`` off: the batch model
    gives its pool no compressed KV).  The gate knob's ``is_dspark`` flip leaves ``is_dspark_draft`` as ``__init__``
    set it.  Worked example: gamma 3 -> ``speculative_num_draft_tokens = 4``, ``target_verify_num_draft_tokens = 3``.
    """
    draft = inputs.speculative_num_draft_tokens is not None
    backend.target_verify_num_draft_tokens = inputs.num_draft_tokens
    backend.speculative_num_draft_tokens = inputs.speculative_num_draft_tokens or inputs.num_draft_tokens
    backend.is_dspark_draft = backend.is_draft_worker = draft


def _spy(backend: Any, method: Callable[..., Any], name: str, seen: dict[str, dict[str, Any]]) -> Callable[..., Any]:
    """``backend.name`` that records its bound arguments (defaults applied) and calls upstream's method."""
    signature = inspect.signature(method)

    def spy(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(backend, *args, **kwargs)
        bound.apply_defaults()
        seen[name] = dict(bound.arguments)
        return method(backend, *args, **kwargs)

    spy.__name__ = spy.__qualname__ = f"observe_{name}"
    return spy
