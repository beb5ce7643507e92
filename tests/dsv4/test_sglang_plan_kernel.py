"""The model of upstream's compress-plan kernel (``c_plan.cuh``) gives the plans worked out here by hand.

The model needs no SGLang, so it is loaded from its file: the main suite runs
it without the adapter package (whose import needs SGLang).  Device-resident
lengths take the kernel's GPU-input path (``kernel0`` + ``kernel_1``), host
lengths its CPU-input path (the host loop + ``kernel_1``); both give the same
plans, laid out differently (padding, row counts).
"""

from __future__ import annotations

import importlib.util
import pickle
import sys
from pathlib import Path

import pytest
import torch

from metadata_builders.audit import DeviceAudit, is_device_resident
from metadata_builders.families.dsv4.metadata import canonical_plan

_ADAPTER = Path(__file__).parents[2] / "metadata_builders" / "families" / "dsv4" / "sglang"


def _load(file: str):
    """An adapter module by path: importing the package needs SGLang, these two modules do not."""
    name = f"_sglang_adapter_{file.removesuffix('.py')}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _ADAPTER / file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


pk = _load("plan_kernel.py")
rd = _load("reading.py")

INVALID_C = [-1, 0, 0, -1, -1]
INVALID_W = [-1, -1]


def _tables(slots: int = 4, width: int = 100):
    """``req_to_token[s][c] = s * width + c``; ``full_to_state[loc] = 1000 + loc`` (a SWA location)."""
    r2t = torch.tensor([[s * width + c for c in range(width)] for s in range(slots)], dtype=torch.int32)
    f2s = torch.tensor([1000 + loc for loc in range(slots * width)], dtype=torch.int64)
    return r2t, f2s


def _plan(seq_lens, extend_lens, slots, *, ratio=4, ring=16, sps=256, req_ring=True, num_q=None, device=True,
          graph=False, module=None, audit=None):
    """One call as ``CompressorPrefillPlan.generate`` makes it; ``device`` puts the lengths in device memory."""
    num_q = sum(extend_lens) if num_q is None else num_q
    with (audit or DeviceAudit()):
        r2t, f2s = _tables()
        rid = DeviceAudit.mark_input(torch.tensor(slots, dtype=torch.int64), "req_pool_indices")
        DeviceAudit.mark_input(r2t, "req_to_token")
        DeviceAudit.mark_input(f2s, "full_to_swa")
        seq = torch.tensor(seq_lens, dtype=torch.int64)
        ext = torch.tensor(extend_lens, dtype=torch.int64)
        if device:
            DeviceAudit.mark_input(seq, "seq_lens")
            DeviceAudit.mark_input(ext, "verify_lens")
        pin = torch.empty(0 if device else num_q * 24, dtype=torch.uint8)
        args = (rid, r2t, f2s, seq, ext, pin, num_q, ratio, sps, ring)
        if module is not None:
            return module.plan_prefill(*args, *((req_ring,) if module.req_ring else ()), graph)
        return pk.plan_prefill(*args, req_ring, graph)


def _rows(plan_c, plan_w):
    return rd.decode_compress_plan(plan_c), rd.decode_write_plan(plan_w)


# -- the worked example and its variations -----------------------------------------------------------


@pytest.mark.parametrize("device", [True, False], ids=["gpu_input", "cpu_input"])
def test_worked_example_c4_request_ring(device: bool) -> None:
    """Slot 3, seq_len 9 after 2 verify tokens: position 7 compresses from pages 12, 13; both positions write."""
    plan_c, plan_w = _plan([9], [2], [3], device=device)
    c, w = _rows(plan_c, plan_w)
    # 0 + 1 = ragged id 0; buffer_len 8 - min(1, 8); pages (3*16 + 3) // 4 and (3*16 + 7) // 4
    assert canonical_plan(c) == [[8, 0, 7, 12, 13]]
    # first_w_pos = min(8 - 4, 9 - (16 - 8 + 2)) = -1: both write, at 3*16 + 7 and 3*16 + 8
    assert canonical_plan(w) == [[0, 55], [1, 56]]


