"""Pieces by release: what each supported SGLang release can express, and where its pieces are.

:class:`Capabilities` is decided by the release's **version**, never by reading
the code under review; :func:`load_upstream` imports the installed release (CPU
shims first) and finds every piece the adapter drives (:class:`Upstream`).  A
new release is a new row here (and in docs/SGLANG.md), not an ``if`` in the double.
"""

from __future__ import annotations

import inspect
import os
import sys
import types
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from metadata_builders.errors import UpstreamNotFound
from metadata_builders.families.dsv4.sglang.finding import (
    class_in,
    dispatch_is_device_check,
    find_module,
    imports_in,
)
from metadata_builders.families.dsv4.sglang.shims import (
    config_registration_tolerated,
    shim_torchvision,
)
from metadata_builders.families.dsv4.variants import Gate

if TYPE_CHECKING:
    import torch

__all__ = ["SUPPORTED_RELEASES", "UPSTREAM_MODULE", "Capabilities", "Upstream", "load_upstream", "upstream_version"]

SUPPORTED_RELEASES = ("0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
"""Releases whose HIP backend has the ragged target-verify path (0.5.17 raises NotImplementedError there)."""

UPSTREAM_MODULE = "sglang.srt.layers.attention.deepseek_v4_backend_hip_radix"
"""Where every supported release defines ``DeepseekV4HipRadixBackend`` (searched further if absent)."""


def upstream_version() -> str:
    """The installed SGLang's version string."""
    from importlib.metadata import version

    return version("sglang")


@dataclass(frozen=True)
class Capabilities:
    """What the installed release can express, by release -- never by reading the code under review.

    A pull request that drops the gate line must fail the gate properties, not
    make the adapter stop asking for the gate.
    """

    gate: bool
    """0.5.21+: ``exact_num_tokens = exact_num_tokens and self.is_dspark`` (the dspark gate)."""
    exact_token_map: bool
    """0.5.20+: the token map may pass ``output_size`` (0.5.18/0.5.19 never do: always synced)."""
    mirrorless: bool
    """0.5.22+: ``seq_lens_cpu=None`` builds the uniform lengths on the device (``full_like``)."""
    pf_padding: bool
    """0.5.21+: ``pf_*`` are padded to the tier (before, they stop at ``num_tokens``)."""
    forced_compression: bool
    """0.5.18-0.5.20: ``need_compress=True`` is hard-coded on the verify path (stubbed without compression)."""
    plan_req_ring: bool
    """0.5.20+: the compress-plan kernel takes ``use_req_ring`` (c4 state in a per-request ring)."""
    plan_max_tokens: int
    """The compress-plan kernel's ``kMaxTokens``: 65535 up to 0.5.20, 65536 from 0.5.21."""
    low_ratios: bool = False
    """0.5.22+: the V4.1 low ratios (``backend.low_ratios``: c1/c2 metadata and ``c{R}_indexer_metadata``)."""
    replay_copies_swa_loc: bool = True
    """0.5.20+: a graph replay's ``UnifiedKvMetadata.copy_`` copies ``swa_loc`` (0.5.18/0.5.19 rebind it: F14)."""
    draft_decode_step_offset: bool = True
    """0.5.20+: a draft-decode child adds ``speculative_step_id + 1`` to ``seq_lens`` (0.5.18/0.5.19 build the accepted
    prefix's lengths: F22)."""
    draft_decode_step_rows: bool = True
    """0.5.20+: before a replay the multi-step backend gives each child its own row of the shared ``out_cache_loc``
    (0.5.18/0.5.19 give every child child 0's raw metadata, its slice of the whole buffer truncated: F23)."""
    draft_extend_one_page: bool = True
    """0.5.22+: draft extend's page-table placeholder is one page (``max_seq_len = page_size``) and its lengths are
    ``full_like`` on the device; 0.5.18-0.5.21 size it by the caller's ``max_seq_len`` (F21) and stage the lengths."""

    @classmethod
    def of(cls, release: str) -> Capabilities:
        """Capabilities of ``release`` (a dev or unknown newer version gets the newest ones)."""
        key = _release_key(release)
        return cls(
            gate=key >= (0, 5, 21),
            exact_token_map=key >= (0, 5, 20),
            mirrorless=key >= (0, 5, 22),
            pf_padding=key >= (0, 5, 21),
            forced_compression=key < (0, 5, 21),
            plan_req_ring=key >= (0, 5, 20),
            plan_max_tokens=65536 if key >= (0, 5, 21) else 65535,
            low_ratios=key >= (0, 5, 22),
            replay_copies_swa_loc=key >= (0, 5, 20),
            draft_decode_step_offset=key >= (0, 5, 20),
            draft_decode_step_rows=key >= (0, 5, 20),
            draft_extend_one_page=key >= (0, 5, 22),
        )

    def gates(self, is_dspark: bool) -> tuple[Gate, ...]:
        """The gate knob values this release can express for a batch.

        0.5.20's rule is ``exact`` alone: ``ungated``, which for DSpark is also the
        dspark rule (its public entry point, raw-verify route included).
        """
        if self.gate:
            return ("dspark", "ungated", "always_sync")
        if self.exact_token_map:
            return ("dspark", "ungated") if is_dspark else ("ungated",)
        return ("always_sync",)


def _release_key(release: str) -> tuple[int, ...]:
    from packaging.version import InvalidVersion, Version

    try:
        return tuple(Version(release).release[:3])
    except InvalidVersion:
        return (10**6,)


@dataclass(frozen=True)
class Upstream:
    """The upstream modules and classes the adapter drives, found in the installed release."""

    release: str
    capabilities: Capabilities
    backend_module: types.ModuleType
    backend_cls: type
    pool_cls: type
    layout_cls: type
    ragged_kernels_module: types.ModuleType
    """``PaddedToBucket`` and ``BuildQoIndptr`` (``ragged_verify_kernels``)."""
    gate_module: types.ModuleType
    """``is_unified_kv_triton`` (and ``is_unified_kv_fp8``, 0.5.20+), as the backend imports it."""
    runtime_module: types.ModuleType
    """``build_decode_streams`` (the unified-KV decode index streams)."""
    expand_module: types.ModuleType
    """``ExpandPrefillCausally`` and its ``_inputs_on_cuda`` dispatch (``attn_metadata_kernels``)."""
    attn_metadata_cls: type | None
    """``DSV4AttnMetadata`` (its compression methods are stubbed where compression is forced and off)."""
    compress_module: types.ModuleType | None
    """``CompressorPrefillPlan`` and ``_jit_compress_plan_module`` (the compress-plan kernel, modelled on CPU)."""
    indexer_module: types.ModuleType | None
    """``PagedIndexerMetadata`` and the ``is_hip`` its ``__post_init__`` dispatches on."""
    compression_missing: UpstreamNotFound | None
    """Why ``compress_module``/``indexer_module`` are None: raised by a build with compression."""
    interpreter: bool
    """Triton runs in interpreter mode (``TRITON_INTERPRET=1``)."""

    def describe(self) -> str:
        """One line: release, capabilities and where the moving pieces were found."""
        caps = self.capabilities
        return (f"SGLang {self.release}: gates {'/'.join(caps.gates(False))} (EAGLE), "
                f"{'/'.join(caps.gates(True))} (DSpark); mirror=device {'yes' if caps.mirrorless else 'no'}; "
                f"gate {self.gate_module.__name__}; kernels {self.expand_module.__name__}; "
                f"triton {'interpreter' if self.interpreter else 'compiled'}")


_LOADED: Upstream | None = None


def load_upstream(device: str | torch.device = "cpu") -> Upstream:
    """Import the installed SGLang (CPU shims first) and find every piece the adapter drives.

    Raises :class:`UpstreamNotFound` naming the piece, the release and every
    place looked when the installed SGLang moved or lacks one.
    """
    global _LOADED
    if _LOADED is not None:
        return _LOADED
    import torch

    if torch.device(device).type == "cpu" and "triton" not in sys.modules:
        # Must precede the first @triton.jit: the decorator picks the interpreter.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    release = upstream_version()
    shim_torchvision()
    with warnings.catch_warnings(), config_registration_tolerated():
        # SGLang warns at import that AWQ/GGUF need a GPU; nothing here quantizes.
        warnings.simplefilter("ignore", UserWarning)
        backend_module = find_module(
            "DeepseekV4HipRadixBackend (the HIP target-verify builders)", release, [UPSTREAM_MODULE],
            lambda m: isinstance(getattr(m, "DeepseekV4HipRadixBackend", None), type),
            "class DeepseekV4HipRadixBackend",
        )
        _LOADED = _find_pieces(release, backend_module)
    return _LOADED


def _find_pieces(release: str, backend_module: types.ModuleType) -> Upstream:
    backend_cls = backend_module.DeepseekV4HipRadixBackend
    old = getattr(backend_cls, "init_forward_metadata_target_verify_old", None)
    if old is None or "ragged_layout" not in inspect.signature(old).parameters:
        raise UpstreamNotFound(
            "the ragged target-verify path (init_forward_metadata_target_verify_old(..., ragged_layout))", release,
            [f"{backend_module.__name__}.DeepseekV4HipRadixBackend (SGLang <= 0.5.17 has no ragged path on HIP; "
             f"supported: {', '.join(SUPPORTED_RELEASES)})"],
        )
    pool_cls = class_in(backend_module, "translate_loc_from_full_to_swa") or class_in(find_module(
        "translate_loc_from_full_to_swa (the DeepSeek-V4 KV pool)", release,
        ["sglang.srt.mem_cache.deepseek_v4_memory_pool"],
        lambda m: class_in(m, "translate_loc_from_full_to_swa") is not None, "def translate_loc_from_full_to_swa",
    ), "translate_loc_from_full_to_swa")
    layout_cls, ragged_kernels = _find_layout(release, backend_module)
    gate_module = find_module(
        "is_unified_kv_triton (the unified-KV gate)", release,
        imports_in(backend_cls._attach_unified_kv_prefill_meta)
        + ["sglang.srt.layers.attention.dsv4.unified_kv_gate",
           "sglang.kernels.ops.attention.dsv4.unified_kv_kernels.env_gate"],
        lambda m: callable(getattr(m, "is_unified_kv_triton", None)), "def is_unified_kv_triton",
    )
    runtime_module = find_module(
        "build_decode_streams (the unified-KV decode streams)", release,
        imports_in(backend_cls._attach_unified_kv_decode_streams)
        + ["sglang.kernels.ops.attention.dsv4.unified_kv_kernels.runtime"],
        lambda m: callable(getattr(m, "build_decode_streams", None)), "def build_decode_streams",
    )
    expand_module = find_module(
        "ExpandPrefillCausally with its _inputs_on_cuda dispatch (attn_metadata_kernels)", release,
        imports_in(backend_cls.init_forward_metadata_prefill)
        + ["sglang.kernels.ops.attention.dsv4.attn_metadata_kernels",
           "sglang.kernels.ops.attention.dsv4_attn_metadata_kernels"],
        lambda m: hasattr(m, "ExpandPrefillCausally") and callable(getattr(m, "_inputs_on_cuda", None)),
        "class ExpandPrefillCausally",
    )
    capabilities = Capabilities.of(release)
    attn_metadata_cls = class_in(backend_module, "init_compression_metadata", "init_flashmla_related")
    if capabilities.forced_compression and attn_metadata_cls is None:
        raise UpstreamNotFound("DSV4AttnMetadata (init_compression_metadata, init_flashmla_related; stubbed)", release,
                               [f"{backend_module.__name__} (no class with both methods among its globals)"])
    compress_module = indexer_module = compression_missing = None
    try:
        compress_module, indexer_module = _find_compression(release, backend_module)
    except UpstreamNotFound as exc:
        compression_missing = exc
    return Upstream(
        release=release,
        capabilities=capabilities,
        backend_module=backend_module,
        backend_cls=backend_cls,
        pool_cls=pool_cls,
        layout_cls=layout_cls,
        ragged_kernels_module=ragged_kernels,
        gate_module=gate_module,
        runtime_module=runtime_module,
        expand_module=expand_module,
        attn_metadata_cls=attn_metadata_cls,
        compress_module=compress_module,
        indexer_module=indexer_module,
        compression_missing=compression_missing,
        interpreter=os.environ.get("TRITON_INTERPRET") == "1",
    )


def _find_layout(release: str, backend_module: types.ModuleType) -> tuple[type, types.ModuleType]:
    """``RaggedVerifyLayout`` and the module of its kernels (``PaddedToBucket``, ``BuildQoIndptr``).

    Both kernels' ``execute`` must still be the two-line device check the routes
    rely on (:mod:`~metadata_builders.families.dsv4.sglang.routing`).
    """
    resolve = getattr(backend_module, "resolve_ragged_verify_layout", None)
    layout_module = find_module(
        "RaggedVerifyLayout (from_verify_lens_device, padded_to_bucket)", release,
        ([resolve.__module__] if resolve is not None else []) + ["sglang.srt.speculative.ragged_verify"],
        lambda m: class_in(m, "from_verify_lens_device", "padded_to_bucket") is not None, "class RaggedVerifyLayout",
    )
    layout_cls = class_in(layout_module, "from_verify_lens_device", "padded_to_bucket")
    assert layout_cls is not None
    ragged_kernels = find_module(
        "PaddedToBucket and BuildQoIndptr (the ragged layout kernels)", release,
        imports_in(layout_cls.padded_to_bucket) + imports_in(getattr(layout_cls, "_assemble_device", None))
        + ["sglang.kernels.ops.speculative.ragged_verify_kernels"],
        lambda m: hasattr(m, "PaddedToBucket") and hasattr(m, "BuildQoIndptr"), "class PaddedToBucket",
    )
    for cls in (ragged_kernels.PaddedToBucket, ragged_kernels.BuildQoIndptr):
        if not dispatch_is_device_check(cls.execute):
            raise UpstreamNotFound(
                f"the triton/torch dispatch of {cls.__name__}.execute (routed to its triton kernel)", release,
                [f"{ragged_kernels.__name__}.{cls.__name__}.execute (no longer 'cls.triton if verify_lens.is_cuda "
                 "else cls.torch')"],
            )
    return layout_cls, ragged_kernels


def _module_of(obj: object) -> list[str]:
    name = getattr(obj, "__module__", None)
    return [name] if isinstance(name, str) else []


def _find_compression(release: str, backend_module: types.ModuleType) -> tuple[types.ModuleType, types.ModuleType]:
    """The compress-plan kernel's module and ``PagedIndexerMetadata``'s, starting where the backend imports them.

    ``create_paged_compressor_data`` (a backend global) calls
    ``CompressorPrefillPlan.generate``, which calls ``_jit_compress_plan_module()``.
    """
    create = getattr(backend_module, "create_paged_compressor_data", None)
    creator_module = sys.modules.get(getattr(create, "__module__", ""), None)
    plan_cls = getattr(creator_module, "CompressorPrefillPlan", None)
    compress_module = find_module(
        "_jit_compress_plan_module (the compress-plan kernel; CompressorPrefillPlan)", release,
        _module_of(plan_cls) + ["sglang.kernels.ops.attention.dsv4.compress"],
        lambda m: callable(getattr(m, "_jit_compress_plan_module", None)) and hasattr(m, "CompressorPrefillPlan"),
        "def _jit_compress_plan_module",
    )
    indexer_module = find_module(
        "PagedIndexerMetadata (the indexer metadata, its is_hip dispatch)", release,
        _module_of(getattr(backend_module, "PagedIndexerMetadata", None))
        + ["sglang.srt.layers.attention.dsv4.metadata"],
        lambda m: isinstance(getattr(m, "PagedIndexerMetadata", None), type) and callable(getattr(m, "is_hip", None)),
        "class PagedIndexerMetadata",
    )
    return compress_module, indexer_module
