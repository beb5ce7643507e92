"""metadata-builders: a property-based correctness harness for the metadata builders of SGLang's attention
backends (DeepSeek-V4 HIP radix, DSA).

The public line: the names below, and ``strategies``.  Each is imported when first used (PEP 562), so importing the
package -- the pytest plugin does in every session of an environment where the harness is installed -- costs
nothing but this file; torch is imported only by what needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata_builders.errors import (
        BuilderNotFound,
        InvalidBatch,
        InvalidVariant,
        MetadataBuildersError,
        PropertyFailure,
    )
    from metadata_builders.families.dsv4.batch import SCHEMA, Compression, Divergence, Geometry, GraphTier, VerifyBatch
    from metadata_builders.families.dsv4.builders import AuditedBuilder, Builder, GraphPhases, get_builder
    from metadata_builders.families.dsv4.errors import StaleMirror
    from metadata_builders.families.dsv4.hip import HipBuilder, Layout
    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.metadata import (
        FIELD_NAMES,
        Audit,
        Decision,
        FaultRecord,
        InputChange,
        Mismatch,
        SyncRecord,
        TokenMap,
        VerifyMetadata,
    )
    from metadata_builders.families.dsv4.properties import (
        check_p1_reference,
        check_p2_mirror,
        check_p3_sync_free,
        check_p4_gate,
        check_p5_graph_vs_eager,
        check_p6_fault_model,
        check_p7_capture_safety,
        check_p8_inputs_untouched,
        check_p9_no_hidden_state,
        check_p10_kv_state,
    )
    from metadata_builders.families.dsv4.properties.spec import Focus, batches_for, focuses_for
    from metadata_builders.families.dsv4.reference import ReferenceBuilder
    from metadata_builders.families.dsv4.variants import Variant, divergence_applies, variants_for

__all__ = [
    "FIELD_NAMES",
    "SCHEMA",
    "Audit",
    "AuditedBuilder",
    "Builder",
    "BuilderNotFound",
    "Compression",
    "Decision",
    "Divergence",
    "FaultRecord",
    "Focus",
    "Geometry",
    "GraphPhases",
    "GraphTier",
    "HipBuilder",
    "InputChange",
    "InvalidBatch",
    "InvalidVariant",
    "Layout",
    "MetadataBuildersError",
    "Mismatch",
    "PropertyFailure",
    "ReferenceBuilder",
    "StaleMirror",
    "SyncRecord",
    "TokenMap",
    "Variant",
    "VerifyBatch",
    "VerifyInputs",
    "VerifyMetadata",
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
    "divergence_applies",
    "focuses_for",
    "get_builder",
    "variants_for",
]

__version__ = "0.3.0"

_PUBLIC: dict[str, str] = {
    "Audit": "metadata_builders.families.dsv4.metadata",
    "check_p1_reference": "metadata_builders.families.dsv4.properties",
    "check_p2_mirror": "metadata_builders.families.dsv4.properties",
    "check_p3_sync_free": "metadata_builders.families.dsv4.properties",
    "check_p4_gate": "metadata_builders.families.dsv4.properties",
    "check_p5_graph_vs_eager": "metadata_builders.families.dsv4.properties",
    "check_p6_fault_model": "metadata_builders.families.dsv4.properties",
    "check_p7_capture_safety": "metadata_builders.families.dsv4.properties",
    "check_p8_inputs_untouched": "metadata_builders.families.dsv4.properties",
    "check_p9_no_hidden_state": "metadata_builders.families.dsv4.properties",
    "check_p10_kv_state": "metadata_builders.families.dsv4.properties",
    "AuditedBuilder": "metadata_builders.families.dsv4.builders",
    "batches_for": "metadata_builders.families.dsv4.properties.spec",
    "Builder": "metadata_builders.families.dsv4.builders",
    "BuilderNotFound": "metadata_builders.errors",
    "Compression": "metadata_builders.families.dsv4.batch",
    "Decision": "metadata_builders.families.dsv4.metadata",
    "Divergence": "metadata_builders.families.dsv4.batch",
    "divergence_applies": "metadata_builders.families.dsv4.variants",
    "FaultRecord": "metadata_builders.families.dsv4.metadata",
    "FIELD_NAMES": "metadata_builders.families.dsv4.metadata",
    "Focus": "metadata_builders.families.dsv4.properties.spec",
    "focuses_for": "metadata_builders.families.dsv4.properties.spec",
    "Geometry": "metadata_builders.families.dsv4.batch",
    "get_builder": "metadata_builders.families.dsv4.builders",
    "GraphPhases": "metadata_builders.families.dsv4.builders",
    "GraphTier": "metadata_builders.families.dsv4.batch",
    "HipBuilder": "metadata_builders.families.dsv4.hip",
    "InputChange": "metadata_builders.families.dsv4.metadata",
    "InvalidBatch": "metadata_builders.errors",
    "InvalidVariant": "metadata_builders.errors",
    "Layout": "metadata_builders.families.dsv4.hip",
    "MetadataBuildersError": "metadata_builders.errors",
    "Mismatch": "metadata_builders.families.dsv4.metadata",
    "PropertyFailure": "metadata_builders.errors",
    "ReferenceBuilder": "metadata_builders.families.dsv4.reference",
    "SCHEMA": "metadata_builders.families.dsv4.batch",
    "StaleMirror": "metadata_builders.families.dsv4.errors",
    "SyncRecord": "metadata_builders.families.dsv4.metadata",
    "TokenMap": "metadata_builders.families.dsv4.metadata",
    "Variant": "metadata_builders.families.dsv4.variants",
    "variants_for": "metadata_builders.families.dsv4.variants",
    "VerifyBatch": "metadata_builders.families.dsv4.batch",
    "VerifyInputs": "metadata_builders.families.dsv4.inputs",
    "VerifyMetadata": "metadata_builders.families.dsv4.metadata",
}
"""Each public name and the module it lives in."""


def __getattr__(name: str) -> object:
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value  # the next access is a plain attribute
        return value
    raise AttributeError(f"module 'metadata_builders' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