def test_gpu_input_pads_to_num_q_tokens_with_invalid_entries() -> None:
    """A graph tier of 5 tokens for 2 real ones: 5 rows each, the rest invalid (seq_len / ragged_id -1)."""
    c, w = _rows(*_plan([9], [2], [3], num_q=5))
    assert c == [[8, 0, 7, 12, 13]] + [INVALID_C] * 4
    assert w == [[0, 55], [1, 56]] + [INVALID_W] * 3


def test_cpu_input_has_exactly_the_entries_unless_graph() -> None:
    """The host path's buffers hold counter_c / counter_w rows; with use_cuda_graph num_q_tokens rows."""
    c, w = _rows(*_plan([9], [2], [3], device=False))
    assert (len(c), len(w)) == (1, 2)
    c, w = _rows(*_plan([9], [2], [3], device=False, graph=True))
    assert c == [[8, 0, 7, 12, 13], INVALID_C]
    assert w == [[0, 55], [1, 56]]


def test_c128_uses_the_request_ring_and_its_own_window() -> None:
    """Ratio 128, ring 256: position 127 of slot 2 compresses (buffer 127), every position writes (mtp_pad 130)."""
    for device in (True, False):
        c, w = _rows(*_plan([130], [3], [2], ratio=128, ring=256, req_ring=False, device=device))
        # pages (2*256 + 0) // 128 = 4 (position max(127 - 128, 0)) and (2*256 + 127) // 128 = 4
        assert canonical_plan(c) == [[128, 0, 127, 4, 4]]
        # first_w_pos = min(128 - 0, 130 - (256 - 128 + 2)) = 0
        assert canonical_plan(w) == [[0, 639], [1, 640], [2, 641]]


def test_without_the_request_ring_c4_goes_through_full_to_state() -> None:
    """0.5.18/0.5.19's layout: the SWA state slot of each position, and the page-edge rule writes positions 22, 23
    early."""
    # ring 8 = window 8: mtp_pad 0; slot 1, positions 22..31 (j 0..9); first_w_pos = min(32 - 4, 32 - 0) = 28.
    # swa_page_size 8 = ring 8, so compute_loc(swa) = swa // 8 * 8 + swa % 8 = swa = 1000 + 100 + position.
    c, w = _rows(*_plan([32], [10], [1], ring=8, sps=8, req_ring=False))
    # 22 % 8 = 6 and 23 % 8 = 7 are >= 8 - 4: written before first_w_pos
    assert canonical_plan(w) == [[0, 1122], [1, 1123], [6, 1128], [7, 1129], [8, 1130], [9, 1131]]
    # positions 23, 27, 31 compress (j 1, 5, 9; buffer 6, 2, 0); pages (1100 + max(p - 4, 0)) // 4, (1100 + p) // 4
    assert canonical_plan(c) == [[24, 1, 6, 279, 280], [28, 5, 2, 280, 281],
                                 [32, 9, 0, -1, 0]]  # buffer_len 0: pages untouched (-1, the batch id)


def test_the_request_ring_drops_the_page_edge_rule() -> None:
    """With use_req_ring only positions from first_w_pos write (28..31 of the batch above)."""
    _, w = _rows(*_plan([32], [10], [1], ring=8, sps=8))
    assert [r[0] for r in canonical_plan(w)] == [6, 7, 8, 9]


def test_mtp_uniform_and_general_loops_agree() -> None:
    """Uniform extend lengths (token-driven loop, capped at batch_size * E on a wider tier) and ragged ones
    (per-request loop) give the plans of the host loop."""
    uniform = _rows(*_plan([9, 20, 7], [3, 3, 3], [1, 2, 3], num_q=12))
    general = _rows(*_plan([9, 20, 7], [3, 3, 3], [1, 2, 3], device=False))
    assert [canonical_plan(r) for r in uniform] == [canonical_plan(r) for r in general]
    ragged = _rows(*_plan([9, 20, 7], [1, 3, 2], [1, 2, 3]))
    host = _rows(*_plan([9, 20, 7], [1, 3, 2], [1, 2, 3], device=False))
    assert [canonical_plan(r) for r in ragged] == [canonical_plan(r) for r in host]
    # ragged ids run over the batch: row 1 starts at 1, row 2 at 4
    assert [r[0] for r in canonical_plan(ragged[1])] == [0, 1, 2, 3, 4, 5]


