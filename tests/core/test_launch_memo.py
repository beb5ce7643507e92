"""What the launch memo may and may not remember (metadata_builders/audit/launch_memo.py).

A remembered launch must leave exactly the storages a run would leave; every
change to what a kernel reads -- a value, a value past the view in the same
storage, a layout, a number, a module global, the interpreter's options -- must
run it again.  Runs where triton is installed (the ``.venv-sglang`` step of
``.ci/run``); skipped elsewhere.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

if importlib.util.find_spec("triton") is not None and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before the first @triton.jit picks compiled or interpreted
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

import torch

from metadata_builders.audit import launch_memo
from metadata_builders.audit import DeviceAudit

pytestmark = pytest.mark.triton

SHIFT = 0
"""A module global the kernel reads, as upstream's kernels read module constants the adapter sets."""


@triton.jit
def _shifted_copy(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    idx = tl.arange(0, BLOCK)
    valid = idx < n
    tl.store(out_ptr + idx, tl.load(src_ptr + idx, mask=valid, other=0) + SHIFT, mask=valid)


@triton.jit
def _read_past_view(src_ptr, out_ptr):
    tl.store(out_ptr, tl.load(src_ptr + 4))  # one element past a 4-element view: same storage


@pytest.fixture
def memo(monkeypatch):
    monkeypatch.setattr(launch_memo, "_ENABLED", True)
    launch_memo.forget()
    before = dict(launch_memo.STATS)
    yield lambda key: launch_memo.STATS[key] - before[key]
    launch_memo.forget()


def _copy(src: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    out = torch.full_like(src, -1) if out is None else out
    with DeviceAudit():
        _shifted_copy[(1,)](src, out, src.numel(), BLOCK=8)
    return out


def test_a_launch_seen_before_leaves_what_the_first_left(memo) -> None:
    src = torch.tensor([3, 1, 2], dtype=torch.int32)
    assert _copy(src).tolist() == [3, 1, 2]
    assert _copy(src).tolist() == [3, 1, 2]
    assert memo("hits") == 1


def test_every_change_to_what_the_kernel_reads_runs_it_again(memo, monkeypatch) -> None:
    src = torch.tensor([3, 1, 2], dtype=torch.int32)
    _copy(src)
    assert _copy(torch.tensor([3, 1, 5], dtype=torch.int32)).tolist() == [3, 1, 5]  # a value
    assert _copy(src.to(torch.int64)).tolist() == [3, 1, 2]  # a dtype
    assert _copy(torch.tensor([3, 1, 2], dtype=torch.int32), torch.zeros(3, dtype=torch.int32)).tolist() == \
        [3, 1, 2]  # what the output held before (it could be read)
    monkeypatch.setattr(sys.modules[__name__], "SHIFT", 10)
    assert _copy(src).tolist() == [13, 11, 12]  # a module global
    assert memo("hits") == 0


def test_a_value_past_the_view_is_part_of_the_key(memo) -> None:
    storage = torch.tensor([0, 0, 0, 0, 7], dtype=torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    with DeviceAudit():
        _read_past_view[(1,)](storage[:4], out)
    storage[4] = 9
    with DeviceAudit():
        _read_past_view[(1,)](storage[:4], out)
    assert out.tolist() == [9] and memo("hits") == 0


def test_a_callable_grid_runs_uncached(memo) -> None:
    src = torch.tensor([1, 2], dtype=torch.int32)
    for _ in range(2):
        out = torch.zeros_like(src)
        with DeviceAudit():
            _shifted_copy[lambda meta: (1,)](src, out, 2, BLOCK=8)
        assert out.tolist() == [1, 2]
    assert memo("hits") == 0 and memo("uncacheable") == 2


def test_off_by_default_and_by_the_environment(monkeypatch) -> None:
    monkeypatch.setattr(launch_memo, "_ENABLED", False)
    monkeypatch.setenv("METADATA_BUILDERS_LAUNCH_MEMO", "0")
    launch_memo.enable()
    assert not launch_memo.enabled()
