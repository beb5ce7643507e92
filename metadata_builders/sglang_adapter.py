"""Builder ``"sglang"``: the installed SGLang's own target-verify code on a backend double.

The adapter runs upstream ``DeepseekV4HipRadixBackend`` methods unchanged --
``init_forward_metadata_target_verify`` (and through it ``..._old``,
``init_forward_metadata_prefill``, ``make_core_attn_metadata``,
``get_swa_page_indices``, ``_attach_unified_kv_prefill_meta``,
``_attach_unified_kv_decode_streams``), ``make_forward_metadata_from_raw_verify``
for DSpark's graph path, and ``RaggedVerifyLayout`` / ``padded_to_bucket`` from
``sglang/srt/speculative/ragged_verify.py`` -- on a double made with
``object.__new__(DeepseekV4HipRadixBackend)`` that carries only the attributes
those methods read.  What our model does not cover is stubbed (docs/SGLANG.md
lists each stub and why): compression metadata, the indexer and the FlashMLA
schedule (``need_compress=False``), and the non-SWA index streams of
``runtime.build_decode_streams``.

Variant mapping (worked example: uniform EAGLE, ``seq_lens=[5, 3]``, 2 drafts)::

    mirror=host     seq_lens_cpu=[5, 3]          (the seed fix)
    mirror=device   seq_lens_cpu=None            (device full_like lengths)
    mirror=tolist   seq_lens_cpu=seq_lens.tolist()   (the pre-fix D2H sync)
    gate=dspark     backend.is_dspark = batch.is_dspark, public entry point
    gate=ungated    backend.is_dspark = True  for ``..._old`` only
    gate=always_sync backend.is_dspark = False for ``..._old`` only

The gate knob is expressible because upstream's gate
``exact_num_tokens = exact_num_tokens and self.is_dspark`` reads nothing but
``self.is_dspark``, and on this path (no fp8 unified pool, no DSpark draft
window) nothing else of ``..._old`` reads it.  The non-``dspark`` gates call
``init_forward_metadata_target_verify_old`` directly so a DSpark batch's graph
build is not diverted to the raw-verify path.

Ragged layouts: eager ``layout_total=host`` is
``RaggedVerifyLayout.from_verify_lens(grid=[sum])`` (host total),
``layout_total=device`` is ``from_verify_lens_device`` (no total: upstream reads
``verify_lens.sum().item()``); the graph path is the host layout padded with
upstream's ``padded_to_bucket(padded_bs=..., cap=...)``.

Geometry: upstream hardcodes ``SWA_WINDOW=128`` and
``PAGE_INDEX_ALIGNED_SIZE=64`` as module constants (read at call time) and
asserts ``page_size == 256`` only in ``__init__``, which the double skips.  The
adapter sets both constants from ``batch.geometry`` for the duration of each
build (under a lock) so every geometry the strategies draw can be checked.

On CPU, ``page_table_from_req_to_token`` is a triton kernel with no torch
fallback, so the adapter runs triton in interpreter mode (``TRITON_INTERPRET=1``,
set before SGLang is imported) and, with ``kernels="triton"`` (the default),
routes ``attn_metadata_kernels``' dispatch to the triton kernels -- the code a
GPU runs.  ``kernels="torch"`` keeps upstream's CPU dispatch (its torch
reference implementations), which cannot build a mirror-less uniform batch
(docs/FINDINGS.md, F1).  Kernel launches run with the harness's
``TorchFunctionMode`` suspended: the interpreter's own host copies are not
syncs of the code under test (a GPU launch is asynchronous).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Literal

from metadata_builders.errors import InvalidVariant
from metadata_builders.metadata import Decision, VerifyMetadata
from metadata_builders.variants import Variant, check_variant, divergence_applies, variants_for

if TYPE_CHECKING:
    import torch

    from metadata_builders.batch import VerifyBatch

if importlib.util.find_spec("sglang") is None:
    raise ImportError("SGLang is not installed; run ci/install-sglang.sh (see docs/SGLANG.md)")

__all__ = ["SGLangBuilder", "UPSTREAM_MODULE", "upstream_version"]

UPSTREAM_MODULE = "sglang.srt.layers.attention.deepseek_v4_backend_hip_radix"
"""The module whose target-verify builders the adapter runs."""

Kernels = Literal["triton", "torch"]

_PATCH_LOCK = threading.RLock()


def upstream_version() -> str:
    """The installed SGLang's version string."""
    from importlib.metadata import version

    return version("sglang")