def test_mtp_extend_of_33_takes_the_general_loop() -> None:
    """Extend 33 > 32 is not MTP-uniform; the per-request loop gives the same plans as the host loop."""
    device = _rows(*_plan([40], [33], [1]))
    host = _rows(*_plan([40], [33], [1], device=False))
    assert [canonical_plan(r) for r in device] == [canonical_plan(r) for r in host]


# -- checks and faults -------------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "check"), [
    ({"ratio": 8}, "compress_ratio == 4 || compress_ratio == 128"),
    ({"ratio": 128, "ring": 256}, "!use_req_ring || compress_ratio == 4"),
    ({"ring": 12}, "swa_page_size % ring_size == 0 && ring_size % compress_ratio == 0"),
    ({"ring": 16, "sps": 24}, "swa_page_size % ring_size == 0 && ring_size % compress_ratio == 0"),
    ({"num_q": 0}, "batch_size <= num_q_tokens && num_q_tokens <= kMaxTokens=65536"),
    ({"num_q": 3, "device": False}, "counter == num_q_tokens"),
])
def test_runtime_checks_fail_as_the_kernel_does(kwargs, check) -> None:
    """Each RuntimeCheck of plan_compress_prefill raises, naming the check."""
    with pytest.raises(pk.PlanCheckFailed) as info:
        _plan([9], [2], [3], **kwargs)
    assert info.value.check == check


def test_host_path_checks_each_row() -> None:
    """0 < extend_len <= seq_len, per row, on the host path."""
    with pytest.raises(pk.PlanCheckFailed, match="row 1"):
        _plan([9, 2], [2, 3], [1, 2], device=False)


def test_tensor_matchers() -> None:
    """Dtypes, the GPU batch limit, the pinned scratch's size, and one device for both length tensors."""
    with DeviceAudit():
        r2t, f2s = _tables()
        for t, name in ((r2t, "req_to_token"), (f2s, "full_to_swa")):
            DeviceAudit.mark_input(t, name)
        rid = DeviceAudit.mark_input(torch.tensor([1], dtype=torch.int64), "req_pool_indices")
        seq32 = DeviceAudit.mark_input(torch.tensor([9], dtype=torch.int32), "seq_lens")
        seq = DeviceAudit.mark_input(torch.tensor([9]), "seq_lens")
        ext_host = torch.tensor([2])
        pin = torch.empty(0, dtype=torch.uint8)
        with pytest.raises(pk.PlanCheckFailed, match=r"seq_lens.dtype == int64"):
            pk.plan_prefill(rid, r2t, f2s, seq32, ext_host, pin, 2, 4, 256, 16, True, False)
        with pytest.raises(pk.PlanCheckFailed, match=r"extend_lens on the device"):
            pk.plan_prefill(rid, r2t, f2s, seq, ext_host, pin, 2, 4, 256, 16, True, False)
        with pytest.raises(pk.PlanCheckFailed, match=r"pin_buffer_bytes"):
            pk.plan_prefill(rid, r2t, f2s, torch.tensor([9]), ext_host, pin, 2, 4, 256, 16, True, False)
        with pytest.raises(pk.PlanCheckFailed, match=r"req_pool_indices on the device"):
            pk.plan_prefill(torch.tensor([1]), r2t, f2s, seq, seq, pin, 2, 4, 256, 16, True, False)
    with pytest.raises(pk.PlanCheckFailed, match="GPU plan batch_size <= 1024"):
        _plan([9] * 1025, [1] * 1025, [1] * 1025)


def test_more_tokens_than_the_buffer_is_an_out_of_bounds_write_the_audit_records() -> None:
    """Device lengths summing past num_q_tokens (a stale copy): kernel0 writes past its buffer and goes on (F9)."""
    audit = DeviceAudit()
    plan_c, plan_w = _plan([9, 9], [2, 2], [1, 2], num_q=3, audit=audit)
    assert [(f.kind, f.count, f.op, f.output_size, f.device_sum) for f in audit.faults] == [
        ("oob_write", 1, "plan_compress_prefill", 3, 4)]
    assert plan_w.shape[0] == 3 and len(canonical_plan(rd.decode_write_plan(plan_w))) == 3  # the rows it holds


