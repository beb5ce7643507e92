"""Properties P1-P7 of DESIGN.md section 3, as checks any builder can be put to.

Each ``check_*`` takes a builder (anything with ``build(batch, variant)``, best
one from :func:`~metadata_builders.get_builder` so it is audited) and one batch,
and raises :class:`~metadata_builders.errors.PropertyFailure` at the first
violation, naming property, variant, field, index and both values.  It returns
a list of notes: things that hold but a person should know (a same-sum
divergence that corrupts metadata silently, a replay skipped because the
builder cannot capture).

The checks are plain functions so the CLI, the pytest plugin and a user's own
Hypothesis test all drive the same code.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from metadata_builders.batch import VerifyBatch
from metadata_builders.errors import PropertyFailure, StaleMirror
from metadata_builders.metadata import FIELD_NAMES, VerifyMetadata, first_difference
from metadata_builders.reference import (
    ReferenceBuilder,
    expected_faults,
    expected_host_syncs,
    verify_extension,
)
from metadata_builders.variants import Variant, apply_gate, divergence_applies, variants_for

__all__ = [
    "PROPERTIES",
    "PropertySpec",
    "check_p1_reference",
    "check_p2_mirror",
    "check_p3_sync_free",
    "check_p4_gate",
    "check_p5_graph_vs_eager",
    "check_p6_fault_model",
    "check_p7_capture_safety",
    "check_sync_contract",
    "fewer_requests_batch",
    "run_all",
    "same_tier_batch",
]

_REFERENCE = ReferenceBuilder()

PER_ROW = ("seq_lens", "extend_seq_lens", "extend_start_loc")
"""Fields with one entry per row; every other field has one entry per token."""


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
    return batch if batch.divergence is None else batch.replace(divergence=None)


# -- P1 ------------------------------------------------------------------------------------


def check_p1_reference(builder, batch: VerifyBatch) -> list[str]:
    """P1: on every variant, every field and the decision equal the pure-Python reference."""
    batch = _clean(batch)
    for variant in variants_for(batch):
        expected = _REFERENCE.build(batch, variant)
        actual = builder.build(batch, variant)
        _compare("P1", variant, expected, actual, "builder vs reference")
        for name in ("num_tokens", "max_seq_len", "used_output_size", "exact_num_tokens"):
            e, a = getattr(expected.decision, name), getattr(actual.decision, name)
            if e != a:
                raise _fail("P1", variant, "decision differs from the reference", field=f"decision.{name}", expected=e, actual=a)
    return []


# -- P2 ------------------------------------------------------------------------------------


def check_p2_mirror(builder, batch: VerifyBatch) -> list[str]:
    """P2: host / device / tolist mirrors give identical metadata; only ``tolist`` syncs on seq_lens.

    ``host`` and ``device`` perform no sync beyond the token map's; ``tolist``
    exactly one more (the pre-fix ``seq_lens.tolist()``).
    """
    notes = _check_stale_mirror(builder, batch)
    batch = _clean(batch)
    if batch.is_ragged:
        return notes + ["P2 mirror comparison applies to uniform batches only; nothing to check"]
    for variant in variants_for(batch):
        if variant.mirror != "host":
            continue
        base = builder.build(batch, variant)
        base_syncs = len(base.audit.host_syncs)
        for mirror in ("device", "tolist"):
            other_v = Variant(variant.path, mirror, variant.layout_total, variant.gate)
            other = builder.build(batch, other_v)
            _compare("P2", other_v, base, other, f"mirror={mirror} vs mirror=host")
            extra = len(other.audit.host_syncs) - base_syncs
            want = 1 if mirror == "tolist" else 0
            if extra != want:
                raise _fail(
                    "P2", other_v, f"mirror={mirror} must perform {want} more D2H sync(s) than mirror=host",
                    field="audit.host_syncs", expected=base_syncs + want, actual=len(other.audit.host_syncs),
                )
        token_map_syncs = 0 if base.decision.used_output_size else 1
        if base_syncs != token_map_syncs:
            raise _fail(
                "P2", variant, "mirror=host must not sync on seq_lens",
                field="audit.host_syncs", expected=token_map_syncs, actual=[s.op for s in base.audit.host_syncs],
            )
    return notes


def _check_stale_mirror(builder, batch: VerifyBatch) -> list[str]:
    """P2, second half: with opt-in mirror validation a stale ``seq_lens_cpu`` raises ``StaleMirror``."""
    div = batch.divergence
    if div is None or div.seq_lens_cpu is None or list(div.seq_lens_cpu) == list(batch.seq_lens):
        return []
    make_validating = getattr(builder, "with_mirror_validation", None)
    if make_validating is None:
        return [f"stale mirror not checked: builder {getattr(builder, 'name', builder)!r} has no mirror validation"]
    validating = make_validating()
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
    for variant in variants_for(batch):
        if variant.gate == "always_sync":
            continue
        actual = builder.build(batch, variant)
        if not actual.decision.used_output_size:
            continue
        if actual.decision.num_tokens != sum(actual.fields["extend_seq_lens"]):
            continue
        synced_v = Variant(variant.path, variant.mirror, variant.layout_total, "always_sync")
        synced = builder.build(batch, synced_v)
        _compare("P3", variant, synced, actual, "output_size map vs synced map")
        map_syncs = [s for s in actual.audit.host_syncs if "repeat_interleave" in s.op]
        if map_syncs:
            raise _fail(
                "P3", variant, "the token map passed output_size but still synced",
                field="audit.host_syncs", expected=[], actual=[f"{s.op}@{s.stage}" for s in map_syncs],
            )
    return []


# -- P4 ------------------------------------------------------------------------------------


def check_p4_gate(builder, batch: VerifyBatch) -> list[str]:
    """P4: ``used_output_size`` follows the gate table; outputs equal across gates."""
    batch = _clean(batch)
    by_recipe: dict[tuple, tuple[Variant, VerifyMetadata]] = {}
    for variant in variants_for(batch):
        exact = verify_extension(batch, variant).exact
        want = apply_gate(variant.gate, exact, batch.is_dspark)
        actual = builder.build(batch, variant)
        if actual.decision.used_output_size != want:
            raise _fail(
                "P4", variant,
                f"gate={variant.gate}, layout exact={exact}, is_dspark={batch.is_dspark}: wrong output_size decision",
                field="decision.used_output_size", expected=want, actual=actual.decision.used_output_size,
            )
        if actual.decision.exact_num_tokens != want:
            raise _fail(
                "P4", variant, "exact_num_tokens must be the gated decision",
                field="decision.exact_num_tokens", expected=want, actual=actual.decision.exact_num_tokens,
            )
        recipe = (variant.path, variant.mirror, variant.layout_total)
        if recipe in by_recipe:
            first_v, first = by_recipe[recipe]
            _compare("P4", variant, first, actual, f"gate={variant.gate} vs gate={first_v.gate}")
        else:
            by_recipe[recipe] = (variant, actual)
    return []


# -- P5 ------------------------------------------------------------------------------------


def _absorbing_row(batch: VerifyBatch) -> int | None:
    """The real row that takes tier slack (no pad rows, no cap), if any slack exists."""
    g = batch.graph
    if g is None or not batch.is_ragged or g.padded_bs != batch.bs or g.cap is not None:
        return None
    return batch.bs - 1 if g.graph_num_tokens > batch.num_real_tokens else None


def check_p5_graph_vs_eager(builder, batch: VerifyBatch, second: VerifyBatch | None = None) -> list[str]:
    """P5: the graph build equals the eager build on real tokens; pads are inert; replay equals a fresh build.

    Documented exceptions: ``page_table`` is compared on the eager build's
    columns, and the real row that absorbed tier slack keeps its longer
    ``seq_lens``/``extend_seq_lens`` and the ``pf_final_pos`` of its tokens.
    """
    batch = _clean(batch)
    if batch.graph is None:
        return ["P5 needs a graph tier; nothing to check"]
    notes: list[str] = []
    bs, real = batch.bs, batch.num_real_tokens
    absorbing = _absorbing_row(batch)
    for variant in variants_for(batch):
        if variant.path != "graph":
            continue
        eager_v = Variant("eager", variant.mirror, "host", variant.gate)
        graph_md = builder.build(batch, variant)
        eager_md = builder.build(batch, eager_v)
        g, e = graph_md.fields, eager_md.fields
        for name in PER_ROW:
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
            if name in PER_ROW:
                continue
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
    notes += _check_replay(builder, batch, second)
    return notes


def _check_pads_inert(batch: VerifyBatch, variant: Variant, md: VerifyMetadata) -> None:
    """Pad-row tokens live in slot 0; the uncovered tail is guarded out of the SWA store."""
    f = md.fields
    num_tokens = md.decision.num_tokens
    win = batch.geometry.unified_swa_window
    ring = batch.geometry.ring_size
    real_slots = set(batch.req_pool_indices)
    # Tokens of pad rows start after the last real row; slack absorbed by the last
    # real row belongs to that row (a documented exception, compared in P5 above).
    first_pad = f["extend_start_loc"][batch.bs] if len(f["extend_start_loc"]) > batch.bs else num_tokens
    for t in range(max(batch.num_real_tokens, first_pad), len(f["seq_lens_casual"])):
        slot = f["req_pool_indices_repeated"][t]
        if t < num_tokens:
            if slot != 0:
                raise _fail("P5", variant, "a pad-row token must use the dummy slot 0",
                            field="req_pool_indices_repeated", index=(t,), expected=0, actual=slot)
            if f["pf_state_slot"][t] != 0 or f["verify_store_state_slot"][t] != 0:
                raise _fail("P5", variant, "a pad-row token must store into slot 0",
                            field="pf_state_slot", index=(t,), expected=0, actual=f["pf_state_slot"][t])
            continue
        for name, want in (("seq_lens_casual", 1), ("positions_casual", 0), ("pf_chunk_start", 0),
                           ("pf_cu_q", 0), ("pf_final_pos", win)):
            if f[name][t] != want:
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
    from metadata_builders.errors import InvalidBatch

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
    from metadata_builders.errors import InvalidBatch

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


def _check_replay(builder, batch: VerifyBatch, second: VerifyBatch | None) -> list[str]:
    capture = getattr(builder, "capture", None)
    replay = getattr(builder, "replay", None)
    if capture is None or replay is None:
        return [f"P5 replay skipped: builder {getattr(builder, 'name', builder)!r} has no capture()/replay()"]
    if second is not None:
        seconds = [_clean(second)]
    else:
        seconds = [same_tier_batch(batch)] + [b for b in [fewer_requests_batch(batch)] if b is not None]
    for variant in variants_for(batch):
        if variant.path != "graph":
            continue
        state = capture(batch, variant)
        shapes = state.shapes()
        for other in seconds:
            replayed = replay(state, other)
            if state.shapes() != shapes:
                raise _fail("P5", variant, "replay changed a captured buffer's shape", field="shapes",
                            expected=shapes, actual=state.shapes())
            fresh = builder.build(other, variant)
            _compare("P5", variant, fresh, replayed,
                     f"in-place replay of a second batch (bs={other.bs}) vs a fresh build")
    return []


# -- P6 ------------------------------------------------------------------------------------


def check_p6_fault_model(builder, batch: VerifyBatch) -> list[str]:
    """P6: with diverging device lengths, exactly the maps that trusted ``output_size`` fault.

    Kinds and counts must equal the model (reference ``expected_faults``); a
    synced map never faults; EAGLE under the dspark gate never faults; an
    uncapped padded tier never passes ``output_size``.  A same-sum divergence
    cannot fault, and when it corrupts metadata silently that is reported as a note.
    """
    notes: list[str] = []
    clean = _clean(batch)
    for variant in variants_for(batch):
        actual = builder.build(batch, variant)
        want = expected_faults(batch, variant)
        got = [(f.kind, f.count) for f in actual.audit.faults]
        if got != [(f.kind, f.count) for f in want]:
            raise _fail("P6", variant, "device faults differ from the HIP model", field="audit.faults",
                        expected=[(f.kind, f.count) for f in want], actual=got)
        if got and not actual.decision.used_output_size:
            raise _fail("P6", variant, "a synced token map faulted", field="audit.faults", expected=[], actual=got)
        if not batch.is_dspark and variant.gate == "dspark" and got:
            raise _fail("P6", variant, "EAGLE faulted under the dspark gate", field="audit.faults", expected=[], actual=got)
        g = batch.graph
        if variant.path == "graph" and batch.is_ragged and g is not None and g.cap is None and actual.decision.used_output_size:
            raise _fail("P6", variant, "an uncapped padded tier passed output_size", field="decision.used_output_size",
                        expected=False, actual=True)
        if batch.divergence is not None and divergence_applies(batch, variant) and not got:
            expected_md = _REFERENCE.build(clean, variant)
            mismatch = first_difference(expected_md.fields, actual.fields)
            if mismatch is not None:
                notes.append(f"{variant.label}: no fault, but wrong metadata (silent on HIP): {mismatch}")
    return notes


# -- P7 and the sync contract -------------------------------------------------------------------


def check_sync_contract(builder, batch: VerifyBatch) -> list[str]:
    """The contract: exactly one D2H sync per tolist mirror, device total, synced token map; no others."""
    for variant in variants_for(batch):
        actual = builder.build(batch, variant)
        want = expected_host_syncs(batch, variant)
        got = actual.audit.host_syncs
        if len(got) != len(want) or Counter(_kind(s.op) for s in got) != Counter(_kind(s.op) for s in want):
            raise _fail("P7", variant, "host syncs break the sync contract", field="audit.host_syncs",
                        expected=[f"{s.op}@{s.stage}" for s in want], actual=[f"{s.op}@{s.stage}" for s in got])
    return []


def _kind(op: str) -> str:
    if "repeat_interleave" in op:
        return "token_map"
    if "tolist" in op:
        return "tolist"
    return op


def check_p7_capture_safety(builder, batch: VerifyBatch) -> list[str]:
    """P7: every variant that claims to be sync-free performs zero host syncs (and the contract holds)."""
    for variant in variants_for(batch):
        if expected_host_syncs(batch, variant):
            continue
        actual = builder.build(batch, variant)
        if actual.audit.host_syncs:
            raise _fail("P7", variant, "a path that claims to be sync-free synced", field="audit.host_syncs",
                        expected=[], actual=[f"{s.op}@{s.stage}" for s in actual.audit.host_syncs])
    return check_sync_contract(builder, batch)


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


PROPERTIES: tuple[PropertySpec, ...] = (
    PropertySpec("P1", "every variant = reference", check_p1_reference,
                 ({}, {"graph": True, "ragged": True}, {"ragged": False})),
    PropertySpec("P2", "mirrors agree, only tolist syncs", check_p2_mirror, ({"ragged": False},)),
    PropertySpec("P3", "output_size map = synced map", check_p3_sync_free, ({},)),
    PropertySpec("P4", "gate decision table", check_p4_gate, ({},)),
    PropertySpec("P5", "graph = eager, pads inert, replay", check_p5_graph_vs_eager,
                 ({"graph": True}, {"graph": True, "ragged": True})),
    PropertySpec("P6", "HIP fault model", check_p6_fault_model, ({"divergence": True},)),
    PropertySpec("P7", "sync contract, capture safety", check_p7_capture_safety, ({},)),
)


def run_all(builder, batch: VerifyBatch, props: Iterable[PropertySpec] = PROPERTIES) -> dict[str, Any]:
    """Run each property on one batch; map name -> ``None`` (held), notes list, or the failure."""
    results: dict[str, Any] = {}
    for spec in props:
        if spec.name == "P5" and batch.graph is None:
            results[spec.name] = ["no graph tier"]
            continue
        if spec.name == "P2" and batch.is_ragged:
            results[spec.name] = ["ragged batch"]
            continue
        try:
            results[spec.name] = spec.check(builder, batch)
        except PropertyFailure as failure:
            results[spec.name] = failure
        except Exception as exc:  # noqa: BLE001 - a crashing builder fails the property; report, don't crash
            results[spec.name] = PropertyFailure(spec.name, f"builder raised {type(exc).__name__}: {exc}")
    return results
