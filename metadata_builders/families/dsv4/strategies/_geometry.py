"""Geometries: the backend constants, at small values and at upstream values.

Small values (``page_size`` 1..8, ``swa_window`` 1..8, ``ring_size`` 1..8) make
every boundary cheap to reach: a handful of tokens already crosses a page,
fills the window and wraps the ring several times.  Upstream values
(``Geometry()``: page 256, window 128, ring ``window + num_draft - 1``, align 64)
check the real constants.  Large rings (:data:`HUGE_RING_SIZES`) push
``swa_loc = slot * ring_size + pos % ring_size`` towards the top of int32 while
keeping it inside, which upstream stores it as (owner decision F4: a geometry
whose ``swa_loc`` leaves int32 is invalid input); ``verify_batches`` then widens
such a ring to the largest one its table allows, ``2**31 // num_slots``.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from metadata_builders.families.dsv4.batch import Compression, Geometry
from metadata_builders.families.dsv4.kv_state import state_window

__all__ = ["COMPRESSED_PAGE_SIZES", "HUGE_RING_SIZES", "LOW_RATIO_CHOICES", "UPSTREAM", "compressions", "geometries"]

UPSTREAM = Geometry()
"""The upstream constants (page 256, window 128, ring 129, unified window 128, align 64)."""

HUGE_RING_SIZES: tuple[int, ...] = (2**20 + 3, 2**26 + 1, 100_000_007)
"""Large rings, valid on their own for up to 21 slots (``num_slots * ring_size <= 2**31``);
``verify_batches`` widens them to ``2**31 // num_slots`` minus 0..3 once it knows the table."""

COMPRESSED_PAGE_SIZES: tuple[int, ...] = (128, 256)
"""Page sizes drawn with compression (a multiple of 128, as upstream's c128 needs; 256 is upstream's)."""

LOW_RATIO_CHOICES: tuple[tuple[int, ...], ...] = ((), (), (), (), (), (), (1,), (2,), (1, 2))
"""``Compression.low_ratios`` as drawn: none two times in three (first, so it is what a failure shrinks to),
else ratio 1, ratio 2 or both (V4.1's pool: ``(1, 2)``)."""

_SMALL = st.integers(1, 8)
_HAS_COMPRESSION = st.sampled_from((False, False, True))


@st.composite
def compressions(draw: st.DrawFn, *, num_draft_tokens: int | None = None) -> Compression:
    """A :class:`Compression`: upstream's top-k (512, 1024) or a small one the c4 lengths reach (8, 64).

    Rings: c4 8 (no speculation) / 16 (speculation) / 32, c128 128 / 256, so a
    verify batch wraps them; ``unified_swa_pages`` 1 or upstream-sized; the V4.1
    low ratios one time in three (:data:`LOW_RATIO_CHOICES`).  Shrinks towards the
    first of each: top-k 512, rings 8 and 128, one unified page, no low ratios.

    With ``num_draft_tokens`` only the rings that serve that many draft tokens are
    drawn (``window + num_draft_tokens - 2 <= ring``, the bound upstream's pool
    configurator asserts, ``get_compress_state_write_pad``): a c128 ring of 128 with
    three drafts is a configuration upstream refuses to start, and P10 cannot judge it.
    """
    def serving(ratio: int, rings: tuple[int, ...]) -> tuple[int, ...]:
        if num_draft_tokens is None:
            return rings
        return tuple(r for r in rings if state_window(ratio) + num_draft_tokens - 2 <= r) or (rings[-1],)

    return Compression(
        index_topk=draw(st.sampled_from((512, 1024, 8, 64))),
        c4_ring_size=draw(st.sampled_from(serving(4, (8, 16, 32)))),
        c128_ring_size=draw(st.sampled_from(serving(128, (128, 256)))),
        unified_swa_pages=draw(st.sampled_from((1, 1024))),
        low_ratios=draw(st.sampled_from(LOW_RATIO_CHOICES)),
    )
_SCALES = st.sampled_from(("small", "mixed", "upstream"))
_DIMENSION_KINDS = st.sampled_from(("small", "upstream", "middle"))
_RING_KINDS = st.sampled_from(("small", "upstream", "huge"))
_HUGE_RINGS = st.sampled_from(HUGE_RING_SIZES)


# The shrinker prefers shorter choice sequences, so each helper makes the same
# draws whichever value it returns (the small one drawn first): otherwise a
# constant upstream value, costing no choice, would shrink "smaller" than 1.


def _draw_dimension(draw: st.DrawFn, scale: str, upstream: int, middle: tuple[int, ...]) -> int:
    small = draw(_SMALL)
    kind = scale if scale != "mixed" else draw(_DIMENSION_KINDS)
    if kind == "small":
        return small
    if kind == "upstream":
        return upstream
    return draw(st.sampled_from(middle))


