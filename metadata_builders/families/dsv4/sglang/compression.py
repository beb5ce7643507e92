"""Compression on the double: what a build with ``geometry.compression`` sets, routes and cannot observe.

With compression on, upstream's own code builds every group of DESIGN.md section 2:
``init_compression_metadata`` and ``init_flashmla_related`` (Triton, under the
interpreter on CPU), the indexer's ``PagedIndexerMetadata`` and the c4/c128
compress plans (``create_paged_compressor_data`` -> ``CompressorPrefillPlan.generate``).
On CPU three things cannot run as on a ROCm GPU, and each is routed, not skipped:

| upstream piece | on a ROCm GPU | on CPU here |
|---|---|---|
| ``_jit_compress_plan_module()`` | the JIT HIP extension ``c_plan.cuh`` | :mod:`.plan_kernel`, a model of it |
| ``PagedIndexerMetadata.__post_init__`` | ``is_hip()`` (and the ROCm hook's environment, | ``is_hip`` -> ``True`` |
|               | :data:`ROCM_ENV`): no DeepGEMM schedule | (routed like the other CPU dispatches), |
|               |  | the same environment |
| pinned staging (``pin_memory=True``) | a page-locked host buffer | a plain host buffer (no pinned allocator |
|               |  | without a GPU) |

And one stub on every device: the backend's ``dsa_topk_backend`` says
``should_use_topk_v2() == False`` (and ``SGLANG_OPT_USE_TOPK_V2`` is off).  On ROCm,
DeepSeek-V4's model hook sets ``SGLANG_OPT_USE_TOPK_V2=1`` (0.5.19+) so the indexer metadata also holds
``plan_topk_v2``'s routing plan (``topk_metadata``): another JIT extension, whose
output is no field of the model.  Without it ``topk_metadata`` is ``empty((0,))``;
nothing else of ``PagedIndexerMetadata`` depends on it.

Geometries upstream refuses (its asserts) build everything else and name the
fields they cannot observe (:func:`unobservable`): the indexer asserts
``page_size == 256`` (stubbed: no indexer); ``init_flashmla_related`` asserts
``index_topk in (512, 1024)`` (stubbed: :func:`empty_sparse_buffers`).

The V4.1 low ratios (``geometry.compression.low_ratios``) are handed to upstream
as ``backend.low_ratios`` (0.5.22+ build their c1/c2 metadata; older releases
ignore it and the fields are not observable), with the low-ratio indexer pool's
64-slot pages (:data:`LOW_RATIO_INDEX_PAGE_SIZE`).  The two stubs above cover the
low ratios' indexers and sparse buffers too.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from torch.overrides import TorchFunctionMode

from metadata_builders.families.dsv4.sglang.plan_decode import JitPlanModule
from metadata_builders.families.dsv4.sglang.routing import patched

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import Compression, Geometry
    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.sglang.releases import Upstream

__all__ = ["INDEXER_PAGE_SIZE", "LOW_RATIO_INDEX_PAGE_SIZE", "ROCM_ENV", "SPARSE_TOPKS", "compression_attributes",
           "compression_patched", "empty_sparse_buffers", "swa_page_size", "unobservable"]

INDEXER_PAGE_SIZE = 256
"""``PagedIndexerMetadata.__post_init__``: ``assert self.page_size == 256``."""
LOW_RATIO_INDEX_PAGE_SIZE = 64
"""``get_index_k_page_size(1 or 2)`` on HIP: ``DSV41_INDEX_PAGE_SIZE`` (64 without DeepGEMM's paged sparse MQA
logits)."""
SPARSE_TOPKS = (512, 1024)
"""``init_flashmla_related``: ``assert self.index_topk in (512, 1024)``."""
ROCM_ENV = {
    "SGLANG_FP8_PAGED_MQA_LOGITS_TORCH": "true",
    "SGLANG_OPT_USE_AITER_INDEXER": "true",
    "SGLANG_OPT_USE_TOPK_V2": "false",
    "SGLANG_OPT_USE_ONLINE_COMPRESS": "false",
}
"""Environment of a compressed build: what SGLang's DeepSeek-V4 hook sets on ROCm (the first two: no DeepGEMM
schedule in ``PagedIndexerMetadata``, the only route 0.5.18/0.5.19 take), no top-k v2 plan (0.5.18: as the ROCm
hook sets it; 0.5.19+: a stub, see the module docstring), and the online c128 planner off (upstream's default; it
is another kernel, fed by host lengths)."""
_SPARSE_FIELDS = ("c4_sparse_topk_lengths", "c4_sparse_topk_lengths_raw", "c4_sparse_page_indices")


def _low_ratio_fields(geo: Geometry, *suffixes: str) -> list[str]:
    assert geo.compression is not None
    return [f"c{ratio}_{suffix}" for ratio in geo.compression.low_ratios for suffix in suffixes]


def unobservable(geo: Geometry, low_ratios: bool = True) -> dict[str, str]:
    """Harness fields ``geo`` cannot give on upstream, each with why (empty: all observable).

    Without compression, every field of the compression groups: 0.5.18-0.5.20 still
    fill them (compression forced on their verify path), from the double's stubs.
    ``low_ratios``: whether the release has the V4.1 low ratios; one without them
    (0.5.18-0.5.21) fills none of their fields, so no stub of theirs is named (the
    coverage line would count a named stub as produced by upstream).
    """
    from metadata_builders.families.dsv4.metadata import FIELDS, STREAM_FIELD_NAMES

    out: dict[str, str] = {}
    if geo.compression is None:
        why = "compression off in this geometry (0.5.18-0.5.20 force it on: stubbed empty)"
        # the low ratios are no stub of a forced piece: a geometry without compression has none to name
        return {name: why for name, spec in FIELDS.items() if spec.needs_compression and spec.group != "low_ratios"}
    if geo.page_size != INDEXER_PAGE_SIZE:
        why = (f"PagedIndexerMetadata asserts page_size == {INDEXER_PAGE_SIZE} (geometry: {geo.page_size}); "
               "the indexer is not built")
        out["indexer_compressed_seq_lens"] = why
        if low_ratios:
            out.update(dict.fromkeys(_low_ratio_fields(geo, "indexer_compressed_seq_lens", "indexer_page_table"), why))
    if geo.compression.index_topk not in SPARSE_TOPKS:
        why = (f"init_flashmla_related asserts index_topk in {SPARSE_TOPKS} (geometry: "
               f"{geo.compression.index_topk}); the sparse buffers are not built")
        out.update(dict.fromkeys(_SPARSE_FIELDS, why))
        if low_ratios:
            out.update(dict.fromkeys(_low_ratio_fields(geo, "sparse_topk_lengths", "sparse_page_indices",
                                                       "sparse_raw_indices"), why))
        if geo.swa_window == geo.unified_swa_window:
            # The CSA stream reads the sparse buffers; the harness reads the six streams together.
            out.update(dict.fromkeys(STREAM_FIELD_NAMES, f"{why}, and the CSA stream reads them"))
    return out


def swa_page_size(geo: Geometry) -> int:
    """The pool's ``swa_page_size``: whole SWA windows and whole rings (the planner's ``swa_page_size % ring_size``).

    Upstream: 256 = lcm(window 128, c4 ring 16, c128 ring 256).
    """
    assert geo.compression is not None
    return math.lcm(geo.swa_window, geo.compression.c4_ring_size, geo.compression.c128_ring_size)


class _TopkWithoutV2:
    """The backend's ``dsa_topk_backend``: no top-k v2 routing plan (a JIT extension; see the module docstring)."""

    def should_use_topk_v2(self) -> bool:
        return False


