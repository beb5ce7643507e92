"""Importing SGLang on a CPU-only torch: the shims, each applied only where a release needs it.

| shim | releases | why |
|---|---|---|
| torchvision stub | all | PyPI's torchvision is CUDA-only; model configs import it at module level |
| ``torchvision.io.decode_jpeg`` | 0.5.18-0.5.20 | imported by name at module level |
| ``AutoConfig.register(exist_ok=True)`` | 0.5.18, 0.5.19 | they register ``qwen3_asr``, which transformers ships |
| ``aiter`` stub modules | 0.5.18 | installed only after importing the decode runtime failed for want of ``aiter`` |
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["config_registration_tolerated", "import_module", "shim_torchvision"]


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
_AITER_STUBS = ("aiter", "aiter.ops", "aiter.ops.triton", "aiter.ops.triton.utils",
                "aiter.ops.triton.utils.device_info")


def _stub_module(name: str, why: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__path__ = []

    def missing(attr: str) -> Any:
        raise AttributeError(f"{name}.{attr}: {why} (metadata_builders.families.dsv4.sglang; docs/SGLANG.md)")

    module.__getattr__ = missing  # type: ignore[method-assign]
    return module


def _stubbed_call(name: str) -> Callable[..., Any]:
    def call(*_: Any, **__: Any) -> Any:
        raise RuntimeError(f"{name} is a stub of metadata_builders.families.dsv4.sglang (docs/SGLANG.md); "
                           "nothing on the target-verify path calls it")

    call.__name__ = name.rpartition(".")[2]
    return call


def shim_torchvision() -> None:
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
def config_registration_tolerated() -> Iterator[None]:
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


def import_module(name: str) -> types.ModuleType:
    """``importlib.import_module``, retried with the ``aiter`` stubs when only ``aiter`` was missing."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("aiter"):
            raise
    _shim_aiter()
    return importlib.import_module(name)
