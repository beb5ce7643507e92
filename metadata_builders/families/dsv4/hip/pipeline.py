"""The stages of the ``hip`` builder: the MTP step's metadata with torch, shaped like upstream; knows nothing of
the harness.

Each function is one stage of ``DeepseekV4HipRadixBackend`` and receives what upstream's caller hands the backend
(:class:`~metadata_builders.families.dsv4.inputs.VerifyInputs`), so a backend engineer recognises it:
``host_mirror`` (``init_forward_metadata_target_verify``'s mirror or the ``tolist`` fallback),
``verify_extension`` (``init_forward_metadata_target_verify_old``: ``+ draft``, ragged layout, tier padding),
``causal_expansion`` (``ExpandPrefillCausally``), ``core_metadata`` (``make_core_attn_metadata``),
``unified_prefill_meta`` (``_attach_unified_kv_prefill_meta``, the token map), ``decode_streams`` (the SWA ring),
``index_streams`` (``build_decode_streams``), ``swa_out_cache_loc`` (the in-graph block's paged SWA target),
``draft_extend_layout`` (``init_forward_metadata_draft_extend``'s
rows); for graph replay ``token_map`` (out-graph), ``prefill_state`` (in-graph) and ``graph_key`` (the per-tier
store's key).  :mod:`.builder` chains them (``target_verify``, ``draft_extend``, :class:`~.builder.HipBuilder`
and its graph phases); :mod:`.compression` and :mod:`.low_ratios` hold the compression groups, :mod:`.decode` the
decode modes.

Runs on ``cpu``, ``cuda`` (ROCm is ``cuda`` under HIP) and ``meta`` (graph path shapes).  No stage syncs
except where the sync contract says (the ``tolist`` mirror, a ragged total read back, a token map built without
``output_size``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from metadata_builders.families.dsv4.errors import StaleMirror
from metadata_builders.families.dsv4.hip.state import GraphState, Layout
from metadata_builders.families.dsv4.hip.streams import decode_index_streams_torch
from metadata_builders.families.dsv4.variants import apply_gate

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.inputs import VerifyInputs

__all__ = ["causal_expansion", "core_metadata", "decode_streams", "draft_extend_layout", "graph_key", "host_mirror",
           "index_streams", "pad_verify_lens_to_bucket", "prefill_state", "swa_out_cache_loc", "token_map",
           "unified_prefill_meta", "validate_mirror", "verify_extension"]

_I32 = torch.int32
_I64 = torch.int64


def draft_extend_layout(inputs: VerifyInputs) -> Layout:
    """Draft extend's rows: ``extend = full_like(seq_lens, n)`` on the device, exact ``n * rows`` tokens."""
    n = inputs.num_draft_tokens
    extend = torch.full_like(inputs.seq_lens, n)
    start = torch.cumsum(extend, 0, dtype=_I32) - extend
    return Layout(seq_lens=inputs.seq_lens, extend_seq_lens=extend, extend_start_loc=start,
                  num_tokens=n * inputs.rows, exact_num_tokens=True, max_seq_len=inputs.geometry.page_size)


def host_mirror(inputs: VerifyInputs, *, check_mirror: bool = False) -> list[int] | None:
    """The host mirror the stages read: the caller's (checked on request), else the pre-fix fallback's read."""
    seq_lens_cpu = inputs.seq_lens_cpu
    if check_mirror:
        validate_mirror(inputs.seq_lens, seq_lens_cpu)
    if inputs.verify_lens is None and inputs.variant.mirror == "tolist":
        # The pre-fix fallback: no host mirror was passed, so read it back (one D2H sync).
        seq_lens_cpu = inputs.seq_lens.tolist()
    return seq_lens_cpu


def validate_mirror(seq_lens: torch.Tensor, seq_lens_cpu: list[int] | None) -> None:
    """Opt-in: raise :class:`StaleMirror` if the host mirror disagrees with device ``seq_lens``.

    Reads ``seq_lens`` back, so it costs one D2H sync: a debugging aid, off by default.
    """
    if seq_lens_cpu is None:
        return
    for i, (want, got) in enumerate(zip(seq_lens.tolist(), seq_lens_cpu)):
        if want != got:
            raise StaleMirror(i, want, got)


def _raw_verify_route(inputs: VerifyInputs) -> bool:
    """DSpark's uniform graph build under the dspark gate: upstream reports the table width (F3)."""
    v = inputs.variant
    return v.path == "graph" and inputs.verify_lens is None and inputs.is_dspark and v.gate == "dspark"


