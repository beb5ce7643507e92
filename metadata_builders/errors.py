"""One exception tree for the harness.

Every class also inherits the nearest builtin, so ``except ValueError`` keeps
working for callers that do not know us; every instance carries its data
(``field``, ``index``, ``expected``, ``actual``) so tests compare data, not text;
and every instance pickles (by its constructor's arguments), so an error raised
in a worker process -- ``mutants --jobs``, a pytest-xdist worker -- arrives whole.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BuilderNotFound",
    "BuilderContractError",
    "CaptureMismatch",
    "CaptureSync",
    "DeviceUnavailable",
    "GateError",
    "InvalidBatch",
    "InvalidDeclaration",
    "InvalidMetadata",
    "InvalidVariant",
    "MetadataBuildersError",
    "ModeNotBuilt",
    "MutantDoesNotApply",
    "Origin",
    "PlotExtraMissing",
    "PropertyFailure",
    "StreamOutOfBounds",
    "UnknownMutant",
    "UpstreamNotFound",
    "UsageError",
]


def _rebuild(cls: type, args: tuple, kwargs: dict) -> MetadataBuildersError:
    return cls(*args, **kwargs)


class MetadataBuildersError(Exception):
    """Base class of every error the harness raises on purpose.

    ``field``, ``index``, ``expected`` and ``actual`` say what is wrong as data;
    ``__reduce__`` rebuilds the error from its constructor's arguments.
    """

    field: str | None = None
    index: Any = None
    expected: Any = None
    actual: Any = None

    def __new__(cls, *args: Any, **kwargs: Any) -> MetadataBuildersError:
        self = super().__new__(cls, *args)
        self._constructed_with = (args, kwargs)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        args, kwargs = self._constructed_with
        return (_rebuild, (type(self), args, kwargs))

    def _data(self, field: str | None, index: Any, expected: Any, actual: Any) -> None:
        self.field, self.index, self.expected, self.actual = field, index, expected, actual


class InvalidBatch(MetadataBuildersError, ValueError):
    """A batch breaks a precondition of the target-verify builders.

    ``InvalidBatch("verify_lens", 2, "in 1..num_draft_tokens=3", 0)`` reads
    ``verify_lens[2]=0 must be in 1..num_draft_tokens=3``.
    """

    def __init__(self, field: str, index: int | None, expected: Any, actual: Any) -> None:
        self._data(field, index, expected, actual)
        where = field if index is None else f"{field}[{index}]"
        super().__init__(f"{where}={actual!r} must be {expected}")


class InvalidVariant(MetadataBuildersError, ValueError):
    """A variant knob has a value outside its closed set, or does not apply to the batch."""

    def __init__(self, field: str, expected: Any, actual: Any) -> None:
        self._data(field, None, expected, actual)
        super().__init__(f"Variant.{field}={actual!r} must be {expected}")


class ModeNotBuilt(MetadataBuildersError, NotImplementedError):
    """A valid batch of an MTP-step mode no builder builds yet: said loudly, never judged as target verify.

    Since every mode of the batch model is built (0.4), it guards a mode added to the batch model before its
    builders (``variants.BUILT_MODES``).  ``ModeNotBuilt("spec_v3", ("target_verify", "draft_extend"))`` reads ``batch
    mode 'spec_v3' is not built yet: the reference and the builders build target_verify, draft_extend
    (docs/DESIGN.md section 3, "Beyond target verify")``.
    """

    def __init__(self, mode: str, built: tuple[str, ...] = ()) -> None:
        self._data("mode", None, " or ".join(built) or "a built mode", mode)
        super().__init__(f"batch mode {mode!r} is not built yet: the reference and the builders build "
                         f"{', '.join(built) or 'other modes'} (docs/DESIGN.md section 3, \"Beyond target verify\")")


class InvalidMetadata(MetadataBuildersError, ValueError):
    """A builder returned metadata that is not the documented shape (a field missing)."""

    def __init__(self, field: str, expected: Any, actual: Any) -> None:
        self._data(field, None, expected, actual)
        super().__init__(f"VerifyMetadata.{field}: {actual} (expected {expected})")


class StreamOutOfBounds(InvalidMetadata):
    """A decode index stream's indptr gives a token a segment that leaves its indices buffer: the attention kernel
    would read past the buffer (a stale extend length reaching ``build_decode_streams``: FINDINGS F8).

    ``StreamOutOfBounds("hca_indices", 3, (40, 52), 48)`` reads ``VerifyMetadata.hca_indices: segment 3 = [40, 52)
    (expected inside its buffer of 48 entries)``; ``index`` is the token.
    """

    def __init__(self, field: str, index: int, segment: tuple[int, int], buffer: int) -> None:
        super().__init__(field, f"inside its buffer of {buffer} entries", f"segment {index} = [{segment[0]}, "
                         f"{segment[1]})")
        self._data(field, index, f"inside [0, {buffer})", list(segment))


class UsageError(MetadataBuildersError, ValueError):
    """A command-line option or argument is wrong; the CLI exits 2 with this message."""

    def __init__(self, field: str, expected: Any, actual: Any) -> None:
        self._data(field, None, expected, actual)
        super().__init__(f"{field}: {actual} ({expected})")


class BuilderNotFound(MetadataBuildersError, LookupError):
    """``get_builder`` was given a name that names no builder."""

    def __init__(self, name: str, reason: str) -> None:
        self._data("name", None, '"reference", "hip", "sglang" or "module:attr"', name)
        super().__init__(f"builder {name!r}: {reason}")


class DeviceUnavailable(MetadataBuildersError, RuntimeError):
    """A device that cannot be used on this machine (no GPU, an index past the last one, a misspelling).

    ``DeviceUnavailable("--device", "cuda", "torch.cuda.is_available() is False ...")`` reads
    ``--device cuda: torch.cuda.is_available() is False ...``: a setup error (exit 2) before anything runs.
    """

    def __init__(self, option: str, device: str, reason: str) -> None:
        self._data(option, None, "a device this machine has", device)
        super().__init__(f"{option} {device}: {reason}")


class BuilderContractError(MetadataBuildersError, TypeError):
    """A builder broke the contract it is called under (``build`` returned something that is no metadata).

    ``BuilderContractError("mypkg:B", "build(inputs)", "a VerifyMetadata", "dict")`` reads
    ``builder 'mypkg:B': build(inputs) must return a VerifyMetadata, returned dict``, with a hint
    for the common mistakes.
    """

    def __init__(self, name: str, call: str, expected: str, actual: str, hint: str = "") -> None:
        self._data(call, None, expected, actual)
        super().__init__(f"builder {name!r}: {call} must return {expected}, returned {actual}" +
                         (f"; {hint}" if hint else ""))


class InvalidDeclaration(BuilderContractError):
    """A builder class declares a capability the harness cannot take (``modes = ()``, ``modes = "decode"``, a mode
    name the batch model does not know): refused where capabilities are computed, before anything is judged.

    ``InvalidDeclaration("mypkg:Mine", "Mine", "modes", "a non-empty tuple of mode names, some of (...)", "()")``
    reads ``builder 'mypkg:Mine': Mine.modes = () must be a non-empty tuple of mode names, some of (...)``.
    """

    def __init__(self, name: str, owner: str, attribute: str, expected: str, actual: str, hint: str = "") -> None:
        self._data(attribute, owner, expected, actual)
        Exception.__init__(self, f"builder {name!r}: {owner}.{attribute} = {actual} must be {expected}"
                           + (f"; {hint}" if hint else ""))


class UnknownMutant(BuilderNotFound, KeyError):
    """A mutant name that is not in the catalogue."""

    def __init__(self, name: str, known: list[str] | tuple[str, ...]) -> None:
        super().__init__(name, f"not in the mutant catalogue; choose from {sorted(known)}")

    def __str__(self) -> str:  # KeyError would quote the message
        return Exception.__str__(self)


def _in_library(filename: str) -> bool:
    """The frame is torch's or Triton's own code (``.../site-packages/torch/...``), or the harness's audit, which
    sits between a builder and torch as a dispatch mode (``metadata_builders/audit/``)."""
    parts = filename.replace("\\", "/").split("/")
    if any(lib in parts[:-1] for lib in ("torch", "triton")) and "site-packages" in parts:
        return True
    return parts[-2:-1] == ["audit"] and "metadata_builders" in parts


@dataclass(frozen=True)
class Origin:
    """Where an exception came from, as Hypothesis' ``InterestingOrigin`` names it: type, file, line, function.

    Two failures with one origin are one bug; the gate calls a side whose every
    batch raised from one origin a setup error, not a verdict.
    """

    exc_type: str
    filename: str = ""
    lineno: int = 0
    function: str = ""

    @classmethod
    def of(cls, exc: BaseException) -> Origin:
        """The origin of ``exc``: its type and the innermost frame of its traceback outside torch's and Triton's
        own packages and the audit (a size mismatch raised in ``torch/_ops.py`` comes from the builder line that
        called it)."""
        import traceback

        frames = traceback.extract_tb(exc.__traceback__)
        if not frames:
            return cls(type(exc).__name__)
        ours = [f for f in frames if not _in_library(f.filename)]
        last = (ours or frames)[-1]
        return cls(type(exc).__name__, last.filename, last.lineno or 0, last.name)

    def where(self) -> str:
        """``deepseek_v4_backend_hip_radix.py:3660 in get_swa_page_indices`` (empty when unknown)."""
        if not self.filename:
            return ""
        return f"{os.path.basename(self.filename)}:{self.lineno} in {self.function}"

    def to_list(self) -> list[Any]:
        return [self.exc_type, self.filename, self.lineno, self.function]

    @classmethod
    def from_list(cls, values: Any) -> Origin | None:
        """The record :meth:`to_list` wrote (a verdict file's ``origin``); None for an empty one (nothing raised)."""
        values = list(values or ())
        return cls(str(values[0]), *values[1:4]) if values else None

    @property
    def place(self) -> tuple[str, str, int]:
        """(type, file, line): two failures with one place are one bug, whatever function name a frame reports."""
        return self.exc_type, self.filename, self.lineno


class PropertyFailure(MetadataBuildersError, AssertionError):
    """A property of DESIGN.md section 3 does not hold for one batch.

    Carries the property (``"P1"`` .. ``"P9"``), the variant label, the field,
    the first differing index and the two values, never a whole tensor; and its
    identity as data: ``check`` (a :data:`~metadata_builders.properties.checks.CheckId`, such
    as ``"p5.replay_vs_fresh"``; ``"raised"`` when the builder raised) and, for a
    raised failure, its :class:`Origin`.  Findings, the gate and tests match on
    those, never on the message's wording.
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
        check: str | None = None,
        origin: Origin | None = None,
        where: str | None = None,
    ) -> None:
        self.prop = prop
        self.variant = variant
        self.message = message
        self.check = check
        self.origin = origin
        self.where = where
        """The pipeline stage the failure is located in, when known (a fault's stage, a sync's)."""
        self._data(field, index, expected, actual)
        head = f"{prop}" + (f" [{variant}]" if variant else "")
        detail = ""
        if field is not None:
            where = "" if index is None else f" index={index}"
            detail = f" field={field}{where} expected={expected!r} actual={actual!r}"
        super().__init__(f"{head}: {message}{detail}")


class CaptureMismatch(MetadataBuildersError, ValueError):
    """A graph replay would change a captured buffer's shape (its address must stay valid)."""

    def __init__(self, field: str, expected: tuple[int, ...], actual: tuple[int, ...]) -> None:
        self._data(field, None, expected, actual)
        super().__init__(f"replay: {field} has shape {actual}, the captured buffer is {expected}")


class CaptureSync(MetadataBuildersError, RuntimeError):
    """A read of device memory back to the host inside a graph capture: a GPU cannot capture it.

    ``CaptureSync("Tensor.item", "in_graph", "scalar", ("seq_lens",))`` reads ``graph capture:
    Tensor.item in in_graph reads device memory back to the host (a scalar read of seq_lens); ...``.
    Carries the call (``actual``), the builder function (``index``) and what it read.
    """

    def __init__(self, op: str, stage: str, kind: str, reads: tuple[str, ...] | list[str] = ()) -> None:
        self.op, self.stage, self.kind, self.reads = op, stage, kind, tuple(reads)
        self._data("in_graph", stage, "no device-to-host read while recording (move it out-graph)", op)
        what = f"a {kind} read" + (f" of {'+'.join(self.reads)}" if self.reads else "")
        super().__init__(f"graph capture: {op} in {stage} reads device memory back to the host ({what}); "
                         "recorded (in-graph) work cannot sync: do it out-graph (out_graph), or keep it on the device")


class MutantDoesNotApply(MetadataBuildersError, LookupError):
    """A mutant's ``find`` text is not exactly once in its stage's source (``hip.py`` changed)."""

    def __init__(self, name: str, stage: str, occurrences: int) -> None:
        self.name, self.stage, self.occurrences = name, stage, occurrences
        self._data("find", None, "exactly once", occurrences)
        super().__init__(
            f"mutant {name!r}: its find text occurs {occurrences} times in hip.{stage} (must be exactly once); "
            "update the family's catalogue (its mutants/catalogue.py) to the new source"
        )


class GateError(MetadataBuildersError, RuntimeError):
    """The gate could not run (bad ref, no SGLang tree, a side that crashed): exit 2, never a verdict."""

    def __init__(self, what: str, detail: str) -> None:
        self._data(what, None, None, detail)
        super().__init__(f"{what}: {detail}")


class UpstreamNotFound(MetadataBuildersError, ImportError):
    """A piece of SGLang the adapter drives is not where any supported release keeps it.

    Carries the piece, the installed release and every place looked, e.g.
    ``SGLang 0.5.24: cannot find is_unified_kv_triton (the unified-KV gate);
    looked in: sglang.srt.layers.attention.dsv4.unified_kv_gate (no is_unified_kv_triton), ...``.
    """

    def __init__(self, piece: str, release: str, looked: list[str] | tuple[str, ...]) -> None:
        self.piece, self.release, self.looked = piece, release, tuple(looked)
        self._data(piece, None, "present", tuple(looked))
        where = "; ".join(self.looked) or "nowhere"
        super().__init__(f"SGLang {release}: cannot find {piece}; looked in: {where}")


class PlotExtraMissing(MetadataBuildersError, ImportError):
    """A picture was asked for without matplotlib: the ``plot`` extra is not installed."""

    def __init__(self, what: str) -> None:
        self._data("matplotlib", None, "installed", None)
        super().__init__(f"{what} needs matplotlib: python -m pip install 'metadata-builders[plot]' "
                         "(in a checkout: python -m pip install -e '.[plot]')")
