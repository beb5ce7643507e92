"""The ``hip`` builder's compression groups: compressed attention, sparse buffers, indexer, compress plans.

Torch on any device, shaped like upstream (SGLang 0.5.23):

=========================  ==================================================
``compressed_attention``   ``DSV4AttnMetadata.init_compression_metadata``
``sparse_buffers``         ``init_flashmla_related`` (``sparse_buffers``)
``indexer_metadata``       ``init_forward_metadata_indexer`` (c4)
``compress_plans``         ``create_paged_compressor_data``: the plan from the
                           **host mirror** when an eager uniform build has one
                           (``host_plan``), from the device lengths otherwise
                           (``device_plan``, a fixed buffer, no sync)
=========================  ==================================================

The host plan is the one place the host mirror reaches the GPU: the mirror's
``seq_lens_cpu + num_draft`` and the host extend lengths are walked on the host,
staged and copied over asynchronously, as upstream's planner does.  The device
plan is a buffer of one row per token slot (``num_q`` rows, the padded tier on
the graph path): row ``t`` holds token ``t``'s entry or the invalid marker (-1
first), so its shape never depends on device values.  ``layout`` is stage 1's
:class:`metadata_builders.families.dsv4.hip.pipeline.Layout` (typed ``Any``: this module is below ``hip``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from metadata_builders.families.dsv4.hip import low_ratios as hip_low_ratios

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import Compression
    from metadata_builders.families.dsv4.inputs import VerifyInputs

__all__ = ["compress_plans", "compressed_attention", "compression_groups", "device_plan", "host_plan",
           "indexer_metadata", "sparse_buffers"]

_I32 = torch.int32
_I64 = torch.int64
RATIOS = (4, 128)


def _aligned(width: int, align: int) -> int:
    return -(-width // align) * align


def compression_groups(layout: Any, inputs: VerifyInputs, core: dict[str, torch.Tensor],
                       seq_lens_cpu: list[int] | None) -> dict[str, torch.Tensor]:
    """Every compression group of one build (a geometry with compression only), the low ratios last."""
    out = compressed_attention(inputs, core["seq_lens_casual"], core["raw_out_loc"], core["page_table"])
    out.update(sparse_buffers(inputs, out))
    out.update(indexer_metadata(out))
    out.update(compress_plans(layout, inputs, seq_lens_cpu))
    # target-verify rows are one token each, so they take the decode indexer's inputs (upstream: decode rows)
    out.update(hip_low_ratios.low_ratio_groups(inputs, core, is_prefill=False))
    return out


def compressed_attention(inputs: VerifyInputs, casual: torch.Tensor, raw_out_loc: torch.Tensor,
                         page_table: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per ratio: ``casual // r`` (raw, clamped to 1), store location ``loc // r`` where ``casual % r == 0``."""
    geo = inputs.geometry
    assert geo.compression is not None
    out: dict[str, torch.Tensor] = {}
    for ratio in RATIOS:
        raw = torch.div(casual, ratio, rounding_mode="floor").to(_I32)
        compress = torch.remainder(casual, ratio) == 0
        out[f"c{ratio}_out_loc"] = torch.where(compress, torch.div(raw_out_loc.to(_I64), ratio, rounding_mode="floor"),
                                               torch.zeros_like(raw_out_loc, dtype=_I64))
        out[f"c{ratio}_topk_lengths_raw"] = raw
        out[f"c{ratio}_topk_lengths_clamp1"] = raw.clamp(min=1)
    out["c128_page_indices"] = c128_page_indices(inputs, page_table, out["c128_topk_lengths_raw"])
    for ratio in RATIOS:
        out[f"unified_c{ratio}_out_loc"] = out[f"c{ratio}_out_loc"] + geo.compression.unified_swa_pages
    return out


