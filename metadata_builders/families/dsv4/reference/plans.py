"""The compress plans, in pure Python (no torch): which verify tokens compress, which write the state ring.

Upstream's planner (``CompressorPrefillPlan.generate``, SGLang 0.5.23's
``c_plan.cuh``) walks each row's verify tokens.  Token ``j`` of row ``i`` sits at
``position = seq_lens[i] - extend[i] + j`` and has ``ragged_id = extend_start_loc[i] + j``.
For ratio ``r`` (window ``w = 2r`` for the overlapping c4, ``r`` for c128; ring
``R`` rows per request; slot ``s = req_pool_indices[i]``):

* it **compresses** when ``(position + 1) % r == 0``: entry
  ``[position + 1, ragged_id, buffer_len, read_page_0, read_page_1]`` with
  ``buffer_len = w - min(j + 1, w)`` (window tokens from before this batch); when
  ``buffer_len > 0`` the read pages are ``loc(max(position - r, 0)) // r`` and
  ``loc(position) // r``, else ``-1`` and the row ``i``;
* it **writes** the state ring when ``position >= first_write`` with
  ``first_write = min(seq_len // r * r - (r if c4 else 0), seq_len - pad)`` and
  ``pad = R - w + 2`` if ``R > w`` else 0 (the verified tail a rollback keeps):
  entry ``[ragged_id, loc(position)]``;

where ``loc(p) = s * R + p % R`` (the per-request ring: c128 always, c4 on the
unified KV pool the HIP backend runs).

The plan is built from what the planner is handed: the **host mirror**
(``seq_lens_cpu + num_draft``, extend lengths ``[num_draft] * bs``) for an eager
uniform build with a mirror, the device lengths otherwise -- the same numbers
when nothing is stale, so every variant gives the same plan.  On the graph path
the planner sees every row of the tier, pad rows (slot 0) included: their
entries read and write slot 0's ring only.

Worked example -- c4, ring 16 (pad 10), one row: slot 2, ``seq_len = 13``, 3
verify tokens (positions 10, 11, 12; ragged ids 0, 1, 2)::

    compress: position 11 -> [12, 1, 6, loc(7) // 4, loc(11) // 4] = [12, 1, 6, 9, 10]
    write:    first_write = min(12 - 4, 13 - 10) = 3 -> every token:
              [[0, 42], [1, 43], [2, 44]]          # 2 * 16 + position % 16
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metadata_builders.families.dsv4.reference.compressed import RATIOS

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import Compression

__all__ = ["compress_plans", "plan_for_ratio", "write_pad"]


def write_pad(ratio: int, ring: int) -> int:
    """Trailing tokens a write plan keeps resident: ``ring - window + 2`` when the ring is wider than the window."""
    window = ratio * (2 if ratio == 4 else 1)
    return ring - window + 2 if ring > window else 0


def plan_for_ratio(ratio: int, ring: int, slots: list[int], seq_lens: list[int],
                   extend: list[int]) -> tuple[list[list[int]], list[list[int]]]:
    """(compress plan, write plan) of one ratio, each sorted by ``ragged_id``."""
    window = ratio * (2 if ratio == 4 else 1)
    pad = write_pad(ratio, ring)
    compress: list[list[int]] = []
    write: list[list[int]] = []
    ragged = 0
    for i, (slot, seq_len, n) in enumerate(zip(slots, seq_lens, extend)):
        def loc(p: int, slot: int = slot) -> int:
            return slot * ring + p % ring

        first_write = min(seq_len // ratio * ratio - (ratio if ratio == 4 else 0), seq_len - pad)
        for j in range(n):
            position = seq_len - n + j
            if (position + 1) % ratio == 0:
                buffered = window - min(j + 1, window)
                pages = [loc(max(position - ratio, 0)) // ratio, loc(position) // ratio] if buffered else [-1, i]
                compress.append([position + 1, ragged + j, buffered, *pages])
            if position >= first_write:
                write.append([ragged + j, loc(position)])
        ragged += n
    return compress, write


def compress_plans(compression: Compression, slots: list[int], seq_lens: list[int],
                   extend: list[int]) -> dict[str, list[list[int]]]:
    """Group ``plans``: ``c4``/``c128`` compress and write plans of the rows the planner is handed."""
    out: dict[str, list[list[int]]] = {}
    for ratio in RATIOS:
        compress, write = plan_for_ratio(ratio, compression.ring_size(ratio), slots, seq_lens, extend)
        out[f"c{ratio}_compress_plan"] = compress
        out[f"c{ratio}_write_plan"] = write
    return out
