"""P1 (every variant = the reference), P3 (output_size map = synced map), P4 (the gate table)."""

from __future__ import annotations

import dataclasses

from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.inputs import forward_num_tokens
from metadata_builders.families.dsv4.metadata import FIELDS, VerifyMetadata, first_difference
from metadata_builders.families.dsv4.properties._common import (
    _DECISION_NAMES,
    Partial,
    _clean,
    _compare,
    _decided,
    _describe,
    _fail,
    _label,
    _name,
    _padding,
    _reference,
    _variants,
    compared_names,
    judging,
)
from metadata_builders.families.dsv4.properties.syncs import contract_role
from metadata_builders.families.dsv4.reference import ReferenceBuilder, verify_extension
from metadata_builders.families.dsv4.variants import Variant, apply_gate


@judging
def check_p1_reference(builder, batch: VerifyBatch) -> list[str]:
    """P1: on every variant, every field and the decision equal the pure-Python reference.

    On a batch without divergence no variant may fault either (an out-of-bounds
    read or write is wrong whatever the fields say).
    """
    batch = _clean(batch)
    notes: list[str] = []
    for variant in _variants(builder, batch, notes):
        expected = _reference(builder).build(batch, variant)
        actual = p1_equivalent(batch, variant, expected, builder.build(batch, variant))
        if actual.not_observable and not any(isinstance(n, Partial) and n.about == "observability" for n in notes):
            notes.append(Partial(f"fields not observable in builder {_name(builder)!r}: "
                                 f"{', '.join(actual.not_observable)}", "observability"))
        _check_active_width(batch, variant, expected, actual)  # the specific diagnosis first: it names both counts
        _check_forward_tokens(batch, variant, actual)
        _compare("P1", variant, expected, actual, "builder vs reference", check="p1.vs_reference")
        _check_dtypes("P1", variant, actual)
        want, got = _decided(expected), _decided(actual)
        for name in _DECISION_NAMES:
            e, a = want[name], got[name]
            if e != a:
                raise _fail("P1", variant, "decision differs from the reference", field=f"decision.{name}", expected=e,
                            actual=a, check="p1.decision")
        if actual.audit.faults:
            _fail_on_faults("P1", variant, batch, actual)
    return notes


def _check_forward_tokens(batch: VerifyBatch, variant: Variant, actual: VerifyMetadata) -> None:
    """Target verify: the metadata has one token per token the forward consumes, ``len(out_cache_loc)`` as the call
    hands it (:func:`~metadata_builders.families.dsv4.inputs.forward_num_tokens`; eager after the worker's DP
    padding), and
    an eager build decides that count.  Upstream #26244: the eager verify metadata was planned before
    ``prepare_mlp_sync_batch`` padded the batch, so its token rows were the real requests' while the forward consumed
    the padded ``out_cache_loc``, and the DSV4 indexer crashed.  Worked example: 3 requests of 3 tokens and 2 DP pad
    rows: the forward consumes 15 tokens; a plan of the real requests has 9 ``positions_casual``."""
    if batch.mode != "target_verify":
        return
    want = forward_num_tokens(batch, variant)
    padded = ", after the worker's DP padding" if batch.dp_pad_rows else ""
    for name in ("positions_casual", "raw_out_loc"):
        got = actual.fields.get(name)
        if got is not None and len(got) != want:
            raise _fail("P1", variant, f"the metadata has {len(got)} tokens but the forward consumes {want} "
                        f"(len(out_cache_loc) handed to the build{padded})",
                        field=f"len({name})", expected=want, actual=len(got), check="p1.forward_tokens")
    if variant.path == "eager" and actual.decision.num_tokens != want:
        raise _fail("P1", variant, f"the eager build decides {actual.decision.num_tokens} tokens but the forward "
                    f"consumes {want} (len(out_cache_loc))", field="decision.num_tokens", expected=want,
                    actual=actual.decision.num_tokens, check="p1.forward_tokens")


