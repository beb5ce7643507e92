"""The ``hip`` builder's decode modes with torch: ``decode`` and ``draft_decode`` (one token per row).

Shaped like upstream 0.5.23: ``init_forward_metadata_decode`` keeps the raw inputs
(:func:`raw_decode`: slots, ``seq_lens``, the step's ``out_cache_loc``) and
``make_forward_metadata_from_raw_decode`` builds every field from them
(:func:`from_raw_decode`) -- right after on the eager path, in the graph on the graph path,
where out-graph work only copies the raw inputs into the tier's buffers
(:class:`~metadata_builders.families.dsv4.hip.state.DecodeState`).  A draft-decode child adds its
``step + 1`` to ``seq_lens`` inside that build and reads row ``step`` of the shared
``out_cache_loc`` buffer (:func:`step_out_cache_loc`).  Reference:
:mod:`metadata_builders.families.dsv4.reference.decode`.

The core stage and the index streams are target verify's (:mod:`.pipeline`); the caller
passes them (``core``, ``streams``), so a mutated stage reaches every mode that calls it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

import torch

from metadata_builders.families.dsv4.hip import compression
from metadata_builders.families.dsv4.hip import low_ratios as hip_low_ratios
from metadata_builders.families.dsv4.hip.state import DecodeState, Layout, MultiStepState
from metadata_builders.families.dsv4.metadata import Decision, VerifyMetadata, fields_for

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.inputs import VerifyInputs

__all__ = ["captured_raw", "copy_raw", "decode", "decode_plans", "from_raw_decode", "multi_step_state", "raw_decode",
           "refresh", "refresh_children", "step_out_cache_loc"]

_I32 = torch.int32
_I64 = torch.int64


def step_out_cache_loc(inputs: VerifyInputs, step: int | None = None) -> torch.Tensor:
    """The call's ``out_cache_loc`` per row: draft decode's row ``step`` (default ``draft_step``) of the shared
    buffer (``per_step_draft_out_cache_loc``: ``view(rows, 1, steps).permute(2, 0, 1)``), else the buffer itself."""
    if inputs.mode == "idle":  # upstream's IDLE substitution: location 0 on every row, whatever the buffer holds
        return torch.zeros(inputs.rows, dtype=_I64, device=inputs.out_cache_loc.device)
    if inputs.mode != "draft_decode":
        return inputs.out_cache_loc
    step = inputs.draft_step if step is None else step
    assert step is not None
    return inputs.out_cache_loc.view(inputs.rows, -1)[:, step].contiguous()


def raw_decode(inputs: VerifyInputs, step: int | None = None) -> DecodeState:
    """``init_forward_metadata_decode``: the raw metadata, nothing computed (``DSV4RawDecodeMetadata``); draft decode:
    child ``step``'s (default: the call's ``draft_step``)."""
    return DecodeState(inputs.req_pool_indices, inputs.seq_lens, step_out_cache_loc(inputs, step))


def _steps(inputs: VerifyInputs) -> int:
    return inputs.num_draft_tokens - 1  # speculative_num_steps: draft extend made the first draft token


def captured_raw(inputs: VerifyInputs, step: int | None = None) -> DecodeState:
    """The raw metadata a capture stores (its own buffers, which replays ``copy_`` into): :func:`raw_decode`'s,
    cloned."""
    raw = raw_decode(inputs, step)
    return DecodeState(raw.req_pool_indices.clone(), raw.seq_lens.clone(), raw.out_cache_loc.clone())


def multi_step_state(inputs: VerifyInputs) -> MultiStepState:
    """A draft-decode tier's graph state: every child's raw metadata, captured from its own row (upstream's capture
    runs each child's out-graph work)."""
    return MultiStepState([captured_raw(inputs, step) for step in range(_steps(inputs))])


def refresh(state: DecodeState | MultiStepState, inputs: VerifyInputs) -> None:
    """Out-graph work before a decode replay: the raw metadata copied into the tier's; draft decode's children as
    the multi-step backend refreshes them (:func:`refresh_children`)."""
    if isinstance(state, MultiStepState):
        refresh_children(state, inputs)
    else:
        copy_raw(state, raw_decode(inputs))


def refresh_children(state: MultiStepState, inputs: VerifyInputs) -> None:
    """The multi-step backend's out-graph work before a replay: child 0's raw metadata from the batch (its own
    out-graph work), then children ``1 .. steps - 2`` get child 0's slots and lengths with their own row of the
    shared buffer -- a copy (``replay_cuda_graph_metadata_from``), no out-graph work of theirs.  The last child runs
    no forward and is left as captured."""
    first = state.children[0]
    copy_raw(first, raw_decode(inputs, 0))
    for step in range(1, _steps(inputs) - 1):
        # An idle replay has no per-step rows (upstream's step_out_cache_locs is None): child 0's raw is copied whole.
        out = first.out_cache_loc if inputs.mode == "idle" else step_out_cache_loc(inputs, step)
        copy_raw(state.children[step], DecodeState(first.req_pool_indices, first.seq_lens, out))


def copy_raw(into: DecodeState, raw: DecodeState) -> None:
    """``DSV4RawDecodeMetadata.copy_``: all three raw tensors into the captured ones."""
    for name in ("req_pool_indices", "seq_lens", "out_cache_loc"):
        getattr(into, name).copy_(getattr(raw, name))


def decode_plans(inputs: VerifyInputs, slots: torch.Tensor, seq_lens: torch.Tensor) -> dict[str, torch.Tensor]:
    """``plan_decode`` per ratio on the per-request ring: ``[seq_len, loc(p), loc(max(p - r, 0)) // r, loc(p) // r]``
    per row, ``p = seq_len - 1``, ``loc(q) = slot * ring + q % ring`` (int32, as the planner's struct)."""
    geo = inputs.geometry
    assert geo.compression is not None
    slot, p = slots.to(_I64), seq_lens.to(_I64) - 1
    out: dict[str, torch.Tensor] = {}
    for ratio in (4, 128):
        ring = geo.compression.ring_size(ratio)
        write = slot * ring + torch.remainder(p, ring)
        first = slot * ring + torch.remainder(torch.clamp(p - ratio, min=0), ring)
        out[f"c{ratio}_decode_plan"] = torch.stack(
            [seq_lens.to(_I64), write, torch.div(first, ratio, rounding_mode="floor"),
             torch.div(write, ratio, rounding_mode="floor")], dim=1).to(_I32)
    return out


def from_raw_decode(raw: DecodeState, inputs: VerifyInputs, core: Callable[..., dict[str, torch.Tensor]],
                    streams: Callable[..., dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """``make_forward_metadata_from_raw_decode`` and the in-graph block (``swa_out_cache_loc``; with the V4.1 low
    ratios their token -> request map and positions): every field.

    Reads only ``raw``, the tables, the geometry and the forward batch's positions (the runner's static buffer), so
    recorded once it refreshes from copied raw buffers.
    """
    geo = inputs.geometry
    seq_lens = raw.seq_lens.to(_I32)
    if inputs.draft_runner:  # draft decode, or the draft runner's idle replay
        assert inputs.draft_step is not None
        seq_lens = seq_lens + (inputs.draft_step + 1)  # the child's speculative_step_id + 1
    slots = raw.req_pool_indices
    ones = torch.ones_like(seq_lens)
    layout = Layout(seq_lens, ones, torch.cumsum(ones, 0, dtype=_I32) - ones, None, None,
                    int(inputs.req_to_token.shape[1]))  # MAX_SEQ_LEN_FOR_CAPTURE: a full-width page table
    fields: dict[str, torch.Tensor] = {"seq_lens": seq_lens, **core(layout, inputs, seq_lens, slots)}
    fields["raw_out_loc"] = raw.out_cache_loc
    compressed = not inputs.draft_runner and geo.compression is not None  # a draft worker: need_compress off
    if compressed:
        out = compression.compressed_attention(inputs, seq_lens, raw.out_cache_loc, fields["page_table"])
        out.update(compression.sparse_buffers(inputs, out))
        out.update(compression.indexer_metadata(out))
        fields.update(out)
    if geo.swa_window == geo.unified_swa_window:
        fields.update(streams(inputs if compressed else dataclasses.replace(
            inputs, geometry=dataclasses.replace(geo, compression=None)), fields))
    ring = geo.ring_size
    fields["verify_store_state_slot"] = slots.clone()  # the SWA ring target, as _attach_unified_kv_decode_streams
    fields["swa_loc"] = (slots.to(_I64) * ring + torch.remainder(fields["positions_casual"].to(_I64), ring)).to(_I32)
    fields["swa_out_cache_loc"] = inputs.full_to_swa[raw.out_cache_loc].to(_I32)
    if compressed:
        fields.update(decode_plans(inputs, slots, seq_lens))
        fields.update(hip_low_ratios.low_ratio_groups(inputs, fields, is_prefill=False))  # the V4.1 c1/c2, decode rows
    return {name: fields[name] for name in fields_for(geo, inputs.mode, draft_runner=inputs.draft_runner)}


def decode(inputs: VerifyInputs, core: Callable[..., Any], streams: Callable[..., Any]) -> VerifyMetadata:
    """Entry point of both decode modes, eager: the raw metadata, then the whole build.  No host read."""
    fields = from_raw_decode(raw_decode(inputs), inputs, core, streams)
    return VerifyMetadata(fields, Decision(inputs.rows, True, True, int(inputs.req_to_token.shape[1])))
