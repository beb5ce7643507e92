"""The audit recognises an interpreted Triton launch from any builder (metadata_builders/audit/triton.py).

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
from _examples import EXAMPLES

from metadata_builders.audit import DeviceAudit
from metadata_builders.audit import triton as audit_triton
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.builders import AuditedBuilder
from metadata_builders.families.dsv4.hip import HipBuilder
from metadata_builders.families.dsv4.properties import check_p5_graph_vs_eager, check_p7_capture_safety
from metadata_builders.harness.graph_recorder import GraphRecorder

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


# -- the graph recorder keeps a launch as one recorded op ------------------------------------------


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    idx = tl.arange(0, BLOCK)
    valid = idx < n
    tl.store(dst_ptr + idx, tl.load(src_ptr + idx, mask=valid, other=0), mask=valid)


def _launch_copy(src: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(src)
    _copy_kernel[(1,)](src, out, src.numel(), BLOCK=triton.next_power_of_2(max(src.numel(), 1)))
    return out


class TritonSeqLens(HipBuilder):
    """The bundled builder with ``seq_lens`` materialised in-graph by a Triton copy of what the graph computed."""

    def in_graph(self, state, inputs):
        fields = super().in_graph(state, inputs)
        fields["seq_lens"] = _launch_copy(fields["seq_lens"])
        return fields


class TritonReadsTheHostMirror(HipBuilder):
    """The same copy fed the host mirror: a GPU graph's kernel reads that host memory as it is at replay."""

    def in_graph(self, state, inputs):
        fields = super().in_graph(state, inputs)
        mirror = torch.tensor(inputs.seq_lens_cpu, dtype=torch.int32)
        fields["seq_lens"][: mirror.numel()] = _launch_copy(mirror)
        return fields


def test_a_launch_in_the_recording_is_relaunched_at_replay_on_the_recorded_storages(lens) -> None:
    """Captured on [3, 1, 2], replayed on [1, 1, 1]: the kernel runs again and reads what the input holds now."""
    with DeviceAudit() as audit:
        recorder = GraphRecorder(audit, [lens])
        with recorder:
            out = torch.empty_like(lens)
            _prefix_kernel[(1,)](lens, out, 3, BLOCK=4)
        graph = recorder.graph({"start": out})
    assert [(c.name, c.rerun) for c in graph.calls] == [("torch.empty_like", False), ("triton _prefix_kernel", True)]
    assert graph.host_reads == [] and audit_triton.WATCHERS == []
    lens.copy_(torch.tensor([1, 1, 1], dtype=torch.int32))
    with DeviceAudit():
        graph.replay()
    assert out.tolist() == [0, 1, 2]


def test_a_launch_reading_host_memory_staged_at_capture_is_a_host_read(lens) -> None:
    """A kernel argument made on the host during capture is frozen there: P7's host read, naming the kernel."""

    def staged_in_graph():
        staged = torch.tensor([2, 2, 2], dtype=torch.int32)
        out = torch.empty_like(lens)
        _copy_kernel[(1,)](staged, out, 3, BLOCK=4)
        return out

    with DeviceAudit() as audit:
        recorder = GraphRecorder(audit, [lens])
        with recorder:
            staged_in_graph()
    [read] = recorder.graph({}).host_reads
    assert str(read) == ("triton _copy_kernel in staged_in_graph reads host tensor (3,) int32 made by torch.tensor "
                         "in staged_in_graph during capture")


@pytest.mark.parametrize("name", ["uniform_eagle_batch_of_three", "ragged_tier_slack_spread_over_pad_rows"])
def test_recorded_triton_work_replays_as_a_fresh_build_and_host_reads_fail_p7(lens, name) -> None:
    """Through P5 and P7: a Triton launch in in_graph holds (it is re-launched at every replay; kept as
    nothing, ``seq_lens`` would replay the capture's); the same launch fed the host mirror fails P7."""
    batch = EXAMPLES[name]
    good = AuditedBuilder(TritonSeqLens(), "cpu", "triton-seq-lens")
    assert check_p5_graph_vs_eager(good, batch) == [] and check_p7_capture_safety(good, batch) == []
    bad = AuditedBuilder(TritonReadsTheHostMirror(), "cpu", "triton-reads-the-mirror")
    with pytest.raises(PropertyFailure) as failure:
        check_p7_capture_safety(bad, batch)
    assert "triton _copy_kernel" in str(failure.value)
