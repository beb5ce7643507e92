"""One exception tree for the harness.

Every class also inherits the nearest builtin, so ``except ValueError`` keeps
working for callers that do not know us, and every instance carries its data
(``field``, ``index``, ``expected``, ``actual``) so tests compare data, not text.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BuilderNotFound",
    "InvalidBatch",
    "InvalidVariant",
    "MetadataBuildersError",
    "PropertyFailure",
    "StaleMirror",
]


class MetadataBuildersError(Exception):
    """Base class of every error the harness raises on purpose."""


class InvalidBatch(MetadataBuildersError, ValueError):
    """A batch breaks a precondition of the target-verify builders.

    ``InvalidBatch("verify_lens", 2, "in 1..num_draft_tokens=3", 0)`` reads
    ``verify_lens[2]=0 must be in 1..num_draft_tokens=3``.
    """

    def __init__(
        self,
        field: str,
        index: int | None,
        expected: Any,
        actual: Any,
    ) -> None:
        self.field = field
        self.index = index
        self.expected = expected
        self.actual = actual
        where = field if index is None else f"{field}[{index}]"
        super().__init__(f"{where}={actual!r} must be {expected}")


class InvalidVariant(MetadataBuildersError, ValueError):
    """A variant knob has a value outside its closed set, or does not apply to the batch."""

    def __init__(self, field: str, expected: Any, actual: Any) -> None:
        self.field = field
        self.index = None
        self.expected = expected
        self.actual = actual
        super().__init__(f"Variant.{field}={actual!r} must be {expected}")


class BuilderNotFound(MetadataBuildersError, LookupError):
    """``get_builder`` was given a name that names no builder."""

    def __init__(self, name: str, reason: str) -> None:
        self.field = "name"
        self.index = None
        self.expected = '"reference", "hip", "sglang" or "module:attr"'
        self.actual = name
        super().__init__(f"builder {name!r}: {reason}")


class PropertyFailure(MetadataBuildersError, AssertionError):
    """A property of DESIGN.md section 3 does not hold for one batch.

    Carries the property (``"P1"`` .. ``"P7"``), the variant label, the field,
    the first differing index and the two values, never a whole tensor.
    """

    def __init__(
        self,
        prop: str,
        message: str,
        *,
        variant: str | None = None,
        field: str | None = None,
        index: Any = None,
        expected: Any = None,
        actual: Any = None,
    ) -> None:
        self.prop = prop
        self.variant = variant
        self.field = field
        self.index = index
        self.expected = expected
        self.actual = actual
        self.message = message
        parts = [f"{prop}"]
        if variant:
            parts.append(f"[{variant}]")
        head = " ".join(parts)
        detail = ""
        if field is not None:
            detail = f" field={field} index={index} expected={expected!r} actual={actual!r}"
        super().__init__(f"{head}: {message}{detail}")


class StaleMirror(MetadataBuildersError, AssertionError):
    """Opt-in mirror validation: the host mirror ``seq_lens_cpu`` disagrees with the device.

    A stale mirror is never used silently when validation is on; validation costs
    one D2H sync (it reads ``seq_lens`` back), so it is a debugging aid, off by default.
    """

    def __init__(self, index: int, expected: int, actual: int) -> None:
        self.field = "seq_lens_cpu"
        self.index = index
        self.expected = expected
        self.actual = actual
        super().__init__(f"seq_lens_cpu[{index}]={actual} is stale: the device holds seq_lens[{index}]={expected}")
