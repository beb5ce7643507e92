"""The fixtures tests of several files share (one definition each; a test module imports no other test module).

``sglang`` and ``upstream`` are the installed SGLang's audited builder and what the adapter found in the release,
``sglang_torch_kernels`` the adapter on upstream's torch reference kernels; tests that take them are marked ``sglang``
(skipped, saying why, where SGLang cannot be imported).
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


@pytest.fixture(scope="module")
def sglang_torch_kernels(sglang):
    """The adapter keeping upstream's CPU dispatch (its torch reference kernels)."""
    from metadata_builders.families.dsv4.builders import AuditedBuilder
    from metadata_builders.families.dsv4.sglang import SGLangBuilder

    return AuditedBuilder(SGLangBuilder("cpu", kernels="torch"), "cpu", "sglang-torch")


@pytest.fixture()
def no_mypkg():
    """No ``mypkg`` imported before or after the test: the documented examples' package (docs/examples/mypkg) and a
    test's own ``mypkg`` in a temporary folder share the name, and whichever a worker imported first would be found."""
    import sys

    def forget() -> None:
        for name in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
            del sys.modules[name]

    forget()
    yield
    forget()
