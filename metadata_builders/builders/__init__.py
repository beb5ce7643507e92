"""Builders: the contract, running one under the harness, and the names they are known by.

=============  ====================================================================================
module         what it holds
=============  ====================================================================================
``contract``   the ``Builder`` / ``GraphPhases`` / ``GraphBuilder`` protocols a builder may offer
``audited``    :class:`AuditedBuilder` (inputs, audit, capture and replay of one builder), the memo
``registry``   the names (``reference``, ``hip``, ``sglang``, ``module:attr``) and :func:`get_builder`
=============  ====================================================================================

``get_builder`` wraps every builder but the reference in :class:`AuditedBuilder`,
whose ``build(batch, variant)`` is what properties, the CLI and users call.
"""

from __future__ import annotations

from metadata_builders.builders.audited import AuditedBuilder, Captured, MemoBuilder, construct, plain_fields
from metadata_builders.builders.contract import HISTORY, Builder, GraphBuilder, GraphPhases
from metadata_builders.builders.registry import (
    REGISTERED,
    check_builder_name,
    get_builder,
    importable_anywhere,
    importable_hint,
    module_root,
    replay_env,
)
from metadata_builders.devices import resolve_device

_construct = construct  # the name tests and notebooks of 0.2 used

__all__ = [
    "HISTORY",
    "REGISTERED",
    "AuditedBuilder",
    "Builder",
    "Captured",
    "GraphBuilder",
    "GraphPhases",
    "MemoBuilder",
    "check_builder_name",
    "construct",
    "get_builder",
    "importable_anywhere",
    "importable_hint",
    "module_root",
    "plain_fields",
    "replay_env",
    "resolve_device",
]
