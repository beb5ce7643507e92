"""The decode index streams of a target-verify build, in pure Python (no torch).

Fields of group ``streams`` (:data:`metadata_builders.families.dsv4.metadata.STREAM_FIELD_NAMES`),
judged where ``swa_window == unified_swa_window``; checked against upstream's
Triton ``build_decode_streams`` in ``tests/dsv4/test_decode_streams.py``.

Target verify runs the unified-KV *decode* kernel: each verify token is its own
query, so ``_attach_unified_kv_decode_streams`` (called from
``init_forward_metadata_prefill`` with ``attach_decode_streams=True``) builds,
through ``runtime.build_decode_streams``, three ragged-packed index streams
into the unified KV pool, one per attention kind:

=========  ============================================  ============================
stream     token ``t``'s segment                         length
=========  ============================================  ============================
``swa``    its SWA window, oldest first                  ``swa_len[t]``
``hca``    the window, then its c128 (HCA) pages         ``swa_len[t] + hca_len[t]``
``csa``    the window, then its c4 (CSA) top-k slots     ``swa_len[t] + csa_len[t]``
=========  ============================================  ============================

``*_indptr`` is the exclusive prefix sum of the lengths (``N + 1`` entries,
int32); token ``t``'s segment is ``*_indices[indptr[t]:indptr[t + 1]]``.

**Values.**  With ``n = min(pos + 1, win)``, window entry ``i < n`` is the ring
row of position ``pos - n + 1 + i``: ``slot * ring_size + (pos - n + 1 + i) %
ring_size`` (upstream ``write_v4_paged_decode_indices``).  HCA tail entry
``j < hca_len[t]`` is ``p + swa_pages`` for ``p = hca_page_indices[t][j] >= 0``,
else ``-1`` (``fill_compress_tail``: compressed rows sit after the SWA ring).

**What is written, what is garbage.**  The buffers are ``torch.empty`` of fixed
capacity ``N * win``, ``N * (win + hca_width)``, ``N * (win + csa_width)``
(:func:`stream_capacities`), static across graph replay.  The build writes:

* ``swa_indices[swa_indptr[t] : swa_indptr[t + 1]]``: all of it;
* ``hca_indices[hca_indptr[t] : hca_indptr[t + 1]]``: all of it (window, then tail);
* ``csa_indices[csa_indptr[t] : csa_indptr[t] + swa_len[t]]``: the window only.
  The CSA tail ``csa_len[t]`` entries are filled per layer, at attention time,
  from the indexer's top-k (``_forward_unified_kv`` calls ``fill_compress_tail``
  on the c4 sparse page indices); after the build they are garbage;
* nothing past ``indptr[N]``: garbage.

The indptrs are written in full.  So the **canonical form** keeps the indptrs
flat and each indices field as one row per token holding only its written
entries (the CSA row is its window).  Every row is recoverable from upstream's
six outputs alone (:func:`canonical_streams`): ``swa_len[t]`` is
``swa_indptr[t + 1] - swa_indptr[t]``.

**Precondition.**  The window kernel writes ``n = min(pos + 1, win)`` entries
into a segment sized ``swa_len[t]``, which upstream passes as
``swa_topk_lengths = min(seq_lens_casual, SWA_WINDOW)`` -- the same number only
when ``SWA_WINDOW`` (128) equals the pool's ``unified_swa_window`` (128 for
DeepSeek-V4).  Where they differ a segment is half unwritten (wider window) or
the kernel overruns into the next token's segment, a race between programs
(narrower window), so the streams are defined only for ``swa_len[t] == n``;
likewise ``hca_len[t] <= hca_width`` and ``csa_len[t] <= csa_width``.

**Arguments in target verify** (SGLang 0.5.23, ``N = padded_num_tokens``):
``slots = req_pool_indices_repeated``, ``positions = positions_casual``,
``swa_lens = swa_topk_lengths``, ``win = unified_swa_window``, ``ring_size =
unified_swa_ring_size``, ``swa_pages = unified_swa_pages``.  Compression on:
``hca_lens = c128_topk_lengths_raw = seq_lens_casual // 128`` (no clamp),
``csa_lens = c4_sparse_topk_lengths_raw = min(seq_lens_casual // 4, index_topk)``,
``hca_page_indices = c128_page_indices`` (-1 padded to a multiple of 64),
``csa_width = c4_sparse_page_indices.shape[1]`` (``index_topk`` rounded up to
``page_index_align``).  Compression off (0.5.21+): an empty compressed tail,
``hca_lens = csa_lens = 0``, ``hca_page_indices`` of width 0, ``csa_width = 0``
(:func:`tail_lengths`).

Worked example: ``win = 4``, ``ring_size = 6``, ``swa_pages = 100``, four tokens::

    slots     = [2, 2, 2, 1]        positions = [2, 3, 4, 6]
    swa_lens  = [3, 4, 4, 4]        (min(pos + 1, 4))
    hca_lens  = [0, 0, 1, 2]        hca_page_indices = [[-1, -1], [-1, -1], [5, -1], [7, -3]]
    csa_lens  = [0, 1, 1, 2]        csa_width = 2

Token 3 reads positions 3..6 of slot 1 (rows 6..11): ring rows ``[9, 10, 11, 6]``
(position 6 wraps to ring row 0).  Its HCA tail is ``[107, -1]``.  Result::

    swa_indptr  = [0, 3, 7, 11, 15]
    swa_indices = [[12, 13, 14], [12, 13, 14, 15], [13, 14, 15, 16], [9, 10, 11, 6]]
    hca_indptr  = [0, 3, 7, 12, 18]
    hca_indices = [[12, 13, 14], [12, 13, 14, 15], [13, 14, 15, 16, 105], [9, 10, 11, 6, 107, -1]]
    csa_indptr  = [0, 3, 8, 13, 19]
    csa_indices = [[12, 13, 14], [12, 13, 14, 15], [13, 14, 15, 16], [9, 10, 11, 6]]

Capacities 16, 24 and 24 entries.  Unwritten: the CSA tails ``csa_indices[7]``,
``[12]``, ``[17:19]`` (tokens 1-3's top-k slots) and everything past each ``indptr[4]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from metadata_builders.errors import StreamOutOfBounds

__all__ = [
    "STREAM_FIELDS",
    "canonical_streams",
    "decode_index_streams",
    "stream_capacities",
    "tail_lengths",
]

STREAM_FIELDS = ("swa_indices", "swa_indptr", "hca_indices", "hca_indptr", "csa_indices", "csa_indptr")
"""The six fields, in ``build_decode_streams``'s return order; all int32."""


