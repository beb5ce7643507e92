"""The DSA family's mutant catalogue: data (:mod:`.catalogue`, torch-free), patching (:mod:`.patching`) and the
run that kills them (:func:`metadata_builders.families.dsa.check.run_mutants`)."""

from __future__ import annotations

from metadata_builders.families.dsa.mutants.catalogue import MUTANTS, DSAMutantSpec

__all__ = ["MUTANTS", "DSAMutantSpec"]
