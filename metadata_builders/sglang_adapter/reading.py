"""Reading: upstream's ``DSV4Metadata``, and the values it passed between stages, as the harness's fields.

Worked example (uniform EAGLE, ``seq_lens=[5, 3]``, 2 drafts): upstream passes
``_attach_unified_kv_prefill_meta(seq_lens=[7, 5], extend_seq_lens=[2, 2],
num_tokens=4, exact_num_tokens=False, ...)`` -- read as the fields
``seq_lens``/``extend_seq_lens`` and the decision -- and returns
``core_attn_metadata`` whose ``seq_lens_casual`` is ``[6, 7, 4, 5]``; a uniform
build passes no ``extend_start_loc``, which is then listed as not observable.
"""

from __future__ import annotations

from typing import Any

from metadata_builders.metadata import Decision, VerifyMetadata

__all__ = ["read"]


def read(md: Any, seen: dict[str, dict[str, Any]]) -> VerifyMetadata:
    """Map upstream's ``DSV4Metadata`` and the values it passed between stages onto ``FIELD_NAMES``.

    ``seq_lens``, ``extend_seq_lens``, ``num_tokens`` and the gated exactness are
    the arguments of ``_attach_unified_kv_prefill_meta``; ``req_pool_indices_repeated``
    and ``max_seq_len`` those of ``make_core_attn_metadata``; ``extend_start_loc``
    that of ``init_forward_metadata_prefill``, which upstream passes only for
    ragged batches (uniform: not observable).
    """
    core = md.core_attn_metadata
    unified = core.unified
    meta = seen["_attach_unified_kv_prefill_meta"]
    core_args = seen["make_core_attn_metadata"]
    start = seen.get("init_forward_metadata_prefill", {}).get("extend_start_loc")
    fields = {
        "seq_lens": meta["seq_lens"],
        "extend_seq_lens": meta["extend_seq_lens"],
        "seq_lens_casual": core.seq_lens_casual,
        "positions_casual": core.positions_casual,
        "req_pool_indices_repeated": core_args["req_pool_indices_repeated"],
        "swa_topk_lengths": core.swa_topk_lengths,
        "page_table": core.page_table,
        "swa_page_indices": core.swa_page_indices,
        "raw_out_loc": core.raw_out_loc,
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
    # 0.5.20+ pass the gated exactness; 0.5.18/0.5.19 pass output_size only without compression.
    exact = bool(meta["exact_num_tokens"]) if "exact_num_tokens" in meta else not meta.get("need_compress", True)
    decision = Decision(int(meta["num_tokens"]), exact, exact, int(core_args["max_seq_len"]))
    return VerifyMetadata(fields, decision, not_observable=not_observable)
