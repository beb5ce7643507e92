"""The sync audit tells device tensors from host mirrors, names each sync, and models HIP faults."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from metadata_builders.audit import DEVICE, DEVICE_NAME, DeviceAudit, is_device_resident


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
        device_tensor = torch.tensor([5, 3, 7], device=DEVICE_NAME)
        op(device_tensor)
    assert len(audit.host_syncs) == 1
    assert audit.host_syncs[0].op.endswith(name)


def test_residency_propagates_through_arithmetic_and_to():
    """Anything computed from a device tensor, or moved with .to(device), is device-resident."""
    audit = DeviceAudit()
    with audit:
        host = torch.tensor([1, 2, 3])
        moved = host.to(DEVICE_NAME)
        derived = (moved + 1).cumsum(0)[1:]
        assert is_device_resident(moved) and is_device_resident(derived) and not is_device_resident(host)
        derived.tolist()
    assert _ops(audit) == ["Tensor.tolist"]


def test_sync_records_name_the_calling_stage():
    """A sync is attributed to the innermost builder function that performed it."""

    def verify_extension(lens):
        return int(lens.sum().item())

    audit = DeviceAudit()
    with audit:
        verify_extension(torch.tensor([1, 2], device=DEVICE_NAME))
    assert [(s.op, s.stage) for s in audit.host_syncs] == [("Tensor.item", "verify_extension")]


def test_repeat_interleave_without_output_size_on_device_repeats_syncs():
    """A token map with device repeats and no output_size reads the sum back: one sync."""
    audit = DeviceAudit()
    with audit:
        reps = torch.tensor([2, 1], device=DEVICE_NAME)
        out = torch.repeat_interleave(torch.arange(2, device=DEVICE_NAME), reps)
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
            torch.arange(2, device=DEVICE_NAME), torch.tensor(repeats, device=DEVICE_NAME), output_size=output_size
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


@pytest.fixture(autouse=True, params=[True, False], ids=["direct", "mode-only"])
def _direct_entries(request, monkeypatch):
    """Every test here runs with the hottest calls entering the audit directly, and with all through the mode."""
    monkeypatch.setattr(DeviceAudit, "DIRECT", request.param)


@pytest.fixture(autouse=True)
def _sneaky_module(tmp_path, monkeypatch):
    (tmp_path / "tests_support_sneaky.py").write_text(
        "from metadata_builders.families.dsv4.hip import HipBuilder\n"
        "import torch\n"
        "class SneakyBuilder(HipBuilder):\n"
        "    def build(self, inputs):\n"
        "        torch.tensor([1], device=self.device).item()\n"
        "        return super().build(inputs)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))


def test_hidden_item_in_a_user_builder_breaks_the_sync_contract():
    """An extra .item() in a path that claims sync-free is reported by P7 with its stage."""
    from _examples import make_batch

    from metadata_builders import GraphTier, PropertyFailure, get_builder
    from metadata_builders.families.dsv4.properties import check_p7_capture_safety

    sneaky = get_builder("tests_support_sneaky:SneakyBuilder", "cpu")
    batch = make_batch([5, 3], [1, 2], 2, graph=GraphTier(2, 4), is_dspark=True)
    with pytest.raises(PropertyFailure) as info:
        check_p7_capture_safety(sneaky, batch)
    assert info.value.prop == "P7" and "Tensor.item@build" in str(info.value.actual)


# -- every spelling of a device read is one read ---------------------------------------------------------


def _graph_state_read(t: torch.Tensor) -> None:
    # A buffer the builder allocated before the build (graph state), read after it.
    buf = torch.zeros(8, dtype=t.dtype, device=DEVICE_NAME)
    buf[:3] = t
    int(buf[:3].max())


SPELLINGS = [
    ("contains", lambda t: 0 in t, "scalar"),
    ("slice_bound", lambda t: torch.arange(10)[: t.sum()], "scalar"),
    ("f_string", lambda t: f"extend={t}", "copy"),
    ("str", lambda t: str(t), "copy"),
    ("np_asarray", lambda t: np.asarray(t), "copy"),
    ("where_mask", lambda t: torch.where(t > 3), "shape"),
    ("arange_of_sum", lambda t: torch.arange(t.sum(), device=DEVICE_NAME), "scalar"),
    ("empty_of_sum", lambda t: torch.empty(t.sum()), "scalar"),
    ("new_zeros_of_sum", lambda t: t.new_zeros(t.sum()), "scalar"),
    ("expand_to_sum", lambda t: t[:1].expand(t.sum()), "scalar"),
    ("copy_into_host", lambda t: torch.zeros(3, dtype=t.dtype).copy_(t), "copy"),
    ("tensor_of_elements", lambda t: torch.tensor([t[0], t[1]]), "copy"),
    ("int_of_sum", lambda t: int(t.sum()), "scalar"),
    ("item_of_sum", lambda t: t.sum().item(), "scalar"),
    ("tolist", lambda t: t.tolist(), "copy"),
    ("cpu_then_tolist", lambda t: t.cpu().tolist(), "copy"),
    ("graph_state_buffer", _graph_state_read, "scalar"),
]


@pytest.mark.parametrize(("name", "read", "kind"), SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_every_spelling_of_a_device_read_is_one_read_of_its_input(name, read, kind):
    """Whatever the Python spelling, a read of device data is one record: its kind and the input it reads."""
    audit = DeviceAudit()
    with audit:
        extend = DeviceAudit.mark_input(torch.tensor([5, 3, 7], device=DEVICE_NAME), "verify_lens")
        read(extend)
    assert [(s.kind, s.reads) for s in audit.host_syncs] == [(kind, ("verify_lens",))], audit.host_syncs


def test_host_values_never_count_as_reads():
    """Shapes, host lists and tensors made without device= are free, whatever is done with them."""
    audit = DeviceAudit()
    with audit:
        extend = DeviceAudit.mark_input(torch.tensor([5, 3, 7], device=DEVICE_NAME), "verify_lens")
        staged = torch.tensor([2, 2, 2])
        assert len(extend) == 3 and extend.shape[0] == 3
        assert staged.tolist() == [2, 2, 2] and int(staged.sum()) == 6 and f"{staged}"
    assert audit.host_syncs == []


def test_reads_carry_the_inputs_they_depend_on():
    """A value computed from two inputs reads both; a fresh device tensor (full_like) reads none."""
    audit = DeviceAudit()
    with audit:
        seq = DeviceAudit.mark_input(torch.tensor([5, 3], device=DEVICE_NAME), "seq_lens")
        lens = DeviceAudit.mark_input(torch.tensor([2, 1], device=DEVICE_NAME), "verify_lens")
        (seq + lens).max().item()
        torch.full_like(seq, 3).sum().item()
    assert [s.reads for s in audit.host_syncs] == [("seq_lens", "verify_lens"), ()]


def test_a_builders_construction_buffers_are_device_memory():
    """Buffers a builder allocates with device= in __init__ (under get_builder) are audited when read."""
    from metadata_builders.builders.loading import construct

    class WithState:
        def __init__(self, device=DEVICE_NAME):
            self.buf = torch.zeros(4, dtype=torch.int64, device=device)

    builder = construct(WithState, "cpu")
    audit = DeviceAudit()
    with audit:
        builder.buf.max().item()
    assert [s.kind for s in audit.host_syncs] == ["scalar"]


# -- the HIP device model: divergence delivery and out-of-bounds reads ------------------------------------


@pytest.mark.parametrize("non_blocking", [True, False])
def test_divergence_reaches_asynchronous_copies_only(non_blocking):
    """An async host-to-device copy of the named lengths delivers the divergence; a blocking one the truth."""
    audit = DeviceAudit(divergence=([2, 2, 2], [3, 2, 2]))
    with audit:
        staged = torch.tensor([2, 2, 2], dtype=torch.int32)
        moved = staged.to(DEVICE_NAME, non_blocking=non_blocking)
        into = torch.zeros(3, dtype=torch.int32, device=DEVICE_NAME)
        into.copy_(staged, non_blocking=non_blocking)
        other = torch.tensor([5, 3, 7], dtype=torch.int32).to(DEVICE_NAME, non_blocking=non_blocking)
    want = [3, 2, 2] if non_blocking else [2, 2, 2]
    assert moved.tolist() == want and into.tolist() == want and other.tolist() == [5, 3, 7]
    assert staged.tolist() == [2, 2, 2]
    assert audit.divergence_delivered == (2 if non_blocking else 0)


def test_a_gather_past_the_table_is_an_out_of_bounds_read():
    """table[rows, cols] with a column past the width records oob_read (one per element) and reads -1 there."""
    audit = DeviceAudit()
    with audit:
        table = DeviceAudit.mark_input(torch.arange(12, device=DEVICE_NAME).reshape(2, 6), "req_to_token")
        cols = torch.tensor([[4, 5, 6], [5, 6, 7]], device=DEVICE_NAME)
        out = table[torch.tensor([[1], [0]], device=DEVICE_NAME), cols]
        in_bounds = table[torch.tensor([1], device=DEVICE_NAME), torch.tensor([-1], device=DEVICE_NAME)]
    assert out.tolist() == [[10, 11, -1], [5, -1, -1]]
    assert in_bounds.tolist() == [11]  # negative indices wrap, as on the device
    assert [(f.kind, f.count) for f in audit.faults] == [("oob_read", 3)]


@pytest.mark.parametrize("op", ["index_select", "gather"])
def test_other_gathers_past_the_end_are_out_of_bounds_reads(op):
    """index_select and gather past a dimension's end are oob_read too (modelled as -1)."""
    audit = DeviceAudit()
    with audit:
        src = DeviceAudit.mark_input(torch.tensor([10, 11, 12], device=DEVICE_NAME), "full_to_swa")
        idx = torch.tensor([0, 3], device=DEVICE_NAME)
        out = src.index_select(0, idx) if op == "index_select" else torch.gather(src, 0, idx)
    assert out.tolist() == [10, -1]
    assert [(f.kind, f.count) for f in audit.faults] == [("oob_read", 1)]


