"""Finding builders, and running any builder under the harness's audit.

A builder is anything with ``build(batch, variant) -> VerifyMetadata``; there is
no base class (:class:`Builder` is a ``typing.Protocol``).  ``get_builder``
returns it wrapped in :class:`AuditedBuilder`, which runs each build under
:class:`~metadata_builders.audit.DeviceAudit` and converts tensor fields to
lists outside the audit -- so every builder, ours or not, is audited the same
way from outside.
"""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from metadata_builders.errors import BuilderNotFound
from metadata_builders.metadata import Audit, VerifyMetadata
from metadata_builders.reference import ReferenceBuilder, expected_host_syncs

if TYPE_CHECKING:
    from metadata_builders.batch import VerifyBatch
    from metadata_builders.variants import Variant

__all__ = ["AuditedBuilder", "Builder", "get_builder", "resolve_device"]


@runtime_checkable
class Builder(Protocol):
    """The builder contract: metadata for one batch along one variant, no state kept."""

    def build(self, batch: VerifyBatch, variant: Variant) -> VerifyMetadata: ...


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when ``torch.cuda.is_available()`` (true on ROCm too), else ``cpu``."""
    if device != "auto":
        return device
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def _to_plain(value: Any) -> Any:
    if hasattr(value, "tolist") and not isinstance(value, list):
        if getattr(getattr(value, "device", None), "type", None) == "meta":
            return list(value.shape)
        return value.tolist()
    return value


class AuditedBuilder:
    """Wraps a builder: audits its syncs and device faults, returns plain-list fields.

    On a GPU, a build whose contract is sync-free additionally runs under
    ``torch.cuda.set_sync_debug_mode("error")`` so a hidden sync raises there.
    On ``meta`` fields hold shapes (``[rows, cols]``) instead of values.
    """

    def __init__(self, inner: Builder, device: str = "cpu", name: str | None = None) -> None:
        self.inner = inner
        self.device = device
        self.name = name or getattr(inner, "name", type(inner).__name__)

    def build(self, batch: VerifyBatch, variant: Variant) -> VerifyMetadata:
        return self._audited(self.inner.build, batch, variant, batch, variant)

    def __getattr__(self, name: str) -> Any:
        # Graph capture/replay (P5) are optional; proxy them, audited, when the inner builder has them.
        if name == "capture":
            inner = self.inner.capture
            return lambda batch, variant: self._audited(inner, batch, variant, batch, variant, plain=False)
        if name == "replay":
            inner_replay = self.inner.replay
            return lambda state, batch: self._audited(inner_replay, batch, state.variant, state, batch)
        if name == "with_mirror_validation":
            make = self.inner.with_mirror_validation
            return lambda: AuditedBuilder(make(), self.device, self.name)
        raise AttributeError(name)

    def _audited(self, fn, batch: VerifyBatch, variant: Variant, *args: Any, plain: bool = True) -> Any:
        from metadata_builders.audit import DeviceAudit, sync_debug_mode

        strict = self.device.startswith("cuda") and not expected_host_syncs(batch, variant)
        audit = DeviceAudit()
        with sync_debug_mode("error" if strict else None), audit:
            result = fn(*args)
        if not plain:
            return result
        fields = {name: _to_plain(value) for name, value in result.fields.items()}
        return VerifyMetadata(fields, result.decision, Audit(list(audit.host_syncs), list(audit.faults)))


def get_builder(name: str, device: str = "cpu") -> AuditedBuilder | ReferenceBuilder:
    """``"reference"``, ``"hip"``, ``"sglang"`` or ``"module:attr"`` (a zero-argument factory or a class).

    The reference is pure Python and needs no audit: its audit *is* the contract.
    A factory or class that accepts a ``device`` keyword gets it.
    """
    device = resolve_device(device)
    if name == "reference":
        return ReferenceBuilder()
    if name == "hip":
        from metadata_builders.hip import HipBuilder

        return AuditedBuilder(HipBuilder(device), device, "hip")
    if name == "sglang":
        try:
            from metadata_builders.sglang_adapter import SGLangBuilder
        except ImportError as exc:
            raise BuilderNotFound(name, f"the SGLang adapter cannot be imported ({exc}); see docs/SGLANG.md") from exc
        return AuditedBuilder(SGLangBuilder(device), device, "sglang")
    if ":" not in name:
        raise BuilderNotFound(name, 'expected "reference", "hip", "sglang" or "module:attr"')
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BuilderNotFound(name, f"cannot import module {module_name!r}: {exc}") from exc
    try:
        factory = getattr(module, attr)
    except AttributeError as exc:
        raise BuilderNotFound(name, f"module {module_name!r} has no attribute {attr!r}") from exc
    if not callable(factory):
        raise BuilderNotFound(name, f"{attr!r} is not callable (need a zero-argument factory or a class)")
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    builder = factory(device=device) if "device" in params else factory()
    if not callable(getattr(builder, "build", None)):
        raise BuilderNotFound(name, f"{attr}() returned {type(builder).__name__}, which has no build(batch, variant)")
    if isinstance(builder, (AuditedBuilder, ReferenceBuilder)):
        return builder
    return AuditedBuilder(builder, device, name)
