"""A model of upstream's compress-plan kernel, for CPU: ``_jit_compress_plan_module().plan_prefill``.

``CompressorPrefillPlan.generate`` hands a JIT CUDA/HIP extension
(``sglang/kernels/jit/csrc/deepseek_v4/c_plan.cuh``, ``plan_compress_prefill``)
exactly these arguments, and this model receives the same ones, checks them as
the kernel's ``TensorMatcher`` and ``RuntimeCheck`` do, and returns the same
plan bytes: ``plan_c`` uint8 ``[n, 16]`` (``CompressPlan``: u32 ``seq_len``,
u16 ``ragged_id``, u16 ``buffer_len``, i32 ``read_page_0``, i32 ``read_page_1``)
and ``plan_w`` uint8 ``[n, 8]`` (``WritePlan``: u32 ``ragged_id``, i32 ``write_loc``).

The kernel picks its path by where ``seq_lens``/``extend_lens`` live, and so does
the model (``_Devices``: on CPU, residency as the audit marks it):

* **GPU input** (device lengths: mirror-less verify, ragged layouts, the graph
  plan): ``plan_compress_prefill_kernel0`` then ``plan_compress_prefill_kernel_1``,
  both buffers ``num_q_tokens`` rows, padded with invalid entries;
* **CPU input** (the host mirror ``seq_lens_cpu + num_draft`` and host extend
  lengths: eager verify with a mirror): the host loop over the mirror into the
  pinned scratch, ``counter_c``/``counter_w`` rows (``num_q_tokens`` with
  ``use_cuda_graph``), copied to the device, then ``kernel_1``.

Worked example (ratio 4, ring 16, ``use_req_ring``, ``window_size = 8``,
``mtp_pad = 16 - 8 + 2 = 10``): one request in slot 3, ``seq_len = 9`` after
verify, 2 verify tokens (positions 7, 8, ragged ids 0, 1).  Position 7 compresses
(``(7 + 1) % 4 == 0``): ``buffer_len = 8 - min(0 + 1, 8) = 7``, read pages
``(3 * 16 + 3) // 4 = 12`` (position ``max(7 - 4, 0) = 3``) and ``(3 * 16 + 7) // 4 = 13``.
Both write: ``first_w_pos = min(8 - 4, 9 - 10) = -1``; write locations
``3 * 16 + 7 = 55`` and ``56``.  So ``plan_c = [[8, 0, 7, 12, 13]]``,
``plan_w = [[0, 55], [1, 56]]`` (read by :func:`~.reading.compress_rows`, :func:`~.reading.write_rows`).

The model's reads of device memory are kernel reads: they run inside the
audit's ``kernel_launch`` (audit suspended, then every tensor argument inherits
what any of them read), as an interpreted Triton launch does
(:mod:`metadata_builders.audit.triton`); the host loop runs under the audit and
reads only host memory.  The SWA state slots ``kernel_1`` reads through
``req_to_token`` and ``full_to_state`` (c4 without the request ring: 0.5.18,
0.5.19) are gathered on the device just before its launch, under the audit, so
the device model records a read past a table as upstream's own gathers are.
The outputs are allocated on ``req_pool_indices``' device before the launch, as
``ffi::empty`` does, so they are device memory.  When kernel0 would write more
entries than its ``num_q_tokens`` rows (F9: device extend lengths a stale copy
made sum past the tier), the model records an ``oob_write`` fault of op
``plan_compress_prefill`` in the audit and keeps the first rows, as the buffer would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from metadata_builders.audit import is_device_resident, kernel_fault, kernel_launch
from metadata_builders.audit.triton import watched
from metadata_builders.families.dsv4.metadata import PLANNER_OP

if TYPE_CHECKING:
    import torch

__all__ = ["MAX_PREFILL_BATCH_SIZE", "MAX_TOKENS", "PlanCheckFailed", "PlanKernelFault", "PlanModule", "mtp_pad",
           "plan_prefill"]

MAX_TOKENS = 65536
"""``kMaxTokens`` (0.5.21+): ``ragged_id`` is a u16, so a batch holds at most 65536 tokens (before: 65535)."""
MAX_PREFILL_BATCH_SIZE = 1024
"""``kMaxPrefillBatchSize``: kernel0 is one block of 1024 threads, one per request."""
_U32 = 0xFFFFFFFF
_INVALID_C = (-1, 0, 0, -1, -1)
"""``CompressPlan::invalid()``: ``{-1u, 0, 0, -1, -1}`` (seq_len read as signed)."""
_INVALID_W = (-1, -1)
"""``WritePlan::invalid()``: ``{-1u, -1}``."""


class PlanCheckFailed(RuntimeError):
    """A ``TensorMatcher``/``RuntimeCheck`` of ``plan_compress_prefill`` failed (the kernel raises too)."""

    def __init__(self, check: str, actual: Any) -> None:
        super().__init__(f"plan_compress_prefill: {check} failed (got {actual!r})")
        self.check = check
        self.actual = actual

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.check, self.actual))


class PlanKernelFault(RuntimeError):
    """A device fault kernel0 would commit: plan entries written past its ``num_q_tokens`` rows.

    Under an audit the model records the fault (``audit.kernel_fault``: a GPU writes
    past the buffer and goes on) and goes on; raised only where no audit is there to
    record it.  Out-of-bounds table reads go through the harness's device model instead.
    """

    def __init__(self, kind: Literal["oob_write"], count: int, where: str) -> None:
        super().__init__(f"plan_compress_prefill: {kind} of {count} element(s) ({where})")
        self.kind = kind
        self.count = count
        self.where = where

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.kind, self.count, self.where))


def _i32(x: int) -> int:
    """``static_cast<int32_t>``: two's-complement wrap."""
    x &= _U32
    return x - (1 << 32) if x >= 1 << 31 else x