# -- the device is not the host, also on CPU -----------------------------------------------------------

DOWN_TO_THE_HOST = [
    ("to_cpu", lambda t: t.to("cpu"), "copy"),
    ("to_torch_device_cpu", lambda t: t.to(torch.device("cpu")), "copy"),
    ("to_cpu_non_blocking", lambda t: t.to("cpu", non_blocking=True), "copy"),
    ("to_device_kw_with_dtype", lambda t: t.to(device="cpu", dtype=torch.int64), "copy"),
    ("to_a_host_tensor", lambda t: t.to(torch.zeros(1)), "copy"),
    ("host_copy_", lambda t: torch.empty(3, dtype=t.dtype, device="cpu").copy_(t), "copy"),
    ("host_copy_non_blocking", lambda t: torch.empty(3, dtype=t.dtype).copy_(t, non_blocking=True), "copy"),
    ("cpu", lambda t: t.cpu(), "copy"),
    ("tolist", lambda t: t.tolist(), "copy"),
    ("numpy", lambda t: t.numpy(), "copy"),
    ("item", lambda t: t[0].item(), "scalar"),
    ("int", lambda t: int(t[0]), "scalar"),
]


@pytest.mark.parametrize(("name", "read", "kind"), DOWN_TO_THE_HOST, ids=[s[0] for s in DOWN_TO_THE_HOST])
def test_every_device_to_host_spelling_is_a_read_on_cpu(name, read, kind):
    """On CPU, "cpu" names the host: each way down from the device is one read of the input, as on a GPU."""
    audit = DeviceAudit()
    with audit:
        seq_lens = DeviceAudit.mark_input(torch.tensor([5, 3, 7], device=DEVICE_NAME), "seq_lens")
        out = read(seq_lens)
        if isinstance(out, torch.Tensor):
            assert not is_device_resident(out), "what came down is host memory"
            out.tolist()  # reading the host copy again is free
    assert [(s.kind, s.reads) for s in audit.host_syncs] == [(kind, ("seq_lens",))], audit.host_syncs