def _ring_size(compression: Compression, compress_ratio: int) -> int:
    """``get_ring_size``: the compress-state ring of ``compress_ratio`` (upstream with speculation: 16 / 256)."""
    return compression.ring_size(compress_ratio)


def _index_k_page_size(page_size: int, compress_ratio: int = 4) -> int:
    """``get_index_k_page_size``: the c4 indexer pool pages ``page_size // 4`` compressed slots, the low ratios' 64."""
    return LOW_RATIO_INDEX_PAGE_SIZE if compress_ratio in (1, 2) else page_size // compress_ratio


def compression_attributes(backend: Any, pool: Any, geo: Geometry) -> None:
    """Turn compression on in the double (both switches: 0.5.21+ ``need_compress``/``has_c4``/``has_c128``,
    0.5.18-0.5.20 forced), with the pool attributes the planner and the indexer read."""
    compression = geo.compression
    assert compression is not None
    backend.need_compress = True
    backend.has_c4 = True
    backend.has_c128 = True
    backend.low_ratios = compression.low_ratios  # 0.5.22+ (present_ratios' 1 and 2); ignored before
    backend.index_topk = compression.index_topk  # 0.5.21+
    backend.c4_topk = compression.index_topk  # 0.5.18-0.5.20
    backend.dsa_topk_backend = _TopkWithoutV2()
    pool.swa_page_size = swa_page_size(geo)
    pool.get_ring_size = functools.partial(_ring_size, compression)
    pool._unified_kv = True  # the unified-KV gate is on: the c4 state lives in the per-request ring
    pool.get_index_k_page_size = functools.partial(_index_k_page_size, geo.page_size)
    pool.unified_swa_pages = compression.unified_swa_pages