def _cdiv(a: int, b: int) -> int:
    """C++ ``/`` on integers: truncates towards zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _cmod(a: int, b: int) -> int:
    """C++ ``%`` on integers: the sign of the dividend."""
    return a - _cdiv(a, b) * b


def mtp_pad(compress_ratio: int, ring_size: int) -> int:
    """Trailing positions the write plan keeps resident: ``ring - window + 2`` when the ring is wider."""
    window = compress_ratio * (2 if compress_ratio == 4 else 1)
    return ring_size - window + 2 if ring_size > window else 0


@dataclass(frozen=True, slots=True)
class _Params:
    """The scalar arguments of one call, as the kernels see them."""

    ratio: int
    swa_page_size: int
    ring_size: int
    use_req_ring: bool
    num_q_tokens: int

    @property
    def overlap(self) -> bool:
        return self.ratio == 4

    @property
    def window(self) -> int:
        return self.ratio * (2 if self.overlap else 1)


# -- stage 0: which tokens compress and which write ------------------------------------------------


def _emit(p: _Params, c: list, w: list, batch_id: int, seq_len: int, position: int, j: int, ragged_id: int) -> None:
    """One token of stage 0 (kernel0 and the host loop share it): its compress and write entries."""
    if (position + 1) % p.ratio == 0:
        buffer_len = p.window - min(j + 1, p.window)
        c.append((position + 1, ragged_id & 0xFFFF, buffer_len & 0xFFFF, -1, batch_id))
    last_c_pos = _cdiv(seq_len, p.ratio) * p.ratio
    first_w_pos = min(last_c_pos - (p.ratio if p.overlap else 0), seq_len - mtp_pad(p.ratio, p.ring_size))
    write = position >= first_w_pos
    if not write and p.overlap and not p.use_req_ring:
        write = _cmod(position, p.swa_page_size) >= p.swa_page_size - p.ratio
    if write:
        w.append(((ragged_id | batch_id << 16) & _U32, position + 1))


def _kernel0(p: _Params, seq_lens: list[int], extend_lens: list[int]) -> tuple[list, list]:
    """``plan_compress_prefill_kernel0``: stage 0 on the device, padded to ``num_q_tokens`` with invalid.

    MTP-uniform batches (every extend length the same ``E`` in 1..32) take the
    token-driven loop over ``batch_size * E`` tokens; others the per-request loop.
    """
    c: list = []
    w: list = []
    seq = [_i32(s) for s in seq_lens]
    ext = [_i32(e) for e in extend_lens]
    as_u32 = [e & _U32 for e in ext]
    if as_u32 and min(as_u32) == max(as_u32) and 0 < max(as_u32) <= 32:
        e = as_u32[0]
        for k in range(len(seq) * e):
            b, j = divmod(k, e)
            prefix = seq[b] - ext[b]
            _emit(p, c, w, b, seq[b], prefix + j, j, k)
    else:
        base = 0
        for b, (sl, el) in enumerate(zip(seq, ext)):
            for j in range(max(el, 0)):
                _emit(p, c, w, b, sl, sl - el + j, j, base + j)
            base = (base + el) & _U32
    n = p.num_q_tokens
    for name, entries in (("plan_c", c), ("plan_w", w)):
        if len(entries) > n and not kernel_fault("oob_write", len(entries) - n, PLANNER_OP, output_size=n,
                                                 device_sum=len(entries)):
            raise PlanKernelFault("oob_write", len(entries) - n, f"kernel0 writes {len(entries)} {name} entries "
                                  f"into a buffer of num_q_tokens={n} rows")
    # Past the buffer, on a GPU, is memory the plan never reads again: the buffer holds n of the entries.
    c, w = c[:n], w[:n]
    return c + [_INVALID_C] * (n - len(c)), w + [_INVALID_W] * (n - len(w))


def _host_loop(p: _Params, seq_lens: list[int], extend_lens: list[int]) -> tuple[list, list]:
    """The CPU-input path's host loop over the mirror, with its ``RuntimeCheck``s."""
    c: list = []
    w: list = []
    counter = 0
    for i, (sl, el) in enumerate(zip(seq_lens, extend_lens)):
        sl, el = _i32(sl), _i32(el)
        if not 0 < el <= sl:
            raise PlanCheckFailed(f"0 < extend_len <= seq_len (row {i})", (el, sl))
        for j in range(el):
            _emit(p, c, w, i, sl, sl - el + j, j, _i32(counter + j))
        counter += el
    if counter != p.num_q_tokens:
        raise PlanCheckFailed("counter == num_q_tokens", (counter, p.num_q_tokens))
    return c, w


