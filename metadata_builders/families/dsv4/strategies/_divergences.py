"""What device memory holds when the host believes otherwise: diverging extend lengths, stale mirrors.

Two ways the host and the device disagree, each drawn on purpose:

* a **divergence** of the extend lengths (:func:`divergences`): what an
  asynchronous copy or a device-assembled layout really delivers, which the
  token map trusts or not (P6);
* a **stale host mirror** (:func:`stale_mirrors`): the caller's ``seq_lens_cpu``
  lags ``seq_lens`` (P2's opt-in validation must name the row).  Three kinds,
  from the obvious to the sly: one row off by one (the sum moves), two rows
  swapped (same values, same sum), two rows moved in opposite directions (same
  sum, new values).  Example with ``seq_lens=[5, 3, 7]``: ``[5, 4, 7]``,
  ``[3, 5, 7]``, ``[6, 2, 7]``.  A validation that compares sums, maxima or sorted
  values misses the last two or three.
"""

from __future__ import annotations

from hypothesis import assume, event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsv4.batch import Divergence, VerifyBatch

__all__ = ["DIVERGENCE_KINDS", "STALE_MIRROR_KINDS", "divergences", "draw_divergence", "stale_mirrors"]

DIVERGENCE_KINDS = ("run_ahead", "fall_behind", "permuted")
"""Kinds :func:`divergences` draws, in shrink order."""

STALE_MIRROR_KINDS = ("one_row_off", "swapped", "same_sum")
"""Kinds :func:`stale_mirrors` draws, in shrink order."""

# A uniform divergence covers the tier's rows (pad rows included) two times in three.
_TIER_ROWS = st.sampled_from((False, True, True))


def _possible_kinds(host: list[int], lo: list[int], hi: list[int], headroom: int | None) -> list[str]:
    """The divergence kinds rows with these bounds can take: room to run ahead, to fall behind, or both in two rows."""
    up = [i for i in range(len(host)) if host[i] < hi[i]] if headroom != 0 else []
    down = [i for i in range(len(host)) if host[i] > lo[i]]
    pairs = bool(up) and bool(down) and len(set(up) | set(down)) >= 2
    return [k for k, ok in zip(DIVERGENCE_KINDS, (up, down, pairs)) if ok]


def draw_divergence(draw: st.DrawFn, batch: VerifyBatch, kind: str | None) -> tuple[Divergence | None, str]:
    """Perturb what the host believes into what device memory holds; None when no valid one exists."""
    graph = batch.graph
    rows = batch.bs
    if batch.verify_lens is None and graph is not None and graph.padded_bs != batch.bs and draw(_TIER_ROWS):
        rows = graph.padded_bs
    host, lo, hi, ceiling = batch.divergence_bounds(rows)
    headroom = None if ceiling is None else ceiling - sum(host)
    up = [i for i in range(rows) if host[i] < hi[i]] if headroom != 0 else []
    down = [i for i in range(rows) if host[i] > lo[i]]
    possible = _possible_kinds(host, lo, hi, headroom)
    if not possible:
        return None, "impossible"
    if kind is None or kind not in possible:
        kind = draw(st.sampled_from(possible))
    device = list(host)
    if kind == "run_ahead":
        i = draw(st.sampled_from(up))
        most = hi[i] - host[i] if headroom is None else min(hi[i] - host[i], headroom)
        device[i] += draw(st.one_of(st.just(1), st.integers(1, most)))
    elif kind == "fall_behind":
        i = draw(st.sampled_from(down))
        device[i] -= draw(st.integers(1, host[i] - lo[i]))
    else:
        i = draw(st.sampled_from([i for i in down if any(j != i for j in up)]))
        j = draw(st.sampled_from([j for j in up if j != i]))
        moved = draw(st.integers(1, min(host[i] - lo[i], hi[j] - host[j])))
        device[i] -= moved
        device[j] += moved
    divergence = Divergence(tuple(device))
    try:
        batch.replace(divergence=divergence)
    except InvalidBatch:
        return None, "impossible"
    return divergence, kind


@st.composite
def divergences(draw: st.DrawFn, batch: VerifyBatch, *, kind: str | None = None) -> Divergence:
    """A :class:`Divergence` for ``batch``: device extend lengths the host does not expect.

    ``run_ahead``: one row holds more than the host believes (the token map writes
    out of bounds); ``fall_behind``: one row holds less (an uninitialised tail);
    ``permuted``: tokens move between two rows, sum kept.  Uniform batches: the
    list covers the ``bs`` real rows, or (with a graph tier) sometimes every
    ``padded_bs`` row.  Ragged batches: the device layout, ``bs`` rows, each still
    a verify length (``1..num_draft_tokens``, within the cap and the tier).  A
    requested ``kind`` the batch cannot take is replaced by one it can;
    :func:`~strategies.divergence_kind` tells which kind a divergence is.  When no
    divergence is valid (a ragged batch with ``num_draft_tokens=1``) the example
    is rejected.

    Shrinks towards a one-token run-ahead on the first real row.
    """
    if kind is not None and kind not in DIVERGENCE_KINDS:
        raise InvalidArgument(f"kind={kind!r} must be None (draw it) or one of {list(DIVERGENCE_KINDS)}")
    divergence, drawn_kind = draw_divergence(draw, batch, kind)
    assume(divergence is not None)
    event(f"divergence_{drawn_kind}")
    return divergence


def _stale_kinds(seq_lens: list[int]) -> list[str]:
    kinds = ["one_row_off"]
    if len(set(seq_lens)) >= 2:
        kinds.append("swapped")
    if len(seq_lens) >= 2 and max(seq_lens) >= 2:
        kinds.append("same_sum")
    return kinds


@st.composite
def stale_mirrors(draw: st.DrawFn, batch: VerifyBatch, *, kind: str | None = None) -> Divergence:
    """``batch.divergence`` with a stale host mirror ``seq_lens_cpu`` (``bs`` entries, each >= 1).

    ``one_row_off``: one row one token off, either way (the sum moves);
    ``swapped``: two rows with different prefixes swapped (same sum, same values);
    ``same_sum``: one row ahead and another behind by the same amount.  A requested
    ``kind`` the batch cannot take (``swapped`` needs two different prefixes,
    ``same_sum`` two rows) is replaced by one it can.  The extend-length divergence
    the batch already has, if any, is kept.

    Shrinks towards the first row one token ahead.
    """
    if kind is not None and kind not in STALE_MIRROR_KINDS:
        raise InvalidArgument(f"kind={kind!r} must be None (draw it) or one of {list(STALE_MIRROR_KINDS)}")
    truth = list(batch.seq_lens)
    possible = _stale_kinds(truth)
    if kind is None or kind not in possible:
        kind = draw(st.sampled_from(possible))
    mirror = list(truth)
    rows = range(len(truth))
    if kind == "one_row_off":
        i = draw(st.sampled_from(rows))
        mirror[i] += 1 if truth[i] == 1 else draw(st.sampled_from((1, -1)))
    elif kind == "swapped":
        i = draw(st.sampled_from(rows))
        j = draw(st.sampled_from([j for j in rows if truth[j] != truth[i]]))
        mirror[i], mirror[j] = truth[j], truth[i]
    else:
        j = draw(st.sampled_from([j for j in rows if truth[j] >= 2]))
        i = draw(st.sampled_from([i for i in rows if i != j]))
        moved = draw(st.integers(1, truth[j] - 1))
        mirror[i] += moved
        mirror[j] -= moved
    event(f"stale_mirror_{kind}")
    div = batch.divergence
    return Divergence(None if div is None else div.extend_seq_lens, tuple(mirror))
