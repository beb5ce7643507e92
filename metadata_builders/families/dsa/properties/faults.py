"""P6 for the DSA family: the fault site, ``seqlens_expand_triton``'s host-sized output and device-placed stores.

Every build is run under the family's device model (:mod:`~metadata_builders.families.dsa.device_model`): the
kernel's stores are modelled before any is made, a store past the output is counted and never made.  P6 holds
when the faults the model reports are exactly the reference's (:func:`~..reference.expected_faults`): on
diverged device lengths, eager draft extend's ``oob_write`` of ``k`` elements (device sum above the host total)
or ``uninitialized_tail`` of ``k`` (below, or a row longer than ``BLOCK``); on every clean build, none.
Worked example: the family's batch in draft extend with device lengths ``[3, 4]`` against the host's
``[3, 3]``: ``oob_write`` 1 on both eager variants, nothing on the graph path (its lengths are filled on the
device from the same ``N`` the total is made of).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from metadata_builders.families.dsa.properties.common import building, fail
from metadata_builders.families.dsa.reference import EXPAND_OP, expected_faults
from metadata_builders.families.dsa.variants import variants_for

if TYPE_CHECKING:
    from metadata_builders.families.dsa.audited import DSASubject
    from metadata_builders.families.dsa.batch import DSABatch

__all__ = ["check_p6_fault_model"]


def check_p6_fault_model(subject: DSASubject, batch: DSABatch) -> list[str]:
    """Every variant's reported faults are the model's prediction; a predicted fault is described in a note."""
    notes: list[str] = []
    for variant in variants_for(batch):
        with building("P6", variant):
            build = subject.build(batch, variant)
        expected = Counter((f.kind, f.count, f.output_size, f.device_sum) for f in expected_faults(batch, variant))
        got = Counter((f.kind, f.count, f.output_size, f.device_sum) for f in build.faults if f.op == EXPAND_OP)
        others = [f for f in build.faults if f.op != EXPAND_OP]
        if others:
            raise fail("P6", "dsa.p6.fault_on_clean", f"the device model saw {others[0].kind} in {others[0].op}",
                       variant, field=others[0].op, expected="no fault", actual=others[0].to_dict())
        if expected != got:
            check = "dsa.p6.faults_vs_model" if expected else "dsa.p6.fault_on_clean"
            raise fail("P6", check, "the faults reported differ from the model's (kind, count, output size, device "
                       "sum)", variant, field="dsa_seqlens_expanded", expected=sorted(expected.elements()),
                       actual=sorted(got.elements()))
        for kind, count, size, device_sum in sorted(expected.elements()):
            notes.append(f"P6 [{variant.label}]: seqlens_expand_kernel {kind} of {count} element(s): output of "
                         f"{size} (host total) for device lengths summing to {device_sum}; modelled before any "
                         "store, none made past the buffer")
    return notes
