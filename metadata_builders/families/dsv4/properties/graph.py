"""P5: the graph build equals the eager build, pads are inert, replays equal fresh builds."""

from __future__ import annotations

import dataclasses
from typing import Any

from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.metadata import (
    FIELD_NAMES,
    FIELDS,
    PER_ENTRY,
    PER_ROW,
    SHAPE_VARIES,
    VerifyMetadata,
    first_difference,
)
from metadata_builders.families.dsv4.properties._common import (
    Partial,
    _capture,
    _clean,
    _compare,
    _fail,
    _name,
    _padding,
    _reference,
    _variants,
    judging,
)
from metadata_builders.families.dsv4.properties.sequences import replay_sequence
from metadata_builders.families.dsv4.tier import Padding, absorbed_slack
from metadata_builders.families.dsv4.variants import Variant


def _absorbing_row(batch: VerifyBatch, padding: Padding) -> int | None:
    """The real row that takes tier slack (no pad rows; an absorbing convention), if it absorbed any."""
    g = batch.graph
    if g is None or not batch.is_ragged:
        return None
    return batch.bs - 1 if absorbed_slack(batch.verify_lens, g.padded_bs, g.graph_num_tokens, g.cap, padding) else None


@judging
def check_p5_graph_vs_eager(builder, batch: VerifyBatch, second: VerifyBatch | None = None) -> list[str]:
    """P5: the graph build equals the eager build on real tokens; pads are inert; replays equal fresh builds.

    Documented exceptions: ``page_table`` (and what is paged by it: ``c128_page_indices``,
    the low ratios' ``c{R}_indexer_page_table``) is compared on the eager build's
    columns, and the real row that absorbed tier slack keeps its longer
    ``seq_lens``/``extend_seq_lens`` and the ``pf_final_pos`` of its tokens.
    The replay half captures the tier once and replays a sequence of batches
    that grows, fills the tier, shrinks and changes values (:func:`replay_sequence`).
    Replay is what a GPU does: for a builder with the two phases the recorded
    in-graph work is re-executed after its out-graph work, none of its in-graph
    Python runs (:mod:`~metadata_builders.harness.graph_recorder`); a 0.2 builder's Python
    ``replay()`` runs instead, and the verdict is ``partial``, saying so.
    """
    batch = _clean(batch)
    if batch.graph is None:
        return ["P5 needs a graph tier; nothing to check"]
    notes: list[str] = []
    bs, real = batch.bs, batch.num_real_tokens
    absorbing = _absorbing_row(batch, _padding(builder))
    variants = _variants(builder, batch, notes)
    for variant in variants:
        if variant.path != "graph":
            continue
        eager_v = Variant("eager", variant.mirror, "host", variant.gate)
        graph_md = builder.build(batch, variant)
        if eager_v not in variants:  # an idle rank has no eager build; its pads are all there is
            _check_pads_inert(batch, variant, graph_md)
            continue
        eager_md = builder.build(batch, eager_v)
        g, e = graph_md.fields, eager_md.fields
        for name in PER_ROW:
            if name not in g or name not in e:
                continue  # not observable in this builder
            _check_length(variant, name, g[name], e[name], bs)
            for row in range(bs):
                if row == absorbing and FIELDS[name].absorbing_row == "own":
                    continue
                if g[name][row] != e[name][row]:
                    raise _fail("P5", variant, "graph vs eager on a real row", field=name, index=(row,),
                                expected=e[name][row], actual=g[name][row], check="p5.graph_vs_eager_row")
        absorbed = range(0)
        if absorbing is not None:
            start = e["extend_start_loc"][absorbing]
            absorbed = range(start, start + e["extend_seq_lens"][absorbing])
        for name in FIELD_NAMES:
            if name in PER_ROW or name in PER_ENTRY or name not in g or name not in e:
                continue
            _check_length(variant, name, g[name], e[name], real)
            spec = FIELDS[name]
            for t in range(real):
                ev, gv = e[name][t], g[name][t]
                if spec.graph_columns == "eager":
                    gv = gv[: len(ev)]  # the graph sizes this field by the tier: compare eager's columns
                if spec.absorbing_row == "own" and t in absorbed:
                    continue
                if ev != gv:
                    raise _fail("P5", variant, "graph vs eager on a real token", field=name, index=(t,),
                                expected=ev, actual=gv, check="p5.graph_vs_eager_token")
        _check_plans(batch, variant, g, e, absorbed)
        _check_pads_inert(batch, variant, graph_md)
    # The whole sequence replays along the production gate (dspark) of each recipe; P7 also
    # captures and replays every graph variant once, under the sync contract.
    replayed = [v for v in variants if v.path == "graph" and v.gate == "dspark"]
    notes += _check_replay(builder, batch, replayed or [v for v in variants if v.path == "graph"][:1], second)
    if second is None:
        from metadata_builders.families.dsv4.properties.runner import check_runner_replays

        notes += check_runner_replays(builder, batch)
    return notes


