"""Finding upstream's DSA pieces in the installed SGLang, and the shims that let them run on CPU.

Every piece is found by what it does, release by release (``docs/research/sglang-dsa-backend.md`` section 1):

===================  ==============================================================  =====================
piece                module (0.5.23; earlier releases)                                 bound by name in
===================  ==============================================================  =====================
the backend          ``srt.layers.attention.dsa_backend`` (every release)              --
``seqlens_expand``   ``kernels.ops.attention.pad.seqlens_expand_triton``              backend, precompute
the fused kernels    ``kernels.ops.attention.dsa.metadata`` (0.5.18-0.5.22:            manager (0.5.20+),
                     ``kernels.ops.attention.dsa_metadata``)                           precompute
the JIT copies       ``kernels.ops.attention.dsa.fused_metadata_copy`` (0.5.18-0.5.21:  imported at the call
                     ``kernels.ops.attention.fused_metadata_copy``)
===================  ==============================================================  =====================

**Shims, each named with why it does not change what is judged** (DESIGN.md section 5):

1. ``assert t.is_cuda`` in the launch wrappers (``seqlens_expand_triton``, ``fused_dsa_*_metadata``): each wrapper is
   recompiled from upstream's own source with exactly those statements removed (AST; same globals, upstream's
   line numbers), and rebound where upstream bound it.  They assert where the tensors live, not what they hold.
2. The Triton 3.9 interpreter's int32 masks (``ValueError: mask has unsupported dtype``: a scalar comparison
   splatted with its operands' dtype, ``&``-ed with a block mask): the interpreter's masked load and store take the
   mask as bool; applied only when a probe kernel reproduces the error.  A GPU build types the mask ``i1``.
3. The fault site: ``seqlens_expand_triton`` is bound behind :func:`guarded_seqlens_expand`, which reads the
   device lengths inside the launch (audit suspended, as the kernel would) and runs upstream's own function unless
   a store would land past the host-sized output -- then the family's device model runs instead (P6: the
   out-of-bounds write never happens in the harness's process).  Every launch is reported for P3 and P6.
4. Import: the DSV4 adapter's import shims (``metadata_builders.families.dsv4.sglang.shims``: a torchvision stub, a
   tolerant ``AutoConfig.register``), to move to the core with issue 42.
5. The config namespace ``parallel``: ``get_parallel().override(attn_cp_size=1)`` around each call (one rank).
6. The JIT copy kernels of a draft-decode replay (``fused_metadata_copy_cuda``, ``fused_metadata_copy_multi_cuda``:
   CUDA/HIP C++ built at the first call; on CPU upstream's loader runs ``nvcc`` for ``sm_00``, fails after ~4 s and
   writes a build directory under ``~/.cache/sglang/jit``) raise :class:`JitCopyNotRun` at once; upstream's own
   ``except`` then runs its torch copies, and what it prints about it is kept out of the harness's output.  HIP
   never calls the single copy (``if not _is_hip``); it does call the multi copy, only with more than 3 draft steps
   (``N >= 5``), which the family's strategies never draw (``N <= 4`` in draft decode): there this adapter judges
   upstream's fallback loop, not HIP's kernel (``adapter/builder.py``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import inspect
import io
import os
import textwrap
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from metadata_builders.errors import MetadataBuildersError

__all__ = ["UPSTREAM", "JitCopyNotRun", "guarded_seqlens_expand", "load", "shims"]

UPSTREAM = "sglang.srt.layers.attention.dsa_backend"
_FUSED = ("sglang.kernels.ops.attention.dsa.metadata", "sglang.kernels.ops.attention.dsa_metadata")
_FUSED_NAMES = ("fused_dsa_decode_metadata", "fused_dsa_target_verify_metadata", "fused_dsa_draft_extend_metadata")
_COPY = ("sglang.kernels.ops.attention.dsa.fused_metadata_copy", "sglang.kernels.ops.attention.fused_metadata_copy")
_COPY_NAMES = ("fused_metadata_copy_cuda", "fused_metadata_copy_multi_cuda")


class JitCopyNotRun(MetadataBuildersError, RuntimeError):
    """Shim 6: a CUDA/HIP JIT copy kernel upstream calls inside ``try`` (never reaches the harness's caller)."""


def _jit_copy_not_run(*args: Any, **kwargs: Any) -> None:
    raise JitCopyNotRun("the CUDA/HIP JIT metadata copy is not built on CPU (shim 6): upstream's torch copies run")


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@functools.lru_cache(maxsize=1)
def load() -> SimpleNamespace:
    """The installed release's DSA modules (``TRITON_INTERPRET=1`` set first when no GPU is there)."""
    import importlib.metadata

    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from metadata_builders.families.dsv4.sglang.shims import (
        config_registration_tolerated,
        import_module,
        shim_torchvision,
    )

    shim_torchvision()
    with config_registration_tolerated():
        backend = import_module(UPSTREAM)
    fused = next((m for m in map(_optional, _FUSED) if m is not None), None)
    if fused is None:
        raise MetadataBuildersError(f"the fused DSA metadata kernels: looked in {list(_FUSED)}")
    import triton  # noqa: F401 - imported before any audited build, so the audit watches interpreted launches

    return SimpleNamespace(
        backend=backend, version=importlib.metadata.version("sglang"), fused=fused,
        pad=importlib.import_module("sglang.kernels.ops.attention.pad"),
        fbi=importlib.import_module("sglang.srt.model_executor.forward_batch_info"),
        precompute=importlib.import_module("sglang.srt.layers.attention.dsa.dsa_backend_mtp_precompute"),
        manager=_optional("sglang.srt.layers.attention.dsa.dsa_metadata_manager"),
        copy=next((m for m in map(_optional, _COPY) if m is not None), None),
        triton_kernel=_optional("sglang.kernels.ops.attention.dsa.triton_kernel")
        or _optional("sglang.srt.layers.attention.dsa.triton_kernel"),
    )


class _DropIsCudaAsserts(ast.NodeTransformer):
    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        test = node.test
        return ast.Pass() if isinstance(test, ast.Attribute) and test.attr == "is_cuda" else node


@functools.cache
def without_cuda_asserts(fn: Any) -> Any:
    """Upstream's ``fn`` recompiled from its own source without its ``assert <x>.is_cuda`` statements (shim 1)."""
    source = textwrap.dedent(inspect.getsource(fn))
    tree = _DropIsCudaAsserts().visit(ast.parse(source))
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, inspect.getsourcelines(fn)[1] - 1)
    namespace: dict[str, Any] = {}
    exec(compile(tree, inspect.getsourcefile(fn) or "<upstream>", "exec"), fn.__globals__, namespace)  # noqa: S102
    return namespace[fn.__name__]


