"""P10 on the paged SWA pool and the V4.1 low-ratio positions: what the in-graph block's fields make the kernels do.

``swa_out_cache_loc`` is where each token's SWA K is stored in the paged SWA pool
(:class:`~metadata_builders.families.dsv4.kv_state.PagedSwa`), ``swa_page_indices`` where each token's window
is read from; ``low_ratio_pos_i64`` is the position each token's V4.1 state row and RoPE take.
Judged from the batch alone, never from the reference: a rule wrong the same way in the
reference and a builder still fails here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.kv_state import PagedSwa, Token
from metadata_builders.families.dsv4.properties._common import _fail
from metadata_builders.families.dsv4.variants import Variant

__all__ = ["judge_low_ratio_positions", "judge_paged_swa"]


def judge_paged_swa(variant: Variant, batch: VerifyBatch, tokens: list[Token], fields: dict[str, Any]) -> None:
    """The paged SWA pool's store and reads: (a) each real token stores at ``full_to_swa[out_cache_loc]`` -- the
    location its caller allocated, where the reads look it up -- and no two real tokens store at one location;
    (b) a padding token (pad row, absorbed slack, the tail) stores only at the dummy slot ``full_to_swa[0]``,
    never over a location a real request reads at this step or owns; (c) each real token's first
    ``swa_topk_lengths`` entries of ``swa_page_indices`` read exactly its causal window (as a multiset; positions
    the batch gives no slot are not judged, nor reads of ``-1`` or the dummy slot, which hold nobody's K)."""
    locs = fields.get("swa_out_cache_loc")
    if locs is None:
        return
    pool = PagedSwa(batch)
    state = pool.history()
    allocated = iter(batch.step_out_cache_loc)
    writers: dict[int, Token] = {}
    for tok, loc in zip(tokens, map(int, locs)):
        if not tok.real:
            continue
        want = pool.target(next(allocated))
        if want is None:  # the caller's location has no SWA slot (or is the padding location): not judged
            continue
        if loc != want:
            raise _fail("P10", variant, f"swa_out_cache_loc: {tok.describe()} stores its SWA K at paged SWA location "
                        f"{loc}; its location's slot is {want} (full_to_swa[out_cache_loc]), where the window reads "
                        "look it up", field="swa_out_cache_loc", index=tok.index, expected=want, actual=loc,
                        check="p10.paged_store_misplaced")
        other = writers.setdefault(loc, tok)
        if other is not tok:
            raise _fail("P10", variant, f"swa_out_cache_loc: {other.describe()} and {tok.describe()} store at one "
                        f"paged SWA location {loc}", field="swa_out_cache_loc", index=tok.index,
                        expected="a location of its own", actual=loc, check="p10.real_writes_collide")
        state[loc] = (tok.slot, tok.position)
    for tok, loc in zip(tokens, map(int, locs)):
        if not tok.real and loc != pool.dummy:
            held = state.get(loc)
            what = (f", which holds slot {held[0]}'s position {held[1]} (a real request reads it): a padding token's "
                    "K over a live one" if held is not None else "")
            raise _fail("P10", variant, f"swa_out_cache_loc: {tok.describe()} stores at paged SWA location "
                        f"{loc}{what}; padding stores only at the dummy slot full_to_swa[0] = {pool.dummy}",
                        field="swa_out_cache_loc", index=tok.index, expected=pool.dummy, actual=loc,
                        check="p10.pad_overwrites_live" if held is not None else "p10.pad_paged_store")
    _window_reads(variant, pool, tokens, fields, state)


def _window_reads(variant: Variant, pool: PagedSwa, tokens: list[Token], fields: dict[str, Any],
                  state: dict[int, Any]) -> None:
    pages, lengths = fields.get("swa_page_indices"), fields.get("swa_topk_lengths")
    if pages is None or lengths is None:
        return
    for tok in (t for t in tokens if t.real):
        assert tok.position is not None
        n = int(lengths[tok.index])
        first = tok.position - min(tok.position + 1, pool.window) + 1
        want = Counter((tok.slot, q) for q in range(first, tok.position + 1) if pool.location(tok.slot, q) is not None)
        reads = [int(r) for r in pages[tok.index][:n]]
        got = Counter(state.get(r, ("nothing", r)) for r in reads if r >= 0 and r != pool.dummy)
        if got != want:
            wrong = sorted(set(got) - set(want), key=str)[:1] or sorted(set(want) - set(got))[:1]
            raise _fail("P10", variant, f"swa_page_indices: {tok.describe()} reads {sum(got.values())} paged SWA "
                        f"locations holding its window's positions {first}..{tok.position} as {dict(got)}; first "
                        f"wrong or missing: {wrong[0] if wrong else 'a count'}", field="swa_page_indices",
                        index=tok.index, expected=dict(want), actual=dict(got), check="p10.paged_window_read")


def judge_low_ratio_positions(variant: Variant, tokens: list[Token], fields: dict[str, Any]) -> None:
    """``low_ratio_pos_i64``: a real token's is its own position (its c2 state row ``req * ring + pos % ring``, its
    RoPE); every token's is ``>= 0`` (the fused c2 store loads the row before it checks for padding, and a negative
    position's C remainder lands before its request slot's ring)."""
    positions = fields.get("low_ratio_pos_i64")
    if positions is None:
        return
    for tok, pos in zip(tokens, map(int, positions)):
        if (tok.real and pos != tok.position) or pos < 0:
            want = tok.position if tok.real else ">= 0"
            raise _fail("P10", variant, f"low_ratio_pos_i64: {tok.describe()} takes position {pos} for its V4.1 state "
                        f"row and RoPE", field="low_ratio_pos_i64", index=tok.index, expected=want, actual=pos,
                        check="p10.low_ratio_position")
