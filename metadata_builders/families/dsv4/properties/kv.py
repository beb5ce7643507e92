"""P10: what the metadata makes the kernels do to the KV state -- an oracle independent of the reference.

It judges the unified SWA ring (:mod:`metadata_builders.families.dsv4.kv_state`): the stores
each consumer performs from a build's metadata, applied to a ring whose rows record
who holds them, and the window reads of the decode streams; the full KV pool
(``raw_out_loc``) and its page-table reads; the compressed pools (c4, c128 and the V4.1 c1/c2) and their
c128 reads; the c4/c128 compressor states the write plans store; the c2 state ring's slots and the V4.1
positions; the paged SWA pool's store (``swa_out_cache_loc``) and window reads (:mod:`.kv_paged`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.kv_state import (
    Ring,
    StateRing,
    Store,
    Token,
    compressed_row,
    layout_tokens,
    ring_unfit,
    state_unfit,
    swa_stores,
    unpaged_slots,
)
from metadata_builders.families.dsv4.properties._common import (
    Partial,
    _clean,
    _fail,
    _label,
    _padding,
    _variants,
    judging,
    tally,
)
from metadata_builders.families.dsv4.properties.kv_paged import judge_low_ratio_positions, judge_paged_swa
from metadata_builders.families.dsv4.variants import Variant

__all__ = ["check_p10_kv_state", "judge_build", "p10_applies"]


def p10_applies(batch: VerifyBatch) -> str | None:
    """Why P10 has nothing to judge on ``batch`` (None: it applies)."""
    return ring_unfit(batch)


@judging
def check_p10_kv_state(builder: Any, batch: VerifyBatch) -> list[str]:
    """P10 on the SWA ring: every variant's stores land inside the ring, never on a live row they do not own.

    For each consumer of the ring (the fused store's ``swa_loc``, the fp8 store's
    ``verify_store_state_slot``): (d) every store lands inside the ring; (c) no two
    real tokens write one row; (b) a padding token (pad row, absorbed slack, the
    tail) writes no row another request owns and no live row; (a) after the step
    every live row -- what each request reads now or at its next decode step --
    holds its own real position, and each real token's SWA stream reads exactly
    its causal window.  A ring narrower than ``swa_window + num_draft - 1`` is not
    judged (:func:`p10_applies`).
    """
    notes: list[str] = []
    clean = _clean(batch)
    unfit = ring_unfit(clean)
    if unfit is not None:  # called directly (a user's own test) on a batch the property does not judge
        return [f"P10 not judged: {unfit}"]
    kernel = builder.swa_store_rows if builder.capabilities.store_kernels else None
    for variant in _variants(builder, clean, notes):
        note = judge_build(variant, clean, builder.build(clean, variant).fields, _padding(builder), kernel)
        if note is not None:
            notes.append(note)
    return notes


def judge_build(variant: Variant, batch: VerifyBatch, fields: dict[str, Any], padding: str,
                kernel: Callable[..., list[int | None] | None] | None = None) -> str | None:
    """P10 on one build's fields (raises :class:`PropertyFailure`); a :class:`Partial` note when its ring stores
    cannot be judged.  ``kernel``: the builder's own SWA ring store kernel (``swa_store_rows``), judged in place of
    its model.  The picture of a failure calls it too, to say which store broke."""
    ring = Ring(batch)
    tokens = layout_tokens(batch, variant.path == "graph", padding)  # type: ignore[arg-type]
    stores = swa_stores(fields, tokens, ring, kernel)
    for consumer, writes in stores.items():
        if writes and writes[0].field == "verify_store_state_slot":  # say whether the kernel or the model was judged
            tally("P10 stores", **({"kernel": 1} if writes[0].by_kernel else
                                   {"model": 1, "kernel_declined": int(kernel is not None)}))
        if writes:  # the fp8 store is modelled for real tokens only: an idle rank's has none
            _judge(variant, ring, tokens, consumer, writes, fields)
    unpaged = unpaged_slots(batch)  # the requests whose table rows the model cannot address: one scan per build
    _full_pool(variant, batch, tokens, fields)
    _page_reads(variant, batch, tokens, fields, unpaged)
    _compressed(variant, batch, tokens, fields, unpaged)
    _low_ratio_pools(variant, batch, tokens, fields, unpaged)
    _low_ratio_states(variant, batch, tokens, fields)
    judge_low_ratio_positions(variant, tokens, fields)
    judge_paged_swa(variant, batch, tokens, fields)
    _compressor_states(variant, batch, tokens, fields)
    if not stores:
        return Partial(f"P10: {_label(variant)} reports neither swa_loc nor verify_store_state_slot: its ring stores "
                       "are not judged", "observability")
    return None


def _compressor_states(variant: Variant, batch: VerifyBatch, tokens: list[Token], fields: dict[str, Any]) -> None:
    """The c4/c128 compressor states the write plans store (``[ragged_id, row]`` per entry): every row inside the
    state pool; a real token's state at its own position's row of its own slot's ring, no two real tokens on one
    row; a padding token's (a pad row's, absorbed slack's) only on slot 0's rows or a dead row of its own slot --
    never on a row whose state a real request's next compress reads
    (:class:`~metadata_builders.families.dsv4.kv_state.StateRing`).  A ring too small for a step's live states (a
    geometry upstream's pool configurator refuses) is counted, not judged: the ``P10 stores:`` line says how many."""
    if batch.geometry.compression is None:
        return
    for ratio in (4, 128):
        name = f"c{ratio}_write_plan"
        plan = fields.get(name)
        if plan is None and f"c{ratio}_decode_plan" in fields:
            # a decode step: every row's token writes its state at the plan's write_loc (PlanD's second word)
            name = f"c{ratio}_decode_plan"
            plan = [[t, entry[1]] for t, entry in enumerate(fields[name])]
        if plan is None:
            continue
        why = state_unfit(batch, ratio)
        tally("P10 states", **({"unfit": 1} if why is not None else {"judged": 1}))
        if why is not None:
            continue
        ring = StateRing(batch, ratio)
        live = ring.live()
        writers: dict[int, Token] = {}
        for entry in plan:
            rid, row = int(entry[0]), int(entry[1])
            if not 0 <= rid < len(tokens):
                raise _fail("P10", variant, f"{name}: an entry names token {rid}, outside the layout's {len(tokens)} "
                            "tokens", field=name, expected=f"0 <= ragged_id < {len(tokens)}", actual=rid,
                            check="p10.oob_write")
            tok = tokens[rid]
            if not 0 <= row < ring.rows:
                raise _fail("P10", variant, f"{name}: {tok.describe()} writes its c{ratio} state at row {row}, outside "
                            f"the state pool's {ring.rows} rows (num_slots x c{ratio}_ring_size)", field=name,
                            index=tok.index, expected=f"0 <= row < {ring.rows}", actual=row, check="p10.oob_write")
            if tok.real:
                assert tok.position is not None
                want = ring.row(tok.slot, tok.position)
                if ring.owner(row) != tok.slot:
                    raise _fail("P10", variant, f"{name}: {tok.describe()} writes its c{ratio} state at row {row}, a "
                                f"row of slot {ring.owner(row)}: a request's state in another request's ring",
                                field=name, index=tok.index, expected=want, actual=row,
                                check="p10.real_writes_other_slot")
                if row != want:
                    raise _fail("P10", variant, f"{name}: {tok.describe()} writes its c{ratio} state at row {row}; its "
                                f"position's row is {want}, where the next compress reads it", field=name,
                                index=tok.index, expected=want, actual=row, check="p10.state_write_misplaced")
                _claim(variant, writers, tok, row, f"{name}: two real tokens write c{ratio} state row {row}", name)
                continue
            held = live.get(row)
            if held is not None:
                raise _fail("P10", variant, f"{name}: {tok.describe()} writes c{ratio} state row {row}, which holds "
                            f"slot {held[0]}'s position {held[1]}, live (its next compress reads it, whatever the "
                            "request accepts): a padding token's state overwrites a live one", field=name,
                            index=tok.index, expected=f"slot 0's rows or a dead row of slot {tok.slot}", actual=row,
                            check="p10.pad_overwrites_live")
            if ring.owner(row) not in (0, tok.slot):
                raise _fail("P10", variant, f"{name}: {tok.describe()} writes c{ratio} state row {row}, a row of slot "
                            f"{ring.owner(row)}, another request's", field=name, index=tok.index,
                            expected=f"a row of slot 0 or {tok.slot}", actual=row, check="p10.pad_writes_other_slot")


