"""The pipeline in pure Python: verify extension, causal expansion, core, unified store, faults, syncs.

This package never imports torch (a test runs it where importing torch fails).
Each pipeline stage of DESIGN.md section 2 is one function; the builder
(:mod:`.builder`) chains them, with the compression groups of :mod:`.compressed` and
:mod:`.plans` when the geometry has compression.  Where DESIGN.md is silent we follow upstream
``deepseek_v4_backend_hip_radix.py`` and say so in the docstring.

Running example used by the docstrings -- a ragged EAGLE batch on the graph path::

    seq_lens         = [5, 3, 7]      # accepted prefixes of three requests
    req_pool_indices = [2, 1, 3]
    verify_lens      = [3, 1, 2]      # 6 real verify tokens, num_draft_tokens = 3
    graph            = padded_bs 5, graph_num_tokens 10, no cap

Tier padding appends two pad rows (seq_len 1, slot 0) and spreads the
leftover ``10 - 6 = 4`` tokens over them: ``extend = [3, 1, 2, 2, 2]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from metadata_builders.families.dsv4.metadata import FaultRecord, SyncRecord
from metadata_builders.families.dsv4.reference.compressed import compressed_attention, indexer_metadata, sparse_buffers
from metadata_builders.families.dsv4.reference.in_graph import forward_positions
from metadata_builders.families.dsv4.reference.low_ratios import low_ratio_groups
from metadata_builders.families.dsv4.reference.plans import compress_plans
from metadata_builders.families.dsv4.reference.streams import decode_index_streams, tail_lengths
from metadata_builders.families.dsv4.tier import DEFAULT_PADDING, Padding, host_total, tier_verify_lens
from metadata_builders.families.dsv4.variants import apply_gate, divergence_applies

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch
    from metadata_builders.families.dsv4.variants import Variant

__all__ = [
    "CONTRACT_STAGES",
    "Rows",
    "causal_expansion",
    "compression_groups",
    "core_metadata",
    "decode_streams",
    "device_extend_lens",
    "diverged_extend_lens",
    "device_token_map",
    "exclusive_cumsum",
    "index_streams",
    "expected_faults",
    "oob_read_count",
    "raw_verify_route",
    "expected_host_syncs",
    "tier_verify_lens",
    "unified_prefill_meta",
    "verify_extension",
]


def exclusive_cumsum(xs: list[int]) -> list[int]:
    """``[3, 1, 2] -> [0, 3, 4]``: where each row's tokens start."""
    out, acc = [], 0
    for x in xs:
        out.append(acc)
        acc += x
    return out


@dataclass(frozen=True, slots=True)
class Rows:
    """The batch after verify extension, one entry per row of the built batch."""

    seq_lens: list[int]
    """(rows,): lengths *after* adding the verify tokens."""
    slots: list[int]
    """(rows,): request slot per row; pad rows use slot 0."""
    extend_seq_lens: list[int]
    """(rows,): verify tokens per row (after tier padding)."""
    extend_start_loc: list[int]
    """(rows,): exclusive cumsum of ``extend_seq_lens``."""
    num_tokens: int
    """Tokens covered by rows (the host's belief)."""
    exact: bool
    """Layout exactness before the gate."""
    used_output_size: bool
    """After the gate."""
    max_seq_len: int
    """After ``+= num_draft_tokens``."""
    out_cache_loc: list[int]
    """(padded_num_tokens,): zero-padded to the tier on the graph path."""
    total_from_device: bool
    """The ragged total was read back from the device (one sync)."""


def raw_verify_route(batch: VerifyBatch, variant: Variant) -> bool:
    """Whether upstream takes DSpark's raw-verify route: uniform, graph path, DSpark, the dspark gate.

    ``init_forward_metadata_target_verify`` defers such a build into the graph
    (``DSV4RawVerifyMetadata``) and reports ``max_seq_len`` as the table width,
    without step 1's ``+ num_draft_tokens`` (owner decision F3).  The other gates
    are recipes of the non-deferred builder, so they keep the increment.
    """
    return variant.path == "graph" and not batch.is_ragged and batch.is_dspark and variant.gate == "dspark"


