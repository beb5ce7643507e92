"""The unified SWA ring as a model of device memory: every ring row records the (request slot, position) it holds.

P10 (docs/DESIGN.md section 3) judges a build by what its metadata makes upstream's
kernels do to the KV state, not by its values: a rule wrong the same way in the
reference and in a builder still fails it.  This module is the state; the judging
is :mod:`metadata_builders.families.dsv4.properties.kv`.  Besides the ring it models the compressed pools'
addressing, the compressor-state rings and the paged SWA pool (:class:`PagedSwa`).

**The ring.**  ``rows = num_slots * ring_size``; position ``p`` of request slot ``s``
lives in row ``s * ring_size + p % ring_size`` (the pool's addressing: upstream's
``_swa_scatter_kernel`` and ``write_v4_paged_decode_indices`` both compute it).  Slot
0 is the padding slot: its rows are nobody's.

**Who is real** comes from the batch alone (never from the build): tokens are laid
out row after row, real rows first, so real token ``j`` of request ``i`` is token
``sum(extend_lens[:i]) + j`` on every path and under every tier padding convention,
at position ``first_positions[i] + j`` (``seq_lens[i] + j``; a draft-decode step's token sits ``draft_step``
further: the steps before it wrote theirs).  Every later token is padding: a pad row's (slot 0),
slack a real row absorbed (that row's slot) or an uncovered tail (slot 0), as the
builder's declared convention lays the tier out (:func:`metadata_builders.families.dsv4.tier.tier_verify_lens`).

**Live rows.**  Request ``i`` (prefix ``L``, ``v`` verify tokens, window ``w``) reads
positions ``L - w + 1 .. L + v - 1`` at this step (token ``j`` reads ``L + j - w + 1 ..
L + j``) and, whatever it accepts, a subset of them at its next decode step.  So those
rows must hold exactly those positions after the step; before it, the history
``L - w + 1 .. L - 1`` is in place.  A ring narrower than ``w + num_draft - 1`` cannot
hold them (upstream sizes it ``window + num_draft - 1``): such a geometry is not judged.

Worked example -- window 2, ring 3 (= 2 + 2 - 1), request slot 1 with prefix 4
verifying 2 tokens: before the step row 3 (= 1 * 3 + 3 % 3) holds position 3; the
two real tokens write positions 4 and 5 to rows 4 and 5; after it rows 3, 4, 5 must
hold positions 3, 4, 5.  A token that absorbed tier slack at position 6 writes row
3 -- position 3, which token 0 (position 4) reads in this very step: a live row
overwritten with a padding token's K.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

from metadata_builders.families.dsv4.batch.modes import DECODE_MODES
from metadata_builders.families.dsv4.tier import Padding, tier_verify_lens

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = ["PagedSwa", "Ring", "StateRing", "Store", "Token", "compressed_row", "layout_tokens", "paged_tables",
           "ring_unfit", "state_live_from", "state_unfit", "state_window", "step_width", "prefill_stores", "swa_stores",
           "unpaged_slots"]

TokenKind = Literal["real", "pad row", "absorbed", "tail"]


@dataclass(frozen=True, slots=True)
class Token:
    """One token of a layout, as the batch defines it: whose it is, and where it stands."""

    index: int
    kind: TokenKind
    slot: int
    """The request slot of its row (0 for a pad row or the tail)."""
    row: int | None
    """Its request's row in the batch (a pad row's index in the tier), None for the tail."""
    position: int | None
    """A real token's position, ``seq_lens[row] + j``; None for padding."""

    @property
    def real(self) -> bool:
        return self.kind == "real"

    def describe(self) -> str:
        if self.real:
            return f"token {self.index} (request {self.row}, slot {self.slot}, position {self.position})"
        where = {"pad row": f"pad row {self.row}", "absorbed": f"slack absorbed by request {self.row} "
                 f"(slot {self.slot})", "tail": "the tier's uncovered tail"}[self.kind]
        return f"token {self.index} ({where}: not a real token)"


def step_width(batch: VerifyBatch) -> int:
    """Tokens a request stores at this step: its verify (or draft-extend) tokens, one in the decode modes."""
    return 1 if batch.mode in DECODE_MODES else batch.num_draft_tokens