def _check_plans(batch: VerifyBatch, variant: Variant, g: dict, e: dict, absorbed: range) -> None:
    """The compress plans: the real tokens' entries as eager; pad rows' entries in slot 0's ring.

    The row that absorbed tier slack ends later, so which of its tokens write the
    state ring may differ, and its slack tokens are its own (documented, as its
    ``pf_final_pos``).
    """
    compression = batch.geometry.compression
    real = batch.num_real_tokens
    # Slack the last real row absorbed is that row's (its entries are its own); pad rows start after it.
    first_pad = _first_pad_token(batch, g)
    for name in PER_ENTRY:
        if name not in g or name not in e:
            continue
        ragged = FIELDS[name].token_column
        ours = [x for x in g[name] if x[ragged] < real and x[ragged] not in absorbed]
        theirs = [x for x in e[name] if x[ragged] not in absorbed]
        if ours != theirs:
            mismatch = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), min(len(ours), len(theirs)))
            raise _fail("P5", variant, "graph vs eager plan entries of the real tokens", field=name, index=(mismatch,),
                        expected=theirs[mismatch] if mismatch < len(theirs) else "no more entries",
                        actual=ours[mismatch] if mismatch < len(ours) else "no more entries", check="p5.plan_entries")
        assert compression is not None and ragged is not None
        ratio = FIELDS[name].ratio
        ring = compression.ring_size(ratio)
        for i, x in enumerate(g[name]):
            if x[ragged] < max(real, first_pad):
                continue
            where = [x[1]] if not ragged else ([x[3], x[4]] if x[2] > 0 else [])
            bound = ring if not ragged else ring // ratio
            if x[ragged] >= len(g["seq_lens_casual"]) or any(not 0 <= w < bound for w in where):
                raise _fail("P5", variant, "a pad token's plan entry must stay in slot 0's ring", field=name,
                            index=(i,), expected=f"ragged_id < tier, locations in [0, {bound})", actual=x,
                            check="p5.pad_plan_ring")


def _check_length(variant: Variant, name: str, graph_values: list, eager_values: list, least: int) -> None:
    """Both builds cover the real rows or tokens: a short field is a failure, never an IndexError."""
    for what, values in (("graph", graph_values), ("eager", eager_values)):
        if len(values) < least:
            raise _fail("P5", variant, f"the {what} build's field is shorter than the real rows/tokens", field=name,
                        expected=f"length >= {least}", actual=f"length {len(values)}", check="p5.field_short")


