"""Builder ``"sglang"``: the installed SGLang's own target-verify code on a backend double.

It receives what upstream's caller hands the backend
(:class:`~metadata_builders.inputs.VerifyInputs`, made by the harness) and runs
``DeepseekV4HipRadixBackend`` methods unchanged -- the public
``init_forward_metadata_target_verify`` (and through it ``..._old``,
``init_forward_metadata_prefill``, ``make_core_attn_metadata``,
``get_swa_page_indices``, ``_attach_unified_kv_prefill_meta``,
``_attach_unified_kv_decode_streams``), ``make_forward_metadata_from_raw_verify``
for DSpark's graph path, and ``RaggedVerifyLayout`` / ``padded_to_bucket`` --
on a double made with ``object.__new__(DeepseekV4HipRadixBackend)`` that
carries only the attributes those methods read.  docs/SGLANG.md lists every
stub and why.  Supported: SGLang 0.5.18 .. 0.5.23 (:data:`SUPPORTED_RELEASES`),
the releases whose HIP backend has the ragged target-verify path.

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
(:meth:`Capabilities.gates`): 0.5.18/0.5.19 always sync, 0.5.20 is ``ungated``.

Ragged layouts are built from the harness's **device** tensor
``inputs.verify_lens``, so the divergence it carries and its provenance reach
upstream: eager ``layout_total=host`` is the public constructor with
``verify_lens_cpu`` and the host total (``extend_start_loc``/``qo_indptr`` from
upstream's ``BuildQoIndptr``); ``layout_total=device`` is
``from_verify_lens_device``; the graph path is the host-total layout then
``padded_to_bucket(padded_bs=rows, cap=cap)``.

Kernels run as a GPU runs them: upstream dispatch that picks a CPU torch
fallback because tensors live on the CPU (``ExpandPrefillCausally`` via
``_inputs_on_cuda``, ``PaddedToBucket`` and ``BuildQoIndptr`` via
``verify_lens.is_cuda``) is routed to the triton implementation, which runs
under ``TRITON_INTERPRET=1``.  Each interpreted launch runs inside
:func:`~metadata_builders.audit.kernel_launch`: the interpreter's host copies
are not syncs of the code under test, and what the kernel wrote inherits what
its arguments read.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import functools
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import textwrap
import threading
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal

from metadata_builders.errors import InvalidVariant, UpstreamNotFound
from metadata_builders.metadata import Decision, VerifyMetadata
from metadata_builders.variants import Gate, variants_for

if TYPE_CHECKING:
    import torch

    from metadata_builders.batch import VerifyBatch
    from metadata_builders.inputs import VerifyInputs
    from metadata_builders.variants import Variant

if importlib.util.find_spec("sglang") is None:
    raise ImportError("SGLang is not installed; run ci/install-sglang.sh (see docs/SGLANG.md)")

__all__ = [
    "SUPPORTED_RELEASES",
    "UPSTREAM_MODULE",
    "Capabilities",
    "SGLangBuilder",
    "Upstream",
    "UpstreamNotFound",
    "load_upstream",
    "upstream_version",
]

SUPPORTED_RELEASES = ("0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
"""Releases whose HIP backend has the ragged target-verify path (0.5.17 raises NotImplementedError there)."""

UPSTREAM_MODULE = "sglang.srt.layers.attention.deepseek_v4_backend_hip_radix"
"""Where every supported release defines ``DeepseekV4HipRadixBackend`` (searched further if absent)."""

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
_AITER_STUBS = ("aiter", "aiter.ops", "aiter.ops.triton", "aiter.ops.triton.utils", "aiter.ops.triton.utils.device_info")


def _stub_module(name: str, why: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__path__ = []

    def missing(attr: str) -> Any:
        raise AttributeError(f"{name}.{attr}: {why} (metadata_builders.sglang_adapter; docs/SGLANG.md)")

    module.__getattr__ = missing  # type: ignore[method-assign]
    return module


def _stubbed_call(name: str) -> Callable[..., Any]:
    def call(*_: Any, **__: Any) -> Any:
        raise RuntimeError(f"{name} is a stub of metadata_builders.sglang_adapter (docs/SGLANG.md); nothing on the "
                           "target-verify path calls it")

    call.__name__ = name.rpartition(".")[2]
    return call


def _shim_torchvision() -> None:
    """Let ``import sglang`` succeed without torchvision (PyPI ships only CUDA builds of it).

    SGLang's model configs import ``torchvision.transforms`` (and, 0.5.18-0.5.20,
    ``torchvision.io.decode_jpeg``) at module level for multimodal preprocessing
    no target-verify code touches.  transformers is told first (its cached
    availability check) so it never tries the stub.
    """
    if importlib.util.find_spec("torchvision") is not None:
        return
    from transformers.utils import is_torchvision_available

    is_torchvision_available()  # cache False before the stub exists
    for name in _TORCHVISION_STUBS:
        sys.modules.setdefault(name, _stub_module(name, "torchvision is stubbed"))
    for name in ("torchvision.transforms", "torchvision.transforms.functional"):
        sys.modules[name].InterpolationMode = _InterpolationMode  # type: ignore[attr-defined]
    sys.modules["torchvision.io"].decode_jpeg = _stubbed_call("torchvision.io.decode_jpeg")  # type: ignore[attr-defined]
    sys.modules["torchvision"].transforms = sys.modules["torchvision.transforms"]  # type: ignore[attr-defined]
    sys.modules["torchvision"].io = sys.modules["torchvision.io"]  # type: ignore[attr-defined]
    sys.modules["torchvision.transforms"].functional = sys.modules["torchvision.transforms.functional"]  # type: ignore[attr-defined]


def _shim_aiter() -> None:
    """0.5.18's decode-stream runtime imports ROCm's ``aiter`` at module level (``get_num_sms``).

    Installed only after that import failed for want of ``aiter``: PyPI's ``aiter``
    is an unrelated package and ``amd-aiter`` is ROCm-only.  ``build_decode_streams``
    never calls it; any call raises.
    """
    for name in _AITER_STUBS:
        sys.modules.setdefault(name, _stub_module(name, "aiter (ROCm) is stubbed"))
    sys.modules[_AITER_STUBS[-1]].get_num_sms = _stubbed_call("aiter.get_num_sms")  # type: ignore[attr-defined]


@contextlib.contextmanager
def _config_registration_tolerated() -> Iterator[None]:
    """0.5.18/0.5.19 register ``qwen3_asr`` with transformers' ``AutoConfig`` without ``exist_ok``.

    Every transformers new enough for the rest of SGLang ships ``qwen3_asr``
    itself, so the registration raises ``ValueError``; tolerate it while SGLang is
    imported, then restore ``AutoConfig.register``.
    """
    try:
        from transformers import AutoConfig
    except ImportError:
        yield
        return
    original = AutoConfig.__dict__.get("register")
    register = AutoConfig.register

    def tolerant(model_type: str, config: Any, exist_ok: bool = False) -> Any:
        return register(model_type, config, exist_ok=True)

    AutoConfig.register = staticmethod(tolerant)  # type: ignore[method-assign]
    try:
        yield
    finally:
        if original is None:
            del AutoConfig.register
        else:
            AutoConfig.register = original  # type: ignore[method-assign]


def _import(name: str) -> types.ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("aiter"):
            raise
    _shim_aiter()
    return importlib.import_module(name)


# -- finding upstream pieces by what they do -----------------------------------------------------


def _imports_in(func: Any) -> list[str]:
    """Modules ``func`` imports from at call time (``from M import a`` in its body): ``M`` and ``M.a``."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return []
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{alias.name}" for alias in node.names]
    return out


