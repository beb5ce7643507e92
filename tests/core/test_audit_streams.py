"""Asynchronous host-to-device copies as a stream orders them (metadata_builders/audit/streams.py).

A ``non_blocking`` copy from pinned memory reads its source when the stream gets there: a source rewritten
with other bytes before the next sync -- in this build or the next -- is a ``stale_async_copy`` fault. ROCm ATOM
PR #817's race (one pinned staging buffer reused every step) is the worked case.
"""

from __future__ import annotations

import torch

from metadata_builders.audit import DEVICE_NAME, DeviceAudit


def _stage(buf: torch.Tensor, values: list[int]) -> torch.Tensor:
    buf.copy_(torch.tensor(values, dtype=buf.dtype))
    return buf.to(DEVICE_NAME, non_blocking=True)


def _builds(values: list[list[int]], *, pin: bool = True, sync_between: bool = False) -> list[list]:
    """Consecutive audited builds staging ``values[k]`` through one buffer (made in the first); each one's faults."""
    faults = []
    buf = None
    with DeviceAudit.session():
        for k, v in enumerate(values):
            with DeviceAudit() as audit:
                if buf is None:
                    buf = torch.zeros(len(v), dtype=torch.int32, pin_memory=pin)
                dev = _stage(buf, v)
                if sync_between:
                    int(dev.sum())  # a device-to-host read: the stream has been drained
            faults.append([(f.kind, f.count) for f in audit.faults])
    return faults


def test_a_pinned_staging_buffer_rewritten_before_a_sync_is_a_stale_copy_atom_817() -> None:
    """Build 2 writes [2, 2] into the buffer build 1's copy of [3, 1] may not have read yet: two elements stale."""
    assert _builds([[3, 1], [2, 2]]) == [[], [("stale_async_copy", 2)]]


def test_the_same_bytes_again_cannot_matter() -> None:
    """The race needs other bytes: a buffer restaged with constant values (a tier's token count) is no fault."""
    assert _builds([[3, 1], [3, 1], [3, 1]]) == [[], [], []]


def test_a_sync_between_the_steps_drains_the_stream() -> None:
    assert _builds([[3, 1], [2, 2]], sync_between=True) == [[], []]


def test_pageable_memory_is_staged_before_the_call_returns() -> None:
    """cudaMemcpyAsync from pageable memory copies it to a driver buffer first: rewriting the source is safe."""
    assert _builds([[3, 1], [2, 2]], pin=False) == [[], []]


def test_a_rewrite_within_one_build_is_found_at_its_end() -> None:
    with DeviceAudit.session():
        with DeviceAudit() as audit:
            buf = torch.zeros(2, dtype=torch.int32, pin_memory=True)
            _stage(buf, [3, 1])
            buf.fill_(0)
    assert [(f.kind, f.count, f.op) for f in audit.faults] == [("stale_async_copy", 2, "to")]


def test_copy_into_a_device_buffer_is_tracked_too() -> None:
    """``dev.copy_(pinned, non_blocking=True)`` -- a runner's static buffer refilled from a staging one."""
    with DeviceAudit.session():
        with DeviceAudit() as audit:
            buf = torch.tensor([4, 4], dtype=torch.int32, pin_memory=True)
            dev = torch.zeros(2, dtype=torch.int32, device=DEVICE_NAME)
            dev.copy_(buf, non_blocking=True)
            buf[0] = 5
    assert [(f.kind, f.count) for f in audit.faults] == [("stale_async_copy", 1)]


def test_a_buffer_staged_through_a_fresh_slice_each_step_is_tracked_by_its_memory() -> None:
    """``buf[:n].copy_(...)`` then ``buf[:n].to(device, non_blocking=True)``: the slice dies with the step, the pinned
    buffer it reads does not -- the next step's other bytes are still a stale copy (the model once lost the slice)."""
    faults = []
    with DeviceAudit.session():
        buf = None
        for values in ([3, 3], [2, 2]):
            with DeviceAudit() as audit:
                if buf is None:
                    buf = torch.zeros(4, dtype=torch.int32, pin_memory=True)
                buf[: len(values)].copy_(torch.tensor(values, dtype=torch.int32))
                buf[: len(values)].to(DEVICE_NAME, non_blocking=True)
            faults.append([(f.kind, f.count) for f in audit.faults])
    assert faults == [[], [("stale_async_copy", 2)]]


def test_what_the_stream_model_saw_is_a_line_of_checks_output() -> None:
    """The model counts the copies from pinned memory it tracked and its faults into the run that collects tallies;
    ``check`` prints them (``streams_line``), and says so when the builder staged nothing pinned."""
    from types import SimpleNamespace

    from metadata_builders.families.dsv4.properties import collecting_tallies
    from metadata_builders.families.dsv4.runs.report import streams_line

    with collecting_tallies() as counts:
        assert _builds([[3, 1], [2, 2], [2, 2]]) == [[], [("stale_async_copy", 2)], []]
        assert _builds([[3, 1]], pin=False) == [[]]
    assert counts == {("stream model", "pinned_copies"): 3, ("stream model", "faults"): 1}, counts
    runs = [SimpleNamespace(tallies=counts), SimpleNamespace(tallies={})]
    assert streams_line(runs) == ("stream model: 3 asynchronous copies from pinned memory seen, 1 faults (a pinned "
                                  "source rewritten before the stream read it: stale_async_copy)")
    assert streams_line([SimpleNamespace(tallies={})]).endswith("the builder stages no copy from pinned memory, so "
                                                                "the model judged none")
    assert streams_line([]) is None