def _check_pads_inert(batch: VerifyBatch, variant: Variant, md: VerifyMetadata) -> None:
    """Pad-row tokens live in slot 0; the uncovered tail is guarded out of the SWA store."""
    f = md.fields
    padded = len(f["seq_lens_casual"])
    short = [n for n in FIELD_NAMES if n in f and FIELDS[n].per == "token" and len(f[n]) != padded]
    if short:
        raise _fail("P5", variant, "per-token fields must cover every token of the tier", field=short[0],
                    expected=f"length {padded}", actual=f"length {len(f[short[0]])}", check="p5.pads_cover_tier")
    num_tokens = md.decision.num_tokens
    win = batch.geometry.unified_swa_window
    ring = batch.geometry.ring_size
    real_slots = set(batch.req_pool_indices)
    # Tokens of pad rows start after the last real row; slack absorbed by the last
    # real row belongs to that row (a documented exception, compared in P5 above).
    first_pad = _first_pad_token(batch, f) if len(f["seq_lens"]) > batch.bs else num_tokens
    slots = f.get("req_pool_indices_repeated", f.get("verify_store_state_slot"))
    for t in range(max(batch.num_real_tokens, first_pad), len(f["seq_lens_casual"])):
        slot = slots[t]
        if t < num_tokens:
            if slot != 0:
                raise _fail("P5", variant, "a pad-row token must use the dummy slot 0",
                            field="req_pool_indices_repeated", index=(t,), expected=0, actual=slot, check="p5.pad_slot")
            _check_pad_reads_nothing(variant, f, t)
            _check_pad_decode_plans(batch, variant, f, t)
            _check_pad_paged_store(batch, variant, f, t)
            for name in (n for n in f if n in FIELDS and FIELDS[n].pad_slot):
                if f[name][t] != 0:
                    raise _fail("P5", variant, "a pad-row token must store into slot 0",
                                field=name, index=(t,), expected=0, actual=f[name][t], check="p5.pad_slot")
            continue
        for name in (n for n in f if n in FIELDS and FIELDS[n].tail is not None):
            tail = FIELDS[name].tail
            want = dataclasses.asdict(batch.geometry)[tail] if isinstance(tail, str) else tail
            if f[name][t] != want:
                raise _fail("P5", variant, "an uncovered-tail token is not inert", field=name, index=(t,),
                            expected=want, actual=f[name][t], check="p5.tail_inert")
        _check_pad_paged_store(batch, variant, f, t)
        if f["positions_casual"][t] > f["pf_final_pos"][t] - win:
            raise _fail("P5", variant, "a tail token passes the SWA store guard pos <= final_pos - win",
                        field="pf_final_pos", index=(t,), expected=win, actual=f["pf_final_pos"][t],
                        check="p5.tail_store_guard")
        # Its own slot's ring (the token map's) or the padding slot's (pad_rows_only, F17); P10 judges which rows.
        if slot in real_slots and f["swa_loc"][t] // ring not in (slot, 0):
            raise _fail("P5", variant, "a tail token's swa_loc left its slot's ring and the padding slot's",
                        field="swa_loc", index=(t,),
                        expected=f"in [{slot * ring}, {(slot + 1) * ring}) or [0, {ring})", actual=f["swa_loc"][t],
                        check="p5.tail_ring")


def _first_pad_token(batch: VerifyBatch, f: dict) -> int:
    """The first token of the pad rows: after the real rows' tokens (and the slack the last one absorbed); a decode
    mode has one token per row and no extend lengths."""
    return sum(f["extend_seq_lens"][: batch.bs]) if "extend_seq_lens" in f else batch.bs


def _check_pad_decode_plans(batch: VerifyBatch, variant: Variant, f: dict, t: int) -> None:
    """A decode pad row's compressor-state write stays in slot 0's ring (the decode plans' ``write_loc``)."""
    compression = batch.geometry.compression
    for ratio in (4, 128):
        name = f"c{ratio}_decode_plan"
        if name in f and compression is not None and not 0 <= f[name][t][1] < compression.ring_size(ratio):
            raise _fail("P5", variant, "a pad row's decode plan must write slot 0's state ring", field=name,
                        index=(t,), expected=f"write_loc in [0, {compression.ring_size(ratio)})", actual=f[name][t],
                        check="p5.pad_plan_ring")


def _check_pad_paged_store(batch: VerifyBatch, variant: Variant, f: dict, t: int) -> None:
    """A pad token stores its SWA K in the paged SWA pool's dummy slot, ``full_to_swa[0]``: the runner pads
    ``out_cache_loc`` with the full pool's reserved location 0 and the in-graph block translates it (upstream:
    "translates the zero-padded out_cache_loc to the dummy slot").  P10 judges that no real slot is touched."""
    dummy = batch.full_to_swa[0]
    if "swa_out_cache_loc" in f and f["swa_out_cache_loc"][t] != dummy:
        raise _fail("P5", variant, "a pad token's paged SWA store must go to the dummy slot full_to_swa[0]",
                    field="swa_out_cache_loc", index=(t,), expected=dummy, actual=f["swa_out_cache_loc"][t],
                    check="p5.pad_paged_store")


