"""The fixtures tests of several files share (one definition each; a test module imports no other test module).

``sglang`` and ``upstream`` are the installed SGLang's audited builder and what the adapter found in the release;
tests that take them are marked ``sglang`` (skipped, saying why, where SGLang cannot be imported).
"""

from __future__ import annotations

import pytest

from metadata_builders.families.dsv4.builders import get_builder


@pytest.fixture(scope="module")
def sglang():
    """The audited ``"sglang"`` builder on CPU, one per test module (a module's tests share its graph state)."""
    return get_builder("sglang", "cpu")


@pytest.fixture(scope="module")
def upstream(sglang):
    """What the adapter found in the installed release (its version, capabilities, module)."""
    return sglang.inner.upstream
