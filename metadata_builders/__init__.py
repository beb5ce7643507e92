"""metadata-builders: a property-based correctness harness for SGLang's
DeepSeek-V4 HIP target-verify metadata builders.

The public surface is re-exported here; everything else lives in modules or
underscore names.  torch is imported lazily: the batch model and the reference
work without it.
"""

from __future__ import annotations

from metadata_builders.families.dsv4.batch import SCHEMA, Compression, Divergence, Geometry, GraphTier, VerifyBatch
from metadata_builders.builders import AuditedBuilder, Builder, GraphPhases, get_builder
from metadata_builders.errors import (
    BuilderNotFound,
    InvalidBatch,
    InvalidVariant,
    MetadataBuildersError,
    PropertyFailure,
    StaleMirror,
)
from metadata_builders.harness.inputs import VerifyInputs
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
from metadata_builders.families.dsv4.reference import ReferenceBuilder
from metadata_builders.properties.spec import Focus, batches_for, focuses_for
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
    "batches_for",
    "divergence_applies",
    "focuses_for",
    "get_builder",
    "variants_for",
]

__version__ = "0.3.0"

_MOVED = {
    "GraphBuilder": ("metadata_builders.builders.contract", "GraphBuilder"),
    "apply_gate": ("metadata_builders.families.dsv4.variants", "apply_gate"),
    "first_difference": ("metadata_builders.families.dsv4.metadata", "first_difference"),
    "resolve_device": ("metadata_builders.devices", "resolve_device"),
}
"""0.2 exported these helpers from the facade; they are no interface (DESIGN.md section 4).  One release more
they still import from here, with a DeprecationWarning naming their module."""


def __getattr__(name: str) -> object:
    if name in _MOVED:
        import importlib
        import warnings

        module, attr = _MOVED[name]
        warnings.warn(f"metadata_builders.{name} is no interface; import it from {module}", DeprecationWarning,
                      stacklevel=2)
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'metadata_builders' has no attribute {name!r}")
