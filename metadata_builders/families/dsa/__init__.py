"""The DSA family: SGLang's ``DeepseekSparseAttnBackend`` (DeepSeek-V3.2, GLM-5.x) on its speculative path, every mode
(DESIGN.md section 6; docs/DSA.md).

================  =====================================================================================
module            what it holds
================  =====================================================================================
``batch``         :class:`DSABatch`: one speculative step as plain data, its modes, JSON and validation
``fields``        the field table: what a build of ``DSAMetadata`` holds, shapes, dtypes, groups
``variants``      every way a builder assembles the same metadata for one batch
``reference``     the specification, pure Python, one function per stage
``builder``       :class:`DSABuilder`, the bundled torch builder: upstream's HIP path stage by stage
``adapter``       the installed SGLang's own DSA metadata code on CPU (``SGLangDSABuilder``)
``inputs``        :class:`DSAInputs`: what the harness hands a DSA builder
``runner``        the graph runner double: captured batch sizes as views of max-size buffers
``audited``       the family's audited wrapper (``DSASubject``)
``device_model``  ``seqlens_expand_kernel``'s stores as a GPU performs them (the fault site)
``transfers``     host-to-device copies as the driver sees them (P7)
``properties``    P1-P10, each ``check_pN(subject, batch) -> notes``, and :data:`PROPERTIES`
``strategies``    Hypothesis strategies: :func:`dsa_batches` and their parts
``check``         ``check --family dsa``: every property, a per-mode table, a verdict (:func:`run_check`)
``gate``          the family's pre-merge gate
``findings``      known upstream findings, keyed by check id and release
``mutants``       the family's mutant catalogue (``metadata_builders.families.dsa.mutants:<name>`` as a builder)
``__main__``      the family's command line (``metadata-builders check|replay|mutants|gate --family dsa``)
================  =====================================================================================

The names a test of one's own needs are this package's public line (``from metadata_builders.families.dsa import
DSABuilder, dsa_batches, PROPERTIES``), imported on first use: importing the package imports no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata_builders.families.dsa.batch import MODES, DSABatch
    from metadata_builders.families.dsa.builder import DSABuilder
    from metadata_builders.families.dsa.check import not_applicable, run_check
    from metadata_builders.families.dsa.inputs import DSAInputs
    from metadata_builders.families.dsa.properties import PROPERTIES
    from metadata_builders.families.dsa.strategies import dsa_batches

__all__ = ["MODES", "PROPERTIES", "DSABatch", "DSABuilder", "DSAInputs", "dsa_batches", "not_applicable", "run_check"]

_PUBLIC: dict[str, str] = {
    "DSABatch": "metadata_builders.families.dsa.batch",
    "DSABuilder": "metadata_builders.families.dsa.builder",
    "DSAInputs": "metadata_builders.families.dsa.inputs",
    "MODES": "metadata_builders.families.dsa.batch",
    "PROPERTIES": "metadata_builders.families.dsa.properties",
    "dsa_batches": "metadata_builders.families.dsa.strategies",
    "not_applicable": "metadata_builders.families.dsa.check",
    "run_check": "metadata_builders.families.dsa.check",
}
"""Each public name and the module it lives in."""


def __getattr__(name: str) -> object:
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value  # the next access is a plain attribute
        return value
    raise AttributeError(f"module 'metadata_builders.families.dsa' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
