"""The mutant catalogue: small, realistic faults in the ``hip`` builder, each one the harness must kill.

=================  ==========================================================================
module             what it holds
=================  ==========================================================================
``catalogue``      :class:`MutantSpec` and :data:`MUTANTS`: each mutant's stage, bug class,
                   summary, ``find`` -> ``replace`` edit and the incident it resembles (data)
``patching``       :func:`mutated_source`, :class:`MutantBuilder`, :func:`mutant_builder`:
                   the edit compiled in ``hip``'s namespace and patched in for each build
``runner``         :func:`run_mutant`, :func:`select_mutants` and ``metadata-builders mutants``
=================  ==========================================================================

Worked example (``causal_start_off_by_one``): stage ``causal_expansion``::

    - casual = layout.seq_lens.to(_I64)[r] - extend[r] + 1 + (t - start[r])
    + casual = layout.seq_lens.to(_I64)[r] - extend[r] + (t - start[r])

A request with ``seq_lens=[5]`` verifying 2 tokens then reports
``seq_lens_casual = [5, 6]`` instead of ``[6, 7]``; P1 names the field, the
first token and both values.

Every mutant is also a ``module:attr`` factory of this package::

    metadata-builders check --builder metadata_builders.families.dsv4.mutants:dropped_dspark_gate

and ``metadata-builders mutants`` runs the ``ci`` profile against each one.
Importing the package does not import torch: :class:`MutantBuilder` is created
on first access (PEP 562 ``__getattr__``).
"""

from __future__ import annotations

from typing import Any

from metadata_builders.errors import MutantDoesNotApply
from metadata_builders.families.dsv4.mutants.catalogue import MUTANTS, MutantSpec
from metadata_builders.families.dsv4.mutants.patching import (
    FACTORIES,
    mutant_builder,
    mutant_builder_class,
    mutated_source,
)
from metadata_builders.families.dsv4.mutants.runner import add_cli, batch_size, run_mutant, select_mutants

__all__ = [
    "MUTANTS",
    "MutantBuilder",  # noqa: F822 - created on first access (module __getattr__), so import stays torch-free
    "MutantDoesNotApply",
    "MutantSpec",
    "add_cli",
    "batch_size",
    "mutant_builder",
    "mutated_source",
    "run_mutant",
    "select_mutants",
]

globals().update(FACTORIES)
__all__ += sorted(FACTORIES)  # noqa: PLE0605 - one module:attr factory per mutant


def __getattr__(name: str) -> Any:
    # PEP 562: ``MutantBuilder`` is created on first access (it subclasses the torch builder).
    if name == "MutantBuilder":
        return mutant_builder_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