def _draw_ring(draw: st.DrawFn, scale: str, upstream_ring: int) -> int:
    """Small rings wrap within a few tokens; upstream's rule; large rings reach int32's upper half."""
    small = draw(_SMALL)
    kind = draw(_RING_KINDS)
    if kind == "small" and scale != "upstream":
        return small
    if kind == "huge":
        return draw(_HUGE_RINGS)
    return upstream_ring


def _draw_unified_window(draw: st.DrawFn, swa_window: int) -> int:
    small = draw(_SMALL)
    kind = draw(_DIMENSION_KINDS)
    if kind == "small":
        return small
    return UPSTREAM.unified_swa_window if kind == "upstream" else swa_window


def _pinned(name: str, value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidArgument(f"{name}={value!r} must be None (draw it) or an int >= 1")
    return value


@st.composite
def geometries(
    draw: st.DrawFn,
    *,
    page_size: int | None = None,
    swa_window: int | None = None,
    ring_size: int | None = None,
    unified_swa_window: int | None = None,
    page_index_align: int | None = None,
    num_draft_tokens: int | None = None,
    compression: bool | None = None,
    equal_windows: bool = False,
) -> Geometry:
    """A :class:`Geometry`; each ``None`` argument is drawn.

    A *scale* is drawn first: ``small`` (every dimension in 1..8), ``upstream``
    (``Geometry()``'s constants) or ``mixed`` (each dimension independently small,
    upstream or in between).  The ring is then ``swa_window + num_draft_tokens - 1``
    (upstream's rule, e.g. 128 + 2 - 1 = 129), small (wraps several times within a
    few tokens) or large (``HUGE_RING_SIZES``: ``swa_loc`` near the top of int32).
    ``num_draft_tokens`` only feeds the upstream ring rule (drawn in 1..8 if None).

    ``compression`` forces (``True``) or forbids (``False``) compression; ``None``
    draws it one time in three where the page size allows (a pinned page size
    must be a multiple of 128).  With compression the page is 128 or 256, the
    alignment upstream's 64 (unless pinned) and the constants come from
    :func:`compressions`.  ``equal_windows=True`` makes ``unified_swa_window`` the drawn ``swa_window``
    (upstream's geometry: both 128), where draft extend's prefill store and its reads share one window.

    Shrinks towards the small scale with every dimension 1, without compression.
    """
    for name, value in (
        ("page_size", page_size),
        ("swa_window", swa_window),
        ("ring_size", ring_size),
        ("unified_swa_window", unified_swa_window),
        ("page_index_align", page_index_align),
        ("num_draft_tokens", num_draft_tokens),
    ):
        _pinned(name, value)
    scale = draw(_SCALES)
    pinned_page, pinned_align = page_size, page_index_align
    draft = num_draft_tokens if num_draft_tokens is not None else draw(_SMALL)
    if page_size is None:
        page_size = _draw_dimension(draw, scale, UPSTREAM.page_size, (16, 32, 64))
    if swa_window is None:
        swa_window = _draw_dimension(draw, scale, UPSTREAM.swa_window, (16, 32, 64))
    if page_index_align is None:
        page_index_align = _draw_dimension(draw, scale, UPSTREAM.page_index_align, (16, 32))
    if equal_windows and unified_swa_window not in (None, swa_window):
        raise InvalidArgument(f"equal_windows=True with unified_swa_window={unified_swa_window} != swa_window="
                              f"{swa_window}")
    if unified_swa_window is None:
        unified_swa_window = swa_window if equal_windows else _draw_unified_window(draw, swa_window)
    if ring_size is None:
        ring_size = _draw_ring(draw, scale, swa_window + draft - 1)
    compressed = None
    if compression is None:
        compression = (pinned_page is None or pinned_page % 128 == 0) and draw(_HAS_COMPRESSION)
    if compression:
        if pinned_page is not None and pinned_page % 128:
            raise InvalidArgument(f"page_size={pinned_page} cannot take compression (a multiple of 128 is needed)")
        page_size = draw(st.sampled_from(COMPRESSED_PAGE_SIZES)) if pinned_page is None else pinned_page
        compressed = draw(compressions(num_draft_tokens=draft))
        if pinned_align is None:
            # Upstream pads the compressed page indices with its module constant 64 bound at
            # definition time (``_pad_last_dim``'s default): other alignments exist only uncompressed.
            page_index_align = UPSTREAM.page_index_align
    return Geometry(
        page_size=page_size,
        swa_window=swa_window,
        ring_size=ring_size,
        unified_swa_window=unified_swa_window,
        page_index_align=page_index_align,
        compression=compressed,
    )