def guarded_seqlens_expand(extend_seq_lens: Any, seq_lens: Any, total_len: int, max_q_len: int) -> Any:
    """Upstream's ``seqlens_expand_triton`` behind the family's fault model (shim 3)."""
    from metadata_builders.audit import kernel_launch
    from metadata_builders.families.dsa import device_model, transfers
    from metadata_builders.families.dsa.builder import kernels
    from metadata_builders.families.dsa.reference.stages import seqlens_expand

    with kernel_launch(((extend_seq_lens, seq_lens), ())), transfers.paused():
        model = seqlens_expand(extend_seq_lens.tolist(), seq_lens.tolist(), total_len, max_q_len)
    if model.oob_writes:
        return kernels.seqlens_expand_triton(extend_seq_lens, seq_lens, total_len, max_q_len)
    out = without_cuda_asserts(load().pad.seqlens_expand_triton)(extend_seq_lens, seq_lens, total_len, max_q_len)
    device_model.report(device_model.ExpandLaunch(
        device_model.EXPAND_OP, "seqlens_expand_triton", total_len, model.device_sum,
        total_len - model.uninitialized, 0, model.uninitialized))
    return out


def _fix_interpreter_masks(saved: list[tuple[Any, str, Any]]) -> None:
    """Shim 2, only when the installed interpreter has the bug."""
    import numpy as np
    import torch
    import triton
    import triton.language as tl
    from triton.runtime import interpreter

    @triton.jit
    def _probe(out, n, bs: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out + offs, offs, mask=(tl.program_id(0) < bs) & (offs < n))

    try:
        _probe[(1,)](torch.zeros(4, dtype=torch.int32), 2, 1, BLOCK=4)
        return
    except Exception as exc:  # the interpreter's own error type varies by release
        if "mask has unsupported dtype" not in repr(exc):
            raise
    builder = interpreter.InterpreterBuilder
    load_, store_ = builder.create_masked_load, builder.create_masked_store

    def as_bool(mask: Any) -> Any:
        return interpreter.TensorHandle(mask.data.astype(np.bool_), tl.int1) if mask.data.dtype != np.bool_ else mask

    def create_masked_load(self: Any, ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: Any) -> Any:
        return load_(self, ptrs, as_bool(mask), other, cache_policy, is_volatile)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> Any:
        return store_(self, ptrs, value, as_bool(mask), cache_policy)

    saved += [(builder, "create_masked_load", load_), (builder, "create_masked_store", store_)]
    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store


@functools.lru_cache(maxsize=1)
def _mask_bug() -> bool:
    saved: list[tuple[Any, str, Any]] = []
    _fix_interpreter_masks(saved)
    for owner, name, value in saved:
        setattr(owner, name, value)
    return bool(saved)


def _parallel_config() -> contextlib.AbstractContextManager[Any]:
    """``pad_dsa_cache_seqlens`` reads ``get_parallel().attn_cp_size`` (U:279): one rank, no context parallelism
    (shim 5: a config namespace a server publishes at startup; the override validates the value)."""
    from sglang.srt.runtime_context import get_parallel

    return get_parallel().override(attn_cp_size=1)


@contextlib.contextmanager
def shims(route_hip: bool) -> Iterator[SimpleNamespace]:
    """Shims 1-3 and 6 and the route flag for one call, restored after it.

    ``route_hip``: the module flag ``_is_hip`` the backend and the precompute read (0.5.20+: HIP takes the fused
    replay kernels when ``index_kpool <= 1``; 0.5.18/0.5.19: HIP runs the torch fallback); the manager's flag is
    always set, so the CUDA JIT copy is never attempted (what HIP does)."""
    mods = load()
    saved: list[tuple[Any, str, Any]] = []

    def bind(modules: tuple[Any, ...], name: str, value: Any) -> None:
        for module in modules:
            if module is not None and hasattr(module, name):
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, value)

    try:
        bind((mods.backend, mods.precompute), "seqlens_expand_triton", guarded_seqlens_expand)
        for name in _FUSED_NAMES:
            bind((mods.fused, mods.manager, mods.precompute), name, without_cuda_asserts(getattr(mods.fused, name)))
        bind((mods.backend, mods.precompute), "_is_hip", route_hip)
        bind((mods.manager,), "_is_hip", True)
        for name in _COPY_NAMES:
            bind((mods.copy,), name, _jit_copy_not_run)
        if _mask_bug():
            _fix_interpreter_masks(saved)
        with _parallel_config(), contextlib.redirect_stdout(io.StringIO()):  # upstream's fallback warnings (shim 6)
            yield mods
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)