# -- stage 1: kernel_1 translates positions into state-pool locations ------------------------------


def _state_reads(p: _Params, c: list, w: list) -> list[tuple[int, int]]:
    """The (batch id, position) pairs whose SWA state slot kernel_1 reads (c4 without the request ring only)."""
    if p.ratio == 128 or p.use_req_ring:
        return []
    pairs = set()
    for seq_len, _, buffer_len, _, batch_id in c:
        if seq_len != -1 and buffer_len > 0:
            pairs |= {(batch_id, max(seq_len - 1 - p.ratio, 0)), (batch_id, seq_len - 1)}
    for packed, position_plus_1 in w:
        if packed != -1:
            pairs.add(((packed >> 16) & 0xFFFF, position_plus_1 - 1))
    return sorted(pairs)


def _gather_state(rid: torch.Tensor, r2t: torch.Tensor, f2s: torch.Tensor,
                  pairs: list[tuple[int, int]]) -> torch.Tensor | None:
    """``f2s[r2t[rid[b]][position]]`` for each pair, as device gathers under the harness's device model.

    Run outside the launch, so a read past ``req_to_token``'s width is recorded as
    an ``oob_read`` fault (and reads -1) exactly as upstream's torch gathers are;
    ``req_to_token``'s -1 entries then read ``full_to_state``'s -1 sentinel, the
    harness's spelling of "no location".
    """
    if not pairs:
        return None
    import torch

    batch = torch.tensor([b for b, _ in pairs], dtype=torch.int64, device=rid.device)
    position = torch.tensor([q for _, q in pairs], dtype=torch.int64, device=rid.device)
    return f2s[r2t[rid[batch], position].to(torch.int64)]


class _Tables:
    """The device tables kernel_1 reads (inside the launch): the slots, and the gathered SWA state slots."""

    def __init__(self, rid: torch.Tensor, pairs: list[tuple[int, int]], state: torch.Tensor | None) -> None:
        self.rid = rid.tolist()
        self._state = dict(zip(pairs, state.tolist())) if state is not None else {}

    def state_loc(self, batch_id: int, position: int) -> int:
        """``f2s[r2t[rid[batch_id]][position]]``, as gathered before the launch."""
        return self._state[(batch_id, position)]


