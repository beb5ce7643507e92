"""P1 (every field equals the reference), P3 (a host-sized ``seqlens_expand`` equals the device-synced size) and
P4 (does not apply) for the DSA family."""

from __future__ import annotations

from typing import TYPE_CHECKING

from metadata_builders.families.dsa.fields import FIELDS, NOT_JUDGED
from metadata_builders.families.dsa.properties.common import (
    building,
    clean,
    compare_field,
    fail,
)
from metadata_builders.families.dsa.reference import reference_metadata
from metadata_builders.families.dsa.variants import variants_for

if TYPE_CHECKING:
    from metadata_builders.families.dsa.audited import DSABuild, DSASubject
    from metadata_builders.families.dsa.batch import DSABatch
    from metadata_builders.families.dsa.variants import DSAVariant

__all__ = ["P1_NOTE", "P4_NOTE", "check_p1_reference", "check_p3_host_total", "check_p4_gate"]

P1_NOTE = ("P1 compares page_table_1 and real_page_table up to each row's read length (cache_seqlens of its "
           "request; ceil(.../P) pages) and their shapes exactly; the columns past it are judged by P9 (what a used "
           "builder leaves there) and P10 (no consumer reads there). Not judged (CUDA-only or off the speculative "
           "path): " + ", ".join(sorted(NOT_JUDGED)) + ".")
P4_NOTE = ("P4 does not apply to the DSA family: its metadata path has no gate choosing between a trusted host "
           "count and a synced one (DSV4's dspark gate); the one kernel sized by a host total, "
           "seqlens_expand_triton, is judged by P3 (host total = device size) and P6 (the fault when they differ).")


def check_p1_reference(subject: DSASubject, batch: DSABatch) -> list[str]:
    """Every variant's every judged field equals the reference: values, shapes, dtypes (device divergence off:
    P6 judges what it does; a stale mirror stays, the reference models it)."""
    batch = clean(batch)
    for variant in variants_for(batch):
        with building("P1", variant):
            build = subject.build(batch, variant)
        _compare(batch, variant, build)
    return [P1_NOTE]


def _compare(batch: DSABatch, variant: DSAVariant, build: DSABuild) -> None:
    expected = reference_metadata(batch, variant)
    for name, spec in FIELDS.items():
        if name not in build.fields:
            raise fail("P1", "dsa.p1.missing", "the build has no such field", variant, field=name,
                       expected="present", actual="missing")
        actual = build.fields[name]
        if spec.dtype not in ("host",) and actual is not None and build.dtypes.get(name) != spec.dtype:
            raise fail("P1", "dsa.p1.dtype", "a device field of another dtype than its consumers take", variant,
                       field=name, expected=spec.dtype, actual=build.dtypes.get(name))
        diff = compare_field(batch, variant.path, name, expected[name], actual)
        if diff is not None:
            what, index, want, got = diff
            check = "dsa.p1.shape" if what == "shape" else "dsa.p1.vs_reference"
            raise fail("P1", check, f"{name} differs from the reference ({what})", variant, field=name, index=index,
                       expected=want, actual=got)


def check_p3_host_total(subject: DSASubject, batch: DSABatch) -> list[str]:
    """Every ``seqlens_expand`` launch of a clean build allocates exactly what the device lengths need, and
    writes every entry it allocated: the host total equals the device-synced size."""
    batch = clean(batch)
    launches = 0
    for variant in variants_for(batch):
        with building("P3", variant):
            build = subject.build(batch, variant)
        for launch in build.launches:
            launches += 1
            if launch.output_size != launch.device_sum:
                raise fail("P3", "dsa.p3.host_total_vs_device", f"{launch.op} in {launch.stage}: the host total "
                           "sizes the output differently from what the device lengths need", variant,
                           field="dsa_seqlens_expanded", expected=launch.device_sum, actual=launch.output_size)
            if launch.uninitialized or launch.oob_writes:
                raise fail("P3", "dsa.p3.unwritten", f"{launch.op} in {launch.stage}: entries of its output left "
                           "unwritten (a row longer than BLOCK, or stores past it)", variant,
                           field="dsa_seqlens_expanded", expected=0,
                           actual={"uninitialized": launch.uninitialized, "oob_writes": launch.oob_writes})
    return [] if launches else ["P3: no seqlens_expand launch in this batch's builds (decode modes, fused route)"]


def check_p4_gate(subject: DSASubject, batch: DSABatch) -> list[str]:
    """Does not apply: says why."""
    return [P4_NOTE]
