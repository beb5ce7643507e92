"""The audit's direct entries (:mod:`metadata_builders.audit.shortcuts`): the same audit, torch left as found."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from metadata_builders.audit import DEVICE_NAME, DeviceAudit, is_device_resident, shortcuts
from metadata_builders.audit.residency import _reads


def _torch_as_it_is() -> dict:
    return {(owner, name): vars(owner).get(name) for owner, names in shortcuts.SHORTCUTS.items() for name in names} | {
        (torch.Tensor, name): vars(torch.Tensor).get(name) for name in shortcuts.GETTERS
    }


def test_an_audit_leaves_torch_as_it_found_it():
    """Installed on entry, removed on exit (nested audits too), even when the build raises."""
    before = _torch_as_it_is()
    with pytest.raises(RuntimeError, match="a build that raised"), DeviceAudit():
        assert torch.arange is not torch._C._VariableFunctions.arange  # installed
        with DeviceAudit():
            pass
        assert torch.arange is not torch._C._VariableFunctions.arange  # the outer audit still holds them
        raise RuntimeError("a build that raised")
    assert _torch_as_it_is() == before
    assert torch.arange is torch._C._VariableFunctions.arange
    assert "to" not in vars(torch.Tensor) and torch.Tensor.to is torch._C.TensorBase.to


def test_a_session_installs_once_for_many_audits_and_leaves_torch_as_found():
    """Between a session's audits the entries stay (no audit: each calls its original); after it, torch as found,
    also when the block raises and when an audit outlives it."""
    before = _torch_as_it_is()
    with pytest.raises(RuntimeError, match="a run that raised"), DeviceAudit.session():
        wrapper = torch.arange
        assert wrapper is not torch._C._VariableFunctions.arange
        for _ in range(2):
            with DeviceAudit():
                assert torch.arange is wrapper and is_device_resident(torch.arange(3, device=DEVICE_NAME))
            assert torch.arange is wrapper  # still installed between the audits
            out = torch.arange(3)  # no audit: the original's result, unmarked
            assert out.tolist() == [0, 1, 2] and not is_device_resident(out)
        raise RuntimeError("a run that raised")
    assert _torch_as_it_is() == before
    audit = DeviceAudit()
    with audit:
        with DeviceAudit.session():
            pass
        assert torch.arange is not torch._C._VariableFunctions.arange  # the audit still holds them
    assert _torch_as_it_is() == before


def test_a_session_without_direct_entries_changes_nothing(monkeypatch):
    monkeypatch.setattr(DeviceAudit, "DIRECT", False)
    with DeviceAudit.session():
        assert torch.arange is torch._C._VariableFunctions.arange


def test_a_direct_entry_records_what_the_mode_records(monkeypatch):
    """Reads through direct entries (``x.sum().item()``) and through the mode (``x.tolist()``), and their marks:
    the same with and without the entries."""
    seen = []
    for direct in (True, False):
        monkeypatch.setattr(DeviceAudit, "DIRECT", direct)
        audit = DeviceAudit()
        with audit:
            lens = DeviceAudit.mark_input(torch.tensor([5, 3, 7], device=DEVICE_NAME), "verify_lens")
            out = F.pad(torch.cumsum(lens, 0), (1, 0)).to(torch.int32)
            listed = out.tolist(), out.sum().item()
            shape, device = tuple(out.shape), str(out.device)
        seen.append((listed, shape, device, is_device_resident(out), sorted(_reads(out)),
                     [(s.op, s.kind, s.reads) for s in audit.host_syncs]))
    assert seen[0] == seen[1]
    assert seen[0][2] == str(torch.device(DEVICE_NAME)) and seen[0][4] == ["verify_lens"]
    assert [s[1] for s in seen[0][5]] == ["copy", "scalar"]


def test_a_tensor_of_elements_still_reads_them():
    """``__getitem__`` has no direct entry: a Python one would make every tensor a sequence to torch's C code."""
    audit = DeviceAudit()
    with audit:
        lens = DeviceAudit.mark_input(torch.tensor([5, 3, 7], device=DEVICE_NAME), "verify_lens")
        assert torch.tensor([lens[0], lens[1]]).tolist() == [5, 3]
    assert [s.kind for s in audit.host_syncs] == ["copy"]


def test_another_mode_on_top_gets_the_call_first():
    """With a mode pushed inside the audit, a call reaches that mode, then the audit, as torch orders them."""
    order = []

    class Outer(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            order.append(getattr(func, "__name__", "?"))
            return func(*args, **(kwargs or {}))

    audit = DeviceAudit()
    with audit:
        lens = DeviceAudit.mark_input(torch.tensor([5, 3, 7], device=DEVICE_NAME), "verify_lens")
        with Outer():
            out = torch.arange(3, device=DEVICE_NAME) + lens
            out.tolist()
    assert "arange" in order and "tolist" in order
    assert [s.kind for s in audit.host_syncs] == ["copy"] and is_device_resident(out)
