"""P2: the host mirror, the device build and the ``tolist`` fallback agree; a stale mirror is caught."""

from __future__ import annotations

from metadata_builders.families.dsv4.errors import StaleMirror
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.metadata import VerifyMetadata, first_difference
from metadata_builders.families.dsv4.properties._common import (
    Partial,
    _clean,
    _compare,
    _describe,
    _fail,
    _label,
    _name,
    _reference,
    _variants,
    judging,
)
from metadata_builders.families.dsv4.properties.syncs import contract_role
from metadata_builders.families.dsv4.variants import Variant, variants_for


@judging
def check_p2_mirror(builder, batch: VerifyBatch) -> list[str]:
    """P2: host / device / tolist mirrors give identical metadata; only ``tolist`` syncs on seq_lens.

    ``host`` and ``device`` read nothing of ``seq_lens`` back; ``tolist`` exactly
    once (the pre-fix ``seq_lens.tolist()``), whatever else the build reads.
    """
    notes = _check_stale_mirror(builder, batch)
    batch = _clean(batch)
    if batch.is_ragged:
        return notes + ["P2 mirror comparison applies to uniform batches only; nothing to check"]
    variants = _variants(builder, batch, notes)
    for variant in variants:
        if variant.mirror != "host":
            continue
        base = builder.build(batch, variant)
        base_reads = _mirror_reads(base)
        if base_reads:
            raise _fail("P2", variant, "mirror=host must not read seq_lens back", field="audit.host_syncs",
                        expected=[], actual=base_reads, check="p2.host_reads_seq_lens")
        for mirror in ("device", "tolist"):
            other_v = Variant(variant.path, mirror, variant.layout_total, variant.gate)
            if other_v not in variants:
                continue
            other = builder.build(batch, other_v)
            _compare("P2", other_v, base, other, f"mirror={mirror} vs mirror=host", check="p2.mirror_vs_host")
            reads = _mirror_reads(other)
            want = 1 if mirror == "tolist" else 0
            if len(reads) != want:
                raise _fail(
                    "P2", other_v, f"mirror={mirror} must read seq_lens back {want} time(s)",
                    field="audit.host_syncs", expected=want, actual=reads or _describe(other.audit.host_syncs),
                    check="p2.mirror_reads",
                )
    return notes


def _mirror_reads(md: VerifyMetadata) -> list[str]:
    return [_describe([s])[0] for s in md.audit.host_syncs if "seq_lens" in s.reads and contract_role(s) != "token_map"]


def _check_stale_mirror(builder, batch: VerifyBatch) -> list[str]:
    """P2, second half: with opt-in mirror validation a stale ``seq_lens_cpu`` raises ``StaleMirror``."""
    div = batch.divergence
    if div is None or div.seq_lens_cpu is None or list(div.seq_lens_cpu) == list(batch.seq_lens):
        return []
    if not builder.capabilities.mirror_validation:
        return [Partial(f"stale mirror not checked: builder {_name(builder)!r} has no mirror validation",
                        "mirror_validation")]
    validating = builder.with_mirror_validation()
    first = next(i for i, (a, b) in enumerate(zip(batch.seq_lens, div.seq_lens_cpu)) if a != b)
    notes: list[str] = []
    for variant in variants_for(batch):
        if not batch.is_ragged and variant.mirror != "host":
            continue
        try:
            validating.build(batch, variant)
        except StaleMirror as exc:
            if exc.index != first:
                raise _fail("P2", variant, "mirror validation named the wrong request", field="seq_lens_cpu",
                            index=(exc.index,), expected=first, actual=exc.index,
                            check="p2.validation_wrong_row") from exc
        else:
            raise _fail("P2", variant, "a stale host mirror was used silently under mirror validation",
                        field="seq_lens_cpu", index=(first,), expected=batch.seq_lens[first],
                        actual=div.seq_lens_cpu[first], check="p2.stale_mirror_silent")
        silent = builder.build(batch, variant)
        mismatch = first_difference(_reference(builder).build(_clean(batch), variant).fields, silent.fields)
        if mismatch is not None and len(notes) < 3:
            notes.append(f"{_label(variant)}: without validation the stale mirror corrupts metadata: {mismatch}")
    return notes
