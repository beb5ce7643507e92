"""The random baseline of ``metadata-builders power``: seeded batches drawn uniformly from the strategies' domain.

:func:`random_batches` is what peers compare against: ``random.Random`` batches
over *every value the strategies can produce*, each choice uniform and
independent, with no boundary targeting and no shrinking -- so what random
sampling misses, it misses for want of aim, not for want of reach.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsv4.batch import Divergence, Geometry, GraphTier, VerifyBatch
from metadata_builders.families.dsv4.tier import tier_verify_lens

__all__ = ["random_batches"]

_BASELINE_MAX_BS = 16
_BASELINE_MAX_DRAFT = 8
_BASELINE_MAX_PAD_ROWS = 8
_SMALL_OR_NAMED = {
    "page_size": (16, 32, 64, 256),
    "swa_window": (16, 32, 64, 128),
    "page_index_align": (16, 32, 64),
}
"""Per geometry dimension, the values the strategies use besides 1..8."""


# -- the baseline generator ----------------------------------------------------------------------


def random_batches(
    rng: random.Random,
    *,
    ragged: bool | None = None,
    graph: bool | None = None,
    divergence: bool | None = None,
    stale_mirror: bool | None = False,
) -> Iterator[VerifyBatch]:
    """Endless seeded random batches over the strategies' input domain, drawn uniformly.

    Every choice is uniform and independent: ``num_draft_tokens`` in 1..8, bs in
    1..16, each geometry dimension from the values the strategies use (1..8 or a
    named middle/upstream value; a ring of 1..8, ``window + draft - 1`` or the
    largest the table allows), each prefix in 1..``MAX_CONTEXT`` less its tokens,
    each ragged verify length in 1..draft; half the batches ragged, half DSpark,
    half with a graph tier (0..8 pad rows, a ragged tier's total up to
    ``padded_bs * (draft + 2)``, half of ragged tiers capped at a cap in
    ``max(verify_lens)..draft + 2``, the absorbed slack past the table width half
    the time it can be); ``max_context`` the tightest width plus 0..8; a shuffled
    pool of locations with 0..3 ``-1`` or sentinel table entries and 0..2
    ``full_to_swa`` holes; and, half the time, a divergence: one row redrawn
    uniformly in its valid range.  ``stale_mirror=True`` (``None``: a coin) redraws
    one row of the host mirror uniformly in ``1..MAX_CONTEXT``.  ``ragged``/``graph``/
    ``divergence``/``stale_mirror`` pin a coin as ``verify_batches`` does.  No
    boundary is aimed at and nothing shrinks.
    """
    while True:
        batch = _random_batch(rng, ragged, graph, divergence)
        if batch is not None and _coin(rng, stale_mirror):
            batch = _random_stale_mirror(rng, batch)
        if batch is not None:
            yield batch


def _random_stale_mirror(rng: random.Random, batch: VerifyBatch) -> VerifyBatch:
    """One row of the host mirror redrawn uniformly (never to its true value)."""
    from metadata_builders.families.dsv4.strategies import MAX_CONTEXT

    mirror = list(batch.seq_lens)
    row = rng.randrange(len(mirror))
    mirror[row] = rng.choice([v for v in range(1, MAX_CONTEXT + 1) if v != mirror[row]])
    extend = None if batch.divergence is None else batch.divergence.extend_seq_lens
    return batch.replace(divergence=Divergence(extend, tuple(mirror)))


def _coin(rng: random.Random, pinned: bool | None) -> bool:
    return rng.random() < 0.5 if pinned is None else pinned


def _dimension(rng: random.Random, name: str) -> int:
    return rng.choice((*range(1, 9), *_SMALL_OR_NAMED[name]))


def _random_tier(rng: random.Random, real: list[int], bs: int, draft: int, is_ragged: bool) -> GraphTier:
    padded_bs = bs + rng.randint(0, _BASELINE_MAX_PAD_ROWS)
    if not is_ragged:
        return GraphTier(padded_bs, padded_bs * draft, rng.randint(1, draft) if rng.random() < 0.5 else None)
    total = rng.randint(sum(real), max(sum(real), padded_bs * (draft + 2)))
    cap = rng.randint(max(real), draft + 2) if rng.random() < 0.5 else None
    return GraphTier(padded_bs, total, cap)


def _random_batch(rng: random.Random, ragged: bool | None, graph: bool | None,
                  divergence: bool | None) -> VerifyBatch | None:
    from metadata_builders.families.dsv4.strategies import MAX_CONTEXT

    draft = rng.randint(1, _BASELINE_MAX_DRAFT)
    bs = rng.randint(1, _BASELINE_MAX_BS)
    is_ragged, is_dspark, has_graph, diverged = (_coin(rng, ragged), _coin(rng, None), _coin(rng, graph),
                                                  _coin(rng, divergence))
    real = [rng.randint(1, draft) for _ in range(bs)] if is_ragged else [draft] * bs
    tier = _random_tier(rng, real, bs, draft, is_ragged) if has_graph else None
    lens = list(real) if tier is None else (
        tier_verify_lens(real, tier.padded_bs, tier.graph_num_tokens, tier.cap) if is_ragged
        else [draft] * tier.padded_bs)
    fits = list(lens)
    if tier is not None and tier.padded_bs == bs and rng.random() < 0.5:
        fits[bs - 1] = real[-1]  # the absorbed slack may run past the width (F2c)
    if max(fits) >= MAX_CONTEXT:
        return None
    seq_lens = [rng.randint(1, MAX_CONTEXT - e) for e in fits[:bs]]
    need = max([s + e for s, e in zip(seq_lens, fits)] + [1 + e for e in fits[bs:]])
    max_context = min(MAX_CONTEXT, need + rng.randint(0, 8))
    num_slots = bs + 1 + rng.randint(0, 4)
    slots = rng.sample(range(1, num_slots), bs)
    pool = list(range(num_slots * max_context + rng.randint(0, 3)))
    rng.shuffle(pool)
    table = [pool[s * max_context : (s + 1) * max_context] for s in range(num_slots)]
    full_to_swa = list(range(len(pool)))
    rng.shuffle(full_to_swa)
    out_cache_loc = [table[slot][s + j] for slot, s, e in zip(slots, seq_lens, real) for j in range(e)]
    sentinel = len(full_to_swa)
    for _ in range(rng.randint(0, 3)):
        b = rng.randrange(bs)
        table[slots[b]][rng.randrange(seq_lens[b] + real[b])] = rng.choice((-1, sentinel))
    for _ in range(rng.randint(0, 2)):
        full_to_swa[rng.randrange(len(full_to_swa))] = -1
    full_to_swa.append(-1)
    ring = rng.choice((*range(1, 9), None, 0))
    window = _dimension(rng, "swa_window")
    if ring is None:
        ring = window + draft - 1
    elif ring == 0:
        ring = 2**31 // num_slots - rng.randint(0, 3)
    geometry = Geometry(
        page_size=_dimension(rng, "page_size"), swa_window=window, ring_size=ring,
        unified_swa_window=rng.choice((*range(1, 9), window, 128)),
        page_index_align=_dimension(rng, "page_index_align"),
    )
    try:
        batch = VerifyBatch(
            seq_lens=seq_lens, req_pool_indices=slots, verify_lens=real if is_ragged else None,
            num_draft_tokens=draft, out_cache_loc=out_cache_loc, req_to_token=table, full_to_swa=full_to_swa,
            is_dspark=is_dspark, geometry=geometry, graph=tier,
        )
    except InvalidBatch:
        return None
    if not diverged:
        return batch
    return _random_divergence(rng, batch, divergence)


def _random_divergence(rng: random.Random, batch: VerifyBatch, pinned: bool | None) -> VerifyBatch | None:
    """One row of the device lengths redrawn uniformly in its valid range (the strategies' domain)."""
    rows = batch.bs
    if batch.verify_lens is None and batch.graph is not None and rng.random() < 0.5:
        rows = batch.graph.padded_bs
    host, lo, hi, _ = batch.divergence_bounds(rows)
    row = rng.randrange(rows)
    device = list(host)
    device[row] = rng.randint(lo[row], max(lo[row], hi[row]))
    if device == host:
        return None if pinned else batch
    try:
        return batch.replace(divergence=Divergence(tuple(device)))
    except InvalidBatch:
        return None if pinned else batch
