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

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

FAMILIES: tuple[str, ...] = ("dsv4", "dsa")
"""The families this release knows, the default first."""

DEFAULT_FAMILY = FAMILIES[0]

FAMILY_HELP = "the backend family: " + ", ".join(FAMILIES) + f" (default {DEFAULT_FAMILY})"


def split_family(argv: Sequence[str]) -> tuple[str, list[str]]:
    """``--family NAME`` (or ``--family=NAME``) taken out of a command line: (NAME or the default, the rest).

    Worked example: ``["check", "--family", "dsa", "--profile", "ci"]`` -> ``("dsa", ["check", "--profile", "ci"])``.
    A family this release does not know raises :class:`~metadata_builders.errors.UsageError` naming the known ones.
    """
    rest, family, args = [], DEFAULT_FAMILY, list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--family" and args:
            family = args.pop(0)
        elif arg.startswith("--family="):
            family = arg.partition("=")[2]
        else:
            rest.append(arg)
    if family not in FAMILIES:
        from metadata_builders.errors import UsageError

        raise UsageError("--family", "one of " + ", ".join(FAMILIES), family)
    return family, rest


def family_main(family: str, argv: list[str]) -> int:
    """Run a family's own command line (``metadata_builders.families.<family>.__main__.main``) on ``argv``."""
    return int(importlib.import_module(f"metadata_builders.families.{family}.__main__").main(argv))


def family_module(family: str, module: str) -> ModuleType:
    """One of a family's modules the core takes a piece from by name: ``__main__`` (its command line: ``main``,
    ``synopsis``), ``plugin`` (what the pytest plugin needs of the default family).  The core imports no family
    module itself; the family's name is data."""
    return importlib.import_module(f"metadata_builders.families.{family}.{module}")


def family_subject(family: str, builder: str | None, device: str) -> Any:
    """A family's builder ``builder`` (None: the family's bundled one), audited, on ``device``: the pytest plugin's
    ``builder`` fixture under ``--mb-family``.  Each family but the default provides it as
    ``metadata_builders.families.<family>.__main__.subject(builder, device)``; a builder it cannot take raises a
    :class:`~metadata_builders.errors.MetadataBuildersError` naming it."""
    return importlib.import_module(f"metadata_builders.families.{family}.__main__").subject(builder, device)


__all__ = ["DEFAULT_FAMILY", "FAMILIES", "FAMILY_HELP", "family_main", "family_module", "family_subject",
           "split_family"]
