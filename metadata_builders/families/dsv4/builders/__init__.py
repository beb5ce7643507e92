"""Builders: the contract, running one under the harness, and the names they are known by.

=============  ====================================================================================
module         what it holds
=============  ====================================================================================
``contract``   the ``Builder`` / ``GraphPhases`` / ``GraphBuilder`` protocols a builder may offer
``audited``    :class:`AuditedBuilder` (inputs, audit, capture and replay of one builder), the memo
``capabilities`` what a builder can be judged on, read once from its class (never probed by a property)
``registry``   the names (``reference``, ``hip``, ``sglang``, ``module:attr``), their routes, :func:`get_builder`
=============  ====================================================================================

``get_builder`` wraps every builder but the reference in :class:`AuditedBuilder`,
whose ``build(batch, variant)`` is what properties, the CLI and users call.
"""

from __future__ import annotations

from metadata_builders.devices import resolve_device
from metadata_builders.families.dsv4.builders.audited import AuditedBuilder, Captured, MemoBuilder, plain_fields
from metadata_builders.families.dsv4.builders.capabilities import Capabilities, capabilities_of
from metadata_builders.families.dsv4.builders.contract import HISTORY, Builder, GraphBuilder, GraphPhases
from metadata_builders.families.dsv4.builders.registry import (
    REGISTERED,
    REGISTRY,
    Registration,
    Route,
    check_builder_name,
    check_declarations,
    get_builder,
    registration,
    routes_of,
)

__all__ = [
    "HISTORY",
    "REGISTERED",
    "REGISTRY",
    "AuditedBuilder",
    "Builder",
    "Capabilities",
    "Captured",
    "GraphBuilder",
    "GraphPhases",
    "MemoBuilder",
    "Registration",
    "Route",
    "capabilities_of",
    "check_builder_name",
    "check_declarations",
    "get_builder",
    "plain_fields",
    "registration",
    "resolve_device",
    "routes_of",
]