def _plan_module(req_ring: bool, max_tokens: int) -> JitPlanModule:
    """``_jit_compress_plan_module()`` on CPU: the models of the release's planners, not a JIT build."""
    return JitPlanModule(req_ring=req_ring, max_tokens=max_tokens)


def _on_rocm() -> bool:
    return True


def _not_built(*_: Any, **__: Any) -> None:
    """Stub of the indexer on a geometry its metadata asserts against (:func:`unobservable` names the field)."""


def empty_sparse_buffers(core: Any, *_: Any, **__: Any) -> None:
    """Stub of ``DSV4AttnMetadata.init_flashmla_related``: zero sparse lengths, ``(N, 0)`` page indices.

    The decode streams of 0.5.18-0.5.20 read these unguarded; zero lengths and no
    columns give them the empty compressed tail 0.5.21+ substitute themselves.
    """
    import torch

    n, dev = core.seq_lens_casual.shape[0], core.seq_lens_casual.device
    core.c4_sparse_topk_lengths = core.c4_sparse_topk_lengths_raw = torch.zeros(n, dtype=torch.int32, device=dev)
    core.c4_sparse_page_indices = torch.empty((n, 0), dtype=torch.int32, device=dev)
    # the FlashMLA schedules, None on HIP (graph replay's copy_ assigns them: they must exist)
    for ratio in (0, 1, 2, 4, 128):
        if getattr(core, f"c{ratio}_flashmla_metadata", None) is None:
            setattr(core, f"c{ratio}_flashmla_metadata", None)


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    had = name in os.environ
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if had:
            os.environ[name] = old  # type: ignore[assignment]
        else:
            os.environ.pop(name, None)


class _Unpinned(TorchFunctionMode):
    """Factories without ``pin_memory``: CPU-only torch has no pinned allocator (the buffer is host memory either
    way)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        kwargs.pop("pin_memory", None)
        return func(*args, **kwargs)


def _from_dlpack(original: Any, x: Any) -> Any:
    """``torch.from_dlpack`` of a torch tensor is that tensor (the model's plans); anything else as upstream's.

    Upstream wraps the JIT extension's ffi tensors; the CPU model returns torch tensors
    already.  The same object keeps what the audit knows of it (device memory), which a
    fresh alias would not: a graph capture would then take the plans for host memory.
    """
    import torch

    return x if isinstance(x, torch.Tensor) else original(x)


def _generate_unpinned(generate: Any, *args: Any, **kwargs: Any) -> Any:
    """Upstream's planner as it is under the audit (which makes its pinned scratch and tracks the scratch's
    asynchronous copies: audit/streams.py); outside one, its factories without ``pin_memory``."""
    from metadata_builders.audit import auditing

    if auditing():
        return generate(*args, **kwargs)
    with _Unpinned():
        return generate(*args, **kwargs)


@contextlib.contextmanager
def compression_patched(up: Upstream, inputs: VerifyInputs) -> Iterator[None]:
    """The routes and stubs of one compressed build (see the module docstring), restored afterwards."""
    import torch

    geo = inputs.geometry
    missing = unobservable(geo)
    with contextlib.ExitStack() as stack:
        enter = stack.enter_context
        for name, value in ROCM_ENV.items():
            enter(_env(name, value))
        if inputs.seq_lens.device.type == "cpu":
            caps = up.capabilities
            module = functools.partial(_plan_module, caps.plan_req_ring, caps.plan_max_tokens)
            enter(patched(up.compress_module, "_jit_compress_plan_module", module))
            enter(patched(up.indexer_module, "is_hip", _on_rocm))
            enter(patched(torch, "from_dlpack", functools.partial(_from_dlpack, torch.from_dlpack)))
            if not torch.cuda.is_available():
                plan_cls = up.compress_module.CompressorPrefillPlan
                unpinned = functools.partial(_generate_unpinned, plan_cls.generate)
                enter(patched(plan_cls, "generate", staticmethod(unpinned)))
        if "indexer_compressed_seq_lens" in missing:
            enter(patched(up.backend_cls, "init_forward_metadata_indexer", _not_built))
        if "c4_sparse_page_indices" in missing and up.attn_metadata_cls is not None:
            enter(patched(up.attn_metadata_cls, "init_flashmla_related", empty_sparse_buffers))
        yield