# -- importing SGLang on a CPU-only torch --------------------------------------------------------


class _InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


_TORCHVISION_STUBS = (
    "torchvision",
    "torchvision.io",
    "torchvision.transforms",
    "torchvision.transforms.functional",
    "torchvision.transforms.v2",
    "torchvision.transforms.v2.functional",
)


def _stub_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__path__ = []

    def missing(attr: str) -> Any:
        raise AttributeError(f"{name}.{attr}: torchvision is stubbed by metadata_builders.sglang_adapter (docs/SGLANG.md)")

    module.__getattr__ = missing  # type: ignore[method-assign]
    return module


def _shim_torchvision() -> None:
    """Let ``import sglang`` succeed without torchvision (PyPI ships only CUDA builds of it).

    SGLang's model configs import ``torchvision.transforms`` at module level for
    multimodal preprocessing no target-verify code touches.  transformers is told
    first (its cached availability check) so it never tries the stub.
    """
    if importlib.util.find_spec("torchvision") is not None:
        return
    from transformers.utils import is_torchvision_available

    is_torchvision_available()  # cache False before the stub exists
    for name in _TORCHVISION_STUBS:
        sys.modules.setdefault(name, _stub_module(name))
    for name in ("torchvision.transforms", "torchvision.transforms.functional"):
        sys.modules[name].InterpolationMode = _InterpolationMode  # type: ignore[attr-defined]
    sys.modules["torchvision"].transforms = sys.modules["torchvision.transforms"]  # type: ignore[attr-defined]
    sys.modules["torchvision.transforms"].functional = sys.modules["torchvision.transforms.functional"]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class _Upstream:
    """The upstream modules and classes the adapter drives."""

    backend_module: types.ModuleType
    backend_cls: type
    pool_cls: type
    layout_cls: type
    gate_module: types.ModuleType
    runtime_module: types.ModuleType
    kernels_module: types.ModuleType
    interpreter: bool


_LOADED: _Upstream | None = None


def _load_upstream(device: torch.device) -> _Upstream:
    global _LOADED
    if _LOADED is not None:
        return _LOADED
    if device.type == "cpu" and "triton" not in sys.modules:
        # Must precede the first @triton.jit: the decorator picks the interpreter.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    _shim_torchvision()
    with warnings.catch_warnings():
        # SGLang warns at import that AWQ/GGUF need a GPU; nothing here quantizes.
        warnings.simplefilter("ignore", UserWarning)
        backend_module = importlib.import_module(UPSTREAM_MODULE)
    _LOADED = _Upstream(
        backend_module=backend_module,
        backend_cls=backend_module.DeepseekV4HipRadixBackend,
        pool_cls=importlib.import_module("sglang.srt.mem_cache.deepseek_v4_memory_pool").DeepSeekV4TokenToKVPool,
        layout_cls=importlib.import_module("sglang.srt.speculative.ragged_verify").RaggedVerifyLayout,
        gate_module=importlib.import_module("sglang.srt.layers.attention.dsv4.unified_kv_gate"),
        runtime_module=importlib.import_module("sglang.kernels.ops.attention.dsv4.unified_kv_kernels.runtime"),
        kernels_module=importlib.import_module("sglang.kernels.ops.attention.dsv4.attn_metadata_kernels"),
        interpreter=os.environ.get("TRITON_INTERPRET") == "1",
    )
    return _LOADED


# -- stubs and per-build patches -----------------------------------------------------------------


def _no_flashmla_schedule() -> None:
    """What upstream's ``_create_flashmla_metadata`` returns on HIP."""
    return None


def _swa_only_decode_streams(**_: Any) -> tuple[None, None, None, None, None, None]:
    """Stub of ``runtime.build_decode_streams``: the swa/hca/csa index streams are not modelled."""
    return (None,) * 6


def _move_to_device_unpinned(device: torch.device, x: list[int]) -> torch.Tensor:
    """Upstream's ``_move_to_device`` less ``pin_memory=True`` (no pinned allocator without a GPU)."""
    import torch

    staged = torch.tensor(x, dtype=torch.int32)
    return staged.to(device, non_blocking=True)