DEVICE_TO_DEVICE = [
    ("to_inputs_device", lambda t: t.to(t.device)),
    ("to_device_non_blocking", lambda t: t.to(t.device, non_blocking=True)),
    ("to_the_builders_device", lambda t: t.to(DEVICE_NAME)),
    ("to_normalised_device", lambda t: t.to(torch.device(str(t.device)))),
    ("to_device_kw_with_dtype", lambda t: t.to(device=t.device, dtype=torch.int64)),
    ("to_another_device_tensor", lambda t: t.to(t + 1)),
    ("dtype_only", lambda t: t.to(torch.int64)),
    ("factory_on_its_device", lambda t: torch.zeros(3, dtype=t.dtype, device=t.device).copy_(t)),
]


@pytest.mark.parametrize(("name", "move"), DEVICE_TO_DEVICE, ids=[s[0] for s in DEVICE_TO_DEVICE])
def test_device_to_device_is_not_a_read(name, move):
    """A move to the device a tensor lives on (its .device, the builder's device) stays on the device, unread."""
    audit = DeviceAudit()
    with audit:
        seq_lens = DeviceAudit.mark_input(torch.tensor([5, 3, 7], device=DEVICE_NAME), "seq_lens")
        assert seq_lens.device == DEVICE
        out = move(seq_lens)
        assert is_device_resident(out)
    assert audit.host_syncs == []