def verify_extension(batch: VerifyBatch, variant: Variant, padding: Padding = DEFAULT_PADDING) -> Rows:
    """Stage 1: add the verify tokens; decide ``num_tokens`` and exactness.

    Running example, graph path: rows ``seq_lens = [8, 4, 9, 3, 3]`` (pads have
    seq_len 1 plus their share of slack), ``extend_start_loc = [0, 3, 4, 6, 8]``,
    ``num_tokens = 10`` (an uncapped tier carries its total: ``exact=False``),
    ``max_seq_len = max_context + 3``.  Eager: three rows, ``num_tokens = 6``,
    ``max_seq_len = 7 + 3 = 10``; a uniform eager batch the worker DP-padded has its pad rows after the real ones,
    as graph pad rows are (seq_len 1, slot 0, location 0, ``num_draft_tokens`` each).  DSpark's raw-verify route reports
    ``max_context`` (:func:`raw_verify_route`).  A ragged graph build pads along
    ``padding`` (:mod:`metadata_builders.families.dsv4.tier`); the total is the host's wherever the
    convention knows it there (``exact=False``), else read back (``exact=True``).
    """
    bs, draft = batch.bs, batch.num_draft_tokens
    seq_lens = list(batch.seq_lens)
    slots = list(batch.req_pool_indices)
    out_cache_loc = list(batch.out_cache_loc)
    total_from_device = False
    if variant.path == "graph":
        graph = batch.graph
        assert graph is not None
        npad = graph.padded_bs - bs
        seq_lens += [1] * npad
        slots += [0] * npad
        out_cache_loc += [0] * (graph.graph_num_tokens - len(out_cache_loc))
        max_seq_len = batch.max_context
    else:
        # The worker's eager DP pad rows (issue 45): the graph pad rows' conventions (seq_len 1, slot 0, location 0).
        seq_lens += [1] * batch.dp_pad_rows
        slots += [0] * batch.dp_pad_rows
        out_cache_loc += [0] * batch.dp_pad_tokens
        max_seq_len = max(seq_lens)
    if not raw_verify_route(batch, variant):
        max_seq_len += draft

    if batch.verify_lens is None:
        extend = [draft] * len(seq_lens)
        num_tokens, exact = draft * len(seq_lens), True
    elif variant.path == "graph":
        assert batch.graph is not None
        g = batch.graph
        extend = tier_verify_lens(batch.verify_lens, g.padded_bs, g.graph_num_tokens, g.cap, padding)
        known = host_total(batch.verify_lens, g.padded_bs, g.graph_num_tokens, g.cap, padding)
        if known is not None:
            num_tokens, exact = known, False
        else:
            num_tokens, exact, total_from_device = sum(extend), True, True
    else:
        extend = list(batch.verify_lens)
        total_from_device = variant.layout_total == "device"
        num_tokens, exact = sum(extend), total_from_device

    return Rows(
        seq_lens=[s + e for s, e in zip(seq_lens, extend)],
        slots=slots,
        extend_seq_lens=extend,
        extend_start_loc=exclusive_cumsum(extend),
        num_tokens=num_tokens,
        exact=exact,
        used_output_size=apply_gate(variant.gate, exact, batch.is_dspark),
        max_seq_len=max_seq_len,
        out_cache_loc=out_cache_loc,
        total_from_device=total_from_device,
    )


def causal_expansion(rows: Rows) -> tuple[list[int], list[int]]:
    """Stage 2: one ``seq_lens_casual`` and slot per token, pads included.

    Token j of row b sees ``seq_lens[b] - extend[b] + 1 + j`` tokens.  Running
    example (graph): row 0 gives ``[6, 7, 8]``, row 1 ``[4]``, row 2 ``[8, 9]``,
    pad rows ``[2, 3]`` each.  Tokens past ``num_tokens`` (a capped tier's
    uncovered tail) get ``seq_lens_casual = 1`` and the slot of the *last row* of
    the built batch (upstream's triton ``ExpandPrefillCausally``).
    """
    casual: list[int] = []
    slots: list[int] = []
    for s, e, slot in zip(rows.seq_lens, rows.extend_seq_lens, rows.slots):
        casual += [s - e + 1 + j for j in range(e)]
        slots += [slot] * e
    pad = len(rows.out_cache_loc) - rows.num_tokens
    casual += [1] * pad
    slots += [rows.slots[-1]] * pad
    return casual, slots


