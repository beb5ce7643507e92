"""pytest plugin: run the harness's tests against any builder, on any device.

Loaded by the ``pytest11`` entry point (and by the root ``conftest.py`` of a
checkout) into every pytest run of the environment, so it stays light: it
registers its options and markers and builds nothing until a test asks for the
``builder`` fixture; torch is imported only then, or when an item carries the
``gpu`` marker.  Options, prefixed so they never collide with another plugin's
(pytest-playwright defines ``--device``):

``--mb-builder NAME``  the builder under test: ``hip`` (default), ``reference``,
                       ``sglang`` or ``module:attr``; fixture ``builder``.
``--mb-device DEV``    ``auto`` picks the GPU when ``torch.cuda.is_available()``
                       (ROCm too); under pytest-xdist worker N takes GPU N;
                       fixture ``device``.

0.1's ``--builder``/``--device`` are gone for that collision; the error pytest
prints for them names no replacement, so README's "Using it on your builder"
says it.  Hypothesis profiles ``dev``/``ci``/``nightly`` are registered here;
choose one with Hypothesis' own ``--hypothesis-profile``.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import pytest

from metadata_builders.profiles import register_profiles

register_profiles()

_DEVICE = pytest.StashKey[str]()
_BUILDER = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("metadata-builders", "target-verify metadata harness")
    group.addoption(
        "--mb-builder", default="hip", metavar="NAME",
        help='builder under test: "hip" (bundled, default), "reference", "sglang" (installed SGLang) or "module:attr" '
        "(a zero-argument factory or class)",
    )
    group.addoption(
        "--mb-device", default="auto", metavar="DEV",
        help="auto: the GPU when torch.cuda.is_available() (true on ROCm), else cpu; with xdist, worker N takes "
        "GPU N. Or cpu | cuda | cuda:N | meta",
    )


def pytest_configure(config: pytest.Config) -> None:
    for marker in (
        "gpu: needs a CUDA/ROCm device; skipped without one",
        "sglang: needs an importable SGLang (the upstream adapter); skipped without it",
        "slow: long-running; nightly only",
    ):
        config.addinivalue_line("markers", marker)
    if config.getoption("--mb-device") == "meta" and config.getoption("--mb-builder") == "reference":
        raise pytest.UsageError("--mb-device meta has no values to compare; the reference builder is pure Python. "
                                "Drop --mb-device or pick --mb-builder hip")


def _worker_device(config: pytest.Config) -> str:
    device = config.getoption("--mb-device")
    if device not in ("auto", "cuda"):
        return device
    import torch

    if not torch.cuda.is_available():
        if device == "cuda":
            raise pytest.UsageError("--mb-device cuda: torch.cuda.is_available() is False; use --mb-device cpu or auto")
        return "cpu"
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    return f"cuda:{index % torch.cuda.device_count()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_sglang = None
    has_gpu = None
    for item in items:
        if "sglang" in item.keywords:
            if has_sglang is None:
                has_sglang = importlib.util.find_spec("sglang") is not None
            if not has_sglang:
                item.add_marker(pytest.mark.skip(reason="SGLang is not importable; install it with ci/install-sglang.sh"))
        if "gpu" in item.keywords:
            if has_gpu is None:
                import torch

                has_gpu = torch.cuda.is_available()
            if not has_gpu:
                item.add_marker(pytest.mark.skip(reason="no CUDA/ROCm device: torch.cuda.is_available() is False"))


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> str:
    """This worker's device (``--mb-device``, resolved on first use)."""
    stash = pytestconfig.stash
    if _DEVICE not in stash:
        stash[_DEVICE] = _worker_device(pytestconfig)
    return stash[_DEVICE]


@pytest.fixture(scope="session")
def builder(pytestconfig: pytest.Config, device: str):
    """The builder under test (``--mb-builder``), audited, on this worker's device; built on first use."""
    from metadata_builders.builders import get_builder
    from metadata_builders.errors import BuilderNotFound

    stash = pytestconfig.stash
    if _BUILDER not in stash:
        try:
            stash[_BUILDER] = get_builder(pytestconfig.getoption("--mb-builder"), device)
        except BuilderNotFound as exc:
            raise pytest.UsageError(f"--mb-builder: {exc}") from exc
    return stash[_BUILDER]