def c128_page_indices(inputs: VerifyInputs, page_table: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
    """Slot ``k`` = ``page_table[t][k // per_page] * per_page + k % per_page`` below the raw length, else -1."""
    geo = inputs.geometry
    per_page = geo.page_size // 128
    width = per_page * page_table.shape[1]
    k = torch.arange(width, dtype=_I64, device=page_table.device)
    slots = page_table.to(_I64)[:, k // per_page] * per_page + k % per_page
    slots = torch.where(k.unsqueeze(0) < raw.to(_I64).unsqueeze(1), slots, torch.full_like(slots, -1)).to(_I32)
    return F.pad(slots, (0, _aligned(width, geo.page_index_align) - width), value=-1)


def sparse_buffers(inputs: VerifyInputs, compressed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The c4 lengths clamped to ``index_topk``; page indices all -1 (the top-k kernel fills them later)."""
    geo = inputs.geometry
    assert geo.compression is not None
    topk = geo.compression.index_topk
    clamp1 = compressed["c4_topk_lengths_clamp1"]
    return {
        "c4_sparse_topk_lengths": clamp1.clamp(max=topk),
        "c4_sparse_topk_lengths_raw": compressed["c4_topk_lengths_raw"].clamp(max=topk),
        "c4_sparse_page_indices": torch.full((clamp1.shape[0], _aligned(topk, geo.page_index_align)), -1,
                                             dtype=_I32, device=clamp1.device),
    }


def indexer_metadata(compressed: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The c4 indexer's compressed lengths: the raw c4 lengths themselves (upstream aliases them)."""
    return {"indexer_compressed_seq_lens": compressed["c4_topk_lengths_raw"]}


def compress_plans(layout: Any, inputs: VerifyInputs, seq_lens_cpu: list[int] | None) -> dict[str, torch.Tensor]:
    """The c4/c128 plans: from the host mirror on an eager uniform build that has one, else from the device."""
    compression = inputs.geometry.compression
    assert compression is not None
    host = inputs.variant.path == "eager" and inputs.verify_lens is None and seq_lens_cpu is not None
    out: dict[str, torch.Tensor] = {}
    for ratio in RATIOS:
        if host:
            assert seq_lens_cpu is not None
            draft = inputs.num_draft_tokens
            plan = host_plan(ratio, compression, inputs, [s + draft for s in seq_lens_cpu], [draft] * inputs.rows)
        else:
            plan = device_plan(ratio, compression, layout, inputs)
        out[f"c{ratio}_compress_plan"], out[f"c{ratio}_write_plan"] = plan
    return out


def _window_and_pad(ratio: int, ring: int) -> tuple[int, int]:
    window = ratio * (2 if ratio == 4 else 1)
    return window, (ring - window + 2 if ring > window else 0)


def host_plan(ratio: int, compression: Compression, inputs: VerifyInputs, seq_lens: list[int],
              extend: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The planner's host loop over the mirror, staged and copied over (no sync); slots resolved on the device.

    As upstream's planner: the host walks the mirror and stages each event with
    its row; a device pass then turns rows into slots and ring locations.
    """
    window, pad = _window_and_pad(ratio, compression.ring_size(ratio))
    compress: list[list[int]] = []
    write: list[list[int]] = []
    ragged = 0
    for i, (seq_len, n) in enumerate(zip(seq_lens, extend)):
        first_write = min(seq_len // ratio * ratio - (ratio if ratio == 4 else 0), seq_len - pad)
        for j in range(n):
            position = seq_len - n + j
            if (position + 1) % ratio == 0:
                compress.append([position, ragged + j, window - min(j + 1, window), i])
            if position >= first_write:
                write.append([position, ragged + j, i])
        ragged += n
    device = inputs.seq_lens.device
    staged_c = torch.tensor(compress, dtype=_I64).reshape(-1, 4).to(device, non_blocking=True)
    staged_w = torch.tensor(write, dtype=_I64).reshape(-1, 3).to(device, non_blocking=True)
    ring = compression.ring_size(ratio)
    slots = inputs.req_pool_indices.to(_I64)
    position, rows = staged_c[:, 0], staged_c[:, 3]
    plan_c = _compress_entries(ratio, ring, position, staged_c[:, 1], staged_c[:, 2], rows, slots[rows])
    plan_w = torch.stack([staged_w[:, 1], _ring_loc(slots[staged_w[:, 2]], staged_w[:, 0], ring)], dim=1)
    return plan_c.to(_I32), plan_w.to(_I32)


def _ring_loc(slot: torch.Tensor, position: torch.Tensor, ring: int) -> torch.Tensor:
    """The per-request ring: ``slot * ring + position % ring``."""
    return slot * ring + torch.remainder(position, ring)


def _compress_entries(ratio: int, ring: int, position: torch.Tensor, ragged: torch.Tensor, buffered: torch.Tensor,
                      rows: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
    """``[position + 1, ragged_id, buffer_len, read_page_0, read_page_1]``; read pages only where buffered."""
    keep = buffered > 0
    page0 = torch.div(_ring_loc(slot, (position - ratio).clamp(min=0), ring), ratio, rounding_mode="floor")
    page1 = torch.div(_ring_loc(slot, position, ring), ratio, rounding_mode="floor")
    return torch.stack([position + 1, ragged, buffered, torch.where(keep, page0, -1), torch.where(keep, page1, rows)],
                       dim=1)


def device_plan(ratio: int, compression: Compression, layout: Any,
                inputs: VerifyInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """One row per token slot (``num_q``): token ``t``'s entry, or -1 first for none; no sync."""
    ring = compression.ring_size(ratio)
    window, pad = _window_and_pad(ratio, ring)
    device = layout.seq_lens.device
    num_q = inputs.padded_num_tokens if inputs.variant.path == "graph" else layout.num_tokens
    start, extend = layout.extend_start_loc.to(_I64), layout.extend_seq_lens.to(_I64)
    seq_lens = layout.seq_lens.to(_I64)
    t = torch.arange(num_q, dtype=_I64, device=device)
    r = (torch.searchsorted(start, t, right=True) - 1).clamp(min=0)
    real = t < start[-1] + extend[-1]
    j = t - start[r]
    position = seq_lens[r] - extend[r] + j
    slot = inputs.req_pool_indices.to(_I64)[r]
    buffered = window - torch.clamp(j + 1, max=window)
    compress = _compress_entries(ratio, ring, position, t, buffered, r, slot)
    compresses = real & (torch.remainder(position + 1, ratio) == 0)
    compress = torch.cat([torch.where(compresses, compress[:, 0], -1).unsqueeze(1), compress[:, 1:]], dim=1)
    last_c = torch.div(seq_lens[r], ratio, rounding_mode="floor") * ratio - (ratio if ratio == 4 else 0)
    writes = real & (position >= torch.minimum(last_c, seq_lens[r] - pad))
    write = torch.stack([torch.where(writes, t, -1), _ring_loc(slot, position, ring)], dim=1)
    return compress.to(_I32), write.to(_I32)