def layout_tokens(batch: VerifyBatch, graph: bool, padding: Padding) -> list[Token]:
    """Every token of the eager layout (``graph=False``: the real ones, then the worker's DP pad rows) or of the graph
    tier, in order."""
    lens = list(batch.extend_lens)
    rows = lens + [batch.num_draft_tokens] * batch.dp_pad_rows  # DP pad rows: eager only (validation)
    total = sum(rows)
    tier = batch.graph
    if graph and tier is not None:
        total = tier.graph_num_tokens
        rows = ([step_width(batch)] * tier.padded_bs if batch.verify_lens is None else
                tier_verify_lens(lens, tier.padded_bs, tier.graph_num_tokens, tier.cap, padding))
    tokens: list[Token] = []
    for row, width in enumerate(rows):
        real = lens[row] if row < batch.bs else 0
        slot = batch.req_pool_indices[row] if row < batch.bs else 0
        for j in range(width):
            index = len(tokens)
            if j < real:
                tokens.append(Token(index, "real", slot, row, batch.first_positions[row] + j))
            else:
                tokens.append(Token(index, "absorbed" if row < batch.bs else "pad row", slot, row, None))
    tokens += [Token(i, "tail", 0, None, None) for i in range(len(tokens), total)]
    return tokens[:total]


def ring_unfit(batch: VerifyBatch) -> str | None:
    """Why the batch's ring cannot hold a step's live window (None: it can)."""
    geo = batch.geometry
    need = geo.swa_window + step_width(batch) - 1
    if geo.ring_size < need:
        tokens = "num_draft_tokens" if batch.mode not in DECODE_MODES else "1 (a decode step's token)"
        return (f"ring_size {geo.ring_size} < swa_window + {tokens} - 1 = {need}: the ring cannot hold a step's "
                "window (upstream sizes it so)")
    if batch.mode == "draft_extend" and geo.swa_window != geo.unified_swa_window:
        return (f"swa_window {geo.swa_window} != unified_swa_window {geo.unified_swa_window}: draft extend's prefill "
                "store keeps the unified window, its attention reads swa_window (upstream: both 128)")
    return None


Holder = tuple[int, int]
"""(request slot, position) a ring row holds."""


class Ring:
    """The unified SWA ring of one batch: its rows, the history before the step, the rows read after it."""

    def __init__(self, batch: VerifyBatch) -> None:
        self.batch = batch
        self.stride = batch.geometry.ring_size
        self.rows = batch.num_slots * self.stride
        self.window = batch.geometry.swa_window

    def row(self, slot: int, position: int) -> int:
        return slot * self.stride + position % self.stride

    def _span(self, i: int, first: int, stop: int) -> dict[int, Holder]:
        slot = self.batch.req_pool_indices[i]
        return {self.row(slot, p): (slot, p) for p in range(max(0, first), stop)}

    def history(self) -> dict[int, Holder]:
        """Rows holding each request's window before the step: positions ``L - w + 1 .. L - 1``."""
        held: dict[int, Holder] = {}
        for i, prefix in enumerate(self.batch.first_positions):
            held.update(self._span(i, prefix - self.window + 1, prefix))
        return held

    def live(self) -> dict[int, Holder]:
        """Rows a real request reads at this step or its next decode step, and what each must hold.

        Draft extend attends through the prefill kernel, which reads the step's own tokens from the activations
        and the ring only for the prefix: its step tokens' rows are live from ``end - w`` on (what the next
        decode step reads), the earlier ones are never read from the ring (the store's guard skips them)."""
        live: dict[int, Holder] = {}
        for i, (prefix, width) in enumerate(zip(self.batch.first_positions, self.batch.extend_lens)):
            if self.batch.mode == "draft_extend":
                live.update(self._span(i, prefix - self.window + 1, prefix))
                live.update(self._span(i, max(prefix, prefix + width - self.window), prefix + width))
            else:
                live.update(self._span(i, prefix - self.window + 1, prefix + width))
        return live

    def owner(self, row: int) -> int:
        """The request slot whose rows ``row`` is among."""
        return row // self.stride

    def drawing(self, row: int, writer: str, *, around: int = 3) -> str:
        """The ring of ``row``'s slot near ``row``, one cell a row: what it holds after the step should (``live``)
        or held before it, ``row`` marked with its ``writer``.  Worked example (window 4, ring 6, slot 2 prefix 6
        verifying 1, row 15 written by absorbed slack, F16): ``ring of slot 2 (rows 12..17): 12 pos 6 live | 13 empty |
        14 empty | [15 pos 3 live <- token 5] | 16 pos 4 live | 17 pos 5 live``."""
        slot = self.owner(row)
        first, stop = slot * self.stride, (slot + 1) * self.stride
        lo, hi = max(first, row - around), min(stop, row + around + 1)
        live, before = self.live(), self.history()
        cells = []
        for r in range(lo, hi):
            held = live.get(r) or before.get(r)
            cell = f"{r} " + ("empty" if held is None else f"pos {held[1]}") + (" live" if r in live else "")
            cells.append(f"[{cell} <- {writer}]" if r == row else cell)
        more = ("... | " if lo > first else "") + " | ".join(cells) + (" | ..." if hi < stop else "")
        return f"ring of slot {slot} (rows {first}..{stop - 1}): {more}"


