"""The stages of upstream's DSA metadata path, one pure-Python function each (no torch).

Each is named after the upstream function (or the ``init_forward_metadata`` lines) it specifies;
lines are SGLang 0.5.23 (``B`` = ``srt/layers/attention/dsa_backend.py``, ``P`` =
``kernels/ops/attention/pad.py``, ``U`` = ``srt/layers/attention/dsa/utils.py``, ``M`` =
``srt/layers/attention/dsa/dsa_backend_mtp_precompute.py``).  Every docstring works DESIGN.md
section 6's example: ``seq_lens [5, 3]``, slots ``[2, 1]``, ``N = 3``, ``P = 4``, top-k 8,
``req_to_token[s][c] = 16 s + c``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ExpandResult",
    "arange",
    "cache_seqlens",
    "compute_cu_seqlens",
    "compute_dsa_seqlens",
    "gather_page_table",
    "max_seqlen_k",
    "next_power_of_2",
    "repeat_rows",
    "seqlens_expand",
    "transform_table_1_to_real",
]


def cache_seqlens(seq_lens: Sequence[int], draft_token_num: int) -> list[int]:
    """``cache_seqlens_int32 = seq_lens + draft_token_num`` (B:1105): ``N`` in target verify, else 0.

    Example: ``cache_seqlens([5, 3], 3) == [8, 6]`` (target verify); draft extend's caller already holds
    ``[8, 6]`` and adds 0.
    """
    return [s + draft_token_num for s in seq_lens]


def compute_cu_seqlens(lengths: Sequence[int | None]) -> list[int | None]:
    """``pad(cumsum(lengths), (1, 0))`` (M:58-63): the exclusive-then-inclusive prefix sums.

    Example: ``compute_cu_seqlens([8, 6]) == [0, 8, 14]``; ``[6, 7, 8, 4, 5, 6]`` gives
    ``[0, 6, 13, 21, 25, 30, 36]``.  An unknown (uninitialised) length makes every later sum unknown (None).
    """
    out: list[int | None] = [0]
    for n in lengths:
        last = out[-1]
        out.append(None if n is None or last is None else last + n)
    return out


def max_seqlen_k(seq_lens_cpu: Sequence[int] | None, seq_lens: Sequence[int], draft_token_num: int) -> int:
    """``max_seqlen_k`` (B:1107-1115): the host mirror's max plus the drafts, or -- without a mirror -- the
    device's ``int(seq_lens.max().item())`` plus the drafts (the eager path's one sync).

    Example: ``max_seqlen_k([5, 3], [5, 3], 3) == 8``; a stale mirror ``[4, 3]`` gives 7 (the table narrows
    below what ``cache_seqlens`` 8 reads: P2).
    """
    return max(seq_lens if seq_lens_cpu is None else seq_lens_cpu) + draft_token_num


def gather_page_table(req_to_token: Sequence[Sequence[int]], slots: Sequence[int], width: int) -> list[list[int]]:
    """``req_to_token[req_pool_indices, :width]`` (B:1117-1119; torch's slice stops at the table's width).

    Example: width 8, slots ``[2, 1]``: ``[[32, ..., 39], [16, ..., 23]]``.
    """
    return [list(req_to_token[s][:width]) for s in slots]


def repeat_rows(rows: Sequence[Sequence[int]], repeats: int) -> list[list[int]]:
    """``repeat_interleave(page_table, repeats=N, dim=0)`` (B:1186, B:1225): each row ``N`` times, in order.

    Example: ``repeat_rows([[1], [2]], 3) == [[1], [1], [1], [2], [2], [2]]``.
    """
    return [list(r) for r in rows for _ in range(repeats)]


def next_power_of_2(n: int) -> int:
    """``triton.next_power_of_2`` for ``n >= 1``: ``BLOCK`` of ``seqlens_expand_kernel`` (3 -> 4, 4 -> 4)."""
    return 1 << max(n - 1, 0).bit_length()


@dataclass(frozen=True, slots=True)
class ExpandResult:
    """What ``seqlens_expand_triton`` leaves in its output and what it does outside it."""

    values: list[int | None]
    """(total_len,): each entry the kernel stored, or None where it stored nothing (uninitialised memory)."""
    oob_writes: int
    """Stores at an index ``>= total_len``: past the output buffer (an out-of-bounds write on a GPU)."""
    uninitialized: int
    """Entries of the output nothing stored to (``torch.empty``'s garbage reaches the consumers)."""
    truncated_rows: int
    """Rows longer than ``BLOCK``: their tail is never stored (the kernel's one block a row)."""
    device_sum: int
    """What the device lengths sum to (the size a device-synced allocation would have had)."""


def seqlens_expand(extend_seq_lens: Sequence[int], seq_lens: Sequence[int], total_len: int,
                   max_q_len: int) -> ExpandResult:
    """``seqlens_expand_triton`` (P:359-390, kernel P:327-356): per row ``b`` and ``j < extend[b]``, the
    token's visible length ``max(seq_lens[b] - extend[b] + 1 + j, 0)``, stored at the *device* offset
    ``cumsum(extend)[b] + j`` into ``torch.empty(total_len)`` sized by the *host* total; one block of
    ``BLOCK = next_power_of_2(max_q_len)`` stores a row, with no bound against the output.

    Example: ``seqlens_expand([3, 3], [8, 6], 6, 3).values == [6, 7, 8, 4, 5, 6]``.  The fault model
    (device lengths that disagree with the host total): ``[3, 4]`` with total 6 stores ``[6, 7, 8, 3, 4, 5]``
    and one element past the buffer (``oob_writes == 1``); ``[3, 2]`` leaves the last entry unwritten
    (``uninitialized == 1``); ``[3, 5]`` with total 8 truncates row 1 to ``BLOCK = 4`` (one unwritten).
    The pad row of a draft-extend replay (``seq_len`` 1, ``N = 3``) stores ``[0, 0, 1]``: the floor at 0 is
    sglang #30378's fix.
    """
    block = next_power_of_2(max_q_len)
    values: list[int | None] = [None] * total_len
    oob = truncated = 0
    offset = 0
    for qo_len, kv_len in zip(extend_seq_lens, seq_lens):
        start = kv_len - qo_len + 1
        truncated += qo_len > block
        for j in range(min(qo_len, block)):
            index = offset + j
            if index < total_len:
                values[index] = max(start + j, 0)
            else:
                oob += 1
        offset += qo_len
    return ExpandResult(values, oob, values.count(None), truncated, offset)


def compute_dsa_seqlens(seqlens_expanded: Sequence[int | None], dsa_index_topk: int) -> list[int | None]:
    """``compute_dsa_seqlens`` (U:159-170, ``index_kpool <= 1``): ``clamp(max=dsa_index_topk)``.

    Example: top-k 8: ``[6, 7, 8, 4, 5, 6]`` is unchanged; top-k 5 gives ``[5, 5, 5, 4, 5, 5]``.
    """
    return [None if n is None else min(n, dsa_index_topk) for n in seqlens_expanded]


def transform_table_1_to_real(page_table: Sequence[Sequence[int]], page_size: int) -> list[list[int]]:
    """``_transform_table_1_to_real`` (B:1066-1074): ``page_table[:, arange(0, W, P)] // P`` (the table itself
    when ``P == 1``).

    Example: ``P = 4``, a row ``[32, ..., 39]`` (width 8) gives ``[8, 9]``; width 16 gives ``[8, 9, 10, 11]``.
    """
    if page_size == 1:
        return [list(r) for r in page_table]
    return [[r[c] // page_size for c in range(0, len(r), page_size)] for r in page_table]


def arange(n: int) -> list[int]:
    """``torch.arange(n)`` (``cu_seqlens_q``, ``dsa_cu_seqlens_q``): ``arange(7) == [0, 1, ..., 6]``."""
    return list(range(n))
