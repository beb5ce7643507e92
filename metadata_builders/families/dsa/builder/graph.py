"""The graph path: upstream's capture and replay of the DSA metadata, both replay routes.

==========================================  =============================================================  ==========
stage (this module)                         upstream (``DeepseekSparseAttnBackend``)                        0.5.23
==========================================  =============================================================  ==========
:func:`init_cuda_graph_state`               ``init_cuda_graph_state(max_bs, max_num_tokens)``: the shared   B:1504
                                            ``page_table [max_num_tokens, W]``, ``cu_seqlens_q``, the arange
:func:`init_forward_metadata_out_graph`     ``init_forward_metadata_out_graph``: ``seq_lens.cpu()`` at       B:1076
                                            capture, then :func:`apply_cuda_graph_metadata`
:func:`build_forward_metadata_cuda_graph`   ``_build_forward_metadata_cuda_graph``: a ``bs`` first seen       B:1627
                                            (the capture's dummy batch); ``seq_lens.tolist()`` builds
                                            verify's expanded lengths on the host
:func:`apply_cuda_graph_metadata`           ``_apply_cuda_graph_metadata``: replay into the captured          B:1797
                                            metadata, by mode and route
:func:`replay_decode_torch` / ``_verify_`` / ``_draft_extend_torch``  its torch fallback branches         B:1866-2034
:func:`replay_fused`                        its fused branches (``fused_dsa_*_metadata``: HIP from 0.5.20   B:1844-2001
                                            with ``index_kpool <= 1``)
:func:`refresh_sparse_tail`                 the epilogue both routes share: ``dsa_cu_seqlens_k`` and         B:2070-2090
                                            ``real_page_table`` copies (torch route only)
:func:`precompute_decode_mode`              ``_precompute_replay_metadata`` / ``_precompute_decode_mode``   M:100-235
                                            (draft decode: once, on child 0)
:func:`copy_base_replay_buffers`            ``_copy_base_replay_buffers`` (HIP: the torch copies)           G:80-199
==========================================  =============================================================  ==========

The backend's state is a dict: ``page_table``, ``cu_seqlens_q``, ``arange`` and ``metadata`` (``bs`` -> the
captured metadata, a dict of tensors and host values; keyed by ``bs`` alone, as upstream).  On decode the
captured ``dsa_seqlens_expanded`` *is* ``cache_seqlens_int32`` (one tensor); with ``P == 1``
``real_page_table`` *is* ``page_table_1``.  Stages are called through this module's globals (mutants).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from metadata_builders.families.dsa.builder import kernels

if TYPE_CHECKING:
    from metadata_builders.families.dsa.inputs import DSAInputs

__all__ = ["apply_cuda_graph_metadata", "build_forward_metadata_cuda_graph", "copy_base_replay_buffers",
           "init_cuda_graph_state", "init_forward_metadata_out_graph", "precompute_decode_mode", "refresh_sparse_tail",
           "replay_decode_torch", "replay_draft_extend_torch", "replay_fused", "replay_verify_torch"]

_I32 = torch.int32
_SPEC = ("target_verify", "draft_extend")


def init_cuda_graph_state(max_bs: int, max_num_tokens: int, req_to_token: torch.Tensor,
                          device: Any) -> dict[str, Any]:
    """The backend's graph buffers (HIP keeps the wide page table: ``dsa_drop_wide_page_table`` is False)."""
    return {
        "cache_seqlens": torch.ones(max_num_tokens, dtype=_I32, device=device),
        "cu_seqlens_q": torch.arange(0, max_bs + 1, dtype=_I32, device=device),
        "cu_seqlens_k": torch.zeros(max_bs + 1, dtype=_I32, device=device),
        "page_table": torch.zeros(max_num_tokens, req_to_token.shape[1], dtype=_I32, device=device),
        "arange": torch.arange(max_num_tokens + 1, dtype=_I32, device=device),
        "metadata": {},
    }


def init_forward_metadata_out_graph(state: dict[str, Any], inputs: DSAInputs) -> dict[str, Any]:
    """Before the capture and every replay: the capture reads ``seq_lens`` back (out of the graph)."""
    seq_lens_cpu = inputs.seq_lens.cpu() if inputs.in_capture else inputs.seq_lens_cpu
    return apply_cuda_graph_metadata(state, inputs, seq_lens_cpu)


