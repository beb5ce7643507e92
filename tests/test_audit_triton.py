"""The audit recognises an interpreted Triton launch from any builder (metadata_builders/audit_triton.py).

A builder of our own -- not SGLang's -- launches a small Triton kernel under
``TRITON_INTERPRET=1``: the launch passes provenance through (a read of the
kernel's output is a read of the input it came from) and the interpreter's own
host copies are not the builder's reads.  Runs where triton is installed (the
``.venv-sglang`` step of ``.ci/run``); skipped elsewhere.
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

from metadata_builders import audit_triton
from metadata_builders.audit import DeviceAudit

pytestmark = pytest.mark.triton


@triton.jit
def _prefix_kernel(lens_ptr, out_ptr, n, BLOCK: tl.constexpr):
    idx = tl.arange(0, BLOCK)
    valid = idx < n
    lens = tl.load(lens_ptr + idx, mask=valid, other=0)
    tl.store(out_ptr + idx, tl.cumsum(lens, axis=0) - lens, mask=valid)


class ExclusiveCumsumBuilder:
    """A third-party builder step: ``extend_start_loc`` by its own Triton kernel, then one host read.

    ``lens = [3, 1, 2]`` gives ``start = [0, 3, 4]``; ``int(start[-1])`` (4, where
    the last request starts) is one scalar read that depends on ``verify_lens``
    only through the kernel.
    """

    def build(self, lens: torch.Tensor) -> tuple[torch.Tensor, int]:
        out = torch.empty_like(lens)
        _prefix_kernel[(1,)](lens, out, lens.shape[0], BLOCK=triton.next_power_of_2(lens.shape[0]))
        start = out.clone()  # device work on the kernel's output, no read
        return start, int(start[-1])


def _interpreted() -> bool:
    interpreter = sys.modules.get(audit_triton.INTERPRETER_MODULE)
    return interpreter is not None and isinstance(_prefix_kernel, interpreter.InterpretedFunction)


@pytest.fixture
def lens() -> torch.Tensor:
    if not _interpreted():
        pytest.skip("triton was imported before TRITON_INTERPRET=1 was set: kernels are compiled here")
    return DeviceAudit.mark_input(torch.tensor([3, 1, 2], dtype=torch.int32), "verify_lens")


def test_a_read_of_a_kernels_output_is_a_read_of_its_input(lens: torch.Tensor) -> None:
    """Provenance passes through the launch: the one read is attributed to ``verify_lens``."""
    with DeviceAudit() as audit:
        start, last = ExclusiveCumsumBuilder().build(lens)
    assert (start.tolist(), last) == ([0, 3, 4], 4)
    assert [(s.kind, s.reads) for s in audit.host_syncs] == [("scalar", ("verify_lens",))]


def test_the_interpreters_host_copies_are_not_the_builders_reads(lens: torch.Tensor) -> None:
    """A launch with no read after it records no sync: the interpreter's copies are not the builder's.

    Today they go through ``UntypedStorage.cpu()`` and ``copy_`` back, which the
    audit would not count anyway; this pins the contract for an interpreter (or an
    audit that sees more host copies) where they would be.
    """
    out = torch.empty_like(lens)
    with DeviceAudit() as audit:
        _prefix_kernel[(1,)](lens, out, 3, BLOCK=4)
    assert audit.host_syncs == [] and out.tolist() == [0, 3, 4]


def test_without_the_launch_hook_provenance_is_lost(lens: torch.Tensor, monkeypatch) -> None:
    """The control: with the hook disabled the same read depends on nothing -- what the hook fixes."""
    monkeypatch.setattr(audit_triton, "_install", lambda launch: None)
    with DeviceAudit() as audit:
        ExclusiveCumsumBuilder().build(lens)
    assert [s.reads for s in audit.host_syncs if s.kind == "scalar"] != [("verify_lens",)]


def test_the_hook_is_removed_with_the_last_audit(lens: torch.Tensor) -> None:
    """Outside every audit, ``InterpretedFunction.run`` is triton's own again; nested audits install it once."""
    cls = sys.modules[audit_triton.INTERPRETER_MODULE].InterpretedFunction
    original = cls.__dict__["run"]
    with DeviceAudit():
        wrapped = cls.__dict__["run"]
        assert wrapped is not original
        with DeviceAudit():
            assert cls.__dict__["run"] is wrapped
        assert cls.__dict__["run"] is wrapped
    assert cls.__dict__["run"] is original


def test_the_audit_never_imports_triton_itself() -> None:
    """A builder that never imported triton gets no triton from the audit (checked in a fresh interpreter)."""
    import subprocess

    code = ("import sys; from metadata_builders.audit import DeviceAudit\n"
            "with DeviceAudit(): pass\n"
            "assert 'triton' not in sys.modules, 'the audit imported triton'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
