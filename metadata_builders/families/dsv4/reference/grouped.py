"""The grouped verify streams (``SGLANG_DSV4_GROUPED_ASM``, SGLang 0.5.21+): what each group of draft tokens must read.

With the switch on, upstream's target verify also builds, for the fp8 asm decode
kernel that takes up to ``block_q = 4`` draft tokens of one request in one tile, one
stream per **group** instead of one per token: ``[the group's compressed tail][the SWA
ring rows from the group's first draft's window to its last draft]``, plus
``kv_indptr`` (the streams' bounds) and ``qo_indptr`` (the groups' token bounds).  The
kernel reads the whole stream with the **last** token's request slot and position, so
a group is one request's consecutive drafts -- nothing else it can mean.

The specification: each row's verify tokens (``extend_seq_lens``, the tier's padding
included) are cut into groups of at most ``block_q`` from the row's first token; a
group never holds two rows' tokens.  For a group of ``g`` tokens whose last token is
at position ``p`` in slot ``s``::

    tail    = [page + unified_swa_pages if page >= 0 else -1 for the last token's c128 pages below its
               c128_topk_lengths_raw]       (none without compression)
    n       = min(p + 1, unified_swa_window + g - 1)
    stream  = tail + [s * ring + (p - n + 1 + i) % ring for i in range(n)]

Built only where upstream builds them: ``num_draft > 1``, ``N % num_draft == 0`` and
``N // num_draft >= 16`` (``N`` tokens; ``_GROUPED_ASM_MIN_REQS``).

Worked example: ``num_draft = 4``, two rows ``[1, 7]`` (a ragged tier of 8 whose
last row absorbed 3), slots ``[1, 2]``, prefixes ``[10, 11]``, window 8, ring 11, no
compression.  Groups: row 0 ``[token 0]`` (position 10), row 1 ``[1..4]``, ``[5..7]``;
``qo_indptr = [0, 1, 5, 8]``.  Group 0: ``n = min(11, 8) = 8``, slot 1's rows of positions
3..10.  Upstream groups tokens ``r * 4 + [0..4)`` whatever the rows: its group 0 is row 0's
token and row 1's first three, read with slot 2's window -- row 0's token attends to another
request's keys (docs/FINDINGS.md F25).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BLOCK_Q", "GROUPED_FIELDS", "MIN_GROUPS", "GroupedReference", "canonical_grouped", "grouped_streams",
           "reaches_grouped"]

BLOCK_Q = 4
"""Draft tokens per group at most (upstream's ``_GROUPED_ASM_BLOCK_Q``)."""

MIN_GROUPS = 16
"""Upstream builds the streams only for at least this many requests' worth of tokens (``_GROUPED_ASM_MIN_REQS``)."""

GROUPED_FIELDS: Mapping[str, str] = {
    "gasm_qo_indptr": "(groups + 1,) exclusive cumsum of the group sizes (tokens per group)",
    "gasm_kv_indptr": "(groups + 1,) exclusive cumsum of the stream lengths",
    "gasm_indices": "(groups, stream) each group's stream: its last token's c128 tail, then the SWA ring rows",
}
"""The fields a build with ``SGLANG_DSV4_GROUPED_ASM`` on adds (none without it), with their shapes."""


def reaches_grouped(num_tokens: int, num_draft: int) -> bool:
    """Whether a target-verify build of ``num_tokens`` tokens builds grouped streams (upstream's condition)."""
    return num_draft > 1 and num_tokens % num_draft == 0 and num_tokens // num_draft >= MIN_GROUPS


def _groups(rows: Sequence[int], num_tokens: int) -> list[tuple[int, int]]:
    """(first token, size) of each group: every row cut into ``BLOCK_Q``s; tokens past the rows one group each."""
    out, start = [], 0
    for n in rows:
        out += [(start + k, min(BLOCK_Q, n - k)) for k in range(0, n, BLOCK_Q)]
        start += n
    return out + [(t, 1) for t in range(start, num_tokens)]


def grouped_streams(fields: Mapping[str, Any], geometry: Any, num_draft: int) -> dict[str, list]:
    """The grouped streams of a build whose reference ``fields`` are given; ``{}`` where upstream builds none."""
    positions, slots = fields["positions_casual"], fields["verify_store_state_slot"]
    if not reaches_grouped(len(positions), num_draft):
        return {}
    compression = geometry.compression
    tail_lens = fields.get("c128_topk_lengths_raw") if compression is not None else None
    pages = fields.get("c128_page_indices") if compression is not None else None
    swa_pages = compression.unified_swa_pages if compression is not None else 0
    win, ring = geometry.unified_swa_window, geometry.ring_size
    qo, kv, streams = [0], [0], []
    for first, size in _groups(fields["extend_seq_lens"], len(positions)):
        last = first + size - 1
        slot, pos = slots[last], positions[last]
        tail = [] if tail_lens is None else [p + swa_pages if p >= 0 else -1 for p in pages[last][: tail_lens[last]]]
        n = max(0, min(pos + 1, win + size - 1))
        streams.append(tail + [slot * ring + (pos - n + 1 + i) % ring for i in range(n)])
        qo.append(qo[-1] + size)
        kv.append(kv[-1] + len(streams[-1]))
    return {"gasm_qo_indptr": qo, "gasm_kv_indptr": kv, "gasm_indices": streams}


def canonical_grouped(indices: Sequence[int], kv_indptr: Sequence[int]) -> list[list[int]]:
    """Upstream's flat ``gasm_indices`` (sized to the worst case, its slack never written) as one row per group.

    Raises :class:`~metadata_builders.errors.StreamOutOfBounds` when a group's
    bounds leave the buffer -- a read the kernel would make past it.
    """
    from metadata_builders.errors import StreamOutOfBounds

    rows = []
    for g in range(len(kv_indptr) - 1):
        start, end = kv_indptr[g], kv_indptr[g + 1]
        if not 0 <= start <= end <= len(indices):
            raise StreamOutOfBounds("gasm_indices", g, (start, end), len(indices))
        rows.append(list(indices[start:end]))
    return rows


class GroupedReference:
    """A reference that also builds the grouped streams: the specification of a route with the switch on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def build(self, batch: Any, variant: Any) -> Any:
        md = self.inner.build(batch, variant)
        if batch.mode != "target_verify":
            return md
        extra = grouped_streams(md.fields, batch.geometry, batch.num_draft_tokens)
        return dataclasses.replace(md, fields={**md.fields, **extra}) if extra else md

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
