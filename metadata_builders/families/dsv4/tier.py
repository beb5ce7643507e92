"""Graph-tier arithmetic: how ragged verify lengths are padded to a captured tier, by convention.

Pure Python and import-free so the batch model, the reference and the
strategies share one definition (the data model never imports a builder).

Upstream pads one tier three ways (docs/DESIGN.md section 2, owner decision of
2026-12-01, settling F13); real tokens map the same under all three, the
difference is who takes the slack ``leftover = graph_num_tokens - sum(real)``:

``absorb_then_clamp``
    spread over the pad rows, or absorbed by the last real row when there is none;
    then every row clamped to the cap (``RaggedVerifyLayout.padded_to_bucket(cap=N)``,
    the decode graph runner's staged copy).  With a cap the total is not known on
    the host: the build reads it back.
``full_coverage``
    the same with the cap ignored (``padded_to_bucket(cap=None)``, what the DSV4
    attention backend's out-graph phase does): every token of the tier is covered,
    the host total is the tier.
``pad_rows_only``
    the cap bounds pad rows only and a real row never widens; slack the pad rows
    cannot take is an uncovered tail (``pad_verify_lens_to_bucket(max_row_len=cap)``,
    upstream's newer line).  The host knows the total: ``min(tier, total + npad x cap)``.
    Upstream's function without a cap is its legacy absorb; the model's convention
    never widens a real row, cap or not (docs/FINDINGS.md F13).

Worked example -- three real rows ``[3, 1, 2]`` (6 tokens):

=====================  =====================  =====================  =====================
tier                   ``absorb_then_clamp``  ``full_coverage``      ``pad_rows_only``
=====================  =====================  =====================  =====================
5 rows, 10 tokens      ``[3, 1, 2, 2, 2]``    ``[3, 1, 2, 2, 2]``    ``[3, 1, 2, 2, 2]``
5 rows, 10, cap 1      ``[3, 1, 2, 1, 1]``    ``[3, 1, 2, 2, 2]``    ``[3, 1, 2, 1, 1]``
3 rows, 10 tokens      ``[3, 1, 6]``          ``[3, 1, 6]``          ``[3, 1, 2]`` (4 uncovered)
3 rows, 10, cap 3      ``[3, 1, 3]``          ``[3, 1, 6]``          ``[3, 1, 2]`` (4 uncovered)
=====================  =====================  =====================  =====================

A cap below ``max(verify_lens)`` would clamp real verify tokens away and is
rejected by the batch model (F2b), so a clamp only ever shortens pad rows and
the slack the last real row absorbed.

The graph runner's **capture geometry** is a convention too (docs/DESIGN.md section 3, P5; decision of
2026-12-04): how many request slots a compact ragged token tier of ``T = b x W`` tokens is captured with
(``W`` the captured request width, the draft tokens), upstream's ``_ragged_capture_slots``:

``token_slots``
    ``min(T, max_bs)``: SGLang's released runner (0.5.18-0.5.23).  Every tier of at least ``max_bs``
    tokens shares ``bs = max_bs``; a smaller one gets one slot per token.
``request_slots``
    ``T // W``: the fix of upstream's #34384 / #39257 branch, each tier captured with the request geometry
    that generates it (``T`` must be a multiple of ``W``; upstream asserts it).

Worked example -- ``capture_bs = (1, 2, 3, 4)``, ``W = 3``, ``max_bs = 4``; each tier as ``(slots, T)`` and the
layout it is captured with (:func:`capture_verify_lens`):

=================  ==========================================  ==========================================
tier ``T``         ``token_slots``                             ``request_slots``
=================  ==========================================  ==========================================
12 (4 requests)    ``(4, 12)`` ``[3, 3, 3, 3]``                ``(4, 12)`` ``[3, 3, 3, 3]``
9 (3 requests)     ``(4, 9)`` ``[3, 2, 2, 2]``                 ``(3, 9)`` ``[3, 3, 3]``
6 (2 requests)     ``(4, 6)`` ``[2, 2, 1, 1]``                 ``(2, 6)`` ``[3, 3]``
3 (1 request)      ``(3, 3)`` ``[1, 1, 1]``                    ``(1, 3)`` ``[3]``
=================  ==========================================  ==========================================

#39257's reproduction, ``T = 42``, ``W = 6``, ``max_bs = 8``: ``token_slots`` captures 8 slots
``[6, 6, 5, 5, 5, 5, 5, 5]``, ``request_slots`` the 7 requests of 6 tokens that made the tier.
"""