def _loc(p: _Params, t: _Tables, batch_id: int, position: int) -> int:
    """``compute_req_ring_loc`` (c128, or the c4 request ring), else ``compute_loc`` of the SWA state slot."""
    if p.ratio == 128 or p.use_req_ring:
        return _i32(t.rid[batch_id] * p.ring_size + _cmod(position, p.ring_size))
    swa_loc = _i32(t.state_loc(batch_id, position))
    return _i32(_cdiv(swa_loc, p.swa_page_size) * p.ring_size + _cmod(swa_loc, p.ring_size))


def _kernel_1(p: _Params, t: _Tables, c: list, w: list, padded: tuple[int, int]) -> tuple[list, list]:
    """``plan_compress_prefill_kernel_1``: read pages for entries with a buffer, write locations, invalid padding."""
    out_c = []
    for entry in c + [_INVALID_C] * (padded[0] - len(c)):
        seq_len, ragged_id, buffer_len, _, batch_id = entry
        if seq_len != -1 and buffer_len > 0:
            position_1 = _i32(seq_len - 1)
            position_0 = max(position_1 - p.ratio, 0)
            entry = (seq_len, ragged_id, buffer_len, _cdiv(_loc(p, t, batch_id, position_0), p.ratio),
                     _cdiv(_loc(p, t, batch_id, position_1), p.ratio))
        out_c.append(entry)
    out_w = []
    for entry in w + [_INVALID_W] * (padded[1] - len(w)):
        packed, position_plus_1 = entry
        if packed != -1:
            ragged_id, batch_id = packed & 0xFFFF, (packed >> 16) & 0xFFFF
            entry = (ragged_id, _loc(p, t, batch_id, _i32(position_plus_1 - 1)))
        out_w.append(entry)
    return out_c, out_w


# -- the entry point -------------------------------------------------------------------------------


class _Devices:
    """Where each argument lives, as the kernel's ``SymbolicDevice`` sees it.

    On a GPU that is the tensor's device; on CPU it is residency as the audit
    marks it (:func:`~metadata_builders.audit.is_device_resident`).  A build with
    no device model at all (none of the tables the kernel requires on the device
    is marked: a bare build, e.g. ``bench``'s timing without the audit) has no
    device to tell from the host: every argument but the pinned scratch is
    taken as device memory, so the device path runs.
    """

    def __init__(self, tables: tuple[torch.Tensor, ...], pin_buffer: torch.Tensor) -> None:
        self.modelled = any(is_device_resident(t) for t in tables)
        self.pin_buffer = pin_buffer

    def holds(self, t: torch.Tensor) -> bool:
        if self.modelled:
            return is_device_resident(t)
        return t is not self.pin_buffer


def _check(cond: bool, check: str, actual: Any) -> None:
    if not cond:
        raise PlanCheckFailed(check, actual)


def _check_tensor(t: Any, name: str, dims: int, dtype: str, device: bool | None, devices: _Devices) -> None:
    """``TensorMatcher``: rank, dtype, contiguity and device (``None``: CPU or GPU)."""
    _check(t.dim() == dims, f"{name} has {dims} dimension(s)", tuple(t.shape))
    _check(str(t.dtype) == f"torch.{dtype}", f"{name}.dtype == {dtype}", t.dtype)
    _check(t.is_contiguous(), f"{name} is contiguous", t.stride())
    if device is not None:
        _check(devices.holds(t) == device, f"{name} on the {'device' if device else 'host'}", t.device)