@dataclass(frozen=True, slots=True)
class Store:
    """One row a consumer writes for one token."""

    token: Token
    row: int | None
    """The ring row written; None: the consumer's kernel left the token's K nowhere (dropped or overwritten)."""
    field: str
    """The metadata field the row comes from (``swa_loc``, ``verify_store_state_slot``)."""
    by_kernel: bool = False
    """The row is where the builder's own store kernel put the token (else the harness's model of the consumer)."""


def swa_stores(fields: dict[str, Any], tokens: list[Token], ring: Ring,
               kernel: Callable[..., list[int | None] | None] | None = None) -> dict[str, list[Store]]:
    """The SWA ring stores of a target-verify step, by consumer, derived as upstream's kernels consume the metadata.

    ``fused store``: the bf16 norm-rope-store writes ``swa_loc[t]`` for every token of
    the layout (``get_unified_swa_loc`` returns the metadata's ``swa_loc``).  ``fp8
    store``: ``store_swa_into_unified`` writes ``verify_store_state_slot[t] * ring +
    positions[t] % ring`` with the forward batch's positions (``final_pos = positions``:
    its guard never skips); a real token's position is the batch's, a padding token's
    is the runner's and not in the metadata, so it is modelled for real tokens only.
    ``kernel``: upstream's own fp8 store where the builder runs it
    (``swa_store_rows(state_slot, positions, ring_stride=, win=)``, the
    row each token landed in): then the kernel's rows, not the formula's, are judged.
    """
    stores: dict[str, list[Store]] = {}
    if "swa_loc" not in fields and "pf_state_slot" in fields:  # draft extend: the unified prefill store alone
        return {"prefill store (pf_state_slot, pf_final_pos)": prefill_stores(fields, tokens, ring, kernel)}
    if "swa_loc" in fields:
        stores["fused store (swa_loc)"] = [Store(tok, int(loc), "swa_loc") for tok, loc in
                                           zip(tokens, fields["swa_loc"])]
    if "verify_store_state_slot" in fields and kernel is not None:
        real = [tok for tok in tokens if tok.real]
        slots = [int(fields["verify_store_state_slot"][tok.index]) for tok in real]
        rows = kernel(slots, [tok.position for tok in real], ring_stride=ring.stride,
                      win=ring.batch.geometry.unified_swa_window)
        if rows is not None:
            stores["fp8 store (upstream's store_swa_into_unified on verify_store_state_slot)"] = [
                Store(tok, row, "verify_store_state_slot", by_kernel=True) for tok, row in zip(real, rows)]
            return stores
    if "verify_store_state_slot" in fields:
        stores["fp8 store (verify_store_state_slot)"] = [
            Store(tok, int(slot) * ring.stride + tok.position % ring.stride, "verify_store_state_slot")
            for tok, slot in zip(tokens, fields["verify_store_state_slot"]) if tok.real]
    return stores


