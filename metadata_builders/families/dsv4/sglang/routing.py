"""Kernel routing: which of upstream's two implementations of a metadata kernel runs.

Upstream dispatches three kernels by where their tensors live
(``PaddedToBucket`` and ``BuildQoIndptr``: ``cls.triton if verify_lens.is_cuda
else cls.torch``; ``ExpandPrefillCausally``: ``_inputs_on_cuda``).  Both
implementations are upstream code, so the adapter runs each as a **route**:

| route | what runs | what it stands for |
|---|---|---|
| ``triton`` | every dispatch routed to the Triton kernel (under the interpreter on CPU) | a GPU |
| ``torch`` | upstream's own dispatch, which on CPU tensors picks the torch fallbacks | upstream's CPU callers |

The Triton-only page-table kernel runs on both routes.  Upstream's decode
streams (``build_decode_streams``: two Triton-only kernels, about a third of an
interpreted build) run on the ``triton`` route only: on the ``torch`` route they
would repeat the same kernels on the same code (there they are not observable).
The ``torch`` route cannot express mirror-less uniform verify: the fallback of
``ExpandPrefillCausally`` asserts host mirrors (docs/FINDINGS.md F1), so
``SGLangBuilder.variants_supported`` leaves ``mirror=device`` out there and the
properties report it ``partial``.

An interpreted launch is the audit's business, not the adapter's: the audit
(``metadata_builders.audit.triton``) recognises it from any builder.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.sglang.releases import Upstream

__all__ = ["KERNEL_ROUTES", "KernelRoute", "kernel_routes", "patched"]

KernelRoute = Literal["triton", "torch"]
"""``triton``: the kernels a GPU runs; ``torch``: upstream's CPU torch fallbacks."""

KERNEL_ROUTES: tuple[KernelRoute, ...] = get_args(KernelRoute)


@contextlib.contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    """``obj.name = value`` for the block; what ``obj`` itself held (or did not) afterwards."""
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


def _on_device(*_: Any, **__: Any) -> bool:
    return True


def _triton_dispatch(cls: type, **kwargs: Any) -> Any:
    """``execute`` that always takes the triton implementation (a GPU's tensors are ``is_cuda``)."""
    return cls.triton(**kwargs)


def _streams_on_the_triton_route(**_: Any) -> tuple[None, None, None, None, None, None]:
    """``build_decode_streams`` on the torch route: not built (six ``None``s, as for a geometry its kernel cannot
    take)."""
    return (None,) * 6


def _no_overflow_asserts() -> contextlib.AbstractContextManager:
    """The interpreter checks every int32 add/sub/mul for overflow with a device assert; a GPU build
    compiles device asserts out (no ``TRITON_DEBUG``), so kernels run here as they run there.

    Measured: the check was ~34 % of an interpreted build (docs/SGLANG.md).
    """
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    return patched(builder, "options", dataclasses.replace(builder.options, sanitize_overflow=False))


@contextlib.contextmanager
def kernel_routes(up: Upstream, inputs: VerifyInputs, route: KernelRoute) -> Iterator[None]:
    """Upstream's kernel dispatch for one build along ``route`` (see the module docstring)."""
    with contextlib.ExitStack() as stack:
        if route == "triton" and inputs.seq_lens.device.type == "cpu":
            stack.enter_context(patched(up.expand_module, "_inputs_on_cuda", _on_device))
            for cls in (up.ragged_kernels_module.PaddedToBucket, up.ragged_kernels_module.BuildQoIndptr):
                stack.enter_context(patched(cls, "execute", classmethod(_triton_dispatch)))
        if route == "torch":
            stack.enter_context(patched(up.runtime_module, "build_decode_streams", _streams_on_the_triton_route))
        if up.interpreter:
            stack.enter_context(_no_overflow_asserts())
        yield