def _full_pool(variant: Variant, batch: VerifyBatch, tokens: list[Token], fields: dict[str, Any]) -> None:
    """The full KV pool, which the store writes at ``raw_out_loc[t]`` for every token of the layout: a real token at
    the location the caller allocated its position (the batch's ``out_cache_loc``, where the page table's reads find
    it), inside the pool, no two real tokens on one location; every other token at location 0, the pool's
    reserved padding location (upstream's allocator never hands it out).  The reference is not consulted: a pad
    token given the last real request's location fails here even where the reference makes the same mistake."""
    locs = fields.get("raw_out_loc")
    if locs is None:
        return
    pool = len(batch.full_to_swa) - 1  # one entry per full location, then the -1 sentinel
    real = iter(batch.step_out_cache_loc)
    writers: dict[int, Token] = {}
    for tok, loc in zip(tokens, map(int, locs)):
        if not 0 <= loc < pool:
            raise _fail("P10", variant, f"raw_out_loc: {tok.describe()} writes full pool location {loc}, outside the "
                        f"pool's {pool} locations", field="raw_out_loc", index=tok.index,
                        expected=f"0 <= location < {pool}", actual=loc, check="p10.oob_write")
        if tok.real:
            want = next(real)
            if loc != want:
                raise _fail("P10", variant, f"raw_out_loc: {tok.describe()} writes its K at full location {loc}; the "
                            f"caller allocated its position location {want} (out_cache_loc), where the page table's "
                            "reads look", field="raw_out_loc", index=tok.index, expected=want, actual=loc,
                            check="p10.full_store_misplaced")
            _claim(variant, writers, tok, loc, f"raw_out_loc: two real tokens write full location {loc}", "raw_out_loc")
        elif loc != 0:
            owner = writers.get(loc)
            whose = f", where {owner.describe()} wrote its K" if owner is not None else ""
            raise _fail("P10", variant, f"raw_out_loc: {tok.describe()} writes full location {loc}{whose}: padding "
                        "writes only location 0, the pool's reserved padding location", field="raw_out_loc",
                        index=tok.index, expected=0, actual=loc, check="p10.pad_full_store")


