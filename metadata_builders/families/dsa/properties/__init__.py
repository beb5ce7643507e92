"""The DSA family's properties P1-P10 (DESIGN.md section 6), each a ``check_pN(subject, batch) -> notes``.

A check takes a :class:`~metadata_builders.families.dsa.audited.DSASubject` and one batch and raises
:class:`~metadata_builders.errors.PropertyFailure` at the first violation, with a check id of
:data:`CHECK_IDS` (namespace ``dsa.``), the variant, the field, the first differing index and both values; it
returns notes (what holds but a person should know, and what it could not judge).

==========  =========================================  ===============================================
property    function                                   module
==========  =========================================  ===============================================
P1          :func:`check_p1_reference`                 ``equality`` (+ P3, P4)
P2          :func:`check_p2_mirror`                    ``mirror``
P3          :func:`check_p3_host_total`                ``equality``
P4          :func:`check_p4_gate` (does not apply)     ``equality``
P5          :func:`check_p5_graph_vs_eager`            ``graph``
P6          :func:`check_p6_fault_model`               ``faults``
P7          :func:`check_p7_sync_contract`             ``syncs`` (+ P8)
P8          :func:`check_p8_inputs_untouched`          ``syncs``
P9          :func:`check_p9_no_hidden_state`           ``state`` (+ P10)
P10         :func:`check_p10_reads`                    ``state``
==========  =========================================  ===============================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from metadata_builders.families.dsa.properties.common import CHECK_IDS, DSACheckId
from metadata_builders.families.dsa.properties.equality import (
    check_p1_reference,
    check_p3_host_total,
    check_p4_gate,
)
from metadata_builders.families.dsa.properties.faults import check_p6_fault_model
from metadata_builders.families.dsa.properties.graph import (
    check_p5_graph_vs_eager,
    replay_sequence,
)
from metadata_builders.families.dsa.properties.mirror import check_p2_mirror
from metadata_builders.families.dsa.properties.state import (
    check_p9_no_hidden_state,
    check_p10_reads,
    history_for,
)
from metadata_builders.families.dsa.properties.syncs import (
    check_p7_sync_contract,
    check_p8_inputs_untouched,
)

if TYPE_CHECKING:
    from metadata_builders.families.dsa.audited import DSASubject
    from metadata_builders.families.dsa.batch import DSABatch

__all__ = [
    "CHECK_IDS",
    "PROPERTIES",
    "DSACheckId",
    "check_all",
    "check_p1_reference",
    "check_p2_mirror",
    "check_p3_host_total",
    "check_p4_gate",
    "check_p5_graph_vs_eager",
    "check_p6_fault_model",
    "check_p7_sync_contract",
    "check_p8_inputs_untouched",
    "check_p9_no_hidden_state",
    "check_p10_reads",
    "history_for",
    "replay_sequence",
]

PROPERTIES: dict[str, Callable[[DSASubject, DSABatch], list[str]]] = {
    "P1": check_p1_reference,
    "P2": check_p2_mirror,
    "P3": check_p3_host_total,
    "P4": check_p4_gate,
    "P5": check_p5_graph_vs_eager,
    "P6": check_p6_fault_model,
    "P7": check_p7_sync_contract,
    "P8": check_p8_inputs_untouched,
    "P9": check_p9_no_hidden_state,
    "P10": check_p10_reads,
}
"""Every property of the family, in order."""


def check_all(subject: DSASubject, batch: DSABatch, only: tuple[str, ...] | None = None) -> dict[str, list[str]]:
    """Run every property (or ``only`` those) on one batch; the first failure raises; returns each one's notes."""
    return {name: check(subject, batch) for name, check in PROPERTIES.items() if only is None or name in only}