def core_metadata(batch: VerifyBatch, rows: Rows, casual: list[int], slots: list[int]) -> dict[str, list]:
    """Stage 3: positions, SWA lengths, page table, SWA window indices.

    ``page_table[t]`` lists the page of positions ``0, page_size, 2*page_size, ...``
    below ``min(max_seq_len, max_context)`` of the token's slot.
    ``swa_page_indices[t][w]`` is the SWA location of position ``pos - w``
    (newest first), ``-1`` before position 0, right-padded with ``-1`` to a
    multiple of ``page_index_align``.  A ``req_to_token`` entry of ``-1`` reads
    ``full_to_swa[-1]``, the sentinel ``-1`` (torch indexing semantics).

    Positions at or past the table width exist only in slack a real row absorbed
    (F2c): a literal gather there reads out of bounds (:func:`oob_read_count`), so
    the model never reads them and reports ``-1``, as for positions before 0.
    """
    geo = batch.geometry
    positions = [c - 1 for c in casual]
    width = min(rows.max_seq_len, batch.max_context)
    columns = range(0, width, geo.page_size)
    page_table = [[batch.req_to_token[slot][c] // geo.page_size for c in columns] for slot in slots]
    padded = -(-geo.swa_window // geo.page_index_align) * geo.page_index_align
    width, full_to_swa, tail = batch.max_context, batch.full_to_swa, [-1] * (padded - geo.swa_window)
    swa: list[list[int]] = []
    for pos, slot in zip(positions, slots):
        row = batch.req_to_token[slot]
        swa.append([full_to_swa[row[pos - w]] if 0 <= pos - w < width else -1 for w in range(geo.swa_window)] + tail)
    return {
        "seq_lens_casual": casual,
        "positions_casual": positions,
        "req_pool_indices_repeated": slots,
        "swa_topk_lengths": [min(c, geo.swa_window) for c in casual],
        "page_table": page_table,
        "swa_page_indices": swa,
        "raw_out_loc": list(rows.out_cache_loc),
    }


def device_token_map(extend: list[int]) -> list[int]:
    """``repeat_interleave(arange(rows), extend)``: ``[3, 1, 2] -> [0, 0, 0, 1, 2, 2]``."""
    return [b for b, e in enumerate(extend) for _ in range(e)]


def unified_prefill_meta(batch: VerifyBatch, rows: Rows, slots: list[int]) -> dict[str, list[int]]:
    """Stage 4: per-token prefill mapping of the unified KV pool.

    Through the token map ``bid``: ``pf_state_slot = slot[bid]``,
    ``pf_chunk_start = (seq_lens - extend)[bid]``, ``pf_cu_q = extend_start_loc[bid]``,
    ``pf_final_pos = (seq_lens - 1)[bid]``.  Tokens past ``num_tokens`` keep their
    repeated slot, start and cu_q 0, and ``final_pos = unified_swa_window`` so the
    SWA store's ``pos <= final_pos - win`` guard skips them.
    """
    bid = device_token_map(rows.extend_seq_lens)
    pad = len(rows.out_cache_loc) - rows.num_tokens
    return {
        "pf_state_slot": [rows.slots[b] for b in bid] + slots[rows.num_tokens :],
        "pf_chunk_start": [rows.seq_lens[b] - rows.extend_seq_lens[b] for b in bid] + [0] * pad,
        "pf_cu_q": [rows.extend_start_loc[b] for b in bid] + [0] * pad,
        "pf_final_pos": [rows.seq_lens[b] - 1 for b in bid] + [batch.geometry.unified_swa_window] * pad,
    }


def store_slots(rows: Rows, slots: list[int], padding: Padding) -> list[int]:
    """The SWA ring store's slot per token: under ``pad_rows_only`` the uncovered tail stores into slot 0.

    Owner decision (FINDINGS.md F17): the token map gives a tail token the last row's
    slot at position 0; with no pad rows that row is real, and row ``slot * ring`` is
    one of its live ring rows (P10).  The absorbing conventions keep upstream's map.
    Example: rows ``[3, 1, 2]`` on 3 rows / 10 tokens: tokens 6..9 store into slot 0.
    """
    if padding != "pad_rows_only":
        return slots
    return slots[: rows.num_tokens] + [0] * (len(slots) - rows.num_tokens)


def decode_streams(batch: VerifyBatch, slots: list[int], positions: list[int]) -> dict[str, list[int]]:
    """Stage 5: SWA ring store targets, ``slot * ring_size + pos % ring_size`` (int64 math)."""
    ring = batch.geometry.ring_size
    return {
        "verify_store_state_slot": list(slots),
        "swa_loc": [slot * ring + pos % ring for slot, pos in zip(slots, positions)],
    }


CONTRACT_STAGES = {
    "mirror": "target_verify",
    "ragged_total": "verify_extension",
    "token_map": "unified_prefill_meta",
}
"""The pipeline stage each contracted host sync belongs to (DESIGN.md section 4)."""


def expected_host_syncs(batch: VerifyBatch, variant: Variant, rows: Rows | None = None,
                        padding: Padding = DEFAULT_PADDING) -> list[SyncRecord]:
    """The sync contract: one D2H read each for a ``tolist`` mirror, a device total, a synced token map.

    Each is a (stage, kind) pair: the mirror is a ``copy`` of ``seq_lens`` in
    ``target_verify``; the ragged total a ``scalar`` read of the device lengths in
    ``verify_extension``; a token map without ``output_size`` a ``scalar`` read
    (the host learns ``sum(extend)``) in ``unified_prefill_meta``.  ``int(t.sum())``
    and ``t.sum().item()`` are the same read.  Mode ``draft_extend``: none (:mod:`.draft_extend`).
    """
    if batch.mode != "target_verify":
        return []
    rows = rows or verify_extension(batch, variant, padding)
    out: list[SyncRecord] = []
    if not batch.is_ragged and variant.mirror == "tolist":
        out.append(SyncRecord("Tensor.tolist", CONTRACT_STAGES["mirror"],
                              "no host mirror: seq_lens.tolist() (pre-fix fallback)", kind="copy", reads=("seq_lens",)))
    if rows.total_from_device:
        out.append(SyncRecord("Tensor.item", CONTRACT_STAGES["ragged_total"],
                              "ragged total read from the device layout", kind="scalar", reads=("verify_lens",)))
    if not rows.used_output_size:
        out.append(SyncRecord("repeat_interleave(no output_size)", CONTRACT_STAGES["token_map"],
                              "token map without output_size", kind="scalar"))
    return out


def device_extend_lens(batch: VerifyBatch, variant: Variant, rows: Rows) -> list[int]:
    """What the device-resident extend lengths hold when the token map runs (uniform batches).

    The harness delivers ``batch.divergence`` to the builder's asynchronous copy
    of the host-staged lengths (:func:`~metadata_builders.families.dsv4.variants.divergence_applies`).
    """
    if batch.is_ragged or not divergence_applies(batch, variant):
        return list(rows.extend_seq_lens)
    return diverged_extend_lens(batch, rows)


def diverged_extend_lens(batch: VerifyBatch, rows: Rows) -> list[int]:
    """What an asynchronous copy of the host-staged extend lengths delivers under ``batch.divergence``.

    A divergence of ``bs`` counts covers the real rows; pad rows keep their truth.
    Example: extend ``[3, 3, 3, 3]`` (3 real rows and a pad row), divergence
    ``[4, 3, 3]`` -> ``[4, 3, 3, 3]``.
    """
    assert batch.divergence is not None and batch.divergence.extend_seq_lens is not None
    div = list(batch.divergence.extend_seq_lens)
    n = len(rows.extend_seq_lens)
    if len(div) >= n:
        return div[:n]
    return div + list(rows.extend_seq_lens[len(div) :])


def oob_read_count(batch: VerifyBatch, variant: Variant, rows: Rows | None = None,
                   padding: Padding = DEFAULT_PADDING) -> int:
    """Elements a literal SWA-window gather reads past ``req_to_token``'s width (F2c).

    Only a real row that absorbed tier slack at the end of its context reaches
    such positions.  Example: width 2, ``seq_lens=[1]``, ``verify_lens=[1]``, one
    row, a tier of 3 tokens: the row absorbs 2, its positions are 1, 2, 3, and the
    window of position 2 reads column 2, that of 3 reads columns 2 and 3: 3 elements
    (with a window of at least 2).  Only the absorbing conventions reach there: under
    ``pad_rows_only`` a real row never widens.
    """
    rows = rows or verify_extension(batch, variant, padding)
    width, window = batch.max_context, batch.geometry.swa_window
    count = 0
    for s, e in zip(rows.seq_lens, rows.extend_seq_lens):
        for pos in range(s - e, s):
            if pos >= width:
                count += min(pos - width + 1, window)
    return count


def expected_faults(batch: VerifyBatch, variant: Variant, rows: Rows | None = None,
                    padding: Padding = DEFAULT_PADDING) -> list[FaultRecord]:
    """The HIP fault model for one build of ``batch`` along ``variant``.

    * A token map that trusted ``output_size`` against other device lengths: device
      repeats summing to more write the excess out of bounds (``oob_write``), to less
      leave the tail uninitialised (``uninitialized_tail``).  Only uniform batches
      can disagree: a ragged layout's total is either the host's and not trusted, or
      read back from the very device lengths the map then reads.
    * A literal SWA-window gather past the table width (``oob_read``, F2c).  The model
      itself never performs it (:func:`core_metadata`), and no builder may: the
      record says how many elements a literal implementation would read.
    """
    if batch.mode != "target_verify":
        return []  # no host count the device can contradict, no window past the table (:mod:`.draft_extend`)
    rows = rows or verify_extension(batch, variant, padding)
    out: list[FaultRecord] = []
    if rows.used_output_size and not batch.is_ragged:
        total = sum(device_extend_lens(batch, variant, rows))
        n = rows.num_tokens
        if total > n:
            out.append(FaultRecord("oob_write", total - n, output_size=n, device_sum=total))
        elif total < n:
            out.append(FaultRecord("uninitialized_tail", n - total, output_size=n, device_sum=total))
    oob = oob_read_count(batch, variant, rows, padding)
    if oob:
        out.append(FaultRecord("oob_read", oob, op="index", stage="core_metadata"))
    return out


def compression_groups(batch: VerifyBatch, rows: Rows, core: dict[str, list]) -> dict[str, list]:
    """Groups ``compressed``, ``sparse``, ``indexer``, ``plans`` and ``low_ratios`` (a geometry with compression
    only)."""
    geo = batch.geometry
    assert geo.compression is not None
    out = compressed_attention(geo, core["seq_lens_casual"], core["raw_out_loc"], core["page_table"])
    out.update(sparse_buffers(geo, out))
    out.update(indexer_metadata(out))
    out.update(compress_plans(geo.compression, rows.slots, rows.seq_lens, rows.extend_seq_lens))
    out.update(low_ratio_groups(geo, core, forward_positions(batch, len(core["raw_out_loc"]))))
    return out


def index_streams(batch: VerifyBatch, fields: dict[str, list]) -> dict[str, list]:
    """The decode index streams (:mod:`.streams`) over every token, pads included.

    Their compressed tails: the c128 pages (``c128_topk_lengths_raw`` of them, no
    more than a row of ``c128_page_indices`` holds: only tier slack past the table
    reaches further) and the c4 top-k lengths; none without compression.
    """
    geo = batch.geometry
    compression = geo.compression
    n = len(fields["positions_casual"])
    if compression is None:
        hca, csa, pages, csa_width, swa_pages = [0] * n, [0] * n, [[] for _ in range(n)], 0, 0
    else:
        hca, csa = tail_lengths(fields["seq_lens_casual"], index_topk=compression.index_topk)
        pages = fields["c128_page_indices"]
        hca = [min(h, len(row)) for h, row in zip(hca, pages)]
        csa_width, swa_pages = len(fields["c4_sparse_page_indices"][0]), compression.unified_swa_pages
    return decode_index_streams(fields["req_pool_indices_repeated"], fields["positions_casual"],
                                fields["swa_topk_lengths"], hca, csa, pages, csa_width=csa_width,
                                win=geo.unified_swa_window, ring_size=geo.ring_size, swa_pages=swa_pages)