def _unified_kv_on() -> bool:
    return True


def _unified_kv_fp8_off() -> bool:
    return False


def _on_device(*_: Any, **__: Any) -> bool:
    return True


@contextlib.contextmanager
def _patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextlib.contextmanager
def _torch_function_off() -> Iterator[None]:
    import torch

    with torch._C.DisableTorchFunction():
        yield


def _quiet_launches(runtime_module: types.ModuleType) -> contextlib.AbstractContextManager:
    """Run interpreted triton launches outside the harness's TorchFunctionMode."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return contextlib.nullcontext()
    run = InterpretedFunction.run

    def quiet_run(self, *args, **kwargs):
        with _torch_function_off():
            return run(self, *args, **kwargs)

    return _patched(InterpretedFunction, "run", quiet_run)


@contextlib.contextmanager
def _upstream_patched(up: _Upstream, batch: VerifyBatch, kernels: Kernels) -> Iterator[None]:
    geo = batch.geometry
    with contextlib.ExitStack() as stack:
        enter = stack.enter_context
        enter(_patched(up.backend_module, "SWA_WINDOW", geo.swa_window))
        enter(_patched(up.backend_module, "PAGE_INDEX_ALIGNED_SIZE", geo.page_index_align))
        enter(_patched(up.backend_module, "_create_flashmla_metadata", _no_flashmla_schedule))
        enter(_patched(up.gate_module, "is_unified_kv_triton", _unified_kv_on))
        enter(_patched(up.gate_module, "is_unified_kv_fp8", _unified_kv_fp8_off))
        enter(_patched(up.runtime_module, "build_decode_streams", _swa_only_decode_streams))
        if kernels == "triton":
            enter(_patched(up.kernels_module, "_inputs_on_cuda", _on_device))
        if up.interpreter:
            enter(_quiet_launches(up.runtime_module))
        yield


# -- the backend double --------------------------------------------------------------------------


@dataclass
class _Seen:
    """What the spies saw upstream pass between its stages (for the decision and row fields)."""

    max_seq_len: int | None = None
    seq_lens: Any = None
    extend_seq_lens: Any = None
    extend_start_loc: Any = None
    num_tokens: int | None = None
    exact_num_tokens: bool | None = None
    calls: list[str] = field(default_factory=list)


def _make_backend(up: _Upstream, batch: VerifyBatch, device: torch.device, tables: dict[str, torch.Tensor],
                  is_dspark: bool, seen: _Seen, divergent: list[int] | None = None) -> Any:
    """``object.__new__(DeepseekV4HipRadixBackend)`` plus the attributes target verify reads."""
    import torch

    geo = batch.geometry
    pool = object.__new__(up.pool_cls)
    pool.full_to_swa_index_mapping = tables["full_to_swa"]
    pool.unified_swa_window = geo.unified_swa_window
    pool.unified_swa_ring_size = geo.ring_size
    pool.unified_swa_pages = 0
    pool.request_window = None

    backend = object.__new__(up.backend_cls)
    backend.device = device
    backend.page_size = geo.page_size
    backend.cuda_int32_kwargs = {"device": device, "dtype": torch.int32}
    backend.req_to_token = tables["req_to_token"]
    backend.MAX_SEQ_LEN_FOR_CAPTURE = batch.max_context
    backend.token_to_kv_pool = pool
    backend.target_verify_num_draft_tokens = batch.num_draft_tokens
    backend.speculative_num_draft_tokens = batch.num_draft_tokens
    backend.is_dspark = is_dspark
    backend.is_dspark_draft = False
    backend.is_draft_worker = False
    backend.is_dsv41 = False
    backend.need_compress = False  # stub: compression, indexer, FlashMLA schedule
    backend.has_c4 = False
    backend.has_c128 = False
    backend.low_ratios = ()
    backend.index_topk = 512
    backend.encoder_replay = False
    backend._fp4_graph_row_limit = None
    backend._fp8_decode_num_heads = 0
    backend._fp8_verify_epi = "bf16"
    if not torch.cuda.is_available():
        # stub: _move_to_device stages in pinned memory, which CPU-only torch cannot allocate.
        backend._move_to_device = functools.partial(_move_to_device_unpinned, device)

    cls = up.backend_cls

    def init_forward_metadata_prefill(*args: Any, **kwargs: Any) -> Any:
        seen.calls.append("init_forward_metadata_prefill")
        seen.extend_start_loc = kwargs.get("extend_start_loc")
        return cls.init_forward_metadata_prefill(backend, *args, **kwargs)

    def make_core_attn_metadata(*args: Any, **kwargs: Any) -> Any:
        seen.max_seq_len = int(kwargs["max_seq_len"])
        return cls.make_core_attn_metadata(backend, *args, **kwargs)

    def attach_prefill_meta(core, req_pool_indices, req_pool_indices_repeated, seq_lens, extend_seq_lens,
                            num_tokens, exact_num_tokens=True):
        seen.seq_lens, seen.extend_seq_lens = seq_lens, extend_seq_lens
        seen.num_tokens, seen.exact_num_tokens = int(num_tokens), bool(exact_num_tokens)
        device_extend = extend_seq_lens
        if divergent is not None:
            # Fault injection (P6): the token map reads a stale / in-flight copy of the lengths.
            rows = extend_seq_lens.shape[0]
            stale = torch.tensor(divergent[:rows], dtype=extend_seq_lens.dtype, device=device)
            device_extend = torch.cat([stale, extend_seq_lens[stale.shape[0]:]])
        return cls._attach_unified_kv_prefill_meta(
            backend, core, req_pool_indices, req_pool_indices_repeated, seq_lens, device_extend,
            num_tokens, exact_num_tokens=exact_num_tokens,
        )

    backend.init_forward_metadata_prefill = init_forward_metadata_prefill
    backend.make_core_attn_metadata = make_core_attn_metadata
    backend._attach_unified_kv_prefill_meta = attach_prefill_meta
    return backend


# -- the builder ---------------------------------------------------------------------------------


class SGLangBuilder:
    """Builder ``"sglang"``: upstream's target-verify code on a backend double; keeps no state.

    ``kernels="triton"`` (default) runs the triton kernels a GPU runs (on CPU under
    the interpreter); ``kernels="torch"`` keeps upstream's CPU dispatch to its
    torch reference implementations.
    """

    name = "sglang"

    def __init__(self, device: str | torch.device = "cpu", kernels: Kernels = "triton") -> None:
        import torch

        self.device = torch.device(device)
        if kernels not in ("triton", "torch"):
            raise InvalidVariant("kernels", "'triton' or 'torch'", kernels)
        self.kernels: Kernels = kernels
        self._up = _load_upstream(self.device)
        if self.device.type == "cpu" and kernels == "triton" and not self._up.interpreter:
            raise RuntimeError(
                "kernels='triton' on CPU needs TRITON_INTERPRET=1 before triton is first imported; "
                "import metadata_builders.sglang_adapter first, or pass kernels='torch'"
            )

    def variants_supported(self, batch: VerifyBatch) -> list[Variant]:
        """Every variant of ``batch`` upstream can express (all of them: see the module docstring)."""
        return variants_for(batch)

    def build(self, batch: VerifyBatch, variant: Variant) -> VerifyMetadata:
        check_variant(batch, variant)
        with _PATCH_LOCK, _upstream_patched(self._up, batch, self.kernels):
            return self._build(batch, variant)

    # Stage names below show up in audit records, like upstream's own functions.

    def _build(self, batch: VerifyBatch, variant: Variant) -> VerifyMetadata:
        import torch

        dev = self.device
        graph = variant.path == "graph"
        rows = batch.graph.padded_bs if graph else batch.bs  # type: ignore[union-attr]
        tokens = batch.graph.graph_num_tokens if graph else batch.num_real_tokens  # type: ignore[union-attr]
        pad_rows = rows - batch.bs
        seq_lens = torch.tensor(list(batch.seq_lens) + [1] * pad_rows, dtype=torch.int32, device=dev)
        req_pool_indices = torch.tensor(list(batch.req_pool_indices) + [0] * pad_rows, dtype=torch.int64, device=dev)
        out_cache_loc = torch.tensor(
            list(batch.out_cache_loc) + [0] * (tokens - batch.num_real_tokens), dtype=torch.int64, device=dev
        )
        tables = {
            "req_to_token": torch.tensor(batch.req_to_token, dtype=torch.int32, device=dev),
            "full_to_swa": torch.tensor(batch.full_to_swa, dtype=torch.int64, device=dev),
        }
        is_dspark = {"dspark": batch.is_dspark, "ungated": True, "always_sync": False}[variant.gate]
        seen = _Seen()
        divergent = None
        if divergence_applies(batch, variant):
            divergent = list(batch.divergence.extend_seq_lens)  # type: ignore[union-attr]
        backend = _make_backend(self._up, batch, dev, tables, is_dspark, seen, divergent)

        seq_lens_cpu = self._mirror(batch, variant, seq_lens, rows)
        layout = self._ragged_layout(batch, variant, rows) if batch.is_ragged else None
        max_seq_len = batch.max_context if graph else max(batch.seq_lens)
        kwargs = dict(
            max_seq_len=max_seq_len,
            req_pool_indices=req_pool_indices,
            seq_lens=seq_lens,
            seq_lens_cpu=seq_lens_cpu,
            out_cache_loc=out_cache_loc,
            use_prefill_cuda_graph=graph,
            ragged_layout=layout,
        )
        if variant.gate == "dspark":
            md = backend.init_forward_metadata_target_verify(**kwargs)
            if isinstance(md, self._up.backend_module.DSV4RawVerifyMetadata):
                seen.calls.append("make_forward_metadata_from_raw_verify")
                md = backend.make_forward_metadata_from_raw_verify(md)
        else:
            md = backend.init_forward_metadata_target_verify_old(**kwargs)
        return self._read(batch, md, seen)

    def _mirror(self, batch: VerifyBatch, variant: Variant, seq_lens: torch.Tensor, rows: int) -> list[int] | None:
        """The host mirror upstream's caller passes: kept list / none / read back with ``tolist``."""
        if batch.is_ragged or variant.mirror == "device":
            return None
        if variant.mirror == "tolist":
            return seq_lens.tolist()  # the pre-fix caller: one D2H sync
        return list(batch.seq_lens) + [1] * (rows - batch.bs)

    def _ragged_layout(self, batch: VerifyBatch, variant: Variant, rows: int) -> Any:
        import torch

        layout_cls = self._up.layout_cls
        real = list(batch.verify_lens or ())
        if variant.path == "eager" and variant.layout_total == "device":
            verify = torch.tensor(real, dtype=torch.int32, device=self.device)
            return layout_cls.from_verify_lens_device(verify_lens=verify, graph_num_tokens=sum(real))
        grid = [batch.graph.graph_num_tokens] if variant.path == "graph" else [sum(real)]  # type: ignore[union-attr]
        layout = layout_cls.from_verify_lens(verify_lens_cpu=real, device=self.device, grid=grid)
        if variant.path == "graph":
            layout = layout.padded_to_bucket(padded_bs=rows, cap=batch.graph.cap)  # type: ignore[union-attr]
        return layout

    def _read(self, batch: VerifyBatch, md: Any, seen: _Seen) -> VerifyMetadata:
        """Map upstream's ``DSV4Metadata`` (core_attn_metadata + unified) onto ``FIELD_NAMES``."""
        import torch

        core = md.core_attn_metadata
        unified = core.unified
        extend = seen.extend_seq_lens
        start = seen.extend_start_loc
        if start is None:
            start = torch.cumsum(extend, 0) - extend
        fields = {
            "seq_lens": seen.seq_lens,
            "extend_seq_lens": extend,
            "extend_start_loc": start,
            "seq_lens_casual": core.seq_lens_casual,
            "positions_casual": core.positions_casual,
            "req_pool_indices_repeated": unified.verify_store_state_slot,
            "swa_topk_lengths": core.swa_topk_lengths,
            "page_table": core.page_table,
            "swa_page_indices": core.swa_page_indices,
            "raw_out_loc": core.raw_out_loc,
            "pf_state_slot": unified.pf_state_slot,
            "pf_chunk_start": unified.pf_chunk_start,
            "pf_cu_q": unified.pf_cu_q,
            "pf_final_pos": unified.pf_final_pos,
            "verify_store_state_slot": unified.verify_store_state_slot,
            "swa_loc": unified.swa_loc,
        }
        assert seen.num_tokens is not None and seen.exact_num_tokens is not None and seen.max_seq_len is not None
        decision = Decision(seen.num_tokens, seen.exact_num_tokens, seen.exact_num_tokens, seen.max_seq_len)
        return VerifyMetadata(fields, decision)
