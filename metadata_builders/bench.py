"""Deprecated alias of :mod:`metadata_builders.tools.bench`, kept so 0.2 imports keep working.

Importing it warns once (``DeprecationWarning``); every name, public or not,
resolves to the new module's own object.
"""

from __future__ import annotations

import warnings
from typing import Any

from metadata_builders.tools import bench as _moved

__all__ = list(_moved.__all__)

warnings.warn("metadata_builders.bench moved to metadata_builders.tools.bench", DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):  # dunders stay this alias's own (never the new module's __spec__ or __path__)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(_moved, name)


def __dir__() -> list[str]:
    return sorted(dir(_moved))