def _indptr(lengths: Sequence[int]) -> list[int]:
    """``[3, 4, 5] -> [0, 3, 7, 12]`` (``_lengths_to_indptr``)."""
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def stream_capacities(num_tokens: int, *, win: int, hca_width: int, csa_width: int) -> dict[str, int]:
    """Entries of each indices buffer: ``N * win``, ``N * (win + hca_width)``, ``N * (win + csa_width)``."""
    return {
        "swa_indices": num_tokens * win,
        "hca_indices": num_tokens * (win + hca_width),
        "csa_indices": num_tokens * (win + csa_width),
    }


def tail_lengths(seq_lens_casual: Sequence[int], *, index_topk: int | None) -> tuple[list[int], list[int]]:
    """``(hca_lens, csa_lens)`` as target verify passes them; ``index_topk=None`` is compression off.

    ``seq_lens_casual = [3, 130, 2049]`` with ``index_topk = 512`` gives
    ``([0, 1, 16], [0, 32, 512])``: c128 lengths unclamped, c4 clamped to the top-k.
    """
    if index_topk is None:
        return [0] * len(seq_lens_casual), [0] * len(seq_lens_casual)
    return [c // 128 for c in seq_lens_casual], [min(c // 4, index_topk) for c in seq_lens_casual]


def _window(slot: int, pos: int, win: int, ring_size: int) -> list[int]:
    """Ring rows of the last ``min(pos + 1, win)`` positions, oldest first."""
    n = min(pos + 1, win)
    return [slot * ring_size + (pos - n + 1 + i) % ring_size for i in range(n)]


def _check(name: str, values: Sequence[int], t: int, lo: int, hi: int, rule: str) -> None:
    if not lo <= values[t] <= hi:
        raise ValueError(f"{name}[{t}]={values[t]} must be in {lo}..{hi} ({rule})")


def _validate(
    slots: Sequence[int],
    positions: Sequence[int],
    swa_lens: Sequence[int],
    hca_lens: Sequence[int],
    csa_lens: Sequence[int],
    hca_page_indices: Sequence[Sequence[int]],
    csa_width: int,
    win: int,
    ring_size: int,
) -> int:
    """Check the precondition token by token; return ``hca_width``."""
    n = len(slots)
    for name, seq in (("positions", positions), ("swa_lens", swa_lens), ("hca_lens", hca_lens),
                      ("csa_lens", csa_lens), ("hca_page_indices", hca_page_indices)):
        if len(seq) != n:
            raise ValueError(f"len({name})={len(seq)} must equal len(slots)={n}")
    if win < 1 or ring_size < 1 or csa_width < 0:
        raise ValueError(f"win={win} and ring_size={ring_size} must be >= 1, csa_width={csa_width} >= 0")
    widths = {len(row) for row in hca_page_indices}
    if len(widths) > 1:
        raise ValueError(f"hca_page_indices rows must share one width, got {sorted(widths)}")
    hca_width = widths.pop() if widths else 0
    for t in range(n):
        _check("slots", slots, t, 0, 2**31 - 1, "a request slot")
        _check("positions", positions, t, 0, 2**31 - 1, "positions_casual = seq_lens_casual - 1")
        n_win = min(positions[t] + 1, win)
        _check("swa_lens", swa_lens, t, n_win, n_win, "the window kernel writes min(positions[t] + 1, win) entries")
        _check("hca_lens", hca_lens, t, 0, hca_width, "at most hca_page_indices' width")
        _check("csa_lens", csa_lens, t, 0, csa_width, "at most csa_width")
    return hca_width


def decode_index_streams(
    slots: Sequence[int],
    positions: Sequence[int],
    swa_lens: Sequence[int],
    hca_lens: Sequence[int],
    csa_lens: Sequence[int],
    hca_page_indices: Sequence[Sequence[int]],
    *,
    csa_width: int,
    win: int,
    ring_size: int,
    swa_pages: int,
) -> dict[str, list]:
    """The six streams in canonical form: flat indptrs, one row of written entries per token.

    See the module docstring for the formulas, the worked example and what
    upstream passes.  Raises ``ValueError`` naming the argument and token when
    the precondition fails (``swa_lens[t] == min(positions[t] + 1, win)``,
    tails within their widths).
    """
    _validate(slots, positions, swa_lens, hca_lens, csa_lens, hca_page_indices, csa_width, win, ring_size)
    windows = [_window(s, p, win, ring_size) for s, p in zip(slots, positions)]
    tails = [[p + swa_pages if p >= 0 else -1 for p in row[:k]] for row, k in zip(hca_page_indices, hca_lens)]
    return {
        "swa_indices": [list(w) for w in windows],
        "swa_indptr": _indptr(swa_lens),
        "hca_indices": [w + tail for w, tail in zip(windows, tails)],
        "hca_indptr": _indptr([s + h for s, h in zip(swa_lens, hca_lens)]),
        "csa_indices": [list(w) for w in windows],
        "csa_indptr": _indptr([s + c for s, c in zip(swa_lens, csa_lens)]),
    }


def canonical_streams(flat: Mapping[str, Sequence[int]]) -> dict[str, list]:
    """Upstream's six flat buffers (as lists) to the canonical form, dropping unwritten entries.

    ``swa_len[t]`` comes from ``swa_indptr``; the CSA row keeps that many entries
    of its segment (the window), the SWA and HCA rows their whole segment.
    Raises ``ValueError`` when an indptr is not ``N + 1`` long, and
    :class:`~metadata_builders.errors.StreamOutOfBounds` (a ``ValueError``) when a segment
    leaves its buffer -- a read the kernel would make past it.
    """
    swa_p, hca_p, csa_p = (list(flat[k]) for k in ("swa_indptr", "hca_indptr", "csa_indptr"))
    if not len(swa_p) == len(hca_p) == len(csa_p) >= 1:
        raise ValueError(f"indptr lengths {len(swa_p)}, {len(hca_p)}, {len(csa_p)} must be equal N + 1 >= 1")
    n = len(swa_p) - 1
    swa_lens = [swa_p[t + 1] - swa_p[t] for t in range(n)]
    out: dict[str, list] = {"swa_indptr": swa_p, "hca_indptr": hca_p, "csa_indptr": csa_p}
    for name, indptr, keep in (("swa", swa_p, None), ("hca", hca_p, None), ("csa", csa_p, swa_lens)):
        buf = flat[f"{name}_indices"]
        rows = []
        for t in range(n):
            end = indptr[t + 1] if keep is None else indptr[t] + keep[t]
            if not 0 <= indptr[t] <= end <= len(buf):
                raise StreamOutOfBounds(f"{name}_indices", t, (indptr[t], end), len(buf))
            rows.append(list(buf[indptr[t] : end]))
        out[f"{name}_indices"] = rows
    return {k: out[k] for k in STREAM_FIELDS}