def _check_active_width(batch: VerifyBatch, variant: Variant, expected: VerifyMetadata, actual: VerifyMetadata
                        ) -> None:
    """A DSpark draft worker's block verify: every real request verifies the active width (``num_draft_tokens``, or
    its ragged length), never the configured count (upstream #31026).  Worked example: gamma 3, configured 4,
    ``seq_lens=[5, 3]``: each request's ``extend_seq_lens`` is 3 (positions 5..7 and 3..5); a build that reads the
    configured count gives 4, and this check names both counts before P1's field-by-field comparison."""
    got = actual.fields.get("extend_seq_lens")
    if not batch.is_dspark_draft or got is None:
        return
    for b, (want, have) in enumerate(zip(expected.fields["extend_seq_lens"][:batch.bs], got[:batch.bs])):
        if have != want:
            raise _fail("P1", variant, f"request {b} verifies {have} tokens on a DSpark draft worker whose active "
                        f"width is {batch.num_draft_tokens} (configured speculative_num_draft_tokens="
                        f"{batch.speculative_num_draft_tokens})", field="extend_seq_lens", index=(b,),
                        expected=want, actual=have, check="p1.active_width")


def p1_differences(builder, batch: VerifyBatch) -> set[str]:
    """Every (variant, field) where the builder differs from the reference: P1's whole verdict, not its first.

    ``check_p1_reference`` stops at the first difference; the gate compares these
    sets, so a difference the base already had (a known finding on every batch)
    cannot hide a new one.  Entries read ``"<variant label>|<field>"``.
    """
    batch = _clean(batch)
    found: set[str] = set()
    for variant in _variants(builder, batch, []):
        expected = _reference(builder).build(batch, variant)
        actual = p1_equivalent(batch, variant, expected, builder.build(batch, variant))
        for name in compared_names(expected.fields):
            if name in actual.fields and first_difference(expected.fields, actual.fields, (name,)) is not None:
                found.add(f"{_label(variant)}|{name}")
        want, got = _decided(expected), _decided(actual)
        for name in _DECISION_NAMES:
            if want[name] != got[name]:
                found.add(f"{_label(variant)}|decision.{name}")
        found.update(f"{_label(variant)}|{name}.dtype" for name, _, _ in _wrong_dtypes(actual))
        if actual.audit.faults:
            found.add(f"{_label(variant)}|audit.faults")
    return found


_BELOW = {"pad_length": 1, "pad_position": 0}
"""``p1_class`` -> the least value a real token holds: below it the token reads nothing, and every such value is one
class (a pad token's ``<= 0`` length: upstream's negative values and a floor at 0 alike)."""