def _page_reads(variant: Variant, batch: VerifyBatch, tokens: list[Token], fields: dict[str, Any],
                unpaged: dict[int, str]) -> None:
    """The full pool's reads: the attention finds position ``q`` of a real token's context through its
    ``page_table`` row, at page ``page_table[t][q // page]``; so the row's first ``position // page + 1`` entries
    must be the pages that hold its positions ``0 .. position`` (``req_to_token[s][k * page] // page``), its own
    one included.  Requests whose table row is not paged are counted, not judged, on every geometry (the
    ``P10 stores:`` line's page-table reads, as the compressed pools' are: :func:`_compressed`)."""
    table = fields.get("page_table")
    if table is None or batch.mode == "draft_extend":  # draft extend's one-page placeholder: nothing reads it (F21)
        return
    tally("P10 page reads", judged=sum(s not in unpaged for s in batch.req_pool_indices), unpaged=len(unpaged))
    page = batch.geometry.page_size
    for tok in tokens:
        if not tok.real or tok.slot in unpaged:
            continue
        assert tok.position is not None
        row = batch.req_to_token[tok.slot]
        want = [row[k * page] // page for k in range(tok.position // page + 1)]
        got = [int(v) for v in table[tok.index][: len(want)]]
        if got != want:
            k = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), len(got))
            raise _fail("P10", variant, f"page_table: {tok.describe()} finds its context through pages {got[:8]}"
                        f"{'...' if len(got) > 8 else ''}; its positions 0..{tok.position} live in pages {want[:8]}"
                        f"{'...' if len(want) > 8 else ''} (first wrong or missing: column {k}, positions "
                        f"{k * page}..{min(tok.position, k * page + page - 1)})", field="page_table", index=tok.index,
                        expected=want, actual=got, check="p10.page_read")