def _defining(needle: str) -> list[str]:
    """Modules of the installed ``sglang`` whose source contains ``needle`` (the last resort)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return []
    out = []
    for root in spec.submodule_search_locations:
        base = Path(root).parent
        for path in sorted(Path(root).rglob("*.py")):
            try:
                if needle in path.read_text(encoding="utf-8", errors="replace"):
                    out.append(".".join(path.relative_to(base).with_suffix("").parts))
            except OSError:
                continue
    return out


def _module_exists(name: str) -> bool | None:
    """True: ``name`` is a module; None: it names an attribute of its parent module; False: neither."""
    try:
        if importlib.util.find_spec(name) is not None:
            return True
    except (ImportError, ValueError):
        pass
    parent, _, attr = name.rpartition(".")
    if parent and parent in sys.modules and hasattr(sys.modules[parent], attr):
        return None
    return False


def _find_module(piece: str, release: str, candidates: list[str], has: Callable[[types.ModuleType], bool],
                 needle: str) -> types.ModuleType:
    """The first of ``candidates`` (then modules whose source contains ``needle``) for which ``has`` holds.

    ``candidates`` may name functions or classes a backend function imports
    (``from M import f`` gives ``M`` and ``M.f``); those are skipped silently.
    """
    looked: list[str] = []
    tried: set[str] = set()
    for batch in (candidates, None):
        names = batch if batch is not None else _defining(needle)
        for name in names:
            if name in tried:
                continue
            tried.add(name)
            exists = _module_exists(name)
            if exists is None:
                continue
            if not exists:
                looked.append(f"{name} (no such module)")
                continue
            try:
                module = _import(name)
            except ImportError as exc:
                looked.append(f"{name} (import failed: {exc})")
                continue
            if has(module):
                return module
            looked.append(f"{name} (has no {piece.split(' ')[0]})")
        if batch is None and not names:
            looked.append(f"no module of the installed sglang mentions {needle!r}")
    raise UpstreamNotFound(piece, release, looked)


def _class_in(module: types.ModuleType, *methods: str) -> type | None:
    """A class reachable from ``module``'s globals that has every one of ``methods``."""
    for value in vars(module).values():
        if isinstance(value, type) and all(callable(getattr(value, m, None)) for m in methods):
            return value
    return None