def build_forward_metadata_cuda_graph(state: dict[str, Any], inputs: DSAInputs) -> dict[str, Any]:
    """Create and store the metadata of a new ``bs`` (the capture's dummy batch)."""
    bs, n, device = inputs.batch_size, inputs.num_draft_tokens, inputs.device
    seq_lens = inputs.seq_lens
    if inputs.mode in _SPEC:
        cache_seqlens_int32 = (seq_lens + n).to(_I32)
        real_rows = bs * n
        cu_seqlens_q = torch.arange(0, bs * n + 1, 1, dtype=_I32, device=device)
        seqlens_int32_cpu = [n + kv_len for kv_len in seq_lens.tolist()]
        seqlens_expanded = torch.cat([torch.arange(kv_len - n + 1, kv_len + 1, dtype=_I32, device=device)
                                      for kv_len in seqlens_int32_cpu])
        extend_list = [1] * bs * n
    else:
        cache_seqlens_int32 = seq_lens.to(_I32)
        real_rows = bs
        cu_seqlens_q = state["cu_seqlens_q"][: bs + 1]
        seqlens_expanded = cache_seqlens_int32
        extend_list = [1] * bs
    page_table_1 = state["page_table"][:real_rows, :]
    dsa_cache_seqlens_int32 = kernels.compute_dsa_seqlens(seqlens_expanded, inputs.index_topk)
    dsa_cu_seqlens_k = kernels.compute_cu_seqlens(dsa_cache_seqlens_int32)
    metadata = {
        "cache_seqlens_int32": cache_seqlens_int32, "cu_seqlens_k": kernels.compute_cu_seqlens(cache_seqlens_int32),
        "cu_seqlens_q": cu_seqlens_q, "page_table_1": page_table_1,
        "real_page_table": kernels.transform_table_1_to_real(page_table_1, inputs.page_size),
        "dsa_seqlens_expanded": seqlens_expanded, "dsa_cache_seqlens_int32": dsa_cache_seqlens_int32,
        "dsa_cu_seqlens_k": dsa_cu_seqlens_k, "dsa_cu_seqlens_q": state["arange"][: len(dsa_cu_seqlens_k)],
        "page_size": inputs.page_size, "max_seq_len_q": 1, "max_seq_len_k": page_table_1.shape[1],
        "dsa_max_seqlen_q": 1, "dsa_extend_seq_lens_list": extend_list, "seq_lens_sum": None,
        "indexer_seq_lens_cpu": None, "indexer_seq_lens": None,
    }
    state["metadata"][bs] = metadata
    return metadata


def apply_cuda_graph_metadata(state: dict[str, Any], inputs: DSAInputs, seq_lens_cpu: Any) -> dict[str, Any]:
    """Capture (a ``bs`` not yet in the state) or replay into its metadata, by mode and route."""
    bs = inputs.batch_size
    if bs not in state["metadata"]:
        return build_forward_metadata_cuda_graph(state, inputs)
    metadata = state["metadata"][bs]
    seq_lens, req_pool_indices = inputs.seq_lens[:bs], inputs.req_pool_indices[:bs]
    if inputs.variant.route == "fused":
        replay_fused(metadata, inputs, seq_lens, req_pool_indices)
        return metadata
    if inputs.mode in ("decode", "idle", "draft_decode"):
        dsa_cache, page_indices = replay_decode_torch(metadata, inputs, seq_lens, req_pool_indices)
    elif inputs.mode == "target_verify":
        dsa_cache, page_indices = replay_verify_torch(metadata, inputs, seq_lens, req_pool_indices)
    else:
        dsa_cache, page_indices = replay_draft_extend_torch(metadata, inputs, seq_lens, req_pool_indices)
    refresh_sparse_tail(metadata, inputs, dsa_cache, page_indices)
    return metadata