def verify_extension(inputs: VerifyInputs, seq_lens_cpu: list[int] | None) -> Layout:
    """Stage 1: ``max_seq_len += num_draft``, ``seq_lens += extend``, decide ``num_tokens``/exact.

    Uniform with a host mirror: the extend lengths are staged on the host and
    copied over asynchronously (upstream ``_move_to_device``).  Without a mirror
    they are built on the device with ``full_like``.  Ragged: the device layout's
    lengths, tier-padded on the graph path (``pad_rows_only``); the total is the host's
    when the layout carries one (eager ``layout_total=host``; every tier: ``pad_rows_only``
    leaves it on the host), else read back with ``.item()`` (then exact).  Every count here is the active
    verify width (upstream's ``target_verify_num_draft_tokens``), never the configured count: a DSpark draft
    worker configures gamma + 1 (``inputs.speculative_num_draft_tokens``) and verifies gamma a request.
    """
    draft = inputs.num_draft_tokens  # the active width: target_verify_num_draft_tokens
    rows = inputs.rows
    device = inputs.seq_lens.device
    max_seq_len = inputs.max_seq_len if _raw_verify_route(inputs) else inputs.max_seq_len + draft

    if inputs.verify_lens is None:
        if seq_lens_cpu is not None:
            staged = torch.tensor([draft] * rows, dtype=_I32)
            extend = staged.to(device, non_blocking=True)
        else:
            extend = torch.full_like(inputs.seq_lens, draft)
        num_tokens, exact = draft * rows, True
    else:
        extend = inputs.verify_lens
        graph = inputs.graph
        if graph is not None:
            extend = pad_verify_lens_to_bucket(extend, rows, graph.graph_num_tokens, graph.cap)
        if inputs.num_tokens_cpu is not None:
            num_tokens, exact = inputs.num_tokens_cpu, False
        else:
            num_tokens, exact = int(extend.sum().item()), True

    seq_lens = inputs.seq_lens + extend
    start = torch.cumsum(extend, 0, dtype=_I32) - extend
    return Layout(
        seq_lens=seq_lens,
        extend_seq_lens=extend,
        extend_start_loc=start,
        num_tokens=num_tokens,
        exact_num_tokens=apply_gate(inputs.variant.gate, exact, inputs.is_dspark),
        max_seq_len=max_seq_len,
    )


def pad_verify_lens_to_bucket(
    verify_lens: torch.Tensor, padded_bs: int, graph_num_tokens: int, cap: int | None
) -> torch.Tensor:
    """Tier padding on the device, no sync, ``pad_rows_only`` (upstream ``pad_verify_lens_to_bucket(max_row_len=cap)``).

    The leftover is spread over the pad rows, each bounded by the cap; a real row
    never widens, so slack the pad rows cannot take is an uncovered tail.  Example:
    ``[3, 1, 2]`` to 5 rows / 10 tokens: leftover 4 over 2 pad rows -> ``[3, 1, 2, 2, 2]``;
    a cap of 1 -> ``[3, 1, 2, 1, 1]`` (2 tokens uncovered); with 3 rows -> ``[3, 1, 2]``
    (4 uncovered), cap or not.
    """
    bs = verify_lens.shape[0]
    npad = padded_bs - bs
    if npad <= 0:
        return verify_lens.clone()
    leftover = graph_num_tokens - verify_lens.to(_I64).sum()
    base = torch.div(leftover, npad, rounding_mode="floor")
    rem = leftover - base * npad
    pad = base + (torch.arange(npad, device=verify_lens.device) < rem).to(_I64)
    if cap is not None:
        pad = pad.clamp(max=cap)
    return torch.cat([verify_lens, pad.to(_I32)])


