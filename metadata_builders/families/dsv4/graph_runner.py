"""A graph runner as upstream runs one: every tier captured on **one** backend, largest first, replays interleaved.

Upstream's ``DecodeCudaGraphRunner`` captures all its tiers on the one attention
backend it serves (0.5.18-0.5.23): largest first, each tier's inputs *views* of
one set of max-size static buffers (``build_replay_fb_view``: ``[:bs]``, ``[:T]``),
each captured with the request geometry the runner derives for it
(upstream's ``build_capture_verify_lens`` where the builder brings it, else its model
:func:`~metadata_builders.families.dsv4.tier.capture_verify_lens`: seq_lens 1, slot 0,
``out_cache_loc`` 0 -- never a batch the harness chooses), its request slots by the capture
geometry the builder declares (:class:`RunnerSpec`'s ``geometry``: the released runner's
``min(T, max_bs)``, or #39257's ``T // W``).  The backend keeps one
captured metadata per tier, keyed by ``bs`` -- by ``graph_num_tokens`` for compact
ragged tiers, where several share ``bs = max_bs`` -- storing it at capture and
``copy_``-ing into it at replay.  So a builder's backend-wide state lives as long
as the runner, and a regression that collides two tiers' keys, or one tier's
capture overwriting what another tier's recording reads, shows only when several
tiers are captured on one backend and replayed in turn.

Here: :class:`GraphRunner` captures each tier on one audited builder (the
builder *is* the backend), every tier's inputs views of one set of buffers, and
hands the builder a :class:`~metadata_builders.families.dsv4.inputs.Runner` on every
tier's inputs (``inputs.runner``: the tier set, and ``shared``, where a builder keeps
what its backend keeps across tiers).  :meth:`GraphRunner.replay` refills the
views of the batch's tier in place and replays that tier.

Worked example, uniform-free compact ragged runner, ``capture_bs = (1, 2, 3, 4)``,
3 draft tokens: tiers ``(4, 12), (4, 9), (4, 6), (3, 3)`` captured in that order on
buffers of 4 rows / 12 tokens; tier ``(4, 9)``'s inputs are ``seq_lens[:4]``,
``out_cache_loc[:9]``, its capture layout ``[3, 2, 2, 2]``.  A replay of
``verify_lens=[1, 2]`` on tier 9 refills ``seq_lens[:4] = [s0, s1, 1, 1]`` -- the same
memory tier 12's inputs see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsv4.batch import DECODE_MODES, GraphTier, VerifyBatch
from metadata_builders.families.dsv4.tier import DEFAULT_CAPTURE_GEOMETRY, CaptureGeometry, host_total, runner_tiers

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.builders.audited import AuditedBuilder, Captured
    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.metadata import VerifyMetadata
    from metadata_builders.families.dsv4.variants import Variant

__all__ = ["GraphRunner", "RunnerSpec"]


@dataclass(frozen=True, slots=True)
class RunnerSpec:
    """Which tiers a runner captures: its batch sizes, the captured request width, ragged (compact) or uniform,
    and the capture geometry its compact ragged tiers take their request slots from."""

    capture_bs: tuple[int, ...]
    width: int
    """``captured_req_width``: the draft tokens per request (the ragged tiers' cap)."""
    ragged: bool
    geometry: CaptureGeometry = DEFAULT_CAPTURE_GEOMETRY
    """The builder's declared capture geometry (:mod:`metadata_builders.families.dsv4.tier`): ``token_slots`` or
    ``request_slots``."""

    def tiers(self) -> list[GraphTier]:
        """Every tier, largest first (the capture order); ragged tiers carry the runner's cap, ``width``."""
        cap = self.width if self.ragged else None
        return [GraphTier(bs, tokens, cap) for bs, tokens in runner_tiers(self.capture_bs, self.width,
                                                                           ragged=self.ragged, geometry=self.geometry)]

    def key(self, tier: GraphTier) -> int:
        """How the backend keys the tier's captured metadata (upstream): ``graph_num_tokens`` ragged, ``bs`` else."""
        return tier.graph_num_tokens if self.ragged else tier.padded_bs

    def tier_for(self, batch: VerifyBatch) -> GraphTier | None:
        """The smallest tier that admits ``batch`` (its requests fit the slots, its tokens the tier), or None."""
        tokens = batch.num_real_tokens
        fits = [t for t in self.tiers() if batch.bs <= t.padded_bs and tokens <= t.graph_num_tokens
                and (self.ragged or t.graph_num_tokens == t.padded_bs * self.width)]
        return min(fits, key=lambda t: (t.graph_num_tokens, t.padded_bs)) if fits else None

    @classmethod
    def around(cls, batch: VerifyBatch, geometry: CaptureGeometry = DEFAULT_CAPTURE_GEOMETRY) -> RunnerSpec | None:
        """A runner whose tiers hold ``batch``: batch sizes ``1 .. bs + 1`` (a uniform batch has a larger tier to
        hop to; under ``token_slots`` the ragged tiers of at least ``max_bs`` tokens share ``bs = max_bs``), width
        the draft tokens, ``geometry`` the capture geometry; None for an eager-only batch.  P5 captures three of its
        tiers, whatever ``max_bs`` is."""
        if batch.graph is None:
            return None
        max_bs = batch.bs + 1
        width = 1 if batch.mode in DECODE_MODES else batch.num_draft_tokens  # a decode tier: one token a row
        return cls(tuple(range(1, max_bs + 1)), width, batch.is_ragged, geometry)


@dataclass
class GraphRunner:
    """One runner's capture of every tier on one builder, and replays into them (the module docstring)."""

    builder: AuditedBuilder
    variant: Variant
    spec: RunnerSpec
    template: VerifyBatch
    """Where the tables, geometry and algorithm come from (every replayed batch shares its tables)."""
    captured: dict[GraphTier, Captured] = field(default_factory=dict)
    order: list[GraphTier] = field(default_factory=list)
    """The tiers in capture order (largest first)."""

    def capture(self, tiers: list[GraphTier] | None = None) -> GraphRunner:
        """Capture ``tiers`` (default: all of them) largest first, on views of one set of max-size buffers."""
        from metadata_builders.families.dsv4.inputs import Runner

        chosen = sorted(tiers or self.spec.tiers(), key=lambda t: (-t.graph_num_tokens, -t.padded_bs))
        runner = Runner(tuple(chosen), self.spec.ragged)
        buffers = _Buffers.for_tiers(self.template, chosen, self.builder.device)
        for tier in chosen:
            inputs = _capture_inputs(self.template, self.variant, tier, buffers, runner, self.spec, self.builder)
            self.captured[tier] = self.builder.capture_on(inputs)
            self.order.append(tier)
        return self

    def replay(self, batch: VerifyBatch) -> VerifyMetadata:
        """Replay ``batch`` on its tier (``batch.graph``, one of the captured): its views refilled, the tier
        replayed."""
        tier = batch.graph
        if tier not in self.captured:
            raise InvalidBatch("graph", None, f"one of the runner's captured tiers {self.order}", tier)
        return self.builder.replay(self.captured[tier], batch)


@dataclass
class _Buffers:
    """The runner's static buffers, sized by its largest tier; every tier's inputs are views of them."""

    seq_lens: Any
    req_pool_indices: Any
    out_cache_loc: Any
    req_to_token: Any
    full_to_swa: Any
    positions: Any

    @classmethod
    def for_tiers(cls, template: VerifyBatch, tiers: list[GraphTier], device: Any) -> _Buffers:
        import torch

        rows = max(t.padded_bs for t in tiers)
        tokens = max(t.graph_num_tokens for t in tiers) * _per_token(template)
        return cls(
            torch.zeros(rows, dtype=torch.int32, device=device),
            torch.zeros(rows, dtype=torch.int64, device=device),
            torch.zeros(tokens, dtype=torch.int64, device=device),
            torch.tensor(template.req_to_token, dtype=torch.int32, device=device),
            torch.tensor(template.full_to_swa, dtype=torch.int64, device=device),
            torch.zeros(tokens, dtype=torch.int64, device=device),
        )


def _per_token(template: VerifyBatch) -> int:
    """``out_cache_loc`` entries per token of a tier: the draft runner's shared buffer holds every step's."""
    return template.num_draft_steps if template.draft_runner else 1


def _capture_inputs(template: VerifyBatch, variant: Variant, tier: GraphTier, buffers: _Buffers, runner: Any,
                    spec: RunnerSpec, builder: AuditedBuilder) -> VerifyInputs:
    """A tier's capture call as the runner makes it: views of the buffers, seq_lens 1, slot 0, the runner's layout."""
    import torch

    from metadata_builders.families.dsv4.inputs import VerifyInputs

    rows, tokens = tier.padded_bs, tier.graph_num_tokens
    seq_lens, slots = buffers.seq_lens[:rows], buffers.req_pool_indices[:rows]
    out = buffers.out_cache_loc[:tokens * _per_token(template)]
    fill = builder.capabilities.seq_len_fill_value  # upstream: attn_backend.get_cuda_graph_seq_len_fill_value()
    seq_lens.fill_(fill)
    positions = buffers.positions[:rows if template.mode in DECODE_MODES else tokens]
    slots.fill_(0)
    out.fill_(0)
    positions.fill_(0)
    lens = builder.capture_verify_lens(tokens, rows, spec.width) if spec.ragged else None
    padding = builder.capabilities.padding
    ragged_total = None if lens is None else host_total(lens, rows, tokens, tier.cap, padding)
    mirror = [fill] * rows if (lens is not None or variant.mirror == "host") else None
    return VerifyInputs(
        seq_lens=seq_lens, req_pool_indices=slots, out_cache_loc=out,
        req_to_token=buffers.req_to_token, full_to_swa=buffers.full_to_swa,
        verify_lens=None if lens is None else torch.tensor(lens, dtype=torch.int32, device=seq_lens.device),
        seq_lens_cpu=mirror, verify_lens_cpu=lens, num_tokens_cpu=ragged_total,
        max_seq_len=template.max_context, bs=rows, num_draft_tokens=template.num_draft_tokens,
        is_dspark=template.is_dspark, geometry=template.geometry, graph=tier, variant=variant, padding=padding,
        runner=runner, mode=template.mode, draft_step=template.draft_step, seq_len_fill=fill, positions=positions,
        speculative_num_draft_tokens=template.speculative_num_draft_tokens,
    )
