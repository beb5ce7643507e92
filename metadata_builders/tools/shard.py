"""A pytest plugin that keeps one shard of the selected tests.

``python -m pytest -p metadata_builders.tools.shard --mb-shard I/N ...``: the nightly matrix (docs/CI.md)
splits a long cell's tests over machines.  A test belongs to shard
``crc32(node id) % N + 1``: deterministic (no seed, no timing, the same on every machine and Python), stable
when other tests are added or removed (a test never moves), and the N shards together are exactly the
selection.  It runs after marker and ``-k`` selection, so ``-m "sglang or triton" --mb-shard 2/3`` is the
second third of the upstream suite.  pytest-xdist then spreads the shard over the machine's cores.
"""

from __future__ import annotations

import zlib

import pytest

__all__ = ["shard_of"]


def shard_of(nodeid: str, shards: int) -> int:
    """The 1-based shard of ``nodeid`` among ``shards``."""
    return zlib.crc32(nodeid.encode("utf-8")) % shards + 1


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("metadata-builders").addoption(
        "--mb-shard", default=None, metavar="I/N",
        help="keep only shard I of N of the selected tests (by a stable hash of the node id; docs/CI.md)")


def _parse(text: str) -> tuple[int, int]:
    index, _, of = text.partition("/")
    if not (index.isdigit() and of.isdigit()) or not 1 <= int(index) <= int(of):
        raise pytest.UsageError(f"--mb-shard: {text!r} is not I/N with 1 <= I <= N")
    return int(index), int(of)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--mb-shard"):
        _parse(config.getoption("--mb-shard"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    text = config.getoption("--mb-shard")
    if not text:
        return
    index, of = _parse(text)
    keep = [item for item in items if shard_of(item.nodeid, of) == index]
    drop = [item for item in items if shard_of(item.nodeid, of) != index]
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
