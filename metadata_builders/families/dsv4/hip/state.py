"""The ``hip`` builder's data between stages and across graph replays: :class:`Layout` (stage 1's result),
:class:`GraphState` (a target-verify tier's graph state), :class:`DraftExtendState` (a draft-extend tier's),
:class:`DecodeState` (the raw decode metadata of both decode modes), :class:`MultiStepState` (a draft-decode tier's:
one raw per child)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["DecodeState", "DraftExtendState", "GraphState", "Layout", "MultiStepState"]


@dataclass(slots=True)
class Layout:
    """Stage 1's result: the extended batch and the token-count decision."""

    seq_lens: torch.Tensor
    """(rows,) int32: prefixes plus verify tokens."""
    extend_seq_lens: torch.Tensor
    """(rows,) int32: verify tokens per row, as device memory holds them."""
    extend_start_loc: torch.Tensor
    """(rows,) int32: exclusive cumsum of ``extend_seq_lens``."""
    num_tokens: int | None
    """Tokens the host believes the rows cover; None in-graph (a host value, out-graph work's)."""
    exact_num_tokens: bool | None
    """After the gate: the token map may pass ``output_size=num_tokens``; None in-graph."""
    max_seq_len: int
    """After verify extension."""


@dataclass(slots=True)
class GraphState:
    """One captured tier's graph state: the raw verify metadata out-graph work refreshes in place.

    Allocated once per capture (:meth:`HipBuilder.graph_state`, outside the graph);
    :meth:`HipBuilder.out_graph` writes it before the capture and before every replay,
    and the recorded in-graph work reads it (upstream: the decode graph runner's
    static buffers and ``init_forward_metadata_out_graph``).  Worked example: an
    uncapped ragged tier of 4 rows / 8 tokens, ``seq_lens=[5, 2, 4]``, ``verify_lens=[3, 1, 2]``
    (the pad row takes the 2 tokens left over)::

        seq_lens           [8, 3, 6, 3]                 prefixes + extend; the pad row 1 + 2
        extend_seq_lens    [3, 1, 2, 2]
        extend_start_loc   [0, 3, 4, 6]
        token_rows         [0, 0, 0, 1, 2, 2, 3, 3]     the token map, 0 past its end
        num_tokens_host    8                            on the host, like a runner's pinned buffer
        num_tokens         8                            its device copy, made in-graph
    """

    seq_lens: torch.Tensor
    """(rows,) int32: prefixes plus verify tokens."""
    extend_seq_lens: torch.Tensor
    """(rows,) int32: verify tokens per row, tier-padded."""
    extend_start_loc: torch.Tensor
    """(rows,) int32: exclusive cumsum of ``extend_seq_lens``."""
    token_rows: torch.Tensor
    """(padded_num_tokens,) int64: the token map (``bid``) up to its length, 0 past it."""
    num_tokens_host: torch.Tensor
    """() int64, host memory: the tokens the host believes the rows cover (the pad boundary)."""
    num_tokens: torch.Tensor
    """() int64, device memory: ``num_tokens_host`` copied over asynchronously in-graph."""
    bs: int
    """The captured batch's real requests (a replay's may differ: in-graph work never reads it)."""
    max_seq_len: int = 0
    """After verify extension; a tier constant (``max_context`` on the graph path), set out-graph."""


@dataclass(slots=True)
class DraftExtendState:
    """A draft-extend tier's captured metadata: out-graph work builds the whole of it and copies it in place.

    Upstream's ``init_forward_metadata_out_graph`` runs ``init_forward_metadata_draft_extend`` in full before every
    replay and copies the result into the bucket's metadata (``replay_cuda_graph_metadata_from``); the recorded
    in-graph work only reads those buffers.
    """

    fields: dict[str, torch.Tensor]
    """Every field's buffer, allocated once per tier (keyed by ``bs`` in upstream's ``DRAFT_EXTEND`` bucket)."""


@dataclass(slots=True)
class DecodeState:
    """The raw decode metadata (upstream's ``DSV4RawDecodeMetadata``): what ``init_forward_metadata_decode`` keeps.

    On the graph path one per tier (and per draft-decode child): out-graph work copies a replay's raw inputs into
    these buffers (``copy_``), and the recorded in-graph build reads them.
    """

    req_pool_indices: torch.Tensor
    """(rows,) int64: each row's slot; pad rows 0."""
    seq_lens: torch.Tensor
    """(rows,) int32: as the caller passes them (decode: with the token; draft decode: before the child's step)."""
    out_cache_loc: torch.Tensor
    """(rows,) int64: the step's location per row (draft decode: row ``draft_step`` of the shared buffer)."""


@dataclass(slots=True)
class MultiStepState:
    """A draft-decode tier's captured metadata: one raw decode metadata per child (step) of the multi-step backend.

    Upstream's ``DeepseekV4MultiStepBackend`` keeps a child backend per step, each with its own captured
    ``DSV4RawDecodeMetadata``.  Before a replay only child 0 runs out-graph work; children ``1 .. steps - 2`` get
    its slots and lengths with their own row of the shared ``out_cache_loc`` (a copy, no out-graph work of theirs),
    and the last child, which runs no forward, is never refreshed.
    """

    children: list[DecodeState]
    """(steps,): child ``s``'s raw metadata, ``s`` its ``speculative_step_id``."""