def _check_pad_reads_nothing(variant: Variant, f: dict, t: int) -> None:
    """A pad token whose SWA length is not positive reads nothing: its index row is ``-1`` only (docs/DESIGN.md
    section 3, FINDINGS L2).  A draft-extend pad row (``seq_len`` 1 with ``n`` tokens) has lengths ``2 - n + j``;
    a consumer that reads the length unsigned reads the whole row, so a live index there is the fault."""
    length, row = f["swa_topk_lengths"][t], f["swa_page_indices"][t]
    if length <= 0 and any(x != -1 for x in row):
        raise _fail("P5", variant, "a pad token with a non-positive SWA length has a live index (an unsigned reader "
                    "of the length would read it)", field="swa_page_indices", index=(t,), expected="-1 only",
                    actual=row, check="p5.pad_reads_nothing")


def _shapes(fields: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    def shape(x: Any) -> tuple[int, ...]:
        return (len(x), *shape(x[0])) if isinstance(x, list) and x else ((0,) if isinstance(x, list) else ())

    # A plan is compared as its valid entries (``canonical_plan``), whose count varies;
    # its buffer's storage is held to the captured address below like any other.
    return {name: shape(v) for name, v in fields.items() if name not in SHAPE_VARIES}


def _check_replay(builder, batch: VerifyBatch, graph_variants: list[Variant], second: VerifyBatch | None) -> list[str]:
    if not builder.capabilities.replays:
        return [Partial(f"P5 replay not checked: builder {_name(builder)!r} has no capture()/replay() "
                        "(nor out_graph()/in_graph())", "replay")]
    sequence = replay_sequence(batch) if second is None else [batch, _clean(second)]
    sequence = [b for b in sequence if b.mode in builder.capabilities.modes]  # an idle rank's tier: decode's too
    for variant in graph_variants:
        captured = _capture("P5", builder, sequence[0], variant)
        shapes: dict[str, tuple[int, ...]] | None = None
        storage: dict[str, int] | None = None
        for step, other in enumerate(sequence):
            replayed = builder.replay(captured, other)
            what = f"replay {step + 1}/{len(sequence)} (bs={other.bs}, captured with bs={sequence[0].bs})"
            now = _shapes(replayed.fields)
            if shapes is not None and now != shapes:
                field = next(n for n in now if now[n] != shapes[n])
                raise _fail("P5", variant, f"{what} changed a captured buffer's shape", field=field,
                            expected=shapes[field], actual=now[field], check="p5.replay_shape")
            shapes = now
            storage = replayed.audit.storage if storage is None else storage
            moved = [n for n in storage if replayed.audit.storage.get(n) != storage[n]]
            if moved:
                raise _fail("P5", variant, f"{what} returned new storage instead of writing into the captured buffer",
                            field=moved[0], expected="the captured address", actual="a new tensor",
                            check="p5.replay_storage")
            if replayed.audit.inputs_written:
                change = replayed.audit.inputs_written[0]
                raise _fail("P5", variant, f"{what} modified the graph runner's static input buffer (P8's rule, "
                            "found during P5's replay sequence)",
                            field=change.name, index=change.index, expected=change.before, actual=change.after,
                            check="p5.replay_writes_input")
            fresh = builder.build(other, variant)
            _compare("P5", variant, fresh, replayed, f"{what} vs a fresh build", check="p5.replay_vs_fresh")
            _in_graph_only(builder, other, variant, fresh, replayed, what)
    if not builder.capabilities.records_graph:
        return [Partial(f"P5 recorded replay not checked: builder {_name(builder)!r} replays in Python "
                        "(capture()/replay(), no out_graph()/in_graph()), which a GPU never runs; so is P7's "
                        "rule on host memory read by recorded work", "recorded_replay")]
    return []


def _in_graph_only(builder: Any, batch: VerifyBatch, variant: Variant, fresh: Any, replayed: Any, what: str) -> None:
    """Fields only the recorded in-graph work sets (the fresh build names them not observable: upstream's
    ``init_forward_metadata_in_graph`` fills ``low_ratio_req_indices``) are judged against the reference of the
    builder's convention -- P1 never sees them."""
    only = [n for n in replayed.fields if n in fresh.not_observable]
    if not only:
        return
    expected = _reference(builder).build(batch, variant).fields
    mismatch = first_difference({n: expected[n] for n in only if n in expected},
                                {n: replayed.fields[n] for n in only if n in expected})
    if mismatch is not None:
        raise _fail("P5", variant, f"{what}: a field only the recorded in-graph work sets differs from the reference",
                    field=mismatch.field, index=mismatch.index, expected=mismatch.expected, actual=mismatch.actual,
                    check="p5.in_graph_vs_reference")