def replay_decode_torch(metadata: dict[str, Any], inputs: DSAInputs, seq_lens: torch.Tensor,
                        req_pool_indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Decode / idle, torch route: the lengths, the whole width of every row, the sparse lengths."""
    max_len = metadata["page_table_1"].shape[1]
    cache_seqlens = seq_lens.to(_I32)
    metadata["cache_seqlens_int32"].copy_(cache_seqlens)
    metadata["cu_seqlens_k"][1:].copy_(torch.cumsum(cache_seqlens, dim=0, dtype=_I32))
    page_indices = inputs.req_to_token[req_pool_indices, :max_len]
    metadata["page_table_1"][:, :max_len].copy_(page_indices)
    dsa_cache_seqlens = kernels.compute_dsa_seqlens(cache_seqlens, inputs.index_topk)
    metadata["dsa_cache_seqlens_int32"].copy_(dsa_cache_seqlens)
    return dsa_cache_seqlens, page_indices


def replay_verify_torch(metadata: dict[str, Any], inputs: DSAInputs, seq_lens: torch.Tensor,
                        req_pool_indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Target verify, torch route: lengths ``+ N``, rows repeated ``N`` times, the device-filled extend lengths
    (``torch.full``: no pageable copy) through ``seqlens_expand_triton``."""
    n, bs = inputs.num_draft_tokens, inputs.batch_size
    max_seqlen_k = metadata["page_table_1"].shape[1]
    cache_seqlens = (seq_lens + n).to(_I32)
    metadata["cache_seqlens_int32"].copy_(cache_seqlens)
    metadata["cu_seqlens_k"][1:].copy_(torch.cumsum(cache_seqlens, dim=0, dtype=_I32))
    page_indices = inputs.req_to_token[req_pool_indices, :max_seqlen_k]
    page_indices = torch.repeat_interleave(page_indices, repeats=n, dim=0)
    metadata["page_table_1"][:, :max_seqlen_k].copy_(page_indices)
    extend_seq_lens = torch.full((bs,), n, dtype=_I32, device=inputs.device)
    seqlens_expanded = kernels.seqlens_expand_triton(extend_seq_lens, cache_seqlens, n * bs, n)
    metadata["dsa_seqlens_expanded"].copy_(seqlens_expanded)
    dsa_cache_seqlens = kernels.compute_dsa_seqlens(seqlens_expanded, inputs.index_topk)
    metadata["dsa_cache_seqlens_int32"].copy_(dsa_cache_seqlens)
    return dsa_cache_seqlens, page_indices


def replay_draft_extend_torch(metadata: dict[str, Any], inputs: DSAInputs, seq_lens: torch.Tensor,
                              req_pool_indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Draft extend, torch route: the caller's lengths as they are, a static width of ``N`` a request (#29413's
    fix: no ``.tolist()``, no data-dependent ``repeat_interleave``)."""
    n, bs = inputs.num_draft_tokens, inputs.batch_size
    max_seqlen_k = metadata["page_table_1"].shape[1]
    total_extend_len = n * bs
    extend_seq_lens = torch.full((bs,), n, dtype=_I32, device=inputs.device)
    cache_seqlens = seq_lens.to(_I32)
    metadata["cache_seqlens_int32"].copy_(cache_seqlens)
    metadata["cu_seqlens_k"][1:].copy_(torch.cumsum(cache_seqlens, dim=0, dtype=_I32))
    page_indices = inputs.req_to_token[req_pool_indices, :max_seqlen_k]
    page_indices = torch.repeat_interleave(page_indices, repeats=n, dim=0)
    metadata["page_table_1"][:, :max_seqlen_k].copy_(page_indices)
    seqlens_expanded = kernels.seqlens_expand_triton(extend_seq_lens, cache_seqlens, total_extend_len, n)
    metadata["dsa_seqlens_expanded"][: seqlens_expanded.shape[0]].copy_(seqlens_expanded)
    dsa_cache_seqlens = kernels.compute_dsa_seqlens(seqlens_expanded, inputs.index_topk)
    metadata["dsa_cache_seqlens_int32"].copy_(dsa_cache_seqlens)
    return dsa_cache_seqlens, page_indices


def refresh_sparse_tail(metadata: dict[str, Any], inputs: DSAInputs, dsa_cache_seqlens: torch.Tensor,
                        page_indices: torch.Tensor) -> None:
    """The torch route's epilogue: ``dsa_cu_seqlens_k`` over every expanded row, the real page table's rows."""
    size = dsa_cache_seqlens.shape[0]
    metadata["dsa_cu_seqlens_k"][1: 1 + size].copy_(torch.cumsum(dsa_cache_seqlens, dim=0, dtype=_I32))
    if inputs.page_size > 1:
        real_table = kernels.transform_table_1_to_real(page_indices, inputs.page_size)
        metadata["real_page_table"][: real_table.shape[0], : real_table.shape[1]].copy_(real_table)


def replay_fused(metadata: dict[str, Any], inputs: DSAInputs, seq_lens: torch.Tensor,
                 req_pool_indices: torch.Tensor) -> None:
    """The fused route: one kernel writes every field in place (page rows only up to their KV length)."""
    n, bs, p = inputs.num_draft_tokens, inputs.batch_size, inputs.page_size
    width = metadata["page_table_1"].shape[1]
    common = dict(req_to_token=inputs.req_to_token, cache_seqlens=metadata["cache_seqlens_int32"],
                  cu_seqlens_k=metadata["cu_seqlens_k"], page_table_1=metadata["page_table_1"],
                  dsa_cache_seqlens=metadata["dsa_cache_seqlens_int32"], dsa_cu_seqlens_k=metadata["dsa_cu_seqlens_k"],
                  real_page_table=metadata["real_page_table"], bs=bs, dsa_index_topk=inputs.index_topk,
                  physical_page_size=p)
    if inputs.mode == "target_verify":
        kernels.fused_dsa_target_verify_metadata(seq_lens, req_pool_indices, seqlens_expanded=metadata[
            "dsa_seqlens_expanded"], max_seqlen_k=width, next_n=n, **common)
    elif inputs.mode == "draft_extend":
        extend_seq_lens = torch.full((bs,), n, dtype=_I32, device=inputs.device)
        kernels.fused_dsa_draft_extend_metadata(seq_lens, extend_seq_lens, req_pool_indices,
                                                seqlens_expanded=metadata["dsa_seqlens_expanded"], total_len=n * bs,
                                                max_seqlen_k=width, max_extend_len=n, **common)
    else:
        kernels.fused_dsa_decode_metadata(seq_lens, req_pool_indices, max_len=width, **common)


def precompute_decode_mode(state: dict[str, Any], inputs: DSAInputs) -> dict[str, Any]:
    """Draft decode's one precompute (child 0's backend, ``DECODE``): fresh tensors; on the fused route
    ``torch.empty`` ones the fused decode kernel fills only over each row's live blocks."""
    bs, p, device = inputs.batch_size, inputs.page_size, inputs.device
    max_len = state["metadata"][bs]["page_table_1"].shape[1]
    seq_lens, req_pool_indices = inputs.seq_lens[:bs], inputs.req_pool_indices[:bs]
    if inputs.variant.route == "fused":
        out = {"cache_seqlens": torch.empty(bs, dtype=_I32, device=device),
               "cu_seqlens_k": torch.empty(bs + 1, dtype=_I32, device=device),
               "page_indices": torch.empty((bs, max_len), dtype=_I32, device=device),
               "dsa_cache_seqlens": torch.empty(bs, dtype=_I32, device=device),
               "dsa_cu_seqlens_k": torch.empty(bs + 1, dtype=_I32, device=device),
               "real_page_table": (torch.empty((bs, (max_len + p - 1) // p), dtype=_I32, device=device)
                                   if p > 1 else None)}
        kernels.fused_dsa_decode_metadata(seq_lens, req_pool_indices, inputs.req_to_token, out["cache_seqlens"],
                                          out["cu_seqlens_k"], out["page_indices"], out["dsa_cache_seqlens"],
                                          out["dsa_cu_seqlens_k"], out["real_page_table"], bs, max_len,
                                          inputs.index_topk, p)
        return {**out, "size": bs, "max_len": max_len}
    cache_seqlens = seq_lens.to(_I32)
    page_indices = inputs.req_to_token[req_pool_indices, :max_len].contiguous()
    dsa_cache_seqlens = kernels.compute_dsa_seqlens(cache_seqlens, inputs.index_topk)
    return {"cache_seqlens": cache_seqlens, "cu_seqlens_k": kernels.compute_cu_seqlens(cache_seqlens),
            "page_indices": page_indices, "dsa_cache_seqlens": dsa_cache_seqlens,
            "dsa_cu_seqlens_k": kernels.compute_cu_seqlens(dsa_cache_seqlens),
            "real_page_table": kernels.transform_table_1_to_real(page_indices, p) if p > 1 else None,
            "size": bs, "max_len": max_len}


def copy_base_replay_buffers(metadata: dict[str, Any], precomputed: dict[str, Any]) -> None:
    """One child's copy of the precompute (HIP never takes the CUDA JIT copy: the torch copies, G:160-199)."""
    metadata["cache_seqlens_int32"].copy_(precomputed["cache_seqlens"])
    metadata["cu_seqlens_k"][1:].copy_(precomputed["cu_seqlens_k"][1:])
    metadata["page_table_1"][:, : precomputed["max_len"]].copy_(precomputed["page_indices"])
    metadata["dsa_cache_seqlens_int32"].copy_(precomputed["dsa_cache_seqlens"])
    size = precomputed["size"]
    metadata["dsa_cu_seqlens_k"][1: 1 + size].copy_(precomputed["dsa_cu_seqlens_k"][1: 1 + size])
    if precomputed["real_page_table"] is not None:
        rows, cols = precomputed["real_page_table"].shape
        metadata["real_page_table"][:rows, :cols].copy_(precomputed["real_page_table"])