from __future__ import annotations

from typing import Literal, Sequence, get_args

__all__ = ["CAPTURE_GEOMETRIES", "CaptureGeometry", "DEFAULT_CAPTURE_GEOMETRY", "DEFAULT_PADDING", "PADDINGS",
           "Padding", "absorbed_slack", "capture_verify_lens", "host_total", "ragged_capture_slots", "runner_tiers",
           "tier_verify_lens"]

Padding = Literal["absorb_then_clamp", "full_coverage", "pad_rows_only"]
"""How a graph path pads a ragged batch to its tier (the module docstring)."""

PADDINGS: tuple[Padding, ...] = get_args(Padding)

DEFAULT_PADDING: Padding = "absorb_then_clamp"
"""The convention of a builder that declares none: the model's rule before conventions were named, so a
third-party builder keeps its verdicts."""

CaptureGeometry = Literal["token_slots", "request_slots"]
"""How many request slots a graph runner captures a compact ragged token tier with (the module docstring)."""

CAPTURE_GEOMETRIES: tuple[CaptureGeometry, ...] = get_args(CaptureGeometry)

DEFAULT_CAPTURE_GEOMETRY: CaptureGeometry = "token_slots"
"""The capture geometry of a builder that declares none: the released runner's (0.5.18-0.5.23), the harness's only
rule before the geometry was named, so a builder keeps its verdicts."""


def tier_verify_lens(verify_lens: Sequence[int], padded_bs: int, graph_num_tokens: int, cap: int | None,
                     padding: Padding = DEFAULT_PADDING) -> list[int]:
    """Ragged verify lengths padded to a graph tier along ``padding`` (the module docstring's table).

    ``leftover = graph_num_tokens - sum(real)``.  With pad rows it is spread over
    them: ``base = leftover // npad``, the first ``leftover % npad`` pad rows get
    one more.  With no pad rows the last real row absorbs it, except under
    ``pad_rows_only``.  Then the cap: every row under ``absorb_then_clamp``, pad
    rows only under ``pad_rows_only``, none under ``full_coverage``.
    """
    if padding not in PADDINGS:
        raise ValueError(f"padding={padding!r} must be one of {list(PADDINGS)}")
    lens = list(verify_lens)
    npad = padded_bs - len(lens)
    leftover = graph_num_tokens - sum(lens)
    if npad > 0:
        base, rem = divmod(leftover, npad)
        lens += [base + (1 if i < rem else 0) for i in range(npad)]
    elif padding != "pad_rows_only":
        lens[-1] += leftover
    if cap is not None and padding == "absorb_then_clamp":
        lens = [min(v, cap) for v in lens]
    elif cap is not None and padding == "pad_rows_only":
        lens = lens[: len(verify_lens)] + [min(v, cap) for v in lens[len(verify_lens):]]
    return lens


def host_total(verify_lens: Sequence[int], padded_bs: int, graph_num_tokens: int, cap: int | None,
               padding: Padding = DEFAULT_PADDING) -> int | None:
    """The tier's token total as the host knows it, or None when the build must read it back from the device.

    ``absorb_then_clamp``: the tier when uncapped, else unknown (the clamp makes it a
    device sum).  ``full_coverage``: always the tier.  ``pad_rows_only``: the padded
    lengths' sum, ``min(tier, total + npad x cap)`` -- no device read.
    """
    if padding == "absorb_then_clamp":
        return graph_num_tokens if cap is None else None
    if padding == "full_coverage":
        return graph_num_tokens
    return sum(tier_verify_lens(verify_lens, padded_bs, graph_num_tokens, cap, padding))


