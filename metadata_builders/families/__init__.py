"""Backend families: one package per family (DESIGN.md sections 4 and 6).

============  ===========================================================================================
package       the family
============  ===========================================================================================
``dsv4``      SGLang's DeepSeek-V4 backend (HIP radix and CUDA): target verify and the MTP step's modes
``dsa``       SGLang's DSA backend (``DeepseekSparseAttnBackend``: DeepSeek-V3.2, GLM-5.x): its speculative path
============  ===========================================================================================

A family package holds everything one backend's metadata means: its batch model and geometry, its field table,
the pure-Python reference, the bundled builder, the adapter of upstream's code, the state model P10 judges.
``metadata-builders check --family NAME`` runs one (``dsv4``, the default, is the whole CLI; ``dsa`` runs
:func:`metadata_builders.families.dsa.check.run_check`).
"""

from __future__ import annotations

FAMILIES: tuple[str, ...] = ("dsv4", "dsa")
"""The families this release knows, the default first."""

DEFAULT_FAMILY = FAMILIES[0]

__all__ = ["DEFAULT_FAMILY", "FAMILIES"]