def prefill_stores(fields: dict[str, Any], tokens: list[Token], ring: Ring,
                   kernel: Callable[..., list[int | None] | None] | None = None) -> list[Store]:
    """Draft extend's SWA ring stores: the extend path's ``store_swa_into_unified`` writes token ``t`` at
    ``pf_state_slot[t] * ring + positions[t] % ring`` unless its guard ``positions[t] <= pf_final_pos[t] - win``
    skips it (``win`` the unified window: only a request's last ``win`` positions are kept).  Modelled for real
    tokens (a padding token's position is the runner's, not in the metadata); the guard from the metadata's
    ``pf_final_pos``, the rows from upstream's own kernel where the builder runs it (``kernel``).  Worked example:
    window 4, a request at prefix 6 extending 6 (positions 6..11, ``final_pos`` 11): positions 8..11 are stored,
    6 and 7 are skipped -- the prefill kernel read them from the activations, and no later step reads them."""
    win = ring.batch.geometry.unified_swa_window
    kept = [tok for tok in tokens if tok.real and tok.position > int(fields["pf_final_pos"][tok.index]) - win]
    slots = [int(fields["pf_state_slot"][tok.index]) for tok in kept]
    rows = None if kernel is None else kernel(slots, [tok.position for tok in kept], ring_stride=ring.stride, win=win)
    if rows is None:
        return [Store(tok, slot * ring.stride + tok.position % ring.stride, "pf_state_slot")
                for tok, slot in zip(kept, slots)]
    return [Store(tok, row, "pf_state_slot", by_kernel=True) for tok, row in zip(kept, rows)]


# -- the compressed pools (c4, c128): a group's entry is stored by the token that completes it ------------------


def unpaged_slots(batch: VerifyBatch) -> dict[int, str]:
    """The request slots whose compressed pools' addressing cannot be derived from the table, each with why.

    Position ``p`` of slot ``s`` lives at full location ``req_to_token[s][p]``; the compressed entry of
    the ``ratio``-group ending at ``p`` at ``req_to_token[s][p] // ratio``.  That is where the page-based
    reads look only when the row is page-contiguous and page-aligned (a paged allocator's table) over the
    positions the step stores and reads, and the request's real tokens' ``out_cache_loc`` are their
    positions' table entries.  The strategies' deliberate table holes (``-1``, the sentinel) make a row so.
    """
    page = batch.geometry.page_size
    why: dict[int, str] = {}
    token = 0
    locations = batch.step_out_cache_loc
    for i, (slot, prefix, width) in enumerate(zip(batch.req_pool_indices, batch.first_positions, batch.extend_lens)):
        row = batch.req_to_token[slot][: prefix + width]
        for start in range(0, len(row), page):
            chunk = row[start:start + page]
            if chunk[0] < 0 or chunk[0] % page or list(chunk) != list(range(chunk[0], chunk[0] + len(chunk))):
                why.setdefault(slot, f"req_to_token[{slot}] is not page-contiguous at column {start}")
                break
        for j in range(width):
            if slot not in why and locations[token + j] != batch.req_to_token[slot][prefix + j]:
                why[slot] = f"out_cache_loc[{token + j}] is not req_to_token's entry of its position"
        token += width
    return why


def paged_tables(batch: VerifyBatch) -> str | None:
    """Why some request's compressed pools cannot be addressed from the table (None: every request's can)."""
    return next(iter(unpaged_slots(batch).values()), None)


def compressed_row(batch: VerifyBatch, slot: int, group: int, ratio: int) -> int:
    """The compressed pool row of ``slot``'s ``group``-th ``ratio``-group: its last position's location // ratio."""
    return batch.req_to_token[slot][group * ratio + ratio - 1] // ratio


# -- the compressor states: each request's per-ratio state ring, which the write plans fill ----------------------


def state_window(ratio: int) -> int:
    """Tokens one compressed entry of ``ratio`` reads: ``2 * ratio`` for the overlapping c4, ``ratio`` for c128."""
    return 2 * ratio if ratio == 4 else ratio


def state_unfit(batch: VerifyBatch, ratio: int) -> str | None:
    """Why ``ratio``'s state ring cannot hold what a step leaves live (None: it can).

    A request with prefix ``L`` verifying ``v`` tokens needs, whatever it accepts, the
    states of positions ``live_from(L) .. L + v - 1`` at its next step -- at most
    ``window + v - 2`` of them -- each at row ``slot * R + position % R``; a ring of
    fewer rows wraps a step's own writes onto them (upstream sizes the c4 ring 16
    with speculation, 8 without).
    """
    assert batch.geometry.compression is not None
    ring = batch.geometry.compression.ring_size(ratio)
    need = state_window(ratio) + step_width(batch) - 2
    if ring < need:
        tokens = "num_draft_tokens" if batch.mode not in DECODE_MODES else "1 (a decode step's token)"
        return (f"c{ratio}_ring_size {ring} < window {state_window(ratio)} + {tokens} - 2 = {need}: "
                "the state ring cannot hold a step's live states")
    return None


