"""P7 (the sync contract per variant; capture-time reads out-graph only; replay none; pageable host-to-device
copies reported) and P8 (inputs untouched; the caller's fields a build may write, declared) for the DSA family.

Worked example (the family's batch): eager target verify without a mirror reads ``seq_lens`` once
(``.item()``) and makes one pageable copy (``torch.tensor([3, 3], device=...)``), and stores
``extend_seq_lens_cpu = [3, 3]`` in the caller's batch (declared); its capture reads ``seq_lens`` twice
out-graph (``.cpu()``, ``.tolist()``); its replay reads nothing and copies nothing, on both routes.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from metadata_builders.families.dsa.fields import CALLER_WRITES
from metadata_builders.families.dsa.inputs import DEVICE_INPUTS
from metadata_builders.families.dsa.properties.common import building, clean, fail
from metadata_builders.families.dsa.reference import (
    caller_writes,
    expected_h2d_copies,
    expected_syncs,
)
from metadata_builders.families.dsa.variants import variants_for

if TYPE_CHECKING:
    from metadata_builders.families.dsa.audited import DSABuild, DSASubject
    from metadata_builders.families.dsa.batch import DSABatch
    from metadata_builders.families.dsa.variants import DSAVariant

__all__ = ["check_p7_sync_contract", "check_p8_inputs_untouched"]


def _reads(syncs: list) -> Counter:
    return Counter((s.kind, tuple(sorted(s.reads))) for s in syncs)


def _contract(check: str, variant: DSAVariant, got: list, want: list, what: str) -> None:
    have, need = _reads(got), _reads([s for s in want])
    if have != need:
        extra = have - need
        missing = need - have
        raise fail("P7", check, f"{what}: reads not in the contract {sorted(extra)}; contract reads not made "
                   f"{sorted(missing)}" + (f" (first extra: {got[0].op} in {got[0].stage})" if got and extra else ""),
                   variant, field="host_syncs", expected=sorted(need.elements()), actual=sorted(have.elements()))


def check_p7_sync_contract(subject: DSASubject, batch: DSABatch) -> list[str]:
    """Eager builds read exactly the contract's reads; a capture's out-graph work exactly the capture's; a replay
    nothing; pageable copies: the eager contract's at most, none in a replay."""
    batch = clean(batch)
    notes: list[str] = []
    for variant in variants_for(batch):
        if variant.path == "eager":
            with building("P7", variant):
                build = subject.build(batch, variant)
            _contract("dsa.p7.sync_contract", variant, build.syncs, expected_syncs(batch, variant, "eager"),
                      "eager build")
            notes += _copies(batch, variant, build)
            continue
        fresh = subject.fresh()
        with building("P7", variant):
            runner = fresh.runner_for(batch, variant)
            capture = fresh.capture_all(runner, batch.mode, batch.draft_step)[0]
            replayed = fresh.replay(runner, batch)
        _contract("dsa.p7.capture_sync_contract", variant, capture.syncs, expected_syncs(batch, variant, "capture"),
                  "capture (out-graph)")
        if capture.host_reads:
            raise fail("P7", "dsa.p7.capture_host_read", f"recorded work reads host memory: {capture.host_reads[0]}",
                       variant, field="in_graph", expected="graph state only", actual=str(capture.host_reads[0]))
        if replayed.syncs:
            first = replayed.syncs[0]
            raise fail("P7", "dsa.p7.replay_synced", f"a replay read the device back: {first.op} in {first.stage}",
                       variant, field="host_syncs", expected=[], actual=[(s.op, s.stage) for s in replayed.syncs])
        if replayed.copies:
            first = replayed.copies[0]
            raise fail("P7", "dsa.p7.replay_pageable_copy", f"a replay copied host memory to the device: {first.op} "
                       f"in {first.stage} (pageable: {first.pageable})", variant, field="h2d_copies", expected=[],
                       actual=[(c.op, c.stage) for c in replayed.copies])
    return notes


def _copies(batch: DSABatch, variant: DSAVariant, build: DSABuild) -> list[str]:
    pageable = [c for c in build.copies if c.pageable]
    allowed = expected_h2d_copies(batch, variant, "eager")
    if len(pageable) > allowed:
        extra = pageable[allowed]
        raise fail("P7", "dsa.p7.copy_contract", f"a pageable host-to-device copy the contract does not list: "
                   f"{extra.op} in {extra.stage}", variant, field="h2d_copies", expected=allowed, actual=len(pageable))
    return [f"P7 [{variant.label}]: pageable host-to-device copy {c.op} in {c.stage} (the host blocks until staged)"
            for c in pageable]


def check_p8_inputs_untouched(subject: DSASubject, batch: DSABatch) -> list[str]:
    """No device input changes; the caller's host fields change only where declared, to the declared value."""
    batch = clean(batch)
    notes: list[str] = []
    for variant in variants_for(batch):
        with building("P8", variant):
            build = subject.build(batch, variant)
        declared = CALLER_WRITES.get(batch.mode, {}).get(variant.path, frozenset())
        values = caller_writes(batch, variant)
        for name, (before, after) in sorted(build.input_changes.items()):
            if name in DEVICE_INPUTS:
                raise fail("P8", "dsa.p8.input_written", f"the build wrote the caller's device tensor {name}",
                           variant, field=name, expected=before, actual=after)
            if name not in declared:
                raise fail("P8", "dsa.p8.caller_write_undeclared", f"the build stored the caller's {name}, which "
                           f"{batch.mode} on the {variant.path} path may not write (declared: {sorted(declared)})",
                           variant, field=name, expected=before, actual=after)
            if after != values.get(name):
                raise fail("P8", "dsa.p8.caller_write_value", f"the build stored a wrong value in the caller's {name}",
                           variant, field=name, expected=values.get(name), actual=after)
            notes.append(f"P8 [{variant.label}]: stored the caller's {name} = {after} (declared)")
    return notes
