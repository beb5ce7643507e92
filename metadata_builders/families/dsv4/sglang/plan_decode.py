"""A model of upstream's decode compress planner, for CPU: ``_jit_compress_plan_module().plan_decode``.

``CompressorDecodePlan.generate`` (the decode modes' ``create_paged_compressor_data(is_prefill=False)``)
hands the JIT extension's ``plan_compress_decode`` (``c_plan.cuh``) these arguments, and the model receives
the same ones, checks them as the kernel's ``TensorMatcher``/``RuntimeCheck`` do (every tensor on the one
device, ``int64`` slots, lengths and ``full_to_state``, an ``int32`` table) and returns the same bytes:
``plan_d`` uint8 ``[batch_size, 16]``, one ``DecodePlan`` per row -- u32 ``seq_len``, i32 ``write_loc``,
i32 ``read_page_0``, i32 ``read_page_1``.  One thread per row, nothing staged on the host.

Per row, with ``p1 = seq_len - 1`` and ``p0 = max(p1 - ratio, 0)``:

* ``ratio == 128`` or ``use_req_ring`` (c4 on the unified pool, 0.5.20+): the per-request state ring,
  ``loc(q) = slot * ring + q % ring``; ``write_loc = loc(p1)``, ``read_page_k = loc(pk) // ratio``;
* else (c4 without the request ring: 0.5.18/0.5.19, whose kernel has no ``use_req_ring``): the paged
  state of the SWA location, ``s(q) = full_to_state[req_to_token[slot][q]]``,
  ``loc = (s // swa_page_size) * ring + s % ring``; ``write_loc = loc(s(p1))``,
  ``read_page_0 = loc(s(p0)) // ratio``, ``read_page_1 = write_loc // ratio``.

Worked example (ratio 4, ring 16, ``use_req_ring``): slot 1, ``seq_len = 9`` -- ``p1 = 8``, ``p0 = 4``:
``[9, 1 * 16 + 8 = 24, (16 + 4) // 4 = 5, 24 // 4 = 6]``.  A graph pad row (``seq_len 1``, slot 0):
``[1, 0, 0, 0]``.

The arithmetic is torch operations on the arguments' device, so the audit sees the table reads upstream's
kernel makes (a read past ``req_to_token``'s width is the device model's ``oob_read``) and a graph recording
keeps them as in-graph work.  C++ integer ``/`` and ``%`` truncate towards zero (``torch.div(...,
rounding_mode="trunc")``, ``torch.fmod``): a ``-1`` sentinel state gives ``loc = -1``, as the kernel does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metadata_builders.audit import is_device_resident
from metadata_builders.families.dsv4.sglang.plan_kernel import PlanCheckFailed, PlanModule

if TYPE_CHECKING:
    import torch

__all__ = ["JitPlanModule", "plan_decode"]


class JitPlanModule(PlanModule):
    """What ``_jit_compress_plan_module()`` returns, on CPU: the models of both planners the harness drives."""

    def plan_decode(self, *args: Any) -> torch.Tensor:
        """The extension's ``plan_decode``: 8 positional arguments (7 without ``use_req_ring``: 0.5.18, 0.5.19)."""
        expected = 8 if self.req_ring else 7
        if len(args) != expected:
            raise TypeError(f"plan_decode expects {expected} arguments, got {len(args)}")
        return plan_decode(*args)


def _check(cond: bool, check: str, actual: Any) -> None:
    if not cond:
        raise PlanCheckFailed(check, actual)


def _device_of(tables: tuple[torch.Tensor, ...]) -> Any:
    """The kernel's ``SymbolicDevice``: on CPU, whether the audit marks the slots device-resident (a bare build
    marks nothing: every argument is taken as device memory)."""
    return is_device_resident(tables[0]) if any(is_device_resident(t) for t in tables) else None


def _check_tensor(t: Any, name: str, dims: int, dtype: str, rows: int | None, device: Any,
                  tables: tuple[torch.Tensor, ...]) -> None:
    _check(t.dim() == dims, f"{name} has {dims} dimension(s)", tuple(t.shape))
    _check(str(t.dtype) == f"torch.{dtype}", f"{name}.dtype == {dtype}", t.dtype)
    if rows is not None:
        _check(t.shape[0] == rows, f"{name} of batch_size={rows} rows", tuple(t.shape))
    _check(t.device == tables[0].device, f"{name} on the kernel's device", t.device)
    if device is not None:
        _check(is_device_resident(t) == device, f"{name} on the device", "host memory")


def plan_decode(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor, full_to_state: torch.Tensor,
                seq_lens: torch.Tensor, compress_ratio: int, swa_page_size: int, ring_size: int,
                use_req_ring: bool = False) -> torch.Tensor:
    """``plan_compress_decode``: the arguments ``CompressorDecodePlan.generate`` passes, the plan it returns."""
    import torch

    tables = (req_pool_indices, req_to_token, full_to_state)
    device = _device_of(tables)
    rows = int(req_pool_indices.shape[0]) if req_pool_indices.dim() == 1 else None
    _check_tensor(req_pool_indices, "req_pool_indices", 1, "int64", None, device, tables)
    _check_tensor(req_to_token, "req_to_token", 2, "int32", None, device, tables)
    _check_tensor(full_to_state, "full_to_state", 1, "int64", None, device, tables)
    _check_tensor(seq_lens, "seq_lens", 1, "int64", rows, device, tables)
    ratio, ring = int(compress_ratio), int(ring_size)
    _check(not use_req_ring or ratio == 4, "!use_req_ring || compress_ratio == 4", (use_req_ring, ratio))
    slot = req_pool_indices
    p1 = seq_lens - 1
    p0 = torch.clamp(p1 - ratio, min=0)
    if ratio == 128 or use_req_ring:
        write = slot * ring + torch.fmod(p1, ring)
        page_0 = torch.div(slot * ring + torch.fmod(p0, ring), ratio, rounding_mode="trunc")
        page_1 = torch.div(write, ratio, rounding_mode="trunc")
    else:
        state_1 = full_to_state[req_to_token[slot, p1].to(torch.int64)]
        state_0 = full_to_state[req_to_token[slot, p0].to(torch.int64)]
        write = _paged_loc(state_1, int(swa_page_size), ring)
        page_0 = torch.div(_paged_loc(state_0, int(swa_page_size), ring), ratio, rounding_mode="trunc")
        page_1 = torch.div(write, ratio, rounding_mode="trunc")
    words = torch.stack([seq_lens, write, page_0, page_1], dim=1).to(torch.int32)
    return words.view(torch.uint8).view(-1, 16)


def _paged_loc(state: torch.Tensor, swa_page_size: int, ring: int) -> torch.Tensor:
    """``compute_loc``: the SWA location's page times the ring, plus its offset in the ring (int32 in C++)."""
    import torch

    state = state.to(torch.int32)
    return torch.div(state, swa_page_size, rounding_mode="trunc") * ring + torch.fmod(state, ring)