def absorbed_slack(verify_lens: Sequence[int], padded_bs: int, graph_num_tokens: int, cap: int | None,
                   padding: Padding = DEFAULT_PADDING) -> int:
    """Tokens of tier slack the last real row absorbed (0 when there are pad rows, and under ``pad_rows_only``).

    ``[3, 1, 2]`` on 3 rows / 10 tokens absorbs 4; with cap 3 it absorbs 1 (``absorb_then_clamp``),
    4 (``full_coverage``), 0 (``pad_rows_only``).
    """
    if padded_bs > len(verify_lens):
        return 0
    return tier_verify_lens(verify_lens, padded_bs, graph_num_tokens, cap, padding)[-1] - verify_lens[-1]


# -- the graph runner's tiers (upstream's DecodeCudaGraphRunner, compact ragged verify) ---------------------


def ragged_capture_slots(graph_num_tokens: int, max_bs: int, width: int | None = None,
                         geometry: CaptureGeometry = DEFAULT_CAPTURE_GEOMETRY) -> int:
    """The request slots a compact ragged token tier is captured with, along ``geometry`` (upstream's
    ``_ragged_capture_slots``; the module docstring's table).

    ``token_slots`` (0.5.18-0.5.23): ``min(T, max_bs)`` -- every tier of at least ``max_bs`` tokens shares
    ``bs = max_bs``.  ``request_slots`` (#39257): ``T // width``, the requests of ``width`` tokens that generate
    the tier; ``T`` must be a multiple of ``width`` and the slots at most ``max_bs``.
    """
    if geometry == "token_slots":
        return min(graph_num_tokens, max_bs)
    if geometry != "request_slots":
        raise ValueError(f"geometry={geometry!r} must be one of {list(CAPTURE_GEOMETRIES)}")
    if width is None or width < 1 or graph_num_tokens % width or not 1 <= graph_num_tokens // width <= max_bs:
        raise ValueError(f"request_slots: tokens={graph_num_tokens} must be a multiple of width={width}, in "
                         f"1..max_bs={max_bs} requests")
    return graph_num_tokens // width


def capture_verify_lens(graph_num_tokens: int, slots: int, width: int) -> list[int]:
    """The verify lengths a runner captures a ragged tier with (upstream ``build_capture_verify_lens``).

    ``T`` tokens over ``S`` slots, the longer rows first: ``base = T // S``, the first
    ``T % S`` rows get one more; it needs ``1 <= S <= T <= S * width``.  Worked example,
    ``max_bs = 4``, width 3: tier 12 -> ``[3, 3, 3, 3]``, 9 -> ``[3, 2, 2, 2]``, 6 -> ``[2, 2, 1, 1]``,
    3 (3 slots) -> ``[1, 1, 1]``.
    """
    if not 1 <= slots <= graph_num_tokens <= slots * width:
        raise ValueError(f"capture_verify_lens: need 1 <= slots={slots} <= tokens={graph_num_tokens} <= "
                         f"slots*width={slots * width}")
    base, rem = divmod(graph_num_tokens, slots)
    return [base + 1] * rem + [base] * (slots - rem)


def runner_tiers(capture_bs: Sequence[int], width: int, *, ragged: bool,
                 geometry: CaptureGeometry = DEFAULT_CAPTURE_GEOMETRY) -> list[tuple[int, int]]:
    """``(padded_bs, graph_num_tokens)`` of every tier a runner captures, **largest first** (its capture order).

    Uniform verify: one tier per captured batch size, ``(b, b * width)``, keyed by ``bs``.  Compact ragged
    verify: one token tier per batch size, ``T = b * width``, with ``ragged_capture_slots(T, max_bs, width,
    geometry)`` slots, keyed by ``T``.  Worked example, ``capture_bs = (1, 2, 3, 4)``, width 3, ragged:
    ``[(4, 12), (4, 9), (4, 6), (3, 3)]`` under ``token_slots`` -- three tiers share ``bs = 4`` --,
    ``[(4, 12), (3, 9), (2, 6), (1, 3)]`` under ``request_slots``.
    """
    max_bs = max(capture_bs)
    tiers = [(ragged_capture_slots(b * width, max_bs, width, geometry) if ragged else b, b * width)
             for b in capture_bs]
    return sorted(set(tiers), key=lambda t: (-t[1], -t[0]))