def p1_equivalent(batch: VerifyBatch, variant: Variant, expected: VerifyMetadata, actual: VerifyMetadata
                  ) -> VerifyMetadata:
    """``actual`` with what P1's contract leaves open taken from ``expected`` (metadata.FIELDS ``p1_class``; decision
    2026-12-04, docs/DESIGN.md section 3):

    * ``pad_length`` / ``pad_position``: where the reference holds a length ``<= 0`` (a position ``< 0``) -- a pad
      token, which reads nothing -- any value ``<= 0`` (``< 0``) is the same class;
    * ``read_columns``: on an **eager** decode build (modes ``decode``, ``draft_decode``) a token reads the first
      ``position // page_size + 1`` columns of its page-table row; the columns past them are no part of the contract
      (a graph's captured width is, through P5). A row that misses a read still differs.

    Worked example: a draft-extend pad row of 3 tokens has ``swa_topk_lengths = [-1, 0, 1]`` upstream; a builder
    flooring them at 0 reports ``[0, 0, 1]``, which P1 takes as the reference's.  A decode token at position 9, page 4,
    reads columns 0..2: a row ``[p0, p1, p2]`` equals the reference's full-width ``[p0, p1, p2, p3, ...]``.
    """
    fields = dict(actual.fields)
    eager_decode = variant.path == "eager" and batch.mode in ("decode", "draft_decode")
    for name, want in expected.fields.items():
        got, rule = fields.get(name), FIELDS[name].p1_class if name in FIELDS else "exact"
        if rule == "exact" or got is None or len(got) != len(want) or got == want:
            continue
        if rule in _BELOW:
            low = _BELOW[rule]
            fields[name] = [e if e < low and a < low else a for e, a in zip(want, got)]
        elif eager_decode and rule == "read_columns":
            reads = [p // batch.geometry.page_size + 1 for p in expected.fields["positions_casual"]]
            fields[name] = [e if len(a) >= n and a[:n] == e[:n] else a for e, a, n in zip(want, got, reads)]
    return actual if fields == actual.fields else dataclasses.replace(actual, fields=fields)


def _wrong_dtypes(md: VerifyMetadata) -> list[tuple[str, str, str]]:
    """(field, the dtype upstream's consumers take, the builder's) for each tensor field of another dtype."""
    return [(name, FIELDS[name].dtype, dtype) for name, dtype in md.dtypes.items()
            if name in FIELDS and dtype != FIELDS[name].dtype]


def _check_dtypes(prop: str, variant: Variant, md: VerifyMetadata) -> None:
    wrong = _wrong_dtypes(md)
    if wrong:
        name, want, got = wrong[0]
        raise _fail(prop, variant, "a tensor field has another dtype than its consumers take (metadata.FIELDS)",
                    field=f"{name}.dtype", expected=want, actual=got, check=f"{prop.lower()}.dtype")


def _fail_on_faults(prop: str, variant: Variant, batch: VerifyBatch, md: VerifyMetadata) -> None:
    f = md.audit.faults[0]
    what = {"oob_read": "read past the end of a device table", "oob_write": "wrote past the token map",
            "uninitialized_tail": "left the token map's tail unwritten",
            "stale_async_copy": "rewrote the pinned source of an asynchronous copy before a sync (the device got "
                                "the later bytes)"}[f.kind]
    raise _fail(prop, variant, f"the build {what} ({f.op} in {f.stage}) on a batch without divergence",
                field="audit.faults", expected=[], actual=[(x.kind, x.count) for x in md.audit.faults],
                check="p1.oob_read" if f.kind == "oob_read" else "p1.fault_on_clean", where=f.stage)


@judging
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
        _compare("P3", variant, synced, actual, "output_size map vs synced map", check="p3.vs_synced")
        map_syncs = [s for s in actual.audit.host_syncs if contract_role(s) == "token_map"]
        if map_syncs:
            raise _fail("P3", variant, "the token map passed output_size but still synced",
                        field="audit.host_syncs", expected=[], actual=_describe(map_syncs), check="p3.map_synced")
    return notes


@judging
def check_p4_gate(builder, batch: VerifyBatch) -> list[str]:
    """P4: ``used_output_size`` (as the audit saw the token map) follows the gate table; outputs equal across gates."""
    batch = _clean(batch)
    notes: list[str] = []
    by_recipe: dict[tuple, tuple[Variant, VerifyMetadata]] = {}
    for variant in _variants(builder, batch, notes):
        rows = verify_extension(batch, variant, _padding(builder))
        want = apply_gate(variant.gate, rows.exact, batch.is_dspark)
        actual = builder.build(batch, variant)
        maps = actual.audit.token_maps
        if not maps and not isinstance(builder, ReferenceBuilder):
            notes.append(Partial(f"{_label(variant)}: the audit saw no token map (repeat_interleave over device "
                                 "lengths); used_output_size is the builder's own word", "token_map"))
        if actual.decision.used_output_size != want:
            raise _fail(
                "P4", variant,
                f"gate={variant.gate}, layout exact={rows.exact}, is_dspark={batch.is_dspark}: "
                "wrong output_size decision",
                field="decision.used_output_size", expected=want, actual=actual.decision.used_output_size,
                check="p4.used_output_size",
            )
        if actual.decision.exact_num_tokens != want:
            raise _fail(
                "P4", variant, "exact_num_tokens must be the gated decision",
                field="decision.exact_num_tokens", expected=want, actual=actual.decision.exact_num_tokens,
                check="p4.exact_num_tokens",
            )
        sizes = [m.output_size for m in maps if m.output_size is not None]
        if sizes and sizes[0] != actual.decision.num_tokens:
            raise _fail("P4", variant, "the token map was given another output_size than the decision's num_tokens",
                        field="token_map.output_size", expected=actual.decision.num_tokens, actual=sizes[0],
                        check="p4.output_size_value")
        recipe = (variant.path, variant.mirror, variant.layout_total)
        if recipe in by_recipe:
            first_v, first = by_recipe[recipe]
            _compare("P4", variant, first, actual, f"gate={variant.gate} vs gate={first_v.gate}",
                     check="p4.gate_vs_gate")
        else:
            by_recipe[recipe] = (variant, actual)
    return notes[:1]