def _low_ratio_pools(variant: Variant, batch: VerifyBatch, tokens: list[Token], fields: dict[str, Any],
                     unpaged: dict[int, str]) -> None:
    """The V4.1 low-ratio compressed pools (c1, c2): ``c{R}_out_loc[t]`` is where the store writes the token's
    entry, ``-1`` for none.  A real token that completes its ``R``-group (every token for ``R = 1``) stores at its
    last position's table location ``// R``, where the low-ratio reads look it up; one that completes none stores
    nothing; padding stores nothing or row 0 (its zero location ``// R``: nobody's).  Requests whose table row is
    not paged are counted, not judged, as for c4/c128 (:func:`_compressed`)."""
    geo = batch.geometry
    if geo.compression is None or not geo.compression.low_ratios:
        return
    for ratio in geo.compression.low_ratios:
        name = f"c{ratio}_out_loc"
        locs = fields.get(name)
        if locs is None:
            continue
        for tok, loc in zip(tokens, map(int, locs)):
            if not tok.real:
                if loc not in (-1, 0):
                    raise _fail("P10", variant, f"{name}: {tok.describe()} stores a c{ratio} entry at row {loc}: "
                                "padding completes no group of anyone's (-1, or row 0: nobody's)", field=name,
                                index=tok.index, expected="-1 or 0", actual=loc, check="p10.pad_compressed_store")
                continue
            if tok.slot in unpaged:
                continue
            assert tok.position is not None
            completes = (tok.position + 1) % ratio == 0
            want = batch.req_to_token[tok.slot][tok.position] // ratio if completes else -1
            if loc != want:
                what = (f"completes its c{ratio} group {(tok.position + 1) // ratio - 1}, "
                        f"whose entry the reads look up at row {want}" if completes
                        else f"completes no c{ratio} group (-1: no store)")
                raise _fail("P10", variant, f"{name}: {tok.describe()} {what}, but stores at row {loc}", field=name,
                            index=tok.index, expected=want, actual=loc, check="p10.compressed_store")


def _low_ratio_states(variant: Variant, batch: VerifyBatch, tokens: list[Token], fields: dict[str, Any]) -> None:
    """The V4.1 c2 compressor-state ring, as upstream's fused c2 store addresses it (``low_ratio_compress.py``:
    ``c2_decode_norm_rope_store``): every token loads its pair partner from ring row ``req * ring + pos % ring``
    with ``req = low_ratio_req_indices[t]`` *before* checking whether it is padding, so every token's ``req``
    must name a slot of the pool; a real token's must be its own slot (its state in its own ring); a padding
    token writes nothing because its ``raw_out_loc`` is 0 (the kernel's mark: :func:`_full_pool` holds every
    padding token to it).  The positions are ``low_ratio_pos_i64`` (the forward batch's, widened), judged by
    :func:`~.kv_paged.judge_low_ratio_positions`."""
    geo = batch.geometry
    reqs = fields.get("low_ratio_req_indices")
    if geo.compression is None or 2 not in geo.compression.low_ratios or reqs is None:
        return
    slots = len(batch.req_to_token)
    for tok, req in zip(tokens, map(int, reqs)):
        if not 0 <= req < slots:
            raise _fail("P10", variant, f"low_ratio_req_indices: {tok.describe()} loads its c2 state from request "
                        f"slot {req}'s ring, outside the state pool's {slots} slots (the fused c2 store loads before "
                        "it skips padding)", field="low_ratio_req_indices", index=tok.index,
                        expected=f"0 <= slot < {slots}", actual=req, check="p10.oob_write")
        if tok.real and req != tok.slot:
            raise _fail("P10", variant, f"low_ratio_req_indices: {tok.describe()} reads and writes its c2 state in "
                        f"slot {req}'s ring: a request's state in another request's ring",
                        field="low_ratio_req_indices", index=tok.index, expected=tok.slot, actual=req,
                        check="p10.real_writes_other_slot")


