"""pytest plugin: run the harness's tests against any builder, on any device.

Loaded by the ``pytest11`` entry point (and by the root ``conftest.py`` of a
checkout).  Options:

``--builder NAME``  the builder under test: ``hip`` (default), ``reference``,
                    ``sglang`` or ``module:attr``; fixture ``builder``.
``--device DEV``    ``auto`` picks the GPU when ``torch.cuda.is_available()``
                    (ROCm too); under pytest-xdist worker N takes GPU N.

Hypothesis profiles ``dev``/``ci``/``nightly`` are registered here; choose one
with Hypothesis' own ``--hypothesis-profile``.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from metadata_builders.builders import get_builder
from metadata_builders.errors import BuilderNotFound
from metadata_builders.profiles import register_profiles

register_profiles()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("metadata-builders", "target-verify metadata harness")
    group.addoption(
        "--builder", default="hip", metavar="NAME",
        help='builder under test: "hip" (bundled, default), "reference", "sglang" (installed SGLang) or "module:attr" '
        "(a zero-argument factory or class)",
    )
    group.addoption(
        "--device", default="auto", metavar="DEV",
        help="auto: the GPU when torch.cuda.is_available() (true on ROCm), else cpu; with xdist, worker N takes "
        "GPU N. Or cpu | cuda | cuda:N | meta",
    )


def _worker_device(config: pytest.Config) -> str:
    device = config.getoption("--device")
    if device not in ("auto", "cuda"):
        return device
    import torch

    if not torch.cuda.is_available():
        if device == "cuda":
            raise pytest.UsageError("--device cuda: torch.cuda.is_available() is False; use --device cpu or auto")
        return "cpu"
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    return f"cuda:{index % torch.cuda.device_count()}"


def pytest_configure(config: pytest.Config) -> None:
    for marker in (
        "gpu: needs a CUDA/ROCm device; skipped without one",
        "sglang: needs an importable SGLang (the upstream adapter); skipped without it",
        "slow: long-running; nightly only",
    ):
        config.addinivalue_line("markers", marker)
    if config.getoption("--device") == "meta" and config.getoption("--builder") == "reference":
        raise pytest.UsageError("--device meta has no values to compare; the reference builder is pure Python. "
                                "Drop --device or pick --builder hip")
    try:
        config._metadata_builders_device = _worker_device(config)  # type: ignore[attr-defined]
        config._metadata_builders_builder = get_builder(  # type: ignore[attr-defined]
            config.getoption("--builder"), config._metadata_builders_device  # type: ignore[attr-defined]
        )
    except BuilderNotFound as exc:
        raise pytest.UsageError(f"--builder: {exc}") from exc


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    no_gpu = pytest.mark.skip(reason="no CUDA/ROCm device: torch.cuda.is_available() is False")
    no_sglang = pytest.mark.skip(reason="SGLang is not importable; install it with ci/install-sglang.sh")
    has_sglang = importlib.util.find_spec("sglang") is not None
    for item in items:
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(no_gpu)
        if "sglang" in item.keywords and not has_sglang:
            item.add_marker(no_sglang)


@pytest.fixture(scope="session")
def builder(pytestconfig: pytest.Config):
    """The builder under test (``--builder``), audited, on this worker's device."""
    return pytestconfig._metadata_builders_builder  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> str:
    """This worker's device (``--device``, resolved)."""
    return pytestconfig._metadata_builders_device  # type: ignore[attr-defined]