def test_a_fault_no_audit_records_is_raised() -> None:
    """Outside an audit nothing would record the write past the buffer: the model raises instead."""
    from metadata_builders.audit import kernel_fault

    assert kernel_fault("oob_write", 1, "plan_compress_prefill") is False
    fault = pk.PlanKernelFault("oob_write", 1, "kernel0 writes 4 plan_w entries into a buffer of num_q_tokens=3 rows")
    assert pickle.loads(pickle.dumps(fault)).count == 1


def test_reading_past_the_table_is_an_out_of_bounds_read_the_device_model_records() -> None:
    """Without the request ring, a position past req_to_token's width is read as the audit's gathers are: a fault."""
    audit = DeviceAudit()
    _, plan_w = _plan([101], [2], [1], req_ring=False, audit=audit)
    assert [(f.kind, f.count) for f in audit.faults] == [("oob_read", 1)]
    # position 100 reads -1, then full_to_state's last entry stands for "no location": compute_loc(swa) of it
    last = 1000 + 399
    assert canonical_plan(rd.decode_write_plan(plan_w))[-1] == [1, last // 256 * 16 + last % 16]


def test_module_takes_the_release_signature() -> None:
    """0.5.18/0.5.19's extension has no use_req_ring (11 arguments; c4 through full_to_state); 0.5.20+ take 12."""
    old = pk.PlanModule(req_ring=False, max_tokens=65535)
    c, _ = _rows(*_plan([9], [2], [3], module=old, req_ring=False))
    # slot 3: swa(p) = 1300 + p; compute_loc = swa // 256 * 16 + swa % 16: 1303 -> 87, 1307 -> 91
    assert canonical_plan(c) == [[8, 0, 7, 87 // 4, 91 // 4]]
    with pytest.raises(TypeError, match="11 arguments"):
        old.plan_prefill(*range(12))
    with pytest.raises(pk.PlanCheckFailed, match="kMaxTokens=65535"):
        _plan([1], [1], [1], num_q=65536, module=old, req_ring=False)
    with pytest.raises(NotImplementedError, match="plan_decode"):
        pk.PlanModule().plan_decode()


# -- the audit ---------------------------------------------------------------------------------------


def test_device_path_reads_no_device_memory_from_the_host_and_outputs_stay_on_the_device() -> None:
    """The kernels' reads are kernel reads (no host sync); the plans are device memory that depends on the inputs."""
    audit = DeviceAudit()
    plan_c, plan_w = _plan([9], [2], [3], audit=audit)
    assert audit.host_syncs == []
    assert is_device_resident(plan_c) and is_device_resident(plan_w)
    with audit:
        plan_c.sum().item()
    assert {"seq_lens", "verify_lens", "req_pool_indices"} <= set(audit.host_syncs[-1].reads)


def test_host_path_syncs_nothing() -> None:
    """The host loop reads only the host mirror; the plans are copied to the device asynchronously."""
    audit = DeviceAudit()
    plan_c, plan_w = _plan([9], [2], [3], device=False, audit=audit)
    assert audit.host_syncs == []
    assert is_device_resident(plan_c) and is_device_resident(plan_w)


def test_plan_rows_decode_where_the_plan_lives() -> None:
    """compress_rows / write_rows decode the plan bytes with device ops (no host read); canonical_plan sorts them."""
    audit = DeviceAudit()
    plan_c, plan_w = _plan([9, 9], [2, 2], [3, 1], num_q=6, audit=audit)
    with audit:
        rows_c, rows_w = rd.compress_rows(plan_c), rd.write_rows(plan_w)
    assert audit.host_syncs == [] and is_device_resident(rows_c) and str(rows_c.dtype) == "torch.int32"
    assert canonical_plan(rows_w.tolist()) == [[0, 55], [1, 56], [2, 23], [3, 24]]
    assert canonical_plan(rows_c.tolist()) == [[8, 0, 7, 12, 13], [8, 2, 7, 4, 5]]
