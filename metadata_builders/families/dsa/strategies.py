"""Hypothesis strategies for the DSA family: whole batches and their parts, drawn with Hypothesis so failures
shrink and replay.

``dsa_batches()`` aims at the family's boundaries: every mode; graph tiers with pad rows (draft extend's pad
rows go negative before the floor); tables narrower and wider than the fused kernels' 128-column block, with
prefixes next to a block edge (a read crossing into a block a kernel skipped); page sizes 1, 4, 64; top-k
budgets below and above the lengths; diverged device lengths in draft extend; stale host mirrors.  Every
argument after the first is keyword-only; None means "draw it".

Measured (``tests/families/dsa/test_strategies.py``): 200 drawn batches reach every mode, wide tables, a
prefix within 3 of a block edge, a pad row, a diverged and a stale batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import assume
from hypothesis import strategies as st

from metadata_builders.families.dsa.batch import (
    MODES,
    DSABatch,
    DSADivergence,
    DSAGraphTier,
)
from metadata_builders.families.dsa.variants import DSAVariant, variants_for

__all__ = ["BLOCK_EDGES", "CAPTURE_LADDER", "dsa_batches", "dsa_capture_lists", "dsa_divergences", "dsa_graph_tiers",
           "dsa_tables", "dsa_variants", "stale_mirrors"]

BLOCK_EDGES = (126, 127, 128, 129, 254, 255, 256)
"""Prefixes next to the fused kernels' 128-column blocks: a verify row's reads cross the edge."""

CAPTURE_LADDER = (1, 2, 4, 8, 12, 16, 24, 32)
"""The start of upstream's default capture list (``cuda_graph_config.decode.bs``): what a runner captures before
``max_running_requests`` cuts it (``get_batch_sizes_to_capture``, ``base_cuda_graph_runner.py``)."""


def _reach(mode: str, n: int) -> int:
    """Columns a request needs past its prefix: verify and draft extend ``N``, decode 1, draft decode ``N - 1``."""
    return {"target_verify": n, "draft_extend": n, "decode": 1, "draft_decode": n - 1, "idle": 0}[mode]


@st.composite
def dsa_tables(draw: st.DrawFn, num_slots: int, width: int) -> list[list[int]]:
    """``req_to_token``: slot ``s`` holds ``base(s) + c`` with ``base`` a drawn permutation of the slots times the
    width (every location distinct; shrinks towards ``s * width + c``)."""
    order = draw(st.permutations(range(num_slots)))
    return [[order[s] * width + c for c in range(width)] for s in range(num_slots)]


@st.composite
def dsa_capture_lists(draw: st.DrawFn, *, min_requests: int = 1, max_requests: int = 6) -> tuple[int, ...]:
    """A runner's capture list as upstream makes it: :data:`CAPTURE_LADDER` cut at a drawn
    ``max_running_requests`` (in ``min_requests..max_requests``), which is added when the ladder skips it.
    Example: ``max_running_requests 3`` captures ``(1, 2, 3)``.  Shrinks towards the smallest
    ``max_running_requests``."""
    cap = draw(st.integers(min_requests, max_requests))
    return tuple(sorted({bs for bs in CAPTURE_LADDER if bs <= cap} | {cap}))


@st.composite
def dsa_graph_tiers(draw: st.DrawFn, bs: int, *, capture_list: bool | None = None,
                    max_pad_rows: int = 2) -> DSAGraphTier:
    """The tier a batch of ``bs`` requests replays on.  With a capture list (``capture_list``; None: draw it):
    the smallest captured size holding ``bs``, every size captured on one backend; without: ``bs`` plus
    ``0..max_pad_rows`` pad rows, alone.  Shrinks towards no capture list and no pad row."""
    rows = max(bs, 1)
    if draw(st.booleans()) if capture_list is None else capture_list:
        capture = draw(dsa_capture_lists(min_requests=rows, max_requests=rows + max_pad_rows + 2))
        return DSAGraphTier(next(t for t in capture if t >= rows), capture)
    return DSAGraphTier(rows + draw(st.integers(0, max_pad_rows)))


@st.composite
def dsa_divergences(draw: st.DrawFn, bs: int, num_draft_tokens: int) -> DSADivergence:
    """Draft extend's device extend lengths, each in ``0..2 N``, not all ``N`` (shrinks towards one row off)."""
    lens = draw(st.lists(st.integers(0, 2 * num_draft_tokens), min_size=bs, max_size=bs))
    assume(lens != [num_draft_tokens] * bs)
    return DSADivergence(extend_seq_lens=tuple(lens))


