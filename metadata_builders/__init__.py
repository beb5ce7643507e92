"""metadata-builders: a property-based correctness harness for SGLang's
DeepSeek-V4 HIP target-verify metadata builders.

The public surface is re-exported here; everything else lives in modules or
underscore names.  torch is imported lazily: the batch model and the reference
work without it.
"""

from __future__ import annotations

from metadata_builders.batch import SCHEMA, Compression, Divergence, Geometry, GraphTier, VerifyBatch
from metadata_builders.builders import AuditedBuilder, Builder, GraphBuilder, GraphPhases, get_builder, resolve_device
from metadata_builders.errors import (
    BuilderNotFound,
    InvalidBatch,
    InvalidVariant,
    MetadataBuildersError,
    PropertyFailure,
    StaleMirror,
)
from metadata_builders.inputs import VerifyInputs
from metadata_builders.metadata import (
    FIELD_NAMES,
    Audit,
    Decision,
    FaultRecord,
    InputChange,
    Mismatch,
    SyncRecord,
    TokenMap,
    VerifyMetadata,
    first_difference,
)
from metadata_builders.reference import ReferenceBuilder
from metadata_builders.variants import Variant, apply_gate, divergence_applies, variants_for

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
    "Geometry",
    "GraphBuilder",
    "GraphPhases",
    "GraphTier",
    "InputChange",
    "InvalidBatch",
    "InvalidVariant",
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
    "apply_gate",
    "divergence_applies",
    "first_difference",
    "get_builder",
    "resolve_device",
    "variants_for",
]

__version__ = "0.2.0"