def _dispatch_is_device_check(execute: Any) -> bool:
    """Whether ``Cls.execute`` only picks ``cls.triton`` or ``cls.torch`` by where its tensors live.

    Upstream's body is ``impl = cls.triton if verify_lens.is_cuda else cls.torch;
    return impl(...)``; anything more would be lost by routing to ``cls.triton``.
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(execute)))
    except (OSError, TypeError, SyntaxError):
        return False
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef) or len(func.body) > 2:
        return False
    tests = [node.test for node in ast.walk(func) if isinstance(node, ast.IfExp)]
    return len(tests) == 1 and isinstance(tests[0], ast.Attribute) and tests[0].attr == "is_cuda"


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
    """0.5.18-0.5.20: ``need_compress=True`` is hard-coded on the verify path (stubbed, see docs)."""

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
    """``DSV4AttnMetadata`` (its compression methods are stubbed where compression is forced)."""
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
    _shim_torchvision()
    with warnings.catch_warnings(), _config_registration_tolerated():
        # SGLang warns at import that AWQ/GGUF need a GPU; nothing here quantizes.
        warnings.simplefilter("ignore", UserWarning)
        backend_module = _find_module(
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
    pool_cls = _class_in(backend_module, "translate_loc_from_full_to_swa") or _class_in(_find_module(
        "translate_loc_from_full_to_swa (the DeepSeek-V4 KV pool)", release,
        ["sglang.srt.mem_cache.deepseek_v4_memory_pool"],
        lambda m: _class_in(m, "translate_loc_from_full_to_swa") is not None, "def translate_loc_from_full_to_swa",
    ), "translate_loc_from_full_to_swa")
    resolve = getattr(backend_module, "resolve_ragged_verify_layout", None)
    layout_module = _find_module(
        "RaggedVerifyLayout (from_verify_lens_device, padded_to_bucket)", release,
        ([resolve.__module__] if resolve is not None else []) + ["sglang.srt.speculative.ragged_verify"],
        lambda m: _class_in(m, "from_verify_lens_device", "padded_to_bucket") is not None, "class RaggedVerifyLayout",
    )
    layout_cls = _class_in(layout_module, "from_verify_lens_device", "padded_to_bucket")
    assert layout_cls is not None
    ragged_kernels = _find_module(
        "PaddedToBucket and BuildQoIndptr (the ragged layout kernels)", release,
        _imports_in(layout_cls.padded_to_bucket) + _imports_in(getattr(layout_cls, "_assemble_device", None))
        + ["sglang.kernels.ops.speculative.ragged_verify_kernels"],
        lambda m: hasattr(m, "PaddedToBucket") and hasattr(m, "BuildQoIndptr"), "class PaddedToBucket",
    )
    gate_module = _find_module(
        "is_unified_kv_triton (the unified-KV gate)", release,
        _imports_in(backend_cls._attach_unified_kv_prefill_meta)
        + ["sglang.srt.layers.attention.dsv4.unified_kv_gate",
           "sglang.kernels.ops.attention.dsv4.unified_kv_kernels.env_gate"],
        lambda m: callable(getattr(m, "is_unified_kv_triton", None)), "def is_unified_kv_triton",
    )
    runtime_module = _find_module(
        "build_decode_streams (the unified-KV decode streams)", release,
        _imports_in(backend_cls._attach_unified_kv_decode_streams)
        + ["sglang.kernels.ops.attention.dsv4.unified_kv_kernels.runtime"],
        lambda m: callable(getattr(m, "build_decode_streams", None)), "def build_decode_streams",
    )
    expand_module = _find_module(
        "ExpandPrefillCausally with its _inputs_on_cuda dispatch (attn_metadata_kernels)", release,
        _imports_in(backend_cls.init_forward_metadata_prefill)
        + ["sglang.kernels.ops.attention.dsv4.attn_metadata_kernels",
           "sglang.kernels.ops.attention.dsv4_attn_metadata_kernels"],
        lambda m: hasattr(m, "ExpandPrefillCausally") and callable(getattr(m, "_inputs_on_cuda", None)),
        "class ExpandPrefillCausally",
    )
    for cls in (ragged_kernels.PaddedToBucket, ragged_kernels.BuildQoIndptr):
        if not _dispatch_is_device_check(cls.execute):
            raise UpstreamNotFound(
                f"the triton/torch dispatch of {cls.__name__}.execute (routed to its triton kernel)", release,
                [f"{ragged_kernels.__name__}.{cls.__name__}.execute (no longer 'cls.triton if verify_lens.is_cuda "
                 "else cls.torch')"],
            )
    capabilities = Capabilities.of(release)
    attn_metadata_cls = _class_in(backend_module, "init_compression_metadata", "init_flashmla_related")
    if capabilities.forced_compression and attn_metadata_cls is None:
        raise UpstreamNotFound("DSV4AttnMetadata (init_compression_metadata, init_flashmla_related; stubbed)", release,
                               [f"{backend_module.__name__} (no class with both methods among its globals)"])
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
        interpreter=os.environ.get("TRITON_INTERPRET") == "1",
    )


# -- stubs and per-build patches -----------------------------------------------------------------


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


def _empty_flashmla(core: Any, *_: Any, **__: Any) -> None:
    """Stub of ``DSV4AttnMetadata.init_flashmla_related`` (0.5.18-0.5.20): no sparse c4 entries."""
    import torch

    n, dev = core.seq_lens_casual.shape[0], core.seq_lens_casual.device
    core.c4_sparse_topk_lengths = core.c4_sparse_topk_lengths_raw = torch.zeros(n, dtype=torch.int32, device=dev)
    core.c4_sparse_page_indices = torch.empty((n, 0), dtype=torch.int32, device=dev)


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


def _on_device(*_: Any, **__: Any) -> bool:
    return True


def _triton_dispatch(cls: type, **kwargs: Any) -> Any:
    """``execute`` that always takes the triton implementation (a GPU's tensors are ``is_cuda``)."""
    return cls.triton(**kwargs)


def _move_to_device_unpinned(device: torch.device, x: list[int]) -> torch.Tensor:
    """Upstream's ``_move_to_device`` less ``pin_memory=True`` (no pinned allocator without a GPU)."""
    import torch

    staged = torch.tensor(x, dtype=torch.int32)
    return staged.to(device, non_blocking=True)


@contextlib.contextmanager
def _patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    had = name in vars(obj)
    old = vars(obj).get(name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        if had:
            setattr(obj, name, old)
        else:
            delattr(obj, name)


def _audited_launches() -> contextlib.AbstractContextManager:
    """Run every interpreted triton launch inside ``audit.kernel_launch`` (suspended audit, provenance after)."""
    from triton.runtime.interpreter import InterpretedFunction

    from metadata_builders.audit import kernel_launch

    run = InterpretedFunction.run

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        with kernel_launch((args, kwargs)):
            return run(self, *args, **kwargs)

    return _patched(InterpretedFunction, "run", launch)


def _no_overflow_asserts() -> contextlib.AbstractContextManager:
    """The interpreter checks every int32 add/sub/mul for overflow with a device assert; a GPU build
    compiles device asserts out (no ``TRITON_DEBUG``), so kernels run here as they run there.

    Measured: the check was ~34 % of an interpreted build (docs/SGLANG.md).
    """
    import dataclasses

    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    return _patched(builder, "options", dataclasses.replace(builder.options, sanitize_overflow=False))


def _decode_streams_run(geometry: Any) -> bool:
    """Whether upstream's ``build_decode_streams`` runs for this geometry (else it is stubbed).

    Its index kernel writes ``min(pos + 1, unified_swa_window)`` entries per token
    into segments sized ``min(pos + 1, swa_window)``; upstream has both at 128.
    With ``swa_window > unified_swa_window`` the last segments start past the
    buffer's ``N * unified_swa_window`` capacity and the write leaves it.
    """
    return geometry.swa_window <= geometry.unified_swa_window


@contextlib.contextmanager
def _upstream_patched(up: Upstream, inputs: VerifyInputs, kernels: Kernels) -> Iterator[None]:
    geo = inputs.geometry
    cpu = inputs.seq_lens.device.type == "cpu"
    with contextlib.ExitStack() as stack:
        enter = stack.enter_context
        enter(_patched(up.backend_module, "SWA_WINDOW", geo.swa_window))
        enter(_patched(up.backend_module, "PAGE_INDEX_ALIGNED_SIZE", geo.page_index_align))
        enter(_patched(up.backend_module, "_create_flashmla_metadata", _no_flashmla_schedule))
        for module in (up.gate_module, up.backend_module):
            if hasattr(module, "is_unified_kv_triton"):
                enter(_patched(module, "is_unified_kv_triton", _unified_kv_on))
            if hasattr(module, "is_unified_kv_fp8"):
                enter(_patched(module, "is_unified_kv_fp8", _unified_kv_fp8_off))
        if not _decode_streams_run(geo):
            enter(_patched(up.runtime_module, "build_decode_streams", _streams_not_built))
        if up.capabilities.forced_compression:
            enter(_patched(up.backend_module, "create_paged_compressor_data", _no_compressor_data))
            if up.attn_metadata_cls is not None:
                enter(_patched(up.attn_metadata_cls, "init_compression_metadata", _empty_compression))
                enter(_patched(up.attn_metadata_cls, "init_flashmla_related", _empty_flashmla))
        if cpu and kernels == "triton":
            enter(_patched(up.expand_module, "_inputs_on_cuda", _on_device))
            for cls in (up.ragged_kernels_module.PaddedToBucket, up.ragged_kernels_module.BuildQoIndptr):
                enter(_patched(cls, "execute", classmethod(_triton_dispatch)))
        if up.interpreter:
            enter(_audited_launches())
            enter(_no_overflow_asserts())
        yield


# -- the backend double --------------------------------------------------------------------------


def _make_backend(up: Upstream, inputs: VerifyInputs, is_dspark: bool, seen: dict[str, dict[str, Any]]) -> Any:
    """``object.__new__(DeepseekV4HipRadixBackend)`` plus the attributes target verify reads (any release)."""
    import torch

    geo = inputs.geometry
    device = inputs.seq_lens.device
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
    backend.target_verify_num_draft_tokens = inputs.num_draft_tokens
    backend.speculative_num_draft_tokens = inputs.num_draft_tokens
    backend.is_dspark = is_dspark
    backend.is_dspark_draft = False
    backend.is_draft_worker = False
    backend.is_dsv41 = False
    backend.need_compress = False  # 0.5.21+: compression, indexer and FlashMLA schedule off
    backend.has_c4 = False
    backend.has_c128 = False
    backend.low_ratios = ()
    backend.c4_topk = 512  # 0.5.18-0.5.20
    backend.index_topk = 512  # 0.5.21+
    backend.encoder_replay = False
    backend._fp4_graph_row_limit = None
    backend._fp8_decode_num_heads = 0
    backend._fp8_verify_epi = "bf16"
    backend.init_forward_metadata_indexer = _no_indexer
    if device.type == "cpu" and not torch.cuda.is_available():
        # stub: _move_to_device stages in pinned memory, which CPU-only torch cannot allocate.
        backend._move_to_device = functools.partial(_move_to_device_unpinned, device)
    for name in ("init_forward_metadata_prefill", "make_core_attn_metadata", "_attach_unified_kv_prefill_meta"):
        setattr(backend, name, _spy(backend, getattr(up.backend_cls, name), name, seen))
    return backend


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
        self.upstream = load_upstream(self.device)
        if self.device.type == "cpu" and not self.upstream.interpreter:
            raise RuntimeError(
                "SGLang's metadata kernels are triton-only on CPU and need TRITON_INTERPRET=1 before triton is "
                "first imported; import metadata_builders.sglang_adapter (or set the variable) first"
            )

    def variants_supported(self, batch: VerifyBatch) -> list[Variant]:
        """The variants of ``batch`` the installed release can express (:class:`Capabilities`)."""
        caps = self.upstream.capabilities
        gates = caps.gates(batch.is_dspark)
        return [v for v in variants_for(batch)
                if v.gate in gates and (v.mirror != "device" or caps.mirrorless)]

    def build(self, inputs: VerifyInputs) -> VerifyMetadata:
        with _PATCH_LOCK, _upstream_patched(self.upstream, inputs, self.kernels):
            return target_verify(self.upstream, inputs)


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


def target_verify(up: Upstream, inputs: VerifyInputs) -> VerifyMetadata:
    """One call of upstream's target-verify entry point on harness-made inputs."""
    variant = inputs.variant
    if variant.mirror == "device" and inputs.verify_lens is None and not up.capabilities.mirrorless:
        raise InvalidVariant("mirror", f"'host' or 'tolist' on SGLang {up.release} (mirror-less verify is 0.5.22+)",
                             variant.mirror)
    entry, is_dspark = _entry_and_is_dspark(up, inputs)
    seen: dict[str, dict[str, Any]] = {}
    backend = _make_backend(up, inputs, is_dspark, seen)
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
    return _read(md, seen)


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


def _read(md: Any, seen: dict[str, dict[str, Any]]) -> VerifyMetadata:
    """Map upstream's ``DSV4Metadata`` and the values it passed between stages onto ``FIELD_NAMES``.

    ``seq_lens``, ``extend_seq_lens``, ``num_tokens`` and the gated exactness are
    the arguments of ``_attach_unified_kv_prefill_meta``; ``req_pool_indices_repeated``
    and ``max_seq_len`` those of ``make_core_attn_metadata``; ``extend_start_loc``
    that of ``init_forward_metadata_prefill``, which upstream passes only for
    ragged batches (uniform: not observable).
    """
    core = md.core_attn_metadata
    unified = core.unified
    meta = seen["_attach_unified_kv_prefill_meta"]
    core_args = seen["make_core_attn_metadata"]
    start = seen.get("init_forward_metadata_prefill", {}).get("extend_start_loc")
    fields = {
        "seq_lens": meta["seq_lens"],
        "extend_seq_lens": meta["extend_seq_lens"],
        "seq_lens_casual": core.seq_lens_casual,
        "positions_casual": core.positions_casual,
        "req_pool_indices_repeated": core_args["req_pool_indices_repeated"],
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
    not_observable: tuple[str, ...] = ()
    if start is None:
        not_observable = ("extend_start_loc",)
    else:
        fields["extend_start_loc"] = start
    # 0.5.20+ pass the gated exactness; 0.5.18/0.5.19 pass output_size only without compression.
    exact = bool(meta["exact_num_tokens"]) if "exact_num_tokens" in meta else not meta.get("need_compress", True)
    decision = Decision(int(meta["num_tokens"]), exact, exact, int(core_args["max_seq_len"]))
    return VerifyMetadata(fields, decision, not_observable=not_observable)