def _check_args(rid, r2t, f2s, seq_lens, extend_lens, pin_buffer, p: _Params, max_tokens: int,
                devices: _Devices) -> int:
    """The kernel's entry checks; returns ``batch_size``."""
    _check_tensor(rid, "req_pool_indices", 1, "int64", True, devices)
    _check_tensor(r2t, "req_to_token", 2, "int32", True, devices)
    _check_tensor(f2s, "full_to_state", 1, "int64", True, devices)
    _check_tensor(seq_lens, "seq_lens", 1, "int64", None, devices)
    _check_tensor(extend_lens, "extend_lens", 1, "int64", devices.holds(seq_lens), devices)
    _check_tensor(pin_buffer, "pin_buffer", 1, "uint8", False, devices)
    batch_size = rid.shape[0]
    _check(seq_lens.shape[0] == batch_size == extend_lens.shape[0], "seq_lens, extend_lens of batch_size rows",
           (seq_lens.shape[0], extend_lens.shape[0], batch_size))
    _check(p.ratio in (4, 128), "compress_ratio == 4 || compress_ratio == 128", p.ratio)
    _check(not p.use_req_ring or p.ratio == 4, "!use_req_ring || compress_ratio == 4", (p.use_req_ring, p.ratio))
    _check(batch_size < MAX_TOKENS and batch_size <= p.num_q_tokens <= max_tokens,
           f"batch_size <= num_q_tokens && num_q_tokens <= kMaxTokens={max_tokens}", (batch_size, p.num_q_tokens))
    _check(p.swa_page_size % p.ring_size == 0 and p.ring_size % p.ratio == 0,
           "swa_page_size % ring_size == 0 && ring_size % compress_ratio == 0",
           (p.swa_page_size, p.ring_size, p.ratio))
    return batch_size


def plan_prefill(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor, full_to_state: torch.Tensor,
                 seq_lens: torch.Tensor, extend_lens: torch.Tensor, pin_buffer: torch.Tensor, num_q_tokens: int,
                 compress_ratio: int, swa_page_size: int, ring_size: int, use_req_ring: bool,
                 use_cuda_graph: bool, *, max_tokens: int = MAX_TOKENS) -> tuple[torch.Tensor, torch.Tensor]:
    """``plan_compress_prefill``: the arguments ``CompressorPrefillPlan.generate`` passes, the plans it returns."""
    p = _Params(int(compress_ratio), int(swa_page_size), int(ring_size), bool(use_req_ring), int(num_q_tokens))
    devices = _Devices((req_pool_indices, req_to_token, full_to_state), pin_buffer)
    batch_size = _check_args(req_pool_indices, req_to_token, full_to_state, seq_lens, extend_lens, pin_buffer, p,
                             max_tokens, devices)
    if devices.holds(seq_lens):
        _check(batch_size <= MAX_PREFILL_BATCH_SIZE, "GPU plan batch_size <= 1024", batch_size)
        return _gpu_input(p, req_pool_indices, req_to_token, full_to_state, seq_lens, extend_lens)
    _check(pin_buffer.numel() >= p.num_q_tokens * 24, "pin_buffer_bytes >= num_q_tokens * 24",
           (pin_buffer.numel(), p.num_q_tokens))
    c, w = _host_loop(p, seq_lens.tolist(), extend_lens.tolist())
    padded = (p.num_q_tokens, p.num_q_tokens) if use_cuda_graph else (len(c), len(w))
    return _cpu_input(p, req_pool_indices, req_to_token, full_to_state, pin_buffer, (c, w), padded)


class _DevicePlan:
    """The device-input planner (kernel0, then kernel_1) as one launch into given plans: a graph recorder keeps it
    as one op re-run on what the lengths hold at replay, as a GPU graph keeps the kernels (``audit_triton.watched``)."""

    launch_name = "plan_compress_prefill (CPU model)"

    def run(self, p: _Params, tables: tuple, seq_lens: torch.Tensor, extend_lens: torch.Tensor, plans: tuple) -> None:
        with kernel_launch((seq_lens, extend_lens, *plans)):
            c, w = _kernel0(p, seq_lens.tolist(), extend_lens.tolist())
        _launch_kernel_1(p, tables, (c, w), plans, (p.num_q_tokens, p.num_q_tokens))


_DEVICE_PLAN = _DevicePlan()


def _gpu_input(p: _Params, rid, r2t, f2s, seq_lens, extend_lens) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    plans = (torch.empty((p.num_q_tokens, 16), dtype=torch.uint8, device=rid.device),
             torch.empty((p.num_q_tokens, 8), dtype=torch.uint8, device=rid.device))
    args = (p, (rid, r2t, f2s), seq_lens, extend_lens, plans)
    with watched(_DEVICE_PLAN, args, {}):
        _DEVICE_PLAN.run(*args)
    return plans


