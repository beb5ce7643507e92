"""What every property shares: the reference, the failure and note types, the variants a builder expresses."""

from __future__ import annotations

import contextvars
import dataclasses
import functools
from typing import Any, Callable, Iterable

from metadata_builders.errors import CaptureSync, PropertyFailure
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.metadata import FIELD_NAMES, FIELDS, SyncRecord, VerifyMetadata, first_difference
from metadata_builders.families.dsv4.reference import ReferenceBuilder
from metadata_builders.families.dsv4.reference.grouped import GroupedReference
from metadata_builders.families.dsv4.tier import PADDINGS, Padding
from metadata_builders.families.dsv4.variants import Variant, variants_for
from metadata_builders.properties.checks import CHECKS, CheckId
from metadata_builders.properties.notes import Partial, PartialAbout, collecting_tallies, tally  # noqa: F401

_REFERENCES = {padding: ReferenceBuilder(padding) for padding in PADDINGS}


def _reference(builder: Any) -> ReferenceBuilder:
    """The specification for ``builder``: the reference of the tier padding convention the builder declares, with
    what the upstream switches it turns on add (``SGLANG_DSV4_GROUPED_ASM``:
    :mod:`metadata_builders.families.dsv4.reference.grouped`)."""
    reference = _REFERENCES[builder.capabilities.padding]
    return GroupedReference(reference) if builder.capabilities.switches else reference


def _padding(builder: Any) -> Padding:
    return builder.capabilities.padding
_DECISION_NAMES = ("num_tokens", "max_seq_len", "used_output_size", "exact_num_tokens")
"""The ``Decision`` fields P1 compares, in the order its first failure names them."""


_JUDGED_MODE: contextvars.ContextVar[str] = contextvars.ContextVar("metadata_builders_judged_mode",
                                                                   default="target_verify")
"""The mode of the batch a property is judging (:func:`judging`): what a variant's label may claim."""


def judging(check: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """Mark ``check(builder, batch, ...)`` as a property's check: while it runs, labels and failures name the
    judged batch's mode (a draft-decode failure never reads ``mirror=host``: :meth:`Variant.label_in`)."""

    @functools.wraps(check)
    def judged(builder: Any, batch: VerifyBatch, *args: Any, **kwargs: Any) -> list[str]:
        declared = builder.capabilities.modes
        if batch.mode not in declared:  # as check says it (properties.spec.verdict), never a build it cannot make
            return [f"not applicable: builder {builder.name!r} does not build mode {batch.mode} (it declares "
                    f"modes = {declared!r}: docs/DESIGN.md section 3)"]
        token = _JUDGED_MODE.set(batch.mode)
        try:
            return check(builder, batch, *args, **kwargs)
        finally:
            _JUDGED_MODE.reset(token)

    return judged


def _label(variant: Variant) -> str:
    """``variant``'s label in the mode being judged (every knob for target verify, the path for another mode)."""
    return variant.label_in(_JUDGED_MODE.get())


def _fail(prop: str, variant: Variant | None, message: str, *, check: CheckId, **data: Any) -> PropertyFailure:
    """A failure of ``prop`` on ``variant``, identified by ``check`` (:mod:`.checks`), with its data."""
    assert check in CHECKS, check
    return PropertyFailure(prop, message, variant=None if variant is None else _label(variant), check=check, **data)


def _compare(prop: str, variant: Variant, expected: VerifyMetadata, actual: VerifyMetadata, what: str, *,
             check: CheckId) -> None:
    """The first differing field; a field one side produced and the other neither reports nor names
    as not observable is a difference too (a builder that drops a whole group fails, never skips)."""
    for one, other, side in ((expected, actual, "actual"), (actual, expected, "expected")):
        dropped = [n for n in one.fields if n not in other.fields and n not in other.not_observable]
        if dropped:
            present, missing = ("present", "missing") if side == "actual" else ("missing", "present")
            raise _fail(prop, variant, f"{what}: one build reports a field the other neither reports nor names "
                        "as not observable", field=dropped[0], expected=present, actual=missing, check=check)
    mismatch = first_difference(expected.fields, actual.fields, compared_names(expected.fields))
    if mismatch is not None:
        raise _fail(
            prop, variant, f"{what}: fields differ",
            field=mismatch.field, index=mismatch.index, expected=mismatch.expected, actual=mismatch.actual, check=check,
        )


def compared_names(fields: dict[str, Any]) -> tuple[str, ...]:
    """Every field of the model, then those a switched route adds (the grouped streams), in that order."""
    return (*FIELD_NAMES, *(n for n in fields if n not in FIELDS))


def _decided(md: VerifyMetadata) -> dict[str, Any]:
    """The decision's values P1 and P9 compare, by name (``num_tokens``, ``max_seq_len``, ...)."""
    values = dataclasses.asdict(md.decision)
    return {name: values[name] for name in _DECISION_NAMES}


def _capture(prop: str, builder: Any, batch: VerifyBatch, variant: Variant) -> Any:
    """``builder.capture(batch, variant)``; a read back inside the recording fails ``prop``, as a GPU refuses it."""
    try:
        return builder.capture(batch, variant)
    except CaptureSync as error:
        raise _capture_error(prop, variant, error) from error


def _capture_error(prop: str, variant: Variant, error: CaptureSync) -> PropertyFailure:
    """The failure of ``prop`` for a read of device memory back to the host while a graph is recorded."""
    return _fail(prop, variant, "graph capture: recorded (in-graph) work reads device memory back to the host "
                 f"({error.kind} read{' of ' + '+'.join(error.reads) if error.reads else ''}); a GPU cannot "
                 "capture a sync", field=f"in_graph ({error.stage})", expected="no read back while recording",
                 actual=error.op, check=f"{prop.lower()}.capture_sync", where=error.stage)


def _clean(batch: VerifyBatch) -> VerifyBatch:
    """The batch without fault injection: what metadata properties compare on."""
    return batch.without_divergence()


# -- variants a builder can express ---------------------------------------------------------


def _variants(builder: Any, batch: VerifyBatch, notes: list[str]) -> list[Variant]:
    """``variants_for(batch)`` less those the builder says it cannot express (noted as partial)."""
    everything = variants_for(batch)
    if not builder.capabilities.expresses:
        return everything
    allowed = builder.variants_supported(batch)
    missing = [_label(v) for v in everything if v not in allowed]
    if missing:
        notes.append(Partial(f"builder {_name(builder)!r} cannot express {len(missing)} variant(s), e.g. {missing[0]}",
                             "variants"))
    return [v for v in everything if v in allowed]


def _name(builder: Any) -> str:
    return builder.name


def _describe(records: Iterable[SyncRecord]) -> list[str]:
    return [f"{s.op}@{s.stage}:{s.kind}" + (f" of {'+'.join(s.reads)}" if s.reads else "") for s in records]
