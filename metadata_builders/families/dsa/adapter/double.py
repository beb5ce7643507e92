"""The backend double: upstream's ``DeepseekSparseAttnBackend`` made with ``object.__new__`` and only the attributes
its metadata path reads (traced per release: ``docs/research/sglang-dsa-backend.md`` section 8), and the forward
batch upstream's runner hands it, made from the harness's :class:`~metadata_builders.families.dsa.inputs.DSAInputs`.

Every value is what a HIP server with DeepSeek-V3.2 / GLM-5.x sets: ``index_kpool`` 1, the torch top-k backend (no
JIT plan), no kv-shard pool, ``use_mha`` False (no speculative mode runs MHA).  Both page-size names are set
(``real_page_size`` up to 0.5.21, ``physical_page_size`` from 0.5.22); ``_init_kpool_metadata_fusion`` (0.5.20+)
is upstream's own, called as its ``__init__`` calls it.

Draft decode's double is upstream's ``DeepseekSparseAttnMultiStepBackend`` made the same way: EAGLE with top-k 1
drafts ``speculative_num_steps = N - 1`` tokens, and the multi-step backend's ``__init__`` makes ``num_steps - 1``
children, ``DeepseekSparseAttnBackend(speculative_step_id=i, topk=1, speculative_num_steps=num_steps)``.  Worked
example: ``N = 4`` -> 3 steps -> children 0 and 1; a batch with ``draft_step=1`` is judged on child 1.  No metadata
path reads ``speculative_step_id`` (every child builds the same metadata from the same batch); the adapter still
judges the named child's own ``DSAMetadata``, so a copy that missed a child shows.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metadata_builders.families.dsa.inputs import DSAInputs

__all__ = ["FORWARD_MODES", "forward_batch", "make_backend", "make_multi_step"]

FORWARD_MODES = {"target_verify": "TARGET_VERIFY", "draft_extend": "DRAFT_EXTEND_V2", "decode": "DECODE",
                 "draft_decode": "DECODE", "idle": "IDLE"}
"""family mode -> upstream's ``ForwardMode`` member."""


def _false() -> bool:
    return False


def _zero() -> int:
    return 0


def make_backend(mods: SimpleNamespace, inputs: DSAInputs, step: int | None = None) -> Any:
    """A backend double for ``inputs``' constants and table (``step``: draft decode's child ``step``)."""
    import torch
    from sglang.srt.layers.attention.dsa.dsa_topk_backend import DSATopKBackend
    from sglang.srt.utils.torch_memory_saver_adapter import TorchMemorySaverAdapter

    req_to_token = inputs.req_to_token
    b = object.__new__(mods.backend.DeepseekSparseAttnBackend)
    b.device = req_to_token.device
    b.dsa_index_topk, b.dsa_index_kpool = inputs.index_topk, 1
    b.physical_page_size = b.real_page_size = inputs.page_size
    b.req_to_token_pool = SimpleNamespace(req_to_token=req_to_token, size=req_to_token.shape[0])
    b.req_to_token = req_to_token
    b.token_to_kv_pool = SimpleNamespace(dtype=torch.bfloat16, size=10**6, page_size=inputs.page_size)
    b._kv_shard_pool = b.hisparse_coordinator = None
    b.use_mha = b.supports_mha_one_shot = b.enable_auto_select_prefill_impl = False
    b.dsa_prefill_impl = b.dsa_decode_impl = "triton"
    b.dsa_kv_cache_store_fp8 = False
    b.speculative_num_draft_tokens = inputs.num_draft_tokens
    b.speculative_step_id, b.topk, b.use_fused_topk = step or 0, 1, False
    b.speculative_num_steps = inputs.num_draft_tokens - 1 if step is not None else 0
    b.dsa_topk_backend = DSATopKBackend("torch")
    b._arange_buf = torch.arange(16384, device=b.device, dtype=torch.int32)
    b._is_in_breakable_cuda_graph = b._is_in_tc_piecewise_cuda_graph = b._is_blackwell = _false
    b._get_device_sm = _zero
    b._memory_saver_adapter = TorchMemorySaverAdapter.create(enable=False)
    b.max_context_len = req_to_token.shape[1]
    b.num_q_heads, b.dcp_size, b.dcp_rank, b.num_splits = 16, 1, 0, 0
    if hasattr(b, "_init_kpool_metadata_fusion"):
        b._init_kpool_metadata_fusion()
    return b


def make_multi_step(mods: SimpleNamespace, inputs: DSAInputs) -> Any:
    """Draft decode's ``DeepseekSparseAttnMultiStepBackend``: ``N - 2`` children, as its ``__init__`` makes them."""
    num_steps = inputs.num_draft_tokens - 1
    multi = object.__new__(mods.backend.DeepseekSparseAttnMultiStepBackend)
    multi.topk, multi.speculative_num_steps, multi._sink_pad_cache = 1, num_steps, {}
    multi.attn_backends = [make_backend(mods, inputs, step=i) for i in range(num_steps - 1)]
    return multi


def forward_batch(mods: SimpleNamespace, inputs: DSAInputs) -> SimpleNamespace:
    """``forward_batch`` as upstream's caller fills it for one call (idle: upstream's ``IDLE`` on decode's bucket).

    Draft decode: the EAGLE worker's ``DECODE`` batch (``prepare_for_draft``: ``seq_lens`` the accepted prefix, one
    token a request with top-k 1); its ``spec_info`` (the draft input) is left None, as the metadata path reads
    ``spec_info`` in draft extend only (``num_accept_tokens``), and ``positions`` are not read by it at all."""
    mode = getattr(mods.fbi.ForwardMode, FORWARD_MODES[inputs.mode])
    extend_cpu = inputs.extend_seq_lens_cpu
    return SimpleNamespace(
        forward_mode=mode, batch_size=inputs.batch_size, seq_lens=inputs.seq_lens,
        req_pool_indices=inputs.req_pool_indices, seq_lens_cpu=inputs.seq_lens_cpu, seq_lens_sum=inputs.seq_lens_sum,
        out_cache_loc=inputs.out_cache_loc, global_num_tokens_cpu=None, extend_seq_lens=inputs.extend_seq_lens,
        extend_seq_lens_cpu=extend_cpu, extend_prefix_lens=inputs.extend_prefix_lens,
        extend_prefix_lens_cpu=inputs.extend_prefix_lens_cpu,
        extend_num_tokens=sum(extend_cpu) if extend_cpu else None, spec_info=None, attn_cp_metadata=None,
        actual_forward_mode=None)


def write_back(fb: SimpleNamespace, inputs: DSAInputs) -> None:
    """The caller's host fields upstream stored in ``forward_batch``, carried back into the harness's inputs (P8
    judges them)."""
    for name in ("seq_lens_cpu", "seq_lens_sum", "extend_seq_lens_cpu", "extend_prefix_lens_cpu"):
        setattr(inputs, name, getattr(fb, name))
