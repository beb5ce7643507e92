"""Reading: upstream's ``DSV4Metadata``, and the values it passed between stages, as the harness's fields.

Worked example (uniform EAGLE, ``seq_lens=[5, 3]``, 2 drafts): upstream passes
``_attach_unified_kv_prefill_meta(seq_lens=[7, 5], extend_seq_lens=[2, 2],
num_tokens=4, exact_num_tokens=False, ...)`` -- read as the fields
``seq_lens``/``extend_seq_lens`` and the decision -- and returns
``core_attn_metadata`` whose ``seq_lens_casual`` is ``[6, 7, 4, 5]``; a uniform
build passes no ``extend_start_loc``, which is then listed as not observable.

With compression (``geometry.compression``), the compressed, sparse, indexer and
plan groups are read too: ``core_attn_metadata.c4_out_loc`` ... as themselves,
``core.unified.c4_out_loc`` as ``unified_c4_out_loc``,
``indexer_metadata.compressed_seq_lens`` as ``indexer_compressed_seq_lens``, and
``c4_compress_metadata.plan_c``/``.plan_w`` as ``c4_compress_plan``/``c4_write_plan``,
and for each low ratio ``R`` of the geometry ``core_attn_metadata.c{R}_*`` as themselves and
``c{R}_indexer_metadata.compressed_seq_lens``/``.page_table`` as ``c{R}_indexer_*``, and what the
in-graph block sets -- ``low_ratio_req_indices``, ``low_ratio_pos_i64`` and (any geometry)
``core_attn_metadata.swa_out_cache_loc`` -- under their own names
(int32 rows decoded where the plan lives,
:func:`~metadata_builders.families.dsv4.sglang.plan_kernel.compress_rows`; the harness
lists and canonicalizes them after the audit).  A field upstream left ``None`` is
not observable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from metadata_builders.families.dsv4.metadata import (
    FIELD_NAMES,
    MODE_FIELD_NAMES,
    STREAM_FIELD_NAMES,
    Decision,
    VerifyMetadata,
)

if TYPE_CHECKING:
    import torch

__all__ = [
    "COMPRESSED_CORE", "LOW_RATIO_CORE", "compress_rows", "compression_fields", "core_fields", "decision",
    "decode_compress_plan",
    "decode_streams", "decode_write_plan", "grouped_streams", "read", "read_mode", "streams_unobservable", "write_rows",
]

COMPRESSED_CORE = (
    "c4_out_loc", "c4_topk_lengths_raw", "c4_topk_lengths_clamp1",
    "c128_out_loc", "c128_topk_lengths_raw", "c128_topk_lengths_clamp1", "c128_page_indices",
    "c4_sparse_topk_lengths", "c4_sparse_topk_lengths_raw", "c4_sparse_page_indices",
)
"""Compressed-group fields ``core_attn_metadata`` holds under the harness's own names."""


def read(md: Any, seen: dict[str, dict[str, Any]], geometry: Any,
         unobservable: Mapping[str, str] | None = None) -> VerifyMetadata:
    """Map upstream's ``DSV4Metadata`` and the values it passed between stages onto ``FIELD_NAMES``.

    ``seq_lens``, ``extend_seq_lens``, ``num_tokens`` and the gated exactness are
    the arguments of ``_attach_unified_kv_prefill_meta``; ``req_pool_indices_repeated``
    and ``max_seq_len`` those of ``make_core_attn_metadata``; ``extend_start_loc``
    that of ``init_forward_metadata_prefill``, which upstream passes only for
    ragged batches (uniform: not observable); the decode streams from
    ``core.unified`` (:func:`decode_streams`).  ``unobservable``: None without
    compression; with it, the fields the geometry cannot give (a stub stands in).
    """
    core = md.core_attn_metadata
    unified = core.unified
    meta = seen["_attach_unified_kv_prefill_meta"]
    core_args = seen["make_core_attn_metadata"]
    start = seen.get("init_forward_metadata_prefill", {}).get("extend_start_loc")
    fields = {
        "seq_lens": meta["seq_lens"],
        "extend_seq_lens": meta["extend_seq_lens"],
        **core_fields(core, core_args),
        "pf_state_slot": unified.pf_state_slot,
        "pf_chunk_start": unified.pf_chunk_start,
        "pf_cu_q": unified.pf_cu_q,
        "pf_final_pos": unified.pf_final_pos,
        "verify_store_state_slot": unified.verify_store_state_slot,
        "swa_loc": unified.swa_loc,
    }
    not_observable: tuple[str, ...] = ()
    if start is None:
        not_observable = ("extend_start_loc",)
    else:
        fields["extend_start_loc"] = start
    paged = getattr(core, "swa_out_cache_loc", None)  # set by the in-graph block: not on a build that skips it
    if paged is None:
        not_observable += ("swa_out_cache_loc",)
    else:
        fields["swa_out_cache_loc"] = paged
    streams, streams_missing = decode_streams(unified, geometry)
    fields.update(streams)
    fields.update(grouped_streams(unified))
    not_observable += streams_missing
    if unobservable is not None:
        compressed = compression_fields(md, geometry.compression.low_ratios)
        fields.update({n: v for n, v in compressed.items() if v is not None})
        for name in FIELD_NAMES:  # what the geometry cannot give (a stub stands in) or upstream left None
            if name not in not_observable and (name in unobservable or (name in compressed and name not in fields)):
                fields.pop(name, None)
                not_observable += (name,)
    return VerifyMetadata(fields, decision(seen), not_observable=not_observable)


