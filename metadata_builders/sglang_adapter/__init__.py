"""Moved to :mod:`metadata_builders.builders.sglang` in 0.3 (the builders in one room); this path keeps
working for one release, its modules included (``metadata_builders.sglang_adapter.coverage`` is the same module
object as ``metadata_builders.builders.sglang.coverage``, never a second copy)."""

from __future__ import annotations

import importlib
import pkgutil
import sys

_NEW = "metadata_builders.builders.sglang"
_package = importlib.import_module(_NEW)
for _info in pkgutil.iter_modules(_package.__path__):
    sys.modules[f"{__name__}.{_info.name}"] = importlib.import_module(f"{_NEW}.{_info.name}")
sys.modules[__name__] = _package
