"""The DSA family's mutant catalogue: data (:mod:`.catalogue`, torch-free), patching (:mod:`.patching`) and the
run that kills them (:func:`metadata_builders.families.dsa.check.run_mutants`)."""

from __future__ import annotations

from metadata_builders.families.dsa.mutants.catalogue import MUTANTS, DSAMutantSpec

__all__ = ["MUTANTS", "DSAMutantSpec"]


def __getattr__(name: str) -> type:
    """``metadata_builders.families.dsa.mutants:<mutant>`` is the bundled builder with that mutant planted, as a
    ``--builder``/``--mb-builder`` names it (made on first access, so importing the catalogue stays torch-free)."""
    if any(spec.name == name for spec in MUTANTS):
        from metadata_builders.families.dsa.mutants.patching import mutant_builder

        return mutant_builder(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r} (no mutant of the DSA catalogue)")
