"""The sync audit tells device tensors from host mirrors, names each sync, and models HIP faults."""

from __future__ import annotations

import pytest
import torch

from metadata_builders.audit import DeviceAudit


def _ops(audit: DeviceAudit) -> list[str]:
    return [s.op for s in audit.host_syncs]


def test_host_lists_and_mirror_tensors_are_not_syncs():
    """Reading a Python list or a CPU mirror made without device= is free."""
    audit = DeviceAudit()
    with audit:
        mirror = torch.tensor([5, 3, 7])
        assert mirror.tolist() == [5, 3, 7]
        assert int(mirror.max()) == 7
        assert max([5, 3, 7]) == 7
    assert audit.host_syncs == []


@pytest.mark.parametrize(
    "name, op",
    [
        ("item", lambda t: t.sum().item()),
        ("tolist", lambda t: t.tolist()),
        ("__int__", lambda t: int(t[0])),
        ("__bool__", lambda t: bool(t[0] > 1)),
        ("cpu", lambda t: t.cpu()),
        ("numpy", lambda t: t.numpy()),
        ("nonzero", lambda t: t.nonzero()),
        ("unique", lambda t: torch.unique(t)),
        ("__getitem__", lambda t: t[t > 3]),
        ("masked_select", lambda t: torch.masked_select(t, t > 3)),
    ],
)
def test_each_device_to_host_read_is_recorded_once(name, op):
    """Every D2H read of a device-resident tensor is one sync record naming the op."""
    audit = DeviceAudit()
    with audit:
        device_tensor = torch.tensor([5, 3, 7], device="cpu")
        op(device_tensor)
    assert len(audit.host_syncs) == 1
    assert audit.host_syncs[0].op.endswith(name)


def test_residency_propagates_through_arithmetic_and_to():
    """Anything computed from a device tensor, or moved with .to(device), is device-resident."""
    audit = DeviceAudit()
    with audit:
        host = torch.tensor([1, 2, 3])
        moved = host.to("cpu")
        derived = (moved + 1).cumsum(0)[1:]
        assert audit.resident(moved) and audit.resident(derived) and not audit.resident(host)
        derived.tolist()
    assert _ops(audit) == ["Tensor.tolist"]


def test_sync_records_name_the_calling_stage():
    """A sync is attributed to the innermost builder function that performed it."""

    def verify_extension(lens):
        return int(lens.sum().item())

    audit = DeviceAudit()
    with audit:
        verify_extension(torch.tensor([1, 2], device="cpu"))
    assert [(s.op, s.stage) for s in audit.host_syncs] == [("Tensor.item", "verify_extension")]


def test_repeat_interleave_without_output_size_on_device_repeats_syncs():
    """A token map with device repeats and no output_size reads the sum back: one sync."""
    audit = DeviceAudit()
    with audit:
        reps = torch.tensor([2, 1], device="cpu")
        out = torch.repeat_interleave(torch.arange(2, device="cpu"), reps)
    assert out.tolist() == [0, 0, 1]
    assert _ops(audit) == ["repeat_interleave(no output_size)"]


def test_repeat_interleave_with_host_repeats_is_not_a_sync():
    """Host repeats are already on the host: no sync."""
    audit = DeviceAudit()
    with audit:
        torch.repeat_interleave(torch.arange(2), torch.tensor([2, 1]))
    assert audit.host_syncs == []


@pytest.mark.parametrize(
    "repeats, output_size, fault, result",
    [
        ([2, 2], 3, ("oob_write", 1), [0, 0, 1]),
        ([1, 1], 3, ("uninitialized_tail", 1), [0, 1, 0]),
        ([2, 1], 3, None, [0, 0, 1]),
    ],
    ids=["run_ahead_writes_out_of_bounds", "fall_behind_leaves_tail", "exact_is_fine"],
)
def test_output_size_is_trusted_like_hip(repeats, output_size, fault, result):
    """With output_size the kernel trusts the host: excess is an OOB write, shortfall an uninitialised tail."""
    audit = DeviceAudit()
    with audit:
        out = torch.repeat_interleave(
            torch.arange(2, device="cpu"), torch.tensor(repeats, device="cpu"), output_size=output_size
        )
    assert out.tolist() == result
    assert [(f.kind, f.count) for f in audit.faults] == ([fault] if fault else [])
    assert audit.host_syncs == []
    if fault:
        assert audit.faults[0].output_size == output_size and audit.faults[0].device_sum == sum(repeats)


def test_meta_tensors_pass_through_for_shapes():
    """On meta there are no values: output_size gives the shape, nothing is recorded."""
    audit = DeviceAudit()
    with audit:
        out = torch.repeat_interleave(
            torch.arange(2, device="meta"), torch.ones(2, dtype=torch.int64, device="meta"), output_size=5
        )
    assert out.shape == (5,) and audit.faults == [] and audit.host_syncs == []


@pytest.fixture(autouse=True)
def _sneaky_module(tmp_path, monkeypatch):
    (tmp_path / "tests_support_sneaky.py").write_text(
        "from metadata_builders.hip import HipBuilder\n"
        "import torch\n"
        "class SneakyBuilder(HipBuilder):\n"
        "    def build(self, batch, variant):\n"
        "        torch.tensor([1], device=self.device).item()\n"
        "        return super().build(batch, variant)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))


def test_hidden_item_in_a_user_builder_breaks_the_sync_contract():
    """An extra .item() in a path that claims sync-free is reported by P7 with its stage."""
    from metadata_builders import GraphTier, PropertyFailure, get_builder
    from metadata_builders.properties import check_p7_capture_safety
    from tests._examples import make_batch

    sneaky = get_builder("tests_support_sneaky:SneakyBuilder", "cpu")
    batch = make_batch([5, 3], [1, 2], 2, graph=GraphTier(2, 4), is_dspark=True)
    with pytest.raises(PropertyFailure) as info:
        check_p7_capture_safety(sneaky, batch)
    assert info.value.prop == "P7" and "Tensor.item@build" in str(info.value.actual)