def core_fields(core: Any, core_args: Mapping[str, Any]) -> dict[str, Any]:
    """The core group of ``core_attn_metadata`` (every mode's), the slots as ``make_core_attn_metadata`` got them."""
    return {
        "seq_lens_casual": core.seq_lens_casual,
        "positions_casual": core.positions_casual,
        "req_pool_indices_repeated": core_args["req_pool_indices_repeated"],
        "swa_topk_lengths": core.swa_topk_lengths,
        "page_table": core.page_table,
        "swa_page_indices": core.swa_page_indices,
        "raw_out_loc": core.raw_out_loc,
    }


def read_mode(md: Any, seen: dict[str, dict[str, Any]], geometry: Any, mode: str,
              unobservable: Mapping[str, str] | None = None) -> VerifyMetadata:
    """:func:`read` for a build of ``mode``: target verify's whole read, or (``draft_extend``) the mode's fields of
    it (:data:`~metadata_builders.families.dsv4.metadata.MODE_FIELD_NAMES`; no compression group is read)."""
    if mode == "target_verify":
        return read(md, seen, geometry, unobservable)
    names = MODE_FIELD_NAMES[mode]
    assert names is not None, mode
    full = read(md, seen, geometry)
    fields = {name: full.fields[name] for name in names if name in full.fields}
    return VerifyMetadata(fields, full.decision, not_observable=tuple(n for n in names if n not in fields))


def decision(seen: dict[str, dict[str, Any]]) -> Decision:
    """The build's decision, from the arguments upstream passed its stages (see :func:`read`)."""
    meta = seen["_attach_unified_kv_prefill_meta"]
    # 0.5.20+ pass the gated exactness; 0.5.18/0.5.19 pass output_size only without compression.
    exact = bool(meta["exact_num_tokens"]) if "exact_num_tokens" in meta else not meta.get("need_compress", True)
    return Decision(int(meta["num_tokens"]), exact, exact, int(seen["make_core_attn_metadata"]["max_seq_len"]))