def test_a_device_to_device_move_does_not_copy():
    """x.to(x.device) returns x itself, as on a GPU: an in-place update through it reaches the input."""
    audit = DeviceAudit()
    with audit:
        seq_lens = DeviceAudit.mark_input(torch.tensor([5, 3, 7], device=DEVICE_NAME), "seq_lens")
        assert seq_lens.to(seq_lens.device) is seq_lens
        assert seq_lens.to(DEVICE_NAME, non_blocking=True) is seq_lens


def test_host_memory_spelled_cpu_is_host_and_goes_up_as_a_copy():
    """A factory with device="cpu" is host memory; .to(the device) of it is a host-to-device copy, no read."""
    audit = DeviceAudit()
    with audit:
        staged = torch.tensor([2, 2, 2], device="cpu")
        assert not is_device_resident(staged)
        up = staged.to(DEVICE_NAME, non_blocking=True)
        assert is_device_resident(up) and up is not staged and up.device == DEVICE
        staged.tolist()
    assert audit.host_syncs == []


# -- the function level vouches only for what the dispatch level would conclude --------------------------


def _table(t: torch.Tensor) -> torch.Tensor:
    return DeviceAudit.mark_input(torch.arange(12, device=DEVICE_NAME).reshape(2, 6), "req_to_token")