def _launch_kernel_1(p: _Params, tables: tuple, staged: tuple[list, list], plans: tuple,
                     padded: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """kernel_1 over the staged entries: its table reads gathered first (audited), then the launch."""
    rid, r2t, f2s = tables
    pairs = _state_reads(p, *staged)
    state = _gather_state(rid, r2t, f2s, pairs)
    with kernel_launch((rid, state, *plans)):
        c, w = _kernel_1(p, _Tables(rid, pairs, state), *staged, padded)
        _store(*plans, c, w)
    return plans


def _cpu_input(p: _Params, rid, r2t, f2s, pin_buffer, staged: tuple[list, list],
               padded: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    c, w = staged
    # The host loop writes into the pinned scratch: plan_c from byte 0, plan_w from num_q_tokens * 16.
    words_c = torch.tensor(_words_c(c), dtype=torch.int32).view(torch.uint8).view(-1, 16)
    words_w = torch.tensor(_words_w(w), dtype=torch.int32).view(torch.uint8).view(-1, 8)
    offset = p.num_q_tokens * 16
    staged_c = pin_buffer[: len(c) * 16].view(-1, 16)
    staged_w = pin_buffer[offset: offset + len(w) * 8].view(-1, 8)
    staged_c.copy_(words_c)
    staged_w.copy_(words_w)
    plan_c = torch.empty((padded[0], 16), dtype=torch.uint8, device=rid.device)
    plan_w = torch.empty((padded[1], 8), dtype=torch.uint8, device=rid.device)
    plan_c[: len(c)].copy_(staged_c, non_blocking=True)  # cudaMemcpyAsync, host to device
    plan_w[: len(w)].copy_(staged_w, non_blocking=True)
    return _launch_kernel_1(p, (rid, r2t, f2s), (c, w), (plan_c, plan_w), padded)


def _words_c(entries: list) -> list[int]:
    """``CompressPlan`` as four int32 words (little-endian: ragged_id in the low half of word 1)."""
    out: list[int] = []
    for seq_len, ragged_id, buffer_len, page_0, page_1 in entries:
        out += [_i32(seq_len), _i32(ragged_id | buffer_len << 16), _i32(page_0), _i32(page_1)]
    return out


def _words_w(entries: list) -> list[int]:
    out: list[int] = []
    for ragged_id, write_loc in entries:
        out += [_i32(ragged_id), _i32(write_loc)]
    return out


def _store(plan_c: torch.Tensor, plan_w: torch.Tensor, c: list, w: list) -> None:
    import torch

    if c:
        plan_c.view(torch.int32).copy_(torch.tensor(_words_c(c), dtype=torch.int32).view(-1, 4))
    if w:
        plan_w.view(torch.int32).copy_(torch.tensor(_words_w(w), dtype=torch.int32).view(-1, 2))


class PlanModule:
    """The model's ``plan_prefill`` for one release (:class:`~.plan_decode.JitPlanModule` adds ``plan_decode``:
    what ``_jit_compress_plan_module()`` returns on CPU).

    ``req_ring``: the release's kernel takes ``use_req_ring`` (0.5.20+; 0.5.18 and
    0.5.19 have no request ring: c4 state always goes through ``full_to_state``);
    ``max_tokens``: its ``kMaxTokens`` (65535 up to 0.5.20, 65536 after).  The
    legacy planners are on no path the harness drives; calling one names itself.
    """

    def __init__(self, *, req_ring: bool = True, max_tokens: int = MAX_TOKENS) -> None:
        self.req_ring = req_ring
        self.max_tokens = max_tokens

    def plan_prefill(self, *args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The extension's ``plan_prefill``: 12 positional arguments (11 without ``use_req_ring``)."""
        expected = 12 if self.req_ring else 11
        if len(args) != expected:
            raise TypeError(f"plan_prefill expects {expected} arguments, got {len(args)}")
        if not self.req_ring:
            args = (*args[:10], False, args[10])
        return plan_prefill(*args, max_tokens=self.max_tokens)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"compress-plan kernel model: {name} is not modelled (only plan_prefill and "
                                  "plan_decode: metadata_builders/families/dsv4/sglang/plan_kernel.py, plan_decode.py)")
