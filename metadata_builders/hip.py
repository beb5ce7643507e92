"""Moved to :mod:`metadata_builders.builders.hip` in 0.3 (a layout by role); this path keeps working for one release."""

from __future__ import annotations

import importlib
import sys

sys.modules[__name__] = importlib.import_module("metadata_builders.builders.hip")