VOUCHED = [
    ("binary", lambda t: (t - t.flip(0)) * 2 + 1),
    ("reverse_operators", lambda t: 10 - t // 2 + 3 % (t + 1)),
    ("comparisons", lambda t: ((t > 3) | (t <= 5), (t < 4) & (t >= 2) * 1)),
    ("where", lambda t: torch.where(t > 4, t, 0)),
    ("where_of_a_mask_alone", lambda t: torch.where(t > 4)),
    ("clamp_by_device_bounds", lambda t: t.clamp(min=t.min(), max=t.max() - 1)),
    ("masked_fill_with_a_device_value", lambda t: t.masked_fill(t > 4, t[0])),
    ("keywords", lambda t: (torch.div(t, 2, rounding_mode="floor"), t.cumsum(0, dtype=torch.int32))),
    ("searchsorted", lambda t: torch.searchsorted(t.sort().values, t, right=True)),
    ("cat_and_stack", lambda t: (torch.cat([t, t]), torch.stack([t, t], dim=1))),
    ("fresh_buffers", lambda t: (torch.full_like(t, 3), torch.ones_like(t), t.new_zeros(4))),
    ("pad", lambda t: torch.nn.functional.pad(t, (0, 2), value=-1)),
    ("reductions", lambda t: (t.sum(), t.max(0), torch.aminmax(t))),
    ("views", lambda t: (t.unsqueeze(1).T, t[1:], t[None, ::2], t[1:, None], t.view(3, 1), t.reshape(-1).data)),
    ("to", lambda t: (t.to(torch.int32), t.to(t.device, torch.int64), t.to(torch.zeros(1, dtype=torch.int8)))),
    ("gather_in_range", lambda t: (t[torch.tensor([2, 0])], _table(t)[t[:2] % 2, t[1:] % 6])),
    ("gather_out_of_range", lambda t: (t[torch.tensor([5, -4], device=DEVICE_NAME)], _table(t)[t[:2] % 2, t[:2]])),
    ("gather_by_a_device_index", lambda t: _table(t)[t % 2]),
    ("gather_beside_a_slice", lambda t: _table(t)[t[:2] % 2, 1:7:2]),
    ("host_gather_by_device_index", lambda t: torch.arange(8)[t]),
    ("index_select_and_gather", lambda t: (t.index_select(0, torch.tensor([1, 3])), torch.gather(t, 0, t % 4))),
    ("token_maps", lambda t: [torch.repeat_interleave(t, output_size=n) for n in (14, 15, 16, None)]),
    ("token_map_gathers", lambda t: torch.repeat_interleave(torch.arange(3, device=DEVICE_NAME), t, output_size=14)),
    ("host_repeats", lambda t: torch.repeat_interleave(t, torch.tensor([1, 0, 2]))),
    ("scalars", lambda t: (t[0].item(), int(t[1]), bool(t[2] > 3), float(t.sum()))),
    ("factories", lambda t: (torch.arange(3, device=t.device), torch.zeros(2, dtype=t.dtype, device=DEVICE_NAME))),
    ("zero_d_index", lambda t: t[t[0] % 3]),
    ("int_beside_an_index", lambda t: _table(t)[1, t[:2]]),
    ("in_place", lambda t: _written(t, lambda b: (b[:2].add_(t[:2]), b.clamp_(max=t.max()), b.mul_(2)))),
    ("scatter", lambda t: _written(t, lambda b: b.scatter_(0, t[:2] % 4, t[1:]))),
    ("item_update", lambda t: _written(t, lambda b: b[-1].__iadd__(t[0]))),
    ("setitem", lambda t: _written(t, lambda b: (b.__setitem__(slice(1, 3), t[:2]), b.__setitem__(0, 9)))),
    ("setitem_through_a_view", lambda t: _written(t, lambda b: b[1:].__setitem__(0, t[2]))),
    ("setitem_from_host", lambda t: _written(t, lambda b: b.__setitem__(2, torch.tensor(4)))),
    ("setitem_into_host", lambda t: torch.zeros(3, dtype=t.dtype).__setitem__(slice(0, 2), t[1:])),
    ("setitem_of_a_host_copy", lambda t: _written(t, lambda b: b.__setitem__(slice(0, 3), t.cpu()))),
]


def _written(t: torch.Tensor, write) -> tuple[torch.Tensor, ...]:
    """A fresh device buffer and a view of it, written by ``write``: where what they hold now comes from."""
    buf = torch.zeros(4, dtype=t.dtype, device=DEVICE_NAME)
    view = buf[1:]
    write(buf)
    return buf, view


def _observed(monkeypatch, fast: bool, call, values: bool = True) -> tuple:
    """What an audit records of ``call`` on verify_lens, and where each result lives and what it reads."""
    from metadata_builders.audit.residency import _reads

    monkeypatch.setattr(DeviceAudit, "FAST", fast)
    audit = DeviceAudit()
    with audit:
        lens = DeviceAudit.mark_input(torch.tensor([5, 3, 7], device=DEVICE_NAME), "verify_lens")
        out = call(lens)
    results = [(t.tolist() if values else t.shape, is_device_resident(t), sorted(_reads(t))) for t in _all_tensors(out)]
    syncs = [(s.op, s.stage, s.kind, s.reads) for s in audit.host_syncs]
    return syncs, audit.faults, audit.token_maps, results, None if isinstance(out, torch.Tensor) else repr(out)


def _all_tensors(out):
    from metadata_builders.audit.residency import _tensors

    return list(_tensors(out)) + [x for x in (getattr(out, name, None) for name in ("values", "indices", "min", "max"))
                                  if isinstance(x, torch.Tensor)]


CALLS = VOUCHED + [(n, read) for n, read, _ in SPELLINGS + DOWN_TO_THE_HOST] + DEVICE_TO_DEVICE


@pytest.mark.parametrize(("name", "call"), CALLS, ids=[c[0] for c in CALLS])
def test_the_function_level_concludes_what_the_dispatch_level_would(name, call, monkeypatch):
    """Each call the function level handles itself gives the records, faults, values and residency of the
    same call watched op by op from the dispatcher (``DeviceAudit.FAST = False``)."""
    values = "empty" not in name  # torch.empty's values are whatever memory held
    assert _observed(monkeypatch, True, call, values) == _observed(monkeypatch, False, call, values)


def test_the_bundled_builder_never_needs_the_dispatch_level(monkeypatch):
    """hip builds every example on the function level alone, to the same result as op by op."""
    from _examples import EXAMPLES

    from metadata_builders import get_builder, variants_for
    from metadata_builders.audit.core import _DispatchLayer

    hip = get_builder("hip", "cpu")
    enter = _DispatchLayer.__enter__
    dispatched = set()

    def entered(layer):  # returns before the call runs: no frame of this file under a record's stage
        dispatched.add(layer.audit._current.func.__name__)
        return enter(layer)

    monkeypatch.setattr(_DispatchLayer, "__enter__", entered)
    fast = {(name, v.label): hip.build(batch, v) for name, batch in EXAMPLES.items() for v in variants_for(batch)}
    assert dispatched == set()
    monkeypatch.setattr(DeviceAudit, "FAST", False)
    slow = {(name, v.label): hip.build(batch, v) for name, batch in EXAMPLES.items() for v in variants_for(batch)}
    assert fast == slow


def test_a_kernel_model_reports_its_fault_to_every_active_audit():
    """``kernel_fault``: a model of a kernel CPU cannot run records the fault it commits, launch or not."""
    from metadata_builders.audit import kernel_fault, kernel_launch

    outer, inner = DeviceAudit(), DeviceAudit()
    with outer, inner, kernel_launch(()):
        assert kernel_fault("oob_write", 2, "plan_compress_prefill", output_size=12, device_sum=14)
    for audit in (outer, inner):
        assert [(f.kind, f.count, f.op, f.output_size, f.device_sum) for f in audit.faults] == [
            ("oob_write", 2, "plan_compress_prefill", 12, 14)]
    assert kernel_fault("oob_write", 2, "plan_compress_prefill") is False  # nobody to tell: the caller raises