def _compressed(variant: Variant, batch: VerifyBatch, tokens: list[Token], fields: dict[str, Any],
                unpaged: dict[int, str]) -> None:
    """The c4/c128 pools: a group's entry is stored by the real token that completes it, at the row the
    page-based reads look it up (``req_to_token[s][p] // ratio`` of its last position ``p``); every other
    token stores row 0 (nobody's); each real token's c128 reads are exactly its completed groups' rows.
    A request whose table row is not paged (:func:`~metadata_builders.families.dsv4.kv_state.unpaged_slots`) has no row
    to hold its tokens to: its real tokens are counted, not judged (the ``P10 stores:`` line); padding is
    judged always (it stores row 0 whatever the table holds)."""
    geo = batch.geometry
    if geo.compression is None:
        return
    tally("P10 compressed", judged=sum(s not in unpaged for s in batch.req_pool_indices), unpaged=len(unpaged))
    skipped = {tok.index for tok in tokens if tok.real and tok.slot in unpaged}
    for ratio in (4, 128):
        for name, base in ((f"c{ratio}_out_loc", 0), (f"unified_c{ratio}_out_loc", geo.compression.unified_swa_pages)):
            locs = fields.get(name)
            if locs is None:
                continue
            for tok, loc in zip(tokens, map(int, locs)):
                if tok.index in skipped:
                    continue
                completes = tok.real and (tok.position + 1) % ratio == 0
                want = base + (compressed_row(batch, tok.slot, (tok.position + 1) // ratio - 1, ratio)
                               if completes else 0)
                if loc == want:
                    continue
                if not tok.real:
                    raise _fail("P10", variant, f"{name}: {tok.describe()} stores a c{ratio} entry at row {loc}: "
                                f"padding completes no group of anyone's (row {base}, nobody's)", field=name,
                                index=tok.index, expected=want, actual=loc, check="p10.pad_compressed_store")
                what = (f"completes its c{ratio} group {(tok.position + 1) // ratio - 1}, "
                        f"whose entry the reads look up at row {want}" if completes
                        else f"completes no c{ratio} group (row {base}, nobody's)")
                raise _fail("P10", variant, f"{name}: {tok.describe()} {what}, but stores at row {loc}",
                            field=name, index=tok.index, expected=want, actual=loc, check="p10.compressed_store")
    pages, lengths = fields.get("c128_page_indices"), fields.get("c128_topk_lengths_raw")
    for tok in (t for t in tokens if t.real and t.index not in skipped and pages and lengths):
        # The attention reads the first c128_topk_lengths_raw entries: exactly the groups completed so far.
        n = (tok.position + 1) // 128
        want = [compressed_row(batch, tok.slot, k, 128) for k in range(n)]
        got = [int(r) for r in pages[tok.index][: int(lengths[tok.index])]]
        if got != want:
            raise _fail("P10", variant, f"c128_page_indices: {tok.describe()} reads c128 rows {got} where its {n} "
                        f"completed groups were stored at {want}", field="c128_page_indices", index=tok.index,
                        expected=want, actual=got, check="p10.compressed_read")


def _judge(variant: Variant, ring: Ring, tokens: list[Token], consumer: str, writes: list[Store],
           fields: dict[str, Any]) -> None:
    field = writes[0].field  # a consumer stores for every real token at least (judge_build skips an empty one)
    every_real = field != "pf_state_slot"  # the prefill store's guard keeps only a request's last window
    if (every_real and len(writes) < sum(t.real for t in tokens)) or \
            (field == "swa_loc" and len(fields[field]) != len(tokens)):
        raise _fail("P10", variant, f"{consumer}: {len(fields[field])} store rows for a layout of {len(tokens)} "
                    "tokens", field=field, expected=len(tokens), actual=len(fields[field]), check="p10.store_rows")
    live = ring.live()
    state = ring.history()
    writers: dict[int, Token] = {}
    for store in writes:
        tok, row = store.token, store.row
        if row is None:
            raise _fail("P10", variant, f"{consumer}: {tok.describe()}'s K is in no ring row after the store (the "
                        "kernel dropped it, or another store overwrote it)", field=field, index=tok.index,
                        expected="a row of its own", actual="no row", check="p10.store_dropped")
        if not 0 <= row < ring.rows:
            raise _fail("P10", variant, f"{consumer}: {tok.describe()} writes ring row {row}, outside the ring's "
                        f"{ring.rows} rows (num_slots x ring_size)", field=field, index=tok.index,
                        expected=f"0 <= row < {ring.rows}", actual=row, check="p10.oob_write")
        if tok.real:
            if ring.owner(row) != tok.slot:
                raise _fail("P10", variant, f"{consumer}: {tok.describe()} writes ring row {row}, a row of slot "
                            f"{ring.owner(row)}: a request's K stored in another request's ring", field=field,
                            index=tok.index, expected=f"a row of slot {tok.slot}", actual=row,
                            check="p10.real_writes_other_slot")
            _claim(variant, writers, tok, row, f"{consumer}: two real tokens write ring row {row}", field)
            state[row] = (tok.slot, tok.position)
            continue
        held = live.get(row)
        if held is not None:
            raise _fail("P10", variant, f"{consumer}: {tok.describe()} writes ring row {row}, which holds slot "
                        f"{held[0]}'s position {held[1]}, live (a real token reads it at this step or the next "
                        "decode step): a padding token's K overwrites a live KV row", field=field, index=tok.index,
                        expected=f"slot 0's rows or a dead row of slot {tok.slot}", actual=row,
                        check="p10.pad_overwrites_live")
        if ring.owner(row) not in (0, tok.slot):
            raise _fail("P10", variant, f"{consumer}: {tok.describe()} writes ring row {row}, a row of slot "
                        f"{ring.owner(row)}, another request's", field=field, index=tok.index,
                        expected=f"a row of slot 0 or {tok.slot}", actual=row, check="p10.pad_writes_other_slot")
        state[row] = ("padding", tok.index)
    for row, held in live.items():
        if state.get(row) != held:
            raise _fail("P10", variant, f"{consumer}: after the step ring row {row} should hold slot {held[0]}'s "
                        f"position {held[1]} (read at this step or the next decode step) but holds "
                        f"{_holder(state.get(row))}", field=field, expected=held, actual=state.get(row),
                        check="p10.live_row_lost")
    _reads(variant, ring, tokens, state, fields)


def _claim(variant: Variant, writers: dict[int, Token], tok: Token, row: int, what: str, field: str) -> None:
    """Row ``row`` written by real token ``tok``: red when another real token wrote it already (``what`` says where)."""
    other = writers.get(row)
    if other is not None and other.index != tok.index:
        raise _fail("P10", variant, f"{what}: {other.describe()} and {tok.describe()}", field=field, index=tok.index,
                    expected="a row of its own", actual=row, check="p10.real_writes_collide")
    writers[row] = tok


def _reads(variant: Variant, ring: Ring, tokens: list[Token], state: dict[int, Any], fields: dict[str, Any]) -> None:
    """Each real token's ``swa_indices`` row reads exactly its causal window (where the streams are reported)."""
    segments = fields.get("swa_indices")
    if not segments:
        return
    win = ring.batch.geometry.unified_swa_window
    for tok in tokens:
        if not tok.real:
            continue
        n = min(tok.position + 1, win)
        want = [(tok.slot, p) for p in range(tok.position - n + 1, tok.position + 1)]
        got = [state.get(int(r)) if 0 <= int(r) < ring.rows else ("outside the ring", int(r))
               for r in segments[tok.index]]
        if Counter(got) != Counter(want):  # the rows it reads, as a multiset: order is the kernel's business
            raise _fail("P10", variant, f"the SWA stream of {tok.describe()} reads {_summary(got)} where its "
                        f"causal window is positions {want[0][1]}..{want[-1][1]} of slot {tok.slot}",
                        field="swa_indices", index=tok.index, expected=want, actual=got, check="p10.window_read")


def _holder(held: Any) -> str:
    if held is None:
        return "nothing this step or its history wrote"
    return f"padding token {held[1]}'s K" if held[0] == "padding" else f"slot {held[0]}'s position {held[1]}"


def _summary(got: list[Any]) -> str:
    wrong = [g for g in got if g is None or isinstance(g[0], str)]
    return f"{len(got)} rows" + (f", {len(wrong)} of them not its window ({wrong[0]})" if wrong else "")
