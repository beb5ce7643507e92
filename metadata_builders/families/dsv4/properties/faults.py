"""P6: the HIP fault model -- with diverging device lengths, exactly the trusting maps fault."""

from __future__ import annotations

from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.metadata import PLANNER_OP, first_difference
from metadata_builders.families.dsv4.properties._common import (
    _clean,
    _fail,
    _label,
    _padding,
    _reference,
    _variants,
    judging,
)
from metadata_builders.families.dsv4.reference import expected_faults
from metadata_builders.families.dsv4.tier import host_total
from metadata_builders.families.dsv4.variants import divergence_applies


@judging
def check_p6_fault_model(builder, batch: VerifyBatch) -> list[str]:
    """P6: with diverging device lengths, exactly the maps that trusted a host count fault, as modelled.

    The harness delivers the divergence (the device layout it hands in; the
    builder's own asynchronous copies), so the builder is judged on what it does.
    A fault the model does not predict fails: a synced map, EAGLE under the dspark
    gate, a ragged total taken from the host and trusted, any out-of-bounds read.
    A predicted fault must match in kind and count; a build that avoids a predicted
    fault (its device lengths never took the async copy) is noted, not failed.
    An uncapped padded tier never passes ``output_size``.  A compress planner never
    writes past its plan buffers (F9: upstream's kernel0 from 0.5.21, planning the
    graph path from device extend lengths a stale copy made sum past the tier).
    """
    notes: list[str] = []
    clean = _clean(batch)
    for variant in _variants(builder, batch, notes):
        actual = builder.build(batch, variant)
        modelled = expected_faults(batch, variant, padding=_padding(builder))
        want = [(f.kind, f.count) for f in modelled if f.kind != "oob_read"]
        planner = [f for f in actual.audit.faults if f.op == PLANNER_OP]
        if planner:
            raise _fail("P6", variant, f"the compress planner wrote {sum(f.count for f in planner)} plan entries past "
                        f"its buffers of {planner[0].output_size} rows (device extend lengths summing past them: F9); "
                        "no variant may", field="audit.faults", expected=[],
                        actual=[(f.kind, f.count) for f in planner], check="p6.planner_overflow",
                        where=planner[0].stage)
        got = [(f.kind, f.count) for f in actual.audit.faults]
        oob = [f for f in actual.audit.faults if f.kind == "oob_read"]
        if oob:
            model = [f.count for f in modelled if f.kind == "oob_read"]
            raise _fail("P6", variant, f"out-of-bounds read in {oob[0].stage} ({oob[0].op}); no variant may perform one"
                        + (f" (a literal gather reads {model[0]} elements past req_to_token here: F2c)"
                           if model else ""),
                        field="audit.faults", expected=[], actual=got, check="p6.oob_read", where=oob[0].stage)
        used = actual.decision.used_output_size
        if got and not used:
            first = actual.audit.faults[0]
            raise _fail("P6", variant, f"a synced token map faulted ({first.op} in {first.stage})",
                        field="audit.faults", expected=[], actual=got, check="p6.synced_map_faulted", where=first.stage)
        if got and not batch.is_dspark and variant.gate == "dspark":
            raise _fail("P6", variant, "EAGLE faulted under the dspark gate", field="audit.faults", expected=[],
                        actual=got, check="p6.eagle_faulted_under_dspark", where=actual.audit.faults[0].stage)
        g = batch.graph
        if variant.path == "graph" and batch.is_ragged and g is not None and used and host_total(
                batch.verify_lens, g.padded_bs, g.graph_num_tokens, g.cap, _padding(builder)) is not None:
            raise _fail("P6", variant, "a tier whose total the host knows passed output_size (it trusts a host "
                        "count against device lengths)", field="decision.used_output_size",
                        expected=False, actual=True, check="p6.uncapped_output_size")
        if got != want:
            if got or not want:
                raise _fail("P6", variant, "device faults differ from the HIP model", field="audit.faults",
                            expected=want, actual=got, check="p6.faults_vs_model",
                            where=actual.audit.faults[0].stage if actual.audit.faults else None)
            notes.append(f"{_label(variant)}: the model predicts {want} but this build's device lengths never took the "
                         f"diverging copy (delivered {actual.audit.divergence_delivered}x): no exposure")
        if used and not got and batch.divergence is not None and divergence_applies(batch, variant):
            mismatch = first_difference(_reference(builder).build(clean, variant).fields, actual.fields)
            if mismatch is not None and len(notes) < 5:
                notes.append(f"{_label(variant)}: no fault, but wrong metadata (silent on HIP): {mismatch}")
    return notes