def state_live_from(prefix: int, ratio: int) -> int:
    """The first position whose state a request with ``prefix`` tokens needs after this step, whatever it accepts
    (at least one token): the start of the window of the group its next compress completes."""
    overlap = ratio if ratio == 4 else 0
    return max(0, (prefix + 1) // ratio * ratio - overlap)


class StateRing:
    """``ratio``'s compressor-state ring: ``num_slots * R`` rows, position ``p`` of slot ``s`` at ``s * R + p % R``
    (the per-request ring the write plans address: c128 always, c4 on the unified KV pool).

    Live after the step: request ``i``'s positions ``state_live_from(L_i) .. L_i + v_i - 1``, the states its next
    compress reads whatever it accepts.  Worked example -- c4, ring 16, slot 2 with prefix 10 verifying 3: live
    positions 4 .. 12 (the next group's window starts at 4 when it accepts one token), rows 36 .. 44.
    """

    def __init__(self, batch: VerifyBatch, ratio: int) -> None:
        assert batch.geometry.compression is not None
        self.batch, self.ratio = batch, ratio
        self.size = batch.geometry.compression.ring_size(ratio)
        self.rows = len(batch.req_to_token) * self.size

    def row(self, slot: int, position: int) -> int:
        return slot * self.size + position % self.size

    def owner(self, row: int) -> int:
        return row // self.size

    def live(self) -> dict[int, Holder]:
        out: dict[int, Holder] = {}
        b = self.batch
        for i in range(b.bs):
            slot, prefix = b.req_pool_indices[i], b.first_positions[i]
            for p in range(state_live_from(prefix, self.ratio), prefix + b.extend_lens[i]):
                out[self.row(slot, p)] = (slot, p)
        return out


# -- the paged SWA pool: each token's SWA K stored at swa_out_cache_loc, each window read through swa_page_indices --


class PagedSwa:
    """The paged SWA pool of one batch (the store ``swa_out_cache_loc`` feeds, the reads ``swa_page_indices`` make):
    SWA location ``full_to_swa[req_to_token[s][p]]`` holds position ``p`` of slot ``s``.

    Before the step each request's window history ``L - w + 1 .. L - 1`` is in place; the step's real token stores
    at ``full_to_swa[out_cache_loc]`` (the location its caller allocated), where the window reads of later tokens
    look it up through the table.  The full pool's location 0 is its reserved padding location (upstream's allocator
    never hands it out), so padding stores at ``full_to_swa[0]``, the **dummy slot**; a position the batch's table
    puts at location 0 (the strategies' tables may) is not judged, nor one whose location maps to ``-1`` (a hole, the
    sentinel: no slot, the reads skip it).

    Worked example -- window 2, ``full_to_swa[x] = 100 + x``, slot 1 with ``req_to_token[1][p] = 10 + p``, prefix 4
    verifying 2 (``out_cache_loc = [14, 15]``): before the step SWA location 113 holds (1, 3); the real tokens store
    (1, 4) at 114 and (1, 5) at 115; a pad token stores at 100, the dummy slot; token 1 reads 115 and 114.
    """

    def __init__(self, batch: VerifyBatch) -> None:
        self.batch = batch
        self.dummy = batch.full_to_swa[0]
        self.window = batch.geometry.swa_window

    def target(self, full: int) -> int | None:
        """The SWA location of full location ``full``; None for the padding location 0 and an unmapped one."""
        if full <= 0 or full >= len(self.batch.full_to_swa):
            return None
        loc = self.batch.full_to_swa[full]
        return None if loc < 0 else loc

    def location(self, slot: int, position: int) -> int | None:
        """Where the reads look up ``slot``'s ``position``: its table entry's SWA location (None: not judged)."""
        row = self.batch.req_to_token[slot]
        return self.target(row[position]) if 0 <= position < len(row) else None

    def history(self) -> dict[int, Holder]:
        """What the pool holds before the step at the locations a real request reads: its window's earlier positions."""
        held: dict[int, Holder] = {}
        for slot, prefix in zip(self.batch.req_pool_indices, self.batch.first_positions):
            for p in range(max(0, prefix - self.window + 1), prefix):
                loc = self.location(slot, p)
                if loc is not None:
                    held[loc] = (slot, p)
        return held