def causal_expansion(layout: Layout, inputs: VerifyInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Stage 2: per-token ``seq_lens_casual`` and slot, as upstream's triton kernel.

    Token t belongs to row ``r = #(start_loc <= t) - 1`` (zero-length rows are
    skipped because the next row shares their start); tokens past the device
    total are pads: ``seq_lens_casual = 1`` and the last row's slot.  Example:
    extend ``[2, 0, 1]``, 4 tokens -> rows ``[0, 0, 2, pad]``.
    """
    padded_num_tokens = inputs.padded_num_tokens
    rows = layout.extend_seq_lens.shape[0]
    device = layout.seq_lens.device
    t = torch.arange(padded_num_tokens, dtype=_I64, device=device)
    start = layout.extend_start_loc.to(_I64)
    extend = layout.extend_seq_lens.to(_I64)
    r = torch.searchsorted(start, t, right=True) - 1
    r = r.clamp(min=0)
    is_real = t < (start[-1] + extend[-1])
    r = torch.where(is_real, r, torch.full_like(r, rows - 1))
    casual = layout.seq_lens.to(_I64)[r] - extend[r] + 1 + (t - start[r])
    casual = torch.where(is_real, casual, torch.ones_like(casual))
    return casual.to(_I32), inputs.req_pool_indices[r]


def core_metadata(
    layout: Layout, inputs: VerifyInputs, seq_lens_casual: torch.Tensor, slots: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Stage 3 (``make_core_attn_metadata``): positions, SWA lengths, page table, SWA window.

    ``swa_page_indices`` is newest first: column w holds position ``pos - w``.
    Positions outside ``[0, max_context)`` gather index 0, are overwritten with -1,
    and -1 then reads the ``full_to_swa`` sentinel -- the same double step as
    upstream for negative positions.  Positions at or past the table width exist
    only in tier slack a real row absorbed; reading them would be out of bounds (F2c).
    """
    geo = inputs.geometry
    width = inputs.req_to_token.shape[1]
    positions = seq_lens_casual - 1
    page_table = inputs.req_to_token[slots, : layout.max_seq_len : geo.page_size]
    page_table = torch.div(page_table, geo.page_size, rounding_mode="floor").to(_I32)
    offsets = positions.to(_I64).unsqueeze(1) - torch.arange(geo.swa_window, dtype=_I64, device=positions.device)
    invalid = (offsets < 0) | (offsets >= width)
    offsets = offsets.masked_fill(invalid, 0)
    raw = inputs.req_to_token[slots.unsqueeze(1), offsets].to(_I64).masked_fill(invalid, -1)
    swa = inputs.full_to_swa[raw].to(_I32)
    target = -(-geo.swa_window // geo.page_index_align) * geo.page_index_align
    swa = F.pad(swa, (0, target - geo.swa_window), value=-1)
    return {
        "seq_lens_casual": seq_lens_casual,
        "positions_casual": positions,
        "req_pool_indices_repeated": slots,
        "swa_topk_lengths": torch.clamp(seq_lens_casual, max=geo.swa_window),
        "page_table": page_table,
        "swa_page_indices": swa,
        "raw_out_loc": inputs.out_cache_loc,
    }


def unified_prefill_meta(layout: Layout, inputs: VerifyInputs, slots: torch.Tensor) -> dict[str, torch.Tensor]:
    """Stage 4 (``_attach_unified_kv_prefill_meta``): the token map and per-token prefill state.

    ``bid = repeat_interleave(arange(rows), extend, output_size=num_tokens if exact else None)``.
    Without ``output_size`` torch reads ``extend.sum()`` back (a sync); with it the
    HIP kernel trusts the host count.  Tokens past ``num_tokens`` are pads.
    """
    rows = layout.extend_seq_lens.shape[0]
    device = layout.seq_lens.device
    ext = layout.extend_seq_lens.to(_I64)
    bid = torch.repeat_interleave(
        torch.arange(rows, dtype=_I64, device=device),
        ext,
        # On ``meta`` there are no values to sync on; pass the size to get shapes.
        output_size=layout.num_tokens if layout.exact_num_tokens or device.type == "meta" else None,
    )
    seq_lens = layout.seq_lens.to(_I64)
    state_slot = inputs.req_pool_indices[bid]
    chunk_start = (seq_lens - ext)[bid]
    cu_q = layout.extend_start_loc.to(_I64)[bid]
    final_pos = (seq_lens - 1)[bid]
    padded = inputs.padded_num_tokens
    pad = padded - layout.num_tokens
    if pad > 0:
        state_slot = torch.cat([state_slot, slots[layout.num_tokens : padded]])
        chunk_start = F.pad(chunk_start, (0, pad), value=0)
        cu_q = F.pad(cu_q, (0, pad), value=0)
        final_pos = F.pad(final_pos, (0, pad), value=inputs.geometry.unified_swa_window)
    return {"pf_state_slot": state_slot, "pf_chunk_start": chunk_start, "pf_cu_q": cu_q, "pf_final_pos": final_pos}


def decode_streams(inputs: VerifyInputs, layout: Layout, slots: torch.Tensor,
                   positions: torch.Tensor) -> dict[str, torch.Tensor]:
    """Stage 5 (``_attach_unified_kv_decode_streams``): ``slot * ring + pos % ring``, computed in int64.

    Stored int32, as the SWA store takes it: every ``swa_loc`` fits (a geometry precondition, DESIGN.md
    section 2).  The uncovered tail stores into the padding slot 0, not the token map's last-row slot,
    whose row ``slot * ring`` is live (F17); the tail starts where the device layout ends (no sync).
    """
    ring = inputs.geometry.ring_size
    t = torch.arange(slots.shape[0], dtype=_I64, device=slots.device)
    slots = torch.where(t < layout.extend_start_loc[-1] + layout.extend_seq_lens[-1], slots, torch.zeros_like(slots))
    swa_loc = (slots.to(_I64) * ring + torch.remainder(positions.to(_I64), ring)).to(_I32)
    return {"verify_store_state_slot": slots.clone(), "swa_loc": swa_loc}


def swa_out_cache_loc(inputs: VerifyInputs) -> torch.Tensor:
    """The in-graph block's paged SWA store target (``translate_loc_from_full_to_swa(out_cache_loc)``, int32): read
    off the forward batch's ``out_cache_loc``, not the metadata, so a replay stores at the live locations; a pad
    token's 0 becomes ``full_to_swa[0]``, the SWA pool's dummy slot (never -1: the store takes every index)."""
    return inputs.full_to_swa[inputs.out_cache_loc].to(_I32)


def index_streams(inputs: VerifyInputs, fields: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``build_decode_streams``: the window of each token, then its c128 pages (c4 tail: at attention time)."""
    geo = inputs.geometry
    casual = fields["seq_lens_casual"]
    if geo.compression is None:
        hca = csa = torch.zeros_like(casual)
        pages = torch.empty((casual.shape[0], 0), dtype=_I32, device=casual.device)
        csa_width, swa_pages = 0, 0
    else:
        pages = fields["c128_page_indices"]
        hca = torch.clamp(fields["c128_topk_lengths_raw"], max=pages.shape[1])
        csa = fields["c4_sparse_topk_lengths_raw"]
        csa_width, swa_pages = fields["c4_sparse_page_indices"].shape[1], geo.compression.unified_swa_pages
    return decode_index_streams_torch(fields["req_pool_indices_repeated"], fields["positions_casual"],
                                      fields["swa_topk_lengths"], hca, csa, pages, csa_width=csa_width,
                                      win=geo.unified_swa_window, ring_size=geo.ring_size, swa_pages=swa_pages)


def token_map(layout: Layout) -> torch.Tensor:
    """Stage 4's ``repeat_interleave``, out-graph: with ``output_size`` when exact, else synced (the contract's
    read)."""
    rows = layout.extend_seq_lens.shape[0]
    device = layout.seq_lens.device
    return torch.repeat_interleave(
        torch.arange(rows, dtype=_I64, device=device),
        layout.extend_seq_lens.to(_I64),
        output_size=layout.num_tokens if layout.exact_num_tokens or device.type == "meta" else None,
    )


def prefill_state(state: GraphState, inputs: VerifyInputs, slots: torch.Tensor) -> dict[str, torch.Tensor]:
    """Stage 4 in-graph: the per-token prefill state from the token map out-graph work wrote.

    Shape-static, so the graph never depends on the token count: tokens at or past
    ``state.num_tokens`` are pads, chosen with ``where`` instead of cut and padded.
    Example: token map ``[0, 0, 1, 0]``, count 3, slots ``[5, 5, 7, 0]``:
    ``pf_state_slot = [5, 5, 7, 0]`` (the last token a pad: its slot), ``pf_final_pos[3] = win``.
    """
    real = torch.arange(inputs.padded_num_tokens, dtype=_I64, device=slots.device) < state.num_tokens
    bid = state.token_rows
    seq_lens = state.seq_lens.to(_I64)
    ext = state.extend_seq_lens.to(_I64)
    return {
        "pf_state_slot": torch.where(real, inputs.req_pool_indices[bid], slots),
        "pf_chunk_start": torch.where(real, (seq_lens - ext)[bid], 0),
        "pf_cu_q": torch.where(real, state.extend_start_loc.to(_I64)[bid], 0),
        "pf_final_pos": torch.where(real, (seq_lens - 1)[bid], inputs.geometry.unified_swa_window),
    }


def graph_key(inputs: VerifyInputs) -> int:
    """A tier's key in the backend's store: ``graph_num_tokens`` ragged (compact tiers share ``bs = max_bs``),
    else ``bs`` (upstream 0.5.23 ``deepseek_v4_backend_hip_radix.py`` ~1971, ~2019)."""
    assert inputs.graph is not None
    return inputs.graph.graph_num_tokens if inputs.verify_lens is not None else inputs.rows


