"""Properties P1-P8 of DESIGN.md section 3, as checks any builder can be put to.

Each ``check_*`` takes a builder (an audited one from
:func:`~metadata_builders.get_builder`) and one batch, and raises
:class:`~metadata_builders.errors.PropertyFailure` at the first violation,
naming property, variant, field, index and both values.  It returns a list of
notes: things that hold but a person should know (a divergence that corrupts
metadata silently).  A note of type :class:`Partial` says the property could
not fully run for this builder (no capture/replay, a variant it cannot
express, a token map the audit never saw): the verdict is then ``partial``,
never a silent ``held``.

The checks are plain functions so the CLI, the pytest plugin and a user's own
Hypothesis test all drive the same code.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal

from metadata_builders.batch import VerifyBatch
from metadata_builders.errors import InvalidBatch, PropertyFailure, StaleMirror
from metadata_builders.metadata import FIELD_NAMES, PER_ROW, SyncRecord, VerifyMetadata, first_difference
from metadata_builders.reference import (
    CONTRACT_STAGES,
    ReferenceBuilder,
    expected_faults,
    expected_host_syncs,
    verify_extension,
)
from metadata_builders.tier import absorbed_slack
from metadata_builders.variants import Variant, apply_gate, divergence_applies, variants_for

__all__ = [
    "PROPERTIES",
    "Partial",
    "PropertyResult",
    "PropertySpec",
    "check_p1_reference",
    "check_p2_mirror",
    "check_p3_sync_free",
    "check_p4_gate",
    "check_p5_graph_vs_eager",
    "check_p6_fault_model",
    "check_p7_capture_safety",
    "check_p8_inputs_untouched",
    "check_sync_contract",
    "contract_role",
    "fewer_requests_batch",
    "filled_tier_batch",
    "p1_differences",
    "replay_sequence",
    "run_all",
    "same_tier_batch",
]

_REFERENCE = ReferenceBuilder()
_DECISION_NAMES = ("num_tokens", "max_seq_len", "used_output_size", "exact_num_tokens")
"""The ``Decision`` fields P1 compares, in the order its first failure names them."""


class Partial(str):
    """A note saying the property could not fully run for this builder, and why."""



def _fail(prop: str, variant: Variant | None, message: str, **data: Any) -> PropertyFailure:
    return PropertyFailure(prop, message, variant=None if variant is None else variant.label, **data)


def _compare(prop: str, variant: Variant, expected: VerifyMetadata, actual: VerifyMetadata, what: str) -> None:
    mismatch = first_difference(expected.fields, actual.fields)
    if mismatch is not None:
        raise _fail(
            prop, variant, f"{what}: fields differ",
            field=mismatch.field, index=mismatch.index, expected=mismatch.expected, actual=mismatch.actual,
        )


def _clean(batch: VerifyBatch) -> VerifyBatch:
    """The batch without fault injection: what metadata properties compare on."""
    return batch.without_divergence()


# -- variants a builder can express ---------------------------------------------------------


def _variants(builder: Any, batch: VerifyBatch, notes: list[str]) -> list[Variant]:
    """``variants_for(batch)`` less those the builder says it cannot express (noted as partial)."""
    everything = variants_for(batch)
    supported = getattr(builder, "variants_supported", None)
    allowed = supported(batch) if callable(supported) else None
    if allowed is None:
        return everything
    missing = [v.label for v in everything if v not in allowed]
    if missing:
        notes.append(Partial(f"builder {_name(builder)!r} cannot express {len(missing)} variant(s), e.g. {missing[0]}"))
    return [v for v in everything if v in allowed]


def _name(builder: Any) -> str:
    return getattr(builder, "name", type(builder).__name__)


# -- P1 ------------------------------------------------------------------------------------


def check_p1_reference(builder, batch: VerifyBatch) -> list[str]:
    """P1: on every variant, every field and the decision equal the pure-Python reference.

    On a batch without divergence no variant may fault either (an out-of-bounds
    read or write is wrong whatever the fields say).
    """
    batch = _clean(batch)
    notes: list[str] = []
    for variant in _variants(builder, batch, notes):
        expected = _REFERENCE.build(batch, variant)
        actual = builder.build(batch, variant)
        if actual.not_observable and not any(isinstance(n, Partial) and "not observable" in n for n in notes):
            notes.append(Partial(f"fields not observable in builder {_name(builder)!r}: "
                                 f"{', '.join(actual.not_observable)}"))
        _compare("P1", variant, expected, actual, "builder vs reference")
        for name in _DECISION_NAMES:
            e, a = getattr(expected.decision, name), getattr(actual.decision, name)
            if e != a:
                raise _fail("P1", variant, "decision differs from the reference", field=f"decision.{name}", expected=e, actual=a)
        if actual.audit.faults:
            _fail_on_faults("P1", variant, batch, actual)
    return notes


def p1_differences(builder, batch: VerifyBatch) -> set[str]:
    """Every (variant, field) where the builder differs from the reference: P1's whole verdict, not its first.

    ``check_p1_reference`` stops at the first difference; the gate compares these
    sets, so a difference the base already had (a known finding on every batch)
    cannot hide a new one.  Entries read ``"<variant label>|<field>"``.
    """
    batch = _clean(batch)
    found: set[str] = set()
    for variant in _variants(builder, batch, []):
        expected = _REFERENCE.build(batch, variant)
        actual = builder.build(batch, variant)
        for name in FIELD_NAMES:
            if name in actual.fields and first_difference(expected.fields, actual.fields, (name,)) is not None:
                found.add(f"{variant.label}|{name}")
        for name in _DECISION_NAMES:
            if getattr(expected.decision, name) != getattr(actual.decision, name):
                found.add(f"{variant.label}|decision.{name}")
        if actual.audit.faults:
            found.add(f"{variant.label}|audit.faults")
    return found


def _fail_on_faults(prop: str, variant: Variant, batch: VerifyBatch, md: VerifyMetadata) -> None:
    f = md.audit.faults[0]
    what = {"oob_read": "read past the end of a device table", "oob_write": "wrote past the token map",
            "uninitialized_tail": "left the token map's tail unwritten"}[f.kind]
    raise _fail(prop, variant, f"the build {what} ({f.op} in {f.stage}) on a batch without divergence",
                field="audit.faults", expected=[], actual=[(x.kind, x.count) for x in md.audit.faults])


# -- P2 ------------------------------------------------------------------------------------


def check_p2_mirror(builder, batch: VerifyBatch) -> list[str]:
    """P2: host / device / tolist mirrors give identical metadata; only ``tolist`` syncs on seq_lens.

    ``host`` and ``device`` read nothing of ``seq_lens`` back; ``tolist`` exactly
    once (the pre-fix ``seq_lens.tolist()``), whatever else the build reads.
    """
    notes = _check_stale_mirror(builder, batch)
    batch = _clean(batch)
    if batch.is_ragged:
        return notes + ["P2 mirror comparison applies to uniform batches only; nothing to check"]
    variants = _variants(builder, batch, notes)
    for variant in variants:
        if variant.mirror != "host":
            continue
        base = builder.build(batch, variant)
        base_reads = _mirror_reads(base)
        if base_reads:
            raise _fail("P2", variant, "mirror=host must not read seq_lens back", field="audit.host_syncs",
                        expected=[], actual=base_reads)
        for mirror in ("device", "tolist"):
            other_v = Variant(variant.path, mirror, variant.layout_total, variant.gate)
            if other_v not in variants:
                continue
            other = builder.build(batch, other_v)
            _compare("P2", other_v, base, other, f"mirror={mirror} vs mirror=host")
            reads = _mirror_reads(other)
            want = 1 if mirror == "tolist" else 0
            if len(reads) != want:
                raise _fail(
                    "P2", other_v, f"mirror={mirror} must read seq_lens back {want} time(s)",
                    field="audit.host_syncs", expected=want, actual=reads or _describe(other.audit.host_syncs),
                )
    return notes


def _mirror_reads(md: VerifyMetadata) -> list[str]:
    return [_describe([s])[0] for s in md.audit.host_syncs if "seq_lens" in s.reads and contract_role(s) != "token_map"]


def _check_stale_mirror(builder, batch: VerifyBatch) -> list[str]:
    """P2, second half: with opt-in mirror validation a stale ``seq_lens_cpu`` raises ``StaleMirror``."""
    div = batch.divergence
    if div is None or div.seq_lens_cpu is None or list(div.seq_lens_cpu) == list(batch.seq_lens):
        return []
    if not getattr(builder, "can_validate_mirror", callable(getattr(builder, "with_mirror_validation", None))):
        return [Partial(f"stale mirror not checked: builder {_name(builder)!r} has no mirror validation")]
    validating = builder.with_mirror_validation()
    first = next(i for i, (a, b) in enumerate(zip(batch.seq_lens, div.seq_lens_cpu)) if a != b)
    notes: list[str] = []
    for variant in variants_for(batch):
        if not batch.is_ragged and variant.mirror != "host":
            continue
        try:
            validating.build(batch, variant)
        except StaleMirror as exc:
            if exc.index != first:
                raise _fail("P2", variant, "mirror validation named the wrong request", field="seq_lens_cpu",
                            index=(exc.index,), expected=first, actual=exc.index) from exc
        else:
            raise _fail("P2", variant, "a stale host mirror was used silently under mirror validation",
                        field="seq_lens_cpu", index=(first,), expected=batch.seq_lens[first],
                        actual=div.seq_lens_cpu[first])
        silent = builder.build(batch, variant)
        mismatch = first_difference(_REFERENCE.build(_clean(batch), variant).fields, silent.fields)
        if mismatch is not None and len(notes) < 3:
            notes.append(f"{variant.label}: without validation the stale mirror corrupts metadata: {mismatch}")
    return notes


# -- P3 ------------------------------------------------------------------------------------


def check_p3_sync_free(builder, batch: VerifyBatch) -> list[str]:
    """P3: a token map with ``output_size`` equals the synced one and performs no sync.

    Compared per path/mirror/layout between the variant that passed
    ``output_size`` and its ``always_sync`` twin, whenever
    ``num_tokens == sum(extend_seq_lens)`` (no divergence, so always here).
    """
    batch = _clean(batch)
    notes: list[str] = []
    variants = _variants(builder, batch, notes)
    for variant in variants:
        if variant.gate == "always_sync":
            continue
        actual = builder.build(batch, variant)
        if not actual.decision.used_output_size:
            continue
        if actual.decision.num_tokens != sum(actual.fields["extend_seq_lens"]):
            continue
        synced_v = Variant(variant.path, variant.mirror, variant.layout_total, "always_sync")
        if synced_v not in variants:
            continue
        synced = builder.build(batch, synced_v)
        _compare("P3", variant, synced, actual, "output_size map vs synced map")
        map_syncs = [s for s in actual.audit.host_syncs if contract_role(s) == "token_map"]
        if map_syncs:
            raise _fail("P3", variant, "the token map passed output_size but still synced",
                        field="audit.host_syncs", expected=[], actual=_describe(map_syncs))
    return notes


# -- P4 ------------------------------------------------------------------------------------


def check_p4_gate(builder, batch: VerifyBatch) -> list[str]:
    """P4: ``used_output_size`` (as the audit saw the token map) follows the gate table; outputs equal across gates."""
    batch = _clean(batch)
    notes: list[str] = []
    by_recipe: dict[tuple, tuple[Variant, VerifyMetadata]] = {}
    for variant in _variants(builder, batch, notes):
        rows = verify_extension(batch, variant)
        want = apply_gate(variant.gate, rows.exact, batch.is_dspark)
        actual = builder.build(batch, variant)
        maps = actual.audit.token_maps
        if not maps and not isinstance(builder, ReferenceBuilder):
            notes.append(Partial(f"{variant.label}: the audit saw no token map (repeat_interleave over device "
                                 "lengths); used_output_size is the builder's own word"))
        if actual.decision.used_output_size != want:
            raise _fail(
                "P4", variant,
                f"gate={variant.gate}, layout exact={rows.exact}, is_dspark={batch.is_dspark}: wrong output_size decision",
                field="decision.used_output_size", expected=want, actual=actual.decision.used_output_size,
            )
        if actual.decision.exact_num_tokens != want:
            raise _fail(
                "P4", variant, "exact_num_tokens must be the gated decision",
                field="decision.exact_num_tokens", expected=want, actual=actual.decision.exact_num_tokens,
            )
        sizes = [m.output_size for m in maps if m.output_size is not None]
        if sizes and sizes[0] != actual.decision.num_tokens:
            raise _fail("P4", variant, "the token map was given another output_size than the decision's num_tokens",
                        field="token_map.output_size", expected=actual.decision.num_tokens, actual=sizes[0])
        recipe = (variant.path, variant.mirror, variant.layout_total)
        if recipe in by_recipe:
            first_v, first = by_recipe[recipe]
            _compare("P4", variant, first, actual, f"gate={variant.gate} vs gate={first_v.gate}")
        else:
            by_recipe[recipe] = (variant, actual)
    return notes[:1]


# -- P5 ------------------------------------------------------------------------------------


def _absorbing_row(batch: VerifyBatch) -> int | None:
    """The real row that takes tier slack (no pad rows; capped or not), if it absorbed any."""
    g = batch.graph
    if g is None or not batch.is_ragged:
        return None
    return batch.bs - 1 if absorbed_slack(batch.verify_lens, g.padded_bs, g.graph_num_tokens, g.cap) else None


def check_p5_graph_vs_eager(builder, batch: VerifyBatch, second: VerifyBatch | None = None) -> list[str]:
    """P5: the graph build equals the eager build on real tokens; pads are inert; replays equal fresh builds.

    Documented exceptions: ``page_table`` is compared on the eager build's
    columns, and the real row that absorbed tier slack keeps its longer
    ``seq_lens``/``extend_seq_lens`` and the ``pf_final_pos`` of its tokens.
    The replay half captures the tier once and replays a sequence of batches
    that grows, fills the tier, shrinks and changes values (:func:`replay_sequence`).
    """
    batch = _clean(batch)
    if batch.graph is None:
        return ["P5 needs a graph tier; nothing to check"]
    notes: list[str] = []
    bs, real = batch.bs, batch.num_real_tokens
    absorbing = _absorbing_row(batch)
    variants = _variants(builder, batch, notes)
    for variant in variants:
        if variant.path != "graph":
            continue
        eager_v = Variant("eager", variant.mirror, "host", variant.gate)
        if eager_v not in variants:
            continue
        graph_md = builder.build(batch, variant)
        eager_md = builder.build(batch, eager_v)
        g, e = graph_md.fields, eager_md.fields
        for name in PER_ROW:
            if name not in g or name not in e:
                continue  # not observable in this builder
            _check_length(variant, name, g[name], e[name], bs)
            for row in range(bs):
                if row == absorbing and name in ("seq_lens", "extend_seq_lens"):
                    continue
                if g[name][row] != e[name][row]:
                    raise _fail("P5", variant, "graph vs eager on a real row", field=name, index=(row,),
                                expected=e[name][row], actual=g[name][row])
        absorbed = range(0)
        if absorbing is not None:
            start = e["extend_start_loc"][absorbing]
            absorbed = range(start, start + e["extend_seq_lens"][absorbing])
        for name in FIELD_NAMES:
            if name in PER_ROW or name not in g or name not in e:
                continue
            _check_length(variant, name, g[name], e[name], real)
            for t in range(real):
                ev, gv = e[name][t], g[name][t]
                if name == "page_table":
                    gv = gv[: len(ev)]
                if name == "pf_final_pos" and t in absorbed:
                    continue
                if ev != gv:
                    raise _fail("P5", variant, "graph vs eager on a real token", field=name, index=(t,),
                                expected=ev, actual=gv)
        _check_pads_inert(batch, variant, graph_md)
    # The whole sequence replays along the production gate (dspark) of each recipe; P7 also
    # captures and replays every graph variant once, under the sync contract.
    replayed = [v for v in variants if v.path == "graph" and v.gate == "dspark"]
    notes += _check_replay(builder, batch, replayed or [v for v in variants if v.path == "graph"][:1], second)
    return notes


def _check_length(variant: Variant, name: str, graph_values: list, eager_values: list, least: int) -> None:
    """Both builds cover the real rows or tokens: a short field is a failure, never an IndexError."""
    for what, values in (("graph", graph_values), ("eager", eager_values)):
        if len(values) < least:
            raise _fail("P5", variant, f"the {what} build's field is shorter than the real rows/tokens", field=name,
                        expected=f"length >= {least}", actual=f"length {len(values)}")


def _check_pads_inert(batch: VerifyBatch, variant: Variant, md: VerifyMetadata) -> None:
    """Pad-row tokens live in slot 0; the uncovered tail is guarded out of the SWA store."""
    f = md.fields
    padded = len(f["seq_lens_casual"])
    short = [n for n in FIELD_NAMES if n in f and n not in PER_ROW and len(f[n]) != padded]
    if short:
        raise _fail("P5", variant, "per-token fields must cover every token of the tier", field=short[0],
                    expected=f"length {padded}", actual=f"length {len(f[short[0]])}")
    num_tokens = md.decision.num_tokens
    win = batch.geometry.unified_swa_window
    ring = batch.geometry.ring_size
    real_slots = set(batch.req_pool_indices)
    # Tokens of pad rows start after the last real row; slack absorbed by the last
    # real row belongs to that row (a documented exception, compared in P5 above).
    first_pad = sum(f["extend_seq_lens"][: batch.bs]) if len(f["extend_seq_lens"]) > batch.bs else num_tokens
    slots = f.get("req_pool_indices_repeated", f.get("verify_store_state_slot"))
    for t in range(max(batch.num_real_tokens, first_pad), len(f["seq_lens_casual"])):
        slot = slots[t]
        if t < num_tokens:
            if slot != 0:
                raise _fail("P5", variant, "a pad-row token must use the dummy slot 0",
                            field="req_pool_indices_repeated", index=(t,), expected=0, actual=slot)
            for name in ("pf_state_slot", "verify_store_state_slot"):
                if name in f and f[name][t] != 0:
                    raise _fail("P5", variant, "a pad-row token must store into slot 0",
                                field=name, index=(t,), expected=0, actual=f[name][t])
            continue
        for name, want in (("seq_lens_casual", 1), ("positions_casual", 0), ("pf_chunk_start", 0),
                           ("pf_cu_q", 0), ("pf_final_pos", win)):
            if name in f and f[name][t] != want:
                raise _fail("P5", variant, "an uncovered-tail token is not inert", field=name, index=(t,),
                            expected=want, actual=f[name][t])
        if f["positions_casual"][t] > f["pf_final_pos"][t] - win:
            raise _fail("P5", variant, "a tail token passes the SWA store guard pos <= final_pos - win",
                        field="pf_final_pos", index=(t,), expected=win, actual=f["pf_final_pos"][t])
        if slot in real_slots and f["swa_loc"][t] // ring != slot:
            raise _fail("P5", variant, "a tail token's swa_loc left its slot's ring", field="swa_loc", index=(t,),
                        expected=f"in [{slot * ring}, {(slot + 1) * ring})", actual=f["swa_loc"][t])


def same_tier_batch(batch: VerifyBatch) -> VerifyBatch:
    """A second batch for the same captured tier: each prefix one shorter, rows' lengths rotated.

    Falls back to the batch itself when the derived one would be invalid.
    """
    seq_lens = [max(1, s - 1) for s in batch.seq_lens]
    verify = None if batch.verify_lens is None else list(batch.verify_lens[1:]) + list(batch.verify_lens[:1])
    try:
        return batch.replace(
            seq_lens=seq_lens,
            verify_lens=verify,
            out_cache_loc=[x + 1 for x in batch.out_cache_loc],
            req_pool_indices=list(batch.req_pool_indices[::-1]),
        )
    except InvalidBatch:
        return batch


def fewer_requests_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """The same tier with the last real request gone: its row becomes a pad row on replay.

    A replay that does not refill the rows a smaller batch leaves to padding keeps
    the first batch's values there; this second batch exposes it.  None when the
    batch has one request or the smaller one would be invalid.
    """
    if batch.bs < 2:
        return None
    keep = batch.num_real_tokens - batch.extend_lens[-1]
    try:
        return batch.replace(
            seq_lens=batch.seq_lens[:-1],
            req_pool_indices=batch.req_pool_indices[:-1],
            verify_lens=None if batch.verify_lens is None else batch.verify_lens[:-1],
            out_cache_loc=batch.out_cache_loc[:keep],
        )
    except InvalidBatch:
        return None


def filled_tier_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """The same tier with every pad row turned into a real request (as far as spare slots allow).

    Each new request has a prefix of 1 and verifies ``num_draft_tokens`` (uniform)
    or 1 token (ragged), in a slot no real request uses.  A replay that refreshes
    only the rows it captured leaves these rows stale.  None when the tier has no
    pad rows, the table no spare slot, or the result would be invalid.
    """
    g = batch.graph
    if g is None or g.padded_bs == batch.bs:
        return None
    used = set(batch.req_pool_indices)
    spare = [s for s in range(1, batch.num_slots) if s not in used][: g.padded_bs - batch.bs]
    if not spare:
        return None
    extend = batch.num_draft_tokens if batch.verify_lens is None else 1
    added = [batch.req_to_token[slot][1 + j] for slot in spare for j in range(extend)]
    try:
        return batch.replace(
            seq_lens=list(batch.seq_lens) + [1] * len(spare),
            req_pool_indices=list(batch.req_pool_indices) + spare,
            verify_lens=None if batch.verify_lens is None else list(batch.verify_lens) + [1] * len(spare),
            out_cache_loc=list(batch.out_cache_loc) + added,
        )
    except InvalidBatch:
        return None


def replay_sequence(batch: VerifyBatch) -> list[VerifyBatch]:
    """What P5 captures and replays on one tier: capture the first, replay all of them in order.

    Smallest first, so the replays grow (``batch``), fill the tier
    (:func:`filled_tier_batch`), shrink back and change every value
    (:func:`same_tier_batch`).  Batches that would be invalid are left out.
    """
    batch = _clean(batch)
    smaller = fewer_requests_batch(batch)
    sequence = [smaller or batch, batch, filled_tier_batch(batch), smaller, same_tier_batch(batch)]
    out: list[VerifyBatch] = []
    for b in sequence:
        if b is not None and (not out or b != out[-1]):
            out.append(b)
    return out


def _shapes(fields: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    def shape(x: Any) -> tuple[int, ...]:
        return (len(x), *shape(x[0])) if isinstance(x, list) and x else ((0,) if isinstance(x, list) else ())

    return {name: shape(v) for name, v in fields.items()}


def _check_replay(builder, batch: VerifyBatch, graph_variants: list[Variant], second: VerifyBatch | None) -> list[str]:
    if not getattr(builder, "can_replay", False):
        return [Partial(f"P5 replay not checked: builder {_name(builder)!r} has no capture()/replay()")]
    sequence = replay_sequence(batch) if second is None else [batch, _clean(second)]
    for variant in graph_variants:
        captured = builder.capture(sequence[0], variant)
        shapes: dict[str, tuple[int, ...]] | None = None
        for step, other in enumerate(sequence):
            replayed = builder.replay(captured, other)
            what = f"replay {step + 1}/{len(sequence)} (bs={other.bs}, captured with bs={sequence[0].bs})"
            now = _shapes(replayed.fields)
            if shapes is not None and now != shapes:
                field = next(n for n in now if now[n] != shapes[n])
                raise _fail("P5", variant, f"{what} changed a captured buffer's shape", field=field,
                            expected=shapes[field], actual=now[field])
            shapes = now
            if captured.last_output_ptrs != captured.output_ptrs:
                field = next(n for n in captured.output_ptrs or {} if captured.last_output_ptrs.get(n) != captured.output_ptrs[n])
                raise _fail("P5", variant, f"{what} returned new storage instead of writing into the captured buffer",
                            field=field, expected="the captured address", actual="a new tensor")
            if replayed.audit.inputs_written:
                change = replayed.audit.inputs_written[0]
                raise _fail("P8", variant, f"{what} modified the graph runner's static input buffer",
                            field=change.name, index=change.index, expected=change.before, actual=change.after)
            fresh = builder.build(other, variant)
            _compare("P5", variant, fresh, replayed, f"{what} vs a fresh build")
    return []


# -- P6 ------------------------------------------------------------------------------------


def check_p6_fault_model(builder, batch: VerifyBatch) -> list[str]:
    """P6: with diverging device lengths, exactly the maps that trusted a host count fault, as modelled.

    The harness delivers the divergence (the device layout it hands in; the
    builder's own asynchronous copies), so the builder is judged on what it does.
    A fault the model does not predict fails: a synced map, EAGLE under the dspark
    gate, a ragged total taken from the host and trusted, any out-of-bounds read.
    A predicted fault must match in kind and count; a build that avoids a predicted
    fault (its device lengths never took the async copy) is noted, not failed.
    An uncapped padded tier never passes ``output_size``.
    """
    notes: list[str] = []
    clean = _clean(batch)
    for variant in _variants(builder, batch, notes):
        actual = builder.build(batch, variant)
        want = [(f.kind, f.count) for f in expected_faults(batch, variant) if f.kind != "oob_read"]
        got = [(f.kind, f.count) for f in actual.audit.faults]
        oob = [f for f in actual.audit.faults if f.kind == "oob_read"]
        if oob:
            model = [f.count for f in expected_faults(batch, variant) if f.kind == "oob_read"]
            raise _fail("P6", variant, f"out-of-bounds read in {oob[0].stage} ({oob[0].op}); no variant may perform one"
                        + (f" (a literal gather reads {model[0]} elements past req_to_token here: F2c)" if model else ""),
                        field="audit.faults", expected=[], actual=got)
        used = actual.decision.used_output_size
        if got and not used:
            raise _fail("P6", variant, "a synced token map faulted", field="audit.faults", expected=[], actual=got)
        if got and not batch.is_dspark and variant.gate == "dspark":
            raise _fail("P6", variant, "EAGLE faulted under the dspark gate", field="audit.faults", expected=[], actual=got)
        g = batch.graph
        if variant.path == "graph" and batch.is_ragged and g is not None and g.cap is None and used:
            raise _fail("P6", variant, "an uncapped padded tier passed output_size", field="decision.used_output_size",
                        expected=False, actual=True)
        if got != want:
            if got or not want:
                raise _fail("P6", variant, "device faults differ from the HIP model", field="audit.faults",
                            expected=want, actual=got)
            notes.append(f"{variant.label}: the model predicts {want} but this build's device lengths never took the "
                         f"diverging copy (delivered {actual.audit.divergence_delivered}x): no exposure")
        if used and not got and batch.divergence is not None and divergence_applies(batch, variant):
            mismatch = first_difference(_REFERENCE.build(clean, variant).fields, actual.fields)
            if mismatch is not None and len(notes) < 5:
                notes.append(f"{variant.label}: no fault, but wrong metadata (silent on HIP): {mismatch}")
    return notes


# -- P7 and the sync contract -------------------------------------------------------------------


def contract_role(record: SyncRecord) -> str | None:
    """Which contracted read a host sync is, judged by what it reads, not how it is spelled.

    ``token_map``: a ``repeat_interleave`` without ``output_size``; ``mirror``: a
    copy of ``seq_lens`` to the host; ``ragged_total``: a number read from the
    device layout's lengths.  Anything else (None) is outside the contract.
    """
    if record.op.startswith("repeat_interleave"):
        return "token_map"
    reads = set(record.reads)
    if record.kind == "copy" and reads == {"seq_lens"}:
        return "mirror"
    if record.kind in ("scalar", "shape") and reads and reads <= {"verify_lens"}:
        return "ragged_total"
    return None


def _contract_key(record: SyncRecord) -> tuple[str, str]:
    role = contract_role(record)
    if role is None:
        return (f"{record.stage} (reads {', '.join(record.reads) or 'no input'})", record.kind)
    return (CONTRACT_STAGES[role], record.kind)


def _describe(records: Iterable[SyncRecord]) -> list[str]:
    return [f"{s.op}@{s.stage}:{s.kind}" + (f" of {'+'.join(s.reads)}" if s.reads else "") for s in records]


def check_sync_contract(builder, batch: VerifyBatch) -> list[str]:
    """The contract per (stage, kind of read): one read each for a tolist mirror, a device total, a synced map.

    ``int(t.sum())`` and ``t.sum().item()`` are the same read; the same number
    read in another stage, or another number read instead, is a different one.
    A graph replay is held to the same contract as a fresh build.
    """
    batch = _clean(batch)
    notes: list[str] = []
    variants = _variants(builder, batch, notes)
    for variant in variants:
        _check_contract(batch, variant, builder.build(batch, variant), "")
    if getattr(builder, "can_replay", False):
        for variant in (v for v in variants if v.path == "graph"):
            captured = builder.capture(batch, variant)
            _check_contract(batch, variant, builder.replay(captured, batch), "graph replay: ")
    return notes


def _check_contract(batch: VerifyBatch, variant: Variant, md: VerifyMetadata, what: str) -> None:
    want = expected_host_syncs(batch, variant)
    got = md.audit.host_syncs
    if Counter((s.stage, s.kind) for s in want) != Counter(_contract_key(s) for s in got):
        raise _fail("P7", variant, f"{what}host syncs break the sync contract", field="audit.host_syncs",
                    expected=[f"{s.stage}:{s.kind}" for s in want], actual=_describe(got))


def check_p7_capture_safety(builder, batch: VerifyBatch) -> list[str]:
    """P7: every variant that claims to be sync-free performs zero host syncs (and the contract holds)."""
    batch = _clean(batch)
    notes: list[str] = []
    for variant in _variants(builder, batch, notes):
        if expected_host_syncs(batch, variant):
            continue
        actual = builder.build(batch, variant)
        if actual.audit.host_syncs:
            raise _fail("P7", variant, "a path that claims to be sync-free synced", field="audit.host_syncs",
                        expected=[], actual=_describe(actual.audit.host_syncs))
    return notes + check_sync_contract(builder, batch)


# -- P8 -------------------------------------------------------------------------------------------


def check_p8_inputs_untouched(builder, batch: VerifyBatch) -> list[str]:
    """P8: a build leaves every input it was handed bit-identical (device tensors and host mirrors).

    In-place updates of a caller's ``seq_lens`` are the classic graph-replay bug.
    Replays are checked by P5, which refills the runner's static buffers.
    """
    if isinstance(builder, ReferenceBuilder):
        return ["the reference has no device inputs; nothing to check"]
    if getattr(builder, "takes_batch", False):
        return [Partial(f"builder {_name(builder)!r} builds its own inputs from the batch (deprecated "
                        "build(batch, variant)); nothing of the harness's to check")]
    notes: list[str] = []
    for variant in _variants(builder, batch, notes):
        actual = builder.build(batch, variant)
        if actual.audit.inputs_written:
            change = actual.audit.inputs_written[0]
            raise _fail("P8", variant, "the build modified an input it was handed", field=change.name,
                        index=change.index, expected=change.before, actual=change.after)
    return notes


def _always(batch: VerifyBatch) -> str | None:
    return None


@dataclass(frozen=True)
class PropertySpec:
    """A property the CLI and the plugin run: its check and the batches it is drawn on."""

    name: str
    title: str
    check: Callable[..., list[str]]
    focuses: tuple[dict[str, Any], ...]
    """Keyword arguments for ``strategies.verify_batches``, one Hypothesis run each.

    Several focused runs reach rare shapes (a tier whose slack the last real row
    absorbs, a capped tail) far more reliably than one run of the same total size,
    because a run's examples are mutations of each other."""
    applies: Callable[[VerifyBatch], str | None] = _always
    """Why the property has nothing to check on ``batch`` (None: it applies)."""


def _needs_graph(batch: VerifyBatch) -> str | None:
    return None if batch.graph is not None else "no graph tier"


def _needs_uniform(batch: VerifyBatch) -> str | None:
    stale = batch.divergence is not None and batch.divergence.seq_lens_cpu is not None
    return "ragged batch" if batch.is_ragged and not stale else None


PROPERTIES: tuple[PropertySpec, ...] = (
    PropertySpec("P1", "every variant = reference", check_p1_reference,
                 ({}, {"graph": True, "ragged": True}, {"ragged": False})),
    PropertySpec("P2", "mirrors agree, only tolist syncs", check_p2_mirror, ({"ragged": False},), _needs_uniform),
    PropertySpec("P3", "output_size map = synced map", check_p3_sync_free, ({},)),
    PropertySpec("P4", "gate decision table", check_p4_gate, ({},)),
    PropertySpec("P5", "graph = eager, pads inert, replay", check_p5_graph_vs_eager,
                 ({"graph": True}, {"graph": True, "ragged": True}), _needs_graph),
    PropertySpec("P6", "HIP fault model", check_p6_fault_model, ({"divergence": True},)),
    PropertySpec("P7", "sync contract, capture safety", check_p7_capture_safety, ({},)),
    PropertySpec("P8", "inputs untouched", check_p8_inputs_untouched, ({},)),
)

Status = Literal["held", "failed", "partial", "not applicable"]


@dataclass(frozen=True)
class PropertyResult:
    """One property's verdict on one batch."""

    prop: str
    status: Status
    notes: tuple[str, ...] = ()
    """Notes the check returned; for ``partial`` the first says why."""
    failure: PropertyFailure | None = None

    @property
    def why(self) -> str:
        """Why the property is ``partial`` or ``not applicable`` (empty otherwise)."""
        partial = [n for n in self.notes if isinstance(n, Partial)]
        if self.status == "partial":
            return partial[0]
        return self.notes[0] if self.status == "not applicable" and self.notes else ""


def verdict(spec: PropertySpec, builder: Any, batch: VerifyBatch) -> PropertyResult:
    """Run one property on one batch; a crashing builder fails the property, with the exception named."""
    reason = spec.applies(batch)
    if reason is not None:
        return PropertyResult(spec.name, "not applicable", (reason,))
    try:
        notes = spec.check(builder, batch)
    except PropertyFailure as failure:
        return PropertyResult(spec.name, "failed", (), failure)
    except Exception as exc:  # noqa: BLE001 - a crashing builder fails the property; report, don't crash
        return PropertyResult(spec.name, "failed", (), PropertyFailure(spec.name, _raised(exc)))
    status: Status = "partial" if any(isinstance(n, Partial) for n in notes) else "held"
    return PropertyResult(spec.name, status, tuple(notes))


def _raised(exc: BaseException) -> str:
    """``builder raised IndexError: ... (at deepseek_v4_backend_hip_radix.py:3660 in get_swa_page_indices)``."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f" (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name})"
    return f"builder raised {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}{where}"


def run_all(builder, batch: VerifyBatch, props: Iterable[PropertySpec] = PROPERTIES) -> dict[str, PropertyResult]:
    """Run each property on one batch: name -> :class:`PropertyResult`."""
    return {spec.name: verdict(spec, builder, batch) for spec in props}
