"""Properties P1-P10 of docs/DESIGN.md section 3, as checks any builder can be put to.

Each ``check_*`` takes a builder (an audited one from
:func:`~metadata_builders.get_builder`) and one batch, and raises
:class:`~metadata_builders.errors.PropertyFailure` at the first violation,
naming property, variant, field, index and both values.  It returns a list of
notes: things that hold but a person should know (a divergence that corrupts
metadata silently).  A note of type :class:`Partial` says the property could
not fully run for this builder (no capture/replay, a variant it cannot
express, a token map the audit never saw): the verdict is then ``partial``,
never a silent ``held``.

The checks are plain functions so the CLI, the pytest plugin and a user's own
Hypothesis test all drive the same code.
"""

from __future__ import annotations

from metadata_builders.families.dsv4.properties._common import Partial, collecting_tallies
from metadata_builders.families.dsv4.properties.equality import (
                                                   check_p1_reference,
                                                   check_p3_sync_free,
                                                   check_p4_gate,
                                                   p1_differences,
)
from metadata_builders.families.dsv4.properties.faults import check_p6_fault_model
from metadata_builders.families.dsv4.properties.graph import check_p5_graph_vs_eager
from metadata_builders.families.dsv4.properties.kv import check_p10_kv_state
from metadata_builders.families.dsv4.properties.mirror import check_p2_mirror
from metadata_builders.families.dsv4.properties.sequences import (
                                                   fewer_requests_batch,
                                                   filled_tier_batch,
                                                   replay_sequence,
                                                   same_tier_batch,
)
from metadata_builders.families.dsv4.properties.spec import (
                                                   PROPERTIES,
                                                   Focus,
                                                   PropertyResult,
                                                   PropertySpec,
                                                   batches_for,
                                                   focuses_for,
                                                   run_all,
                                                   verdict,
)
from metadata_builders.families.dsv4.properties.state import (
                                                   check_p8_inputs_untouched,
                                                   check_p9_no_hidden_state,
                                                   history_for,
)
from metadata_builders.families.dsv4.properties.syncs import check_p7_capture_safety, check_sync_contract, contract_role

__all__ = [
    "PROPERTIES",
    "Focus",
    "Partial",
    "PropertyResult",
    "PropertySpec",
    "batches_for",
    "check_p10_kv_state",
    "check_p1_reference",
    "check_p2_mirror",
    "check_p3_sync_free",
    "check_p4_gate",
    "check_p5_graph_vs_eager",
    "check_p6_fault_model",
    "check_p7_capture_safety",
    "check_p8_inputs_untouched",
    "check_p9_no_hidden_state",
    "check_sync_contract",
    "collecting_tallies",
    "contract_role",
    "fewer_requests_batch",
    "filled_tier_batch",
    "focuses_for",
    "history_for",
    "p1_differences",
    "replay_sequence",
    "run_all",
    "same_tier_batch",
    "verdict",
]
