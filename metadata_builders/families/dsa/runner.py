"""The DSA graph runner: one backend's captured batch sizes, their inputs as views of max-size buffers.

Upstream's ``DecodeCudaGraphRunner`` (and the draft runners) call the backend's
``init_cuda_graph_state(max_bs, max_num_tokens)`` once, then capture every batch size on **one** backend,
largest first, each on a dummy batch (``seq_lens`` the fill value 1, slot 0), and replay a batch by copying it
into the runner's static buffers and calling ``init_forward_metadata_out_graph`` on views of them.  The
backend keys its captured metadata by ``bs`` alone (B:1814-1826), so each runner bucket is its own backend
(upstream builds the target's verify runner, the draft-extend runner and the draft runner on different backend
objects; an idle rank replays the decode runner's graph): :data:`BUCKETS`.

Worked example: a target-verify runner with tiers ``(3, 1)``, ``N = 3``: buffers ``seq_lens [3]``,
``req_pool_indices [3]``, ``out_cache_loc [9]``; tier 3's inputs are ``[:3]`` / ``[:9]``, tier 1's ``[:1]`` /
``[:3]``.  Replaying the family's batch fills tier 3 with ``[5, 3, 1]`` / ``[2, 1, 0]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsa.inputs import DSAInputs, host_values
from metadata_builders.families.dsa.reference.modes import PAD_SEQ_LEN

if TYPE_CHECKING:
    import torch

    from metadata_builders.families.dsa.batch import DSABatch
    from metadata_builders.families.dsa.variants import DSAVariant

__all__ = ["BUCKETS", "DSARunner"]

BUCKETS = {"target_verify": "target_verify", "draft_extend": "draft_extend", "decode": "decode_or_idle",
           "idle": "decode_or_idle", "draft_decode": "draft_decode"}
"""mode -> the runner (backend object) its graph lives on."""


@dataclass(eq=False)
class DSARunner:
    """One runner bucket's backend: its tiers, its static input buffers, the backend's own state."""

    bucket: str
    """:data:`BUCKETS`' value of the modes it serves."""
    tiers: tuple[int, ...]
    """Every batch size it captures, largest first (the order upstream's runner captures them)."""
    variant: DSAVariant
    """The graph variant of every call (mirror, route)."""
    template: DSABatch
    """A batch of the runner's constants (``N``, ``P``, top-k, the table's shape)."""
    device: Any
    """Where its buffers live."""
    shared: dict[str, Any] = field(default_factory=dict)
    """The backend's state across tiers (``init_cuda_graph_state``'s buffers, the captured metadata by ``bs``):
    the builder's to keep, as long as the runner lives."""
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)
    """The runner's max-size static inputs."""
    captures: dict[tuple[int, int | None], Any] = field(default_factory=dict)
    """(padded_bs, draft_step) -> what the harness captured there (its inputs, state and recording)."""

    def __post_init__(self) -> None:
        import torch

        self.tiers = tuple(sorted(set(self.tiers), reverse=True))
        max_bs, per_row = self.max_bs, self.template.step_tokens or 1
        table = [list(r) for r in self.template.req_to_token]
        self.buffers = {
            "seq_lens": torch.full((max_bs,), PAD_SEQ_LEN, dtype=torch.int64, device=self.device),
            "req_pool_indices": torch.zeros(max_bs, dtype=torch.int64, device=self.device),
            "out_cache_loc": torch.zeros(max_bs * per_row, dtype=torch.int64, device=self.device),
            "req_to_token": torch.tensor(table, dtype=torch.int32, device=self.device),
        }

    @classmethod
    def for_batch(cls, batch: DSABatch, variant: DSAVariant, device: Any, tiers: tuple[int, ...] = ()) -> DSARunner:
        """A runner of ``batch``'s bucket capturing ``batch``'s capture list (its tier at least) and ``tiers``."""
        assert batch.graph is not None
        return cls(BUCKETS[batch.mode], (*batch.graph.tiers, batch.graph.padded_bs, *tiers), variant, batch, device)

    @property
    def max_bs(self) -> int:
        """``init_cuda_graph_state``'s ``max_bs``: the largest tier."""
        return self.tiers[0]

    @property
    def tokens_per_row(self) -> int:
        """Query rows per request: ``N`` in target verify and draft extend, else 1."""
        return self.template.tokens_per_row

    @property
    def max_num_tokens(self) -> int:
        """``init_cuda_graph_state``'s ``max_num_tokens``: ``max_bs * tokens_per_row``."""
        return self.max_bs * self.tokens_per_row

    def inputs_for(self, padded_bs: int, mode: str, draft_step: int | None = None) -> DSAInputs:
        """Tier ``padded_bs``'s inputs: views of the buffers (filled by :meth:`fill` or :meth:`fill_capture`)."""
        if padded_bs not in self.tiers:
            raise InvalidBatch("graph.padded_bs", None, f"one of the runner's tiers {list(self.tiers)}", padded_bs)
        t = self.template
        per_row = t.step_tokens or 1
        return DSAInputs(
            seq_lens=self.buffers["seq_lens"][:padded_bs],
            req_pool_indices=self.buffers["req_pool_indices"][:padded_bs],
            out_cache_loc=self.buffers["out_cache_loc"][: padded_bs * per_row],
            req_to_token=self.buffers["req_to_token"], extend_seq_lens=None, extend_prefix_lens=None,
            seq_lens_cpu=None, seq_lens_sum=None, extend_seq_lens_cpu=None, extend_prefix_lens_cpu=None,
            batch_size=padded_bs, num_draft_tokens=t.num_draft_tokens, page_size=t.page_size,
            index_topk=t.index_topk, mode=mode, variant=self.variant, draft_step=draft_step, runner=self,
        )

    def fill_capture(self, inputs: DSAInputs) -> None:
        """The capture's dummy batch: every row ``seq_len`` 1 on slot 0 (upstream's runner at capture)."""
        inputs.seq_lens.fill_(PAD_SEQ_LEN)
        inputs.req_pool_indices.zero_()
        inputs.out_cache_loc.zero_()
        inputs.seq_lens_cpu = inputs.extend_seq_lens_cpu = inputs.extend_prefix_lens_cpu = None
        inputs.seq_lens_sum = None

    def fill(self, inputs: DSAInputs, batch: DSABatch) -> None:
        """Copy ``batch`` into the tier's views in place (pads: 1, slot 0, location 0), as the runner does
        before a replay; the host values are replaced.  A batch that does not fit raises ``InvalidBatch``."""
        import torch

        self._check_fits(inputs, batch)
        rows = inputs.batch_size
        fresh = torch.tensor([list(r) for r in batch.req_to_token], dtype=torch.int32)
        inputs.req_to_token.copy_(fresh)
        inputs.seq_lens.fill_(PAD_SEQ_LEN)
        inputs.req_pool_indices.zero_()
        inputs.out_cache_loc.zero_()
        if batch.bs:
            inputs.seq_lens[: batch.bs] = torch.tensor(list(batch.caller_seq_lens), dtype=torch.int64)
            inputs.req_pool_indices[: batch.bs] = torch.tensor(list(batch.req_pool_indices), dtype=torch.int64)
            inputs.out_cache_loc[: batch.num_out_cache_loc] = torch.tensor(list(batch.out_cache_loc),
                                                                           dtype=torch.int64)
        for name, value in host_values(batch, self.variant, rows).items():
            setattr(inputs, name, value)
        inputs.mode, inputs.draft_step = batch.mode, batch.draft_step

    def _check_fits(self, inputs: DSAInputs, batch: DSABatch) -> None:
        if batch.graph is None or batch.graph.padded_bs != inputs.batch_size:
            raise InvalidBatch("graph", None, f"the tier's padded_bs={inputs.batch_size}", batch.graph)
        if BUCKETS[batch.mode] != self.bucket:
            raise InvalidBatch("mode", None, f"a mode of the runner's bucket {self.bucket!r}", batch.mode)
        t = self.template
        for name in ("num_draft_tokens", "page_size", "index_topk", "num_slots", "width"):
            if getattr(batch, name) != getattr(t, name):
                raise InvalidBatch(name, None, f"the runner's {getattr(t, name)}", getattr(batch, name))