@st.composite
def stale_mirrors(draw: st.DrawFn, truth: Sequence[int], *, max_value: int) -> DSADivergence:
    """A host mirror that is not the device's: each entry in ``1..max_value``, at least one off (shrinks towards
    one row one lower)."""
    mirror = [draw(st.integers(1, max_value)) if draw(st.booleans()) else v for v in truth]
    assume(list(mirror) != list(truth))
    return DSADivergence(seq_lens_cpu=tuple(mirror))


@st.composite
def _prefixes(draw: st.DrawFn, bs: int, hi: int) -> list[int]:
    """Prefixes in ``1..hi``, some next to a block edge when the table is wide."""
    edges = [v for v in BLOCK_EDGES if v <= hi]
    one = st.integers(1, hi) if not edges else st.one_of(st.integers(1, hi), st.sampled_from(edges))
    return draw(st.lists(one, min_size=bs, max_size=bs))


@st.composite
def dsa_batches(draw: st.DrawFn, *, modes: Sequence[str] | None = None, min_bs: int = 1, max_bs: int = 3,
                num_draft_tokens: int | None = None, page_size: int | None = None, index_topk: int | None = None,
                graph: bool | None = None, wide: bool | None = None, diverged: bool | None = None,
                stale: bool | None = None) -> DSABatch:
    """A valid :class:`~metadata_builders.families.dsa.batch.DSABatch`.

    ``modes``: the modes to draw from (all by default); ``graph``: with a tier; ``wide``: a table wider than one
    fused block (129..300 columns; else up to 40); ``diverged``: draft extend's device lengths diverge (forces
    draft extend); ``stale``: a stale host mirror.  Shrinks towards an idle batch (the shortest draw) when idle is
    among ``modes``, else one target-verify request on a narrow table, no tier, nothing injected.
    """
    mode = "draft_extend" if diverged else draw(st.sampled_from(list(modes or MODES)))
    n = num_draft_tokens if num_draft_tokens is not None else draw(
        st.integers(3 if mode == "draft_decode" else 1, 4))
    assume(mode != "draft_decode" or n >= 3)
    bs = 0 if mode == "idle" else draw(st.integers(min_bs, max_bs))
    reach = _reach(mode, n)
    is_wide = draw(st.booleans()) if wide is None else wide
    width = draw(st.integers(130, 300) if is_wide else st.integers(reach + 1, max(reach + 1, 40)))
    num_slots = bs + 1 + draw(st.integers(0, 2))
    table = draw(dsa_tables(num_slots, width))
    slots = draw(st.lists(st.integers(1, num_slots - 1), min_size=bs, max_size=bs, unique=True)) if bs else []
    seq = draw(_prefixes(bs, width - reach))
    loc = [table[s][p + j] for s, p in zip(slots, seq) for j in range(reach)]
    with_tier = mode == "idle" or (draw(st.booleans()) if graph is None else graph)
    tier = draw(dsa_graph_tiers(bs)) if with_tier else None
    divergence = None
    if mode == "draft_extend" and (draw(st.booleans()) if diverged is None else diverged):
        divergence = draw(dsa_divergences(bs, n))
    batch = DSABatch(seq, slots, table, loc, n, page_size=page_size or draw(st.sampled_from((4, 1, 2, 64))),
                     index_topk=index_topk or draw(st.one_of(st.just(2048), st.integers(1, width + 8))), mode=mode,
                     graph=tier, divergence=divergence,
                     draft_step=draw(st.integers(0, n - 3)) if mode == "draft_decode" else None)
    if mode != "idle" and (draw(st.booleans()) if stale is None else stale):
        mirror = draw(stale_mirrors(batch.caller_seq_lens, max_value=width))
        batch = batch.replace(divergence=DSADivergence(None if divergence is None else divergence.extend_seq_lens,
                                                       mirror.seq_lens_cpu))
    return batch


def dsa_variants(batch: DSABatch) -> st.SearchStrategy[DSAVariant]:
    """One of ``variants_for(batch)`` (shrinks towards eager with the mirror)."""
    return st.sampled_from(variants_for(batch))
