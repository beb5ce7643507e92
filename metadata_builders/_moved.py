"""Deprecated module paths: one mechanism for every module that moved.

``metadata_builders.mutants``, ``.power`` and ``.bench`` moved to
``metadata_builders.tools`` in 0.2.  Each old module is three lines calling
:func:`alias`: importing it warns once (``DeprecationWarning``) and every name,
public or not, resolves to the new module's own object -- so
``from metadata_builders.mutants import MUTANTS`` and builder names such as
``metadata_builders.mutants:dropped_dspark_gate`` keep working.
"""

from __future__ import annotations

import types
import warnings
from typing import Any

__all__ = ["alias"]


def alias(old: dict[str, Any], new: types.ModuleType) -> None:
    """Make the module whose globals are ``old`` a warning alias of ``new``."""
    warnings.warn(f"{old['__name__']} moved to {new.__name__}", DeprecationWarning, stacklevel=3)
    old["__all__"] = list(getattr(new, "__all__", ()))

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # dunders stay the alias's own (never the new module's __spec__ or __path__)
            raise AttributeError(f"module {old['__name__']!r} has no attribute {name!r}")
        return getattr(new, name)

    def __dir__() -> list[str]:
        return sorted(dir(new))

    old["__getattr__"], old["__dir__"] = __getattr__, __dir__
