"""Builder ``"hip"``: target-verify metadata with torch, shaped like upstream.

Each function is one stage of ``DeepseekV4HipRadixBackend`` so a backend
engineer recognises it:

=========================  ==================================================
``target_verify``          ``init_forward_metadata_target_verify``: host mirror or
                           ``seq_lens.tolist()`` fallback, graph-tier buffers
``verify_extension``       ``init_forward_metadata_target_verify_old``: ``+ draft``,
                           ragged layout and tier padding (``pad_verify_lens_to_bucket``)
``causal_expansion``       ``ExpandPrefillCausally`` (the triton kernel's rule)
``core_metadata``          ``make_core_attn_metadata`` / ``get_swa_page_indices``
``unified_prefill_meta``   ``_attach_unified_kv_prefill_meta`` (the token map)
``decode_streams``         ``_attach_unified_kv_decode_streams`` (SWA ring)
=========================  ==================================================

Runs on any device: ``cpu``, ``cuda`` (ROCm is ``cuda`` under HIP), and ``meta``
for shapes (graph path only: eager shapes depend on values).  No stage syncs
except where the sync contract says: the ``tolist`` mirror, a ragged total
read back from the device, and a token map built without ``output_size``.

The builder returns tensors in ``VerifyMetadata.fields``; the harness
(:func:`metadata_builders.get_builder`) converts them to lists *outside* the
audit, so the conversion is not mistaken for a sync of the builder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from metadata_builders.errors import StaleMirror
from metadata_builders.metadata import Decision, VerifyMetadata
from metadata_builders.variants import apply_gate, check_variant, divergence_applies

if TYPE_CHECKING:
    from metadata_builders.batch import VerifyBatch
    from metadata_builders.variants import Variant

__all__ = ["GraphCapture", "HipBuilder", "Inputs", "Layout"]

_I32 = torch.int32
_I64 = torch.int64


@dataclass(slots=True)
class Inputs:
    """Device-resident inputs of one build (graph path: the tier's static buffers)."""

    seq_lens: torch.Tensor
    """(rows,) int32: accepted prefixes; pad rows hold 1 (the graph fill value)."""
    req_pool_indices: torch.Tensor
    """(rows,) int64: slots; pad rows hold slot 0."""
    verify_lens: torch.Tensor | None
    """(bs,) int32: ragged verify lengths as the device layout holds them."""
    out_cache_loc: torch.Tensor
    """(padded_num_tokens,) int64: zero-padded to the tier on the graph path."""
    req_to_token: torch.Tensor
    """(num_slots, max_context) int64."""
    full_to_swa: torch.Tensor
    """(pool + 1,) int64, last entry -1."""
    seq_lens_cpu: list[int] | None
    """Host mirror of the real rows' ``seq_lens``; None = not passed."""
    bs: int
    """Real requests."""


@dataclass(slots=True)
class Layout:
    """Stage 1's result: the extended batch and the token-count decision."""

    seq_lens: torch.Tensor
    extend_seq_lens: torch.Tensor
    extend_start_loc: torch.Tensor
    num_tokens: int
    exact_num_tokens: bool
    max_seq_len: int


def target_verify(
    batch: VerifyBatch, variant: Variant, device: torch.device, *, check_mirror: bool = False
) -> VerifyMetadata:
    """Entry point (``init_forward_metadata_target_verify``): inputs, then the five stages."""
    return _build_with_mirror(batch, variant, make_inputs(batch, variant, device), check_mirror=check_mirror)


def _build_with_mirror(
    batch: VerifyBatch, variant: Variant, inputs: Inputs, *, check_mirror: bool = False
) -> VerifyMetadata:
    """Apply the mirror knob to uploaded inputs (optionally validating it), then run the stages."""
    if check_mirror and (batch.is_ragged or variant.mirror == "host"):
        validate_mirror(inputs)
    if not batch.is_ragged and variant.mirror == "tolist":
        # The pre-fix fallback: no host mirror was passed, so read it back (one D2H sync).
        inputs.seq_lens_cpu = inputs.seq_lens[: inputs.bs].tolist()
    elif not batch.is_ragged and variant.mirror == "device":
        inputs.seq_lens_cpu = None
    return build_from_inputs(batch, variant, inputs)


def make_inputs(batch: VerifyBatch, variant: Variant, device: torch.device) -> Inputs:
    """Upload the batch; on the graph path fill the tier's buffers like graph replay does.

    Graph replay fills ``seq_lens`` with 1 and ``req_pool_indices`` with 0 (the
    dummy slot), then copies the real rows in; ``out_cache_loc`` is zero-padded.
    """
    rows = batch.bs if variant.path == "eager" else batch.graph.padded_bs  # type: ignore[union-attr]
    tokens = batch.num_real_tokens if variant.path == "eager" else batch.graph.graph_num_tokens  # type: ignore[union-attr]
    seq_lens = torch.ones(rows, dtype=_I32, device=device)
    req_pool_indices = torch.zeros(rows, dtype=_I64, device=device)
    out_cache_loc = torch.zeros(tokens, dtype=_I64, device=device)
    seq_lens[: batch.bs].copy_(_host(batch.seq_lens, _I32).to(device))
    req_pool_indices[: batch.bs].copy_(_host(batch.req_pool_indices, _I64).to(device))
    out_cache_loc[: batch.num_real_tokens].copy_(_host(batch.out_cache_loc, _I64).to(device))
    verify_lens = None
    if batch.verify_lens is not None:
        verify_lens = _host(batch.verify_lens, _I32).to(device)
    return Inputs(
        seq_lens=seq_lens,
        req_pool_indices=req_pool_indices,
        verify_lens=verify_lens,
        out_cache_loc=out_cache_loc,
        req_to_token=torch.tensor(batch.req_to_token, dtype=_I64, device=device),
        full_to_swa=torch.tensor(batch.full_to_swa, dtype=_I64, device=device),
        seq_lens_cpu=_host_mirror(batch),
        bs=batch.bs,
    )


def _host_mirror(batch: VerifyBatch) -> list[int]:
    """The caller's ``seq_lens_cpu``: the batch's, unless the batch injects a stale one."""
    div = batch.divergence
    if div is not None and div.seq_lens_cpu is not None:
        return list(div.seq_lens_cpu)
    return list(batch.seq_lens)


def validate_mirror(inputs: Inputs) -> None:
    """Opt-in: raise :class:`StaleMirror` if the host mirror disagrees with device ``seq_lens``.

    Reads ``seq_lens`` back, so it costs one D2H sync: a debugging aid, off by default.
    """
    if inputs.seq_lens_cpu is None:
        return
    device_values = inputs.seq_lens[: inputs.bs].tolist()
    for i, (want, got) in enumerate(zip(device_values, inputs.seq_lens_cpu)):
        if want != got:
            raise StaleMirror(i, want, got)


def _host(values, dtype: torch.dtype) -> torch.Tensor:
    """A host (staging) tensor: no ``device=``, so the audit sees it as a host mirror."""
    return torch.tensor(list(values), dtype=dtype)


def build_from_inputs(batch: VerifyBatch, variant: Variant, inputs: Inputs) -> VerifyMetadata:
    """Stages 1-5 on uploaded inputs (shared by a fresh build and a graph replay)."""
    layout = verify_extension(batch, variant, inputs)
    seq_lens_casual, slots = causal_expansion(layout, inputs)
    core = core_metadata(batch, layout, inputs, seq_lens_casual, slots)
    device_extend = _device_view_of_extend(batch, variant, layout)
    core.update(unified_prefill_meta(batch, layout, inputs, slots, device_extend))
    core.update(decode_streams(batch, slots, core["positions_casual"]))
    fields = {
        "seq_lens": layout.seq_lens,
        "extend_seq_lens": layout.extend_seq_lens,
        "extend_start_loc": layout.extend_start_loc,
        **core,
    }
    decision = Decision(layout.num_tokens, layout.exact_num_tokens, layout.exact_num_tokens, layout.max_seq_len)
    return VerifyMetadata(fields, decision)


def verify_extension(batch: VerifyBatch, variant: Variant, inputs: Inputs) -> Layout:
    """Stage 1: ``max_seq_len += num_draft``, ``seq_lens += extend``, decide ``num_tokens``/exact.

    Uniform with a host mirror (or the ``tolist`` fallback): the extend lengths are
    staged on the host and copied over (upstream ``_move_to_device``).  Without a
    mirror they are built on the device with ``full_like``.  Ragged: the device
    layout's lengths, tier-padded on the graph path; the total is the host's
    (eager ``layout_total=host``; an uncapped tier: the tier) or read back with
    ``.item()`` (eager ``layout_total=device``; a capped tier) -- then exact.
    """
    draft = batch.num_draft_tokens
    rows = inputs.seq_lens.shape[0]
    device = inputs.seq_lens.device
    if variant.path == "graph":
        max_seq_len = batch.max_context
    elif inputs.seq_lens_cpu is not None:
        max_seq_len = max(inputs.seq_lens_cpu)
    else:
        # No mirror reached target-verify, but the caller's forward batch keeps its
        # host max (``_build_forward_metadata`` reads ``seq_lens_cpu.max()``).
        max_seq_len = max(batch.seq_lens)
    max_seq_len += draft

    if inputs.verify_lens is None:
        if inputs.seq_lens_cpu is not None:
            extend = _host([draft] * rows, _I32).to(device, non_blocking=True)
        else:
            extend = torch.full_like(inputs.seq_lens, draft)
        num_tokens, exact = draft * rows, True
    elif variant.path == "graph":
        graph = batch.graph
        assert graph is not None
        extend = pad_verify_lens_to_bucket(inputs.verify_lens, rows, graph.graph_num_tokens, graph.cap)
        if graph.cap is None:
            num_tokens, exact = graph.graph_num_tokens, False
        else:
            num_tokens, exact = int(extend.sum().item()), True
    else:
        extend = inputs.verify_lens
        if variant.layout_total == "device":
            num_tokens, exact = int(extend.sum().item()), True
        else:
            num_tokens, exact = sum(batch.verify_lens or ()), False

    seq_lens = inputs.seq_lens + extend
    start = torch.cumsum(extend, 0, dtype=_I32) - extend
    return Layout(
        seq_lens=seq_lens,
        extend_seq_lens=extend,
        extend_start_loc=start,
        num_tokens=num_tokens,
        exact_num_tokens=apply_gate(variant.gate, exact, batch.is_dspark),
        max_seq_len=max_seq_len,
    )


def pad_verify_lens_to_bucket(
    verify_lens: torch.Tensor, padded_bs: int, graph_num_tokens: int, cap: int | None
) -> torch.Tensor:
    """Tier padding on the device, no sync (upstream ``pad_verify_lens_to_bucket`` + cap).

    Example: ``[3, 1, 2]`` to 5 rows / 10 tokens: leftover 4 over 2 pad rows ->
    ``[3, 1, 2, 2, 2]``; with 3 rows the last real row absorbs it -> ``[3, 1, 6]``.
    """
    bs = verify_lens.shape[0]
    npad = padded_bs - bs
    leftover = graph_num_tokens - verify_lens.to(_I64).sum()
    if npad > 0:
        base = torch.div(leftover, npad, rounding_mode="floor")
        rem = leftover - base * npad
        pad = base + (torch.arange(npad, device=verify_lens.device) < rem).to(_I64)
        if cap is not None:
            pad = pad.clamp(max=cap)
        return torch.cat([verify_lens, pad.to(_I32)])
    out = verify_lens.clone()
    if cap is None:
        out[-1] += leftover.to(_I32)
    return out


def causal_expansion(layout: Layout, inputs: Inputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Stage 2: per-token ``seq_lens_casual`` and slot, as upstream's triton kernel.

    Token t belongs to row ``r = #(start_loc <= t) - 1`` (zero-length rows are
    skipped because the next row shares their start); tokens past the device
    total are pads: ``seq_lens_casual = 1`` and the last row's slot.  Example:
    extend ``[2, 0, 1]``, 4 tokens -> rows ``[0, 0, 2, pad]``.
    """
    padded_num_tokens = inputs.out_cache_loc.shape[0]
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
    batch: VerifyBatch, layout: Layout, inputs: Inputs, seq_lens_casual: torch.Tensor, slots: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Stage 3 (``make_core_attn_metadata``): positions, SWA lengths, page table, SWA window.

    ``swa_page_indices`` is newest first: column w holds position ``pos - w``.
    Negative positions gather index 0, are overwritten with -1, and -1 then reads
    the ``full_to_swa`` sentinel -- the same double step as upstream.
    """
    geo = batch.geometry
    positions = seq_lens_casual - 1
    page_table = inputs.req_to_token[slots, : layout.max_seq_len : geo.page_size]
    page_table = torch.div(page_table, geo.page_size, rounding_mode="floor").to(_I32)
    offsets = positions.to(_I64).unsqueeze(1) - torch.arange(geo.swa_window, dtype=_I64, device=positions.device)
    invalid = offsets < 0
    offsets = offsets.masked_fill(invalid, 0)
    raw = inputs.req_to_token[slots.unsqueeze(1), offsets].masked_fill(invalid, -1)
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


def _device_view_of_extend(batch: VerifyBatch, variant: Variant, layout: Layout) -> torch.Tensor:
    """The extend lengths as device memory holds them when the token map runs.

    Normally ``layout.extend_seq_lens``; with an applicable ``batch.divergence``
    (a stale or in-flight async copy) what the divergence says.
    """
    if not divergence_applies(batch, variant):
        return layout.extend_seq_lens
    assert batch.divergence is not None
    rows = layout.extend_seq_lens.shape[0]
    div = torch.tensor(batch.divergence.extend_seq_lens[:rows], dtype=_I32, device=layout.extend_seq_lens.device)
    if div.shape[0] == rows:
        return div
    return torch.cat([div, layout.extend_seq_lens[div.shape[0] :]])


def unified_prefill_meta(
    batch: VerifyBatch, layout: Layout, inputs: Inputs, slots: torch.Tensor, device_extend: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Stage 4 (``_attach_unified_kv_prefill_meta``): the token map and per-token prefill state.

    ``bid = repeat_interleave(arange(rows), extend, output_size=num_tokens if exact else None)``.
    Without ``output_size`` torch reads ``extend.sum()`` back (a sync); with it the
    HIP kernel trusts the host count.  Tokens past ``num_tokens`` are pads.
    """
    rows = layout.extend_seq_lens.shape[0]
    device = layout.seq_lens.device
    ext = device_extend.to(_I64)
    bid = torch.repeat_interleave(
        torch.arange(rows, dtype=_I64, device=device),
        ext,
        # On ``meta`` there are no values to sync on; pass the size to get shapes.
        output_size=layout.num_tokens if layout.exact_num_tokens or device.type == "meta" else None,
    )
    seq_lens = layout.seq_lens.to(_I64)
    true_ext = layout.extend_seq_lens.to(_I64)
    state_slot = inputs.req_pool_indices[bid]
    chunk_start = (seq_lens - true_ext)[bid]
    cu_q = layout.extend_start_loc.to(_I64)[bid]
    final_pos = (seq_lens - 1)[bid]
    padded = inputs.out_cache_loc.shape[0]
    pad = padded - layout.num_tokens
    if pad > 0:
        state_slot = torch.cat([state_slot, slots[layout.num_tokens : padded]])
        chunk_start = F.pad(chunk_start, (0, pad), value=0)
        cu_q = F.pad(cu_q, (0, pad), value=0)
        final_pos = F.pad(final_pos, (0, pad), value=batch.geometry.unified_swa_window)
    return {"pf_state_slot": state_slot, "pf_chunk_start": chunk_start, "pf_cu_q": cu_q, "pf_final_pos": final_pos}


def decode_streams(batch: VerifyBatch, slots: torch.Tensor, positions: torch.Tensor) -> dict[str, torch.Tensor]:
    """Stage 5 (``_attach_unified_kv_decode_streams``): ``slot * ring + pos % ring`` in int64."""
    ring = batch.geometry.ring_size
    swa_loc = slots.to(_I64) * ring + torch.remainder(positions.to(_I64), ring)
    return {"verify_store_state_slot": slots.clone(), "swa_loc": swa_loc}


@dataclass(slots=True)
class GraphCapture:
    """The buffers of one captured graph-path build: static inputs and outputs.

    A replay copies a new batch into ``inputs`` and the rebuilt metadata into
    ``outputs`` in place (upstream ``DSV4AttnMetadata.copy_``), so every captured
    address stays valid; shapes must never change.
    """

    variant: Variant
    tier: tuple[int, int, int | None]
    inputs: Inputs
    outputs: dict[str, torch.Tensor]
    decision: Decision

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Shape of every captured output buffer."""
        return {name: tuple(t.shape) for name, t in self.outputs.items()}


def _refill(static: torch.Tensor, fresh: torch.Tensor, name: str) -> None:
    if static.shape != fresh.shape:
        raise ValueError(f"replay: {name} has shape {tuple(fresh.shape)}, captured buffer is {tuple(static.shape)}")
    static.copy_(fresh)


class HipBuilder:
    """Builder ``"hip"`` on one torch device; keeps no state between builds.

    ``capture``/``replay`` model CUDA/HIP-graph replay of the graph path for P5.
    """

    name = "hip"

    def __init__(self, device: str | torch.device = "cpu", *, validate_mirror: bool = False) -> None:
        self.device = torch.device(device)
        self.validate_mirror = validate_mirror
        """Opt-in: check the host mirror against device ``seq_lens`` (one extra sync)."""

    def with_mirror_validation(self) -> HipBuilder:
        """The same builder with opt-in mirror validation on."""
        return HipBuilder(self.device, validate_mirror=True)

    def build(self, batch: VerifyBatch, variant: Variant) -> VerifyMetadata:
        check_variant(batch, variant)
        return target_verify(batch, variant, self.device, check_mirror=self.validate_mirror)

    def capture(self, batch: VerifyBatch, variant: Variant) -> GraphCapture:
        """Build ``batch`` along a graph variant and keep its buffers."""
        check_variant(batch, variant)
        if variant.path != "graph":
            raise ValueError(f"capture needs a graph-path variant, got {variant.label}")
        inputs = make_inputs(batch, variant, self.device)
        md = _build_with_mirror(batch, variant, inputs, check_mirror=self.validate_mirror)
        outputs = {name: t.clone() for name, t in md.fields.items()}
        tier = (batch.graph.padded_bs, batch.graph.graph_num_tokens, batch.graph.cap)  # type: ignore[union-attr]
        return GraphCapture(variant, tier, inputs, outputs, md.decision)

    def replay(self, capture: GraphCapture, batch: VerifyBatch) -> VerifyMetadata:
        """Copy ``batch`` into the captured buffers in place and rebuild into them."""
        check_variant(batch, capture.variant)
        g = batch.graph
        tier = None if g is None else (g.padded_bs, g.graph_num_tokens, g.cap)
        if tier != capture.tier:
            raise ValueError(f"replay: batch tier {tier} is not the captured tier {capture.tier}")
        fresh = make_inputs(batch, capture.variant, self.device)
        for name in ("seq_lens", "req_pool_indices", "out_cache_loc", "req_to_token", "full_to_swa"):
            _refill(getattr(capture.inputs, name), getattr(fresh, name), name)
        capture.inputs.verify_lens = fresh.verify_lens
        capture.inputs.seq_lens_cpu = fresh.seq_lens_cpu
        capture.inputs.bs = fresh.bs
        md = _build_with_mirror(batch, capture.variant, capture.inputs, check_mirror=self.validate_mirror)
        for name, t in md.fields.items():
            _refill(capture.outputs[name], t, name)
        capture.decision = md.decision
        return VerifyMetadata(dict(capture.outputs), md.decision)