def decode_streams(unified: Any, geometry: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The decode index streams (``unified.swa/hca/csa_indices``, ``*_indptr``), upstream's flat buffers.

    Judged only where the SWA window equals the unified pool's (``metadata.fields_for``);
    there a stream upstream did not build (the ``torch`` route) is not observable.
    The harness turns the flat buffers into per-token rows after the audit.
    """
    if geometry.swa_window != geometry.unified_swa_window:
        return {}, ()
    values = {name: getattr(unified, name, None) for name in STREAM_FIELD_NAMES}
    missing = tuple(name for name, value in values.items() if value is None)
    return {name: value for name, value in values.items() if value is not None}, missing


def grouped_streams(unified: Any) -> dict[str, Any]:
    """The grouped verify streams (``unified.gasm_*``, built with ``SGLANG_DSV4_GROUPED_ASM`` on, 0.5.21+) as
    ``gasm_indices`` (the flat buffer), ``gasm_kv_indptr``, ``gasm_qo_indptr``; ``{}`` where upstream built none."""
    values = {name: getattr(unified, name, None) for name in ("gasm_indices", "gasm_kv_indptr", "gasm_qo_indptr")}
    return {} if any(value is None for value in values.values()) else values


def streams_unobservable(geometry: Any, not_reported: tuple[str, ...]) -> dict[str, str]:
    """Why a decode stream is not judged: the windows differ, or upstream built none (``not_reported``)."""
    if geometry.swa_window != geometry.unified_swa_window:
        why = (f"swa_window {geometry.swa_window} != unified_swa_window {geometry.unified_swa_window}: upstream's "
               "window kernel leaves or overruns its segments (judged only where they are equal)")
        return dict.fromkeys(STREAM_FIELD_NAMES, why)
    return dict.fromkeys((n for n in not_reported if n in STREAM_FIELD_NAMES),
                         "upstream built no stream (the torch route does not run build_decode_streams)")


LOW_RATIO_CORE = ("out_loc", "topk_lengths_clamp1", "sparse_topk_lengths", "sparse_page_indices", "sparse_raw_indices")
"""Low-ratio fields ``core_attn_metadata`` holds as ``c{R}_<name>``, the harness's names too."""


def compression_fields(md: Any, low_ratios: tuple[int, ...] = ()) -> dict[str, Any]:
    """The compressed, sparse, indexer, plan and ``low_ratios`` groups of a build with compression; None where
    upstream left none (a release without the low ratios: every one of theirs)."""
    core = md.core_attn_metadata
    unified = core.unified
    out: dict[str, Any] = {name: getattr(core, name, None) for name in COMPRESSED_CORE}
    out["unified_c4_out_loc"] = getattr(unified, "c4_out_loc", None)
    out["unified_c128_out_loc"] = getattr(unified, "c128_out_loc", None)
    indexer = md.indexer_metadata
    # 0.5.18/0.5.19 name it c4_seq_lens
    lengths = getattr(indexer, "compressed_seq_lens", getattr(indexer, "c4_seq_lens", None))
    out["indexer_compressed_seq_lens"] = lengths
    for ratio in (4, 128):
        plan = getattr(md, f"c{ratio}_compress_metadata", None)
        plan_c, plan_w = getattr(plan, "plan_c", None), getattr(plan, "plan_w", None)
        out[f"c{ratio}_compress_plan"] = None if plan_c is None else compress_rows(plan_c)
        out[f"c{ratio}_write_plan"] = None if plan_w is None else write_rows(plan_w)
    if low_ratios:
        # Set by init_forward_metadata_in_graph (the graph path; eager: after the entry point, as the dispatcher).
        out["low_ratio_req_indices"] = getattr(md, "low_ratio_req_indices", None)
        out["low_ratio_pos_i64"] = getattr(md, "low_ratio_pos_i64", None)
    for ratio in low_ratios:
        out.update({f"c{ratio}_{n}": getattr(core, f"c{ratio}_{n}", None) for n in LOW_RATIO_CORE})
        low = getattr(md, f"c{ratio}_indexer_metadata", None)
        out[f"c{ratio}_indexer_compressed_seq_lens"] = getattr(low, "compressed_seq_lens", None)
        out[f"c{ratio}_indexer_page_table"] = getattr(low, "page_table", None)
    return out


# -- reading the plans (the compress-plan kernel's bytes, plan_kernel.py) -----------------------------


def compress_rows(plan_c: torch.Tensor) -> torch.Tensor:
    """``plan_c`` as int32 rows ``[seq_len, ragged_id, buffer_len, read_page_0, read_page_1]`` (invalid: -1 first).

    A view and bit operations where the plan lives: no host read (the harness lists
    and canonicalizes the rows after the audit).
    """
    import torch

    words = plan_c.contiguous().view(torch.int32).view(-1, 4)
    packed = words[:, 1]
    return torch.stack([words[:, 0], packed & 0xFFFF, (packed >> 16) & 0xFFFF, words[:, 2], words[:, 3]], dim=1)


def write_rows(plan_w: torch.Tensor) -> torch.Tensor:
    """``plan_w`` as int32 rows ``[ragged_id, write_loc]`` (invalid: ragged_id -1)."""
    import torch

    return plan_w.contiguous().view(torch.int32).view(-1, 2)


def decode_compress_plan(plan_c: torch.Tensor) -> list[list[int]]:
    """:func:`compress_rows` as a list (a host read: for tests and ``ci/gpu_checks.py``)."""
    return compress_rows(plan_c).tolist()


def decode_write_plan(plan_w: torch.Tensor) -> list[list[int]]:
    return write_rows(plan_w).tolist()  # write_rows as a list
