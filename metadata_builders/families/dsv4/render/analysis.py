"""One batch analysed for a picture: the drawn build's rows and cells, every disagreement, every fault.

:func:`analyse` builds the batch on every variant with the builder and the
reference, lays out the drawn build (below), compares the builds
(:mod:`~metadata_builders.families.dsv4.render.differences`: every differing element, not only
the first) and reads the device model's faults; it returns an
:class:`~metadata_builders.families.dsv4.render.model.Analysis`, the pure data both renderers
draw (:mod:`~metadata_builders.families.dsv4.render.model`, re-exported here).

Worked example -- the ragged EAGLE batch of :mod:`metadata_builders.families.dsv4.reference`
on its graph tier (padded_bs 5, graph_num_tokens 10, uncapped)::

    row 0  slot 2  [prefix 5] [5][6][7]          verify tokens, cell number = position
    row 1  slot 1  [prefix 3] [3]
    row 2  slot 3  [prefix 7] [7][8]
    ------------------------------------------   eager map end (6 real tokens)
    row 3  slot 0  [prefix 1] [1][2]             pad row: tier slack spread over pad rows
    row 4  slot 0  [prefix 1] [1][2]
    ==========================================   tier boundary graph_num_tokens = 10

With ``padded_bs = 3`` the last real row absorbs the slack instead (its cells past
its own 2 verify tokens are "slack"); with a cap the pad rows are clamped and the
tokens past ``num_tokens`` form an "uncovered" row, whose cells carry
``seq_lens_casual = 1`` and the last row's slot.

Token ``t`` of an eager build is token ``t`` of the graph build (real rows come
first, and only the *end* of the last real row grows), so the eager variants'
disagreements land on the same cells.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence

from metadata_builders.families.dsv4.builders import AuditedBuilder, get_builder
from metadata_builders.families.dsv4.metadata import first_difference
from metadata_builders.families.dsv4.reference import ReferenceBuilder
from metadata_builders.families.dsv4.render.differences import (
    FIELD_ORDER,
    Collector,
    compare_builds,
    every_difference,
)
from metadata_builders.families.dsv4.render.model import (
    MAX_LISTED,
    MAX_ROWS,
    MAX_TOKENS_PER_ROW,
    Analysis,
    Cell,
    CellKind,
    Disagreement,
    DrawnRow,
    FaultMark,
    Row,
    RowKind,
    element_name,
)
from metadata_builders.families.dsv4.tier import DEFAULT_PADDING, Padding
from metadata_builders.families.dsv4.variants import variants_for

if TYPE_CHECKING:
    from metadata_builders.errors import PropertyFailure
    from metadata_builders.families.dsv4.batch import VerifyBatch
    from metadata_builders.families.dsv4.builders import Builder
    from metadata_builders.families.dsv4.metadata import VerifyMetadata
    from metadata_builders.families.dsv4.variants import Path, Variant

__all__ = [
    "MAX_LISTED",
    "MAX_ROWS",
    "MAX_TOKENS_PER_ROW",
    "Analysis",
    "Cell",
    "CellKind",
    "Disagreement",
    "DrawnRow",
    "FaultMark",
    "Row",
    "RowKind",
    "analyse",
    "every_difference",
    "failure_lines",
    "short_label",
]

_MAX_RECORDS = 5000
"""Distinct disagreements kept in an :class:`Analysis` (``num_disagreements`` counts all)."""


# -- the layout of the drawn build -------------------------------------------------------------------


def short_label(batch: VerifyBatch, variant: Variant) -> str:
    """The knobs that vary for this batch: ``eager mirror=host gate=ungated``."""
    parts = [variant.path]
    if not batch.is_ragged:
        parts.append(f"mirror={variant.mirror}")
    elif variant.path == "eager":
        parts.append(f"layout_total={variant.layout_total}")
    parts.append(f"gate={variant.gate}")
    return " ".join(parts)


def _layout(batch: VerifyBatch, md: VerifyMetadata) -> tuple[list[Row], list[Cell]]:
    """Rows and cells of the reference build ``md``, as the worked example of this module draws them."""
    f = md.fields
    # A decode mode has one token per row and no extend lengths; draft extend passes no start locations.
    extend = f.get("extend_seq_lens") or [1] * len(f["seq_lens"])
    starts = f.get("extend_start_loc") or [sum(extend[:r]) for r in range(len(extend))]
    positions, slots = f["positions_casual"], f["req_pool_indices_repeated"]
    num_tokens, padded = md.decision.num_tokens, len(positions)
    real_lens = batch.extend_lens
    rows: list[Row] = []
    cells: list[Cell] = []
    for r, (e, start) in enumerate(zip(extend, starts)):
        real = r < batch.bs
        rows.append(Row(r, "real" if real else "pad", batch.req_pool_indices[r] if real else 0,
                        batch.seq_lens[r] if real else 1, start, e))
        for j in range(e):
            t = start + j
            kind: CellKind = ("verify" if j < real_lens[r] else "slack") if real else "pad"
            cells.append(Cell(t, r, j, kind, positions[t], slots[t]))
    if padded > num_tokens:
        r = len(extend)
        rows.append(Row(r, "uncovered", slots[num_tokens], None, num_tokens, padded - num_tokens))
        cells += [Cell(t, r, j, "uncovered", positions[t], slots[t]) for j, t in enumerate(range(num_tokens, padded))]
    return rows, cells



def _build(builder: Any, batch: VerifyBatch, variant: Variant, label: str, notes: list[str]) -> VerifyMetadata | None:
    try:
        return builder.build(batch, variant)
    except Exception as exc:  # noqa: BLE001 - a failing build is shown in the picture, not raised
        notes.append(f"{label}: build raised {type(exc).__name__}: {exc}")
        return None



def analyse(
    batch: VerifyBatch, builder_name: str = "hip", device: str = "cpu", *, builder: Builder | None = None,
    failure: PropertyFailure | None = None, history: Sequence[VerifyBatch] = (),
) -> Analysis:
    """Build ``batch`` on every variant with the builder and the reference, and say where they differ.

    Metadata is compared on the batch *without* its divergence (P1: every variant
    equals the reference; variants of one path also against each other, which is
    what catches an inconsistent reference).  The device-model faults are read from
    builds of the batch *with* its divergence and checked against the fault model.
    ``builder`` overrides ``builder_name`` (a builder object, e.g. a test's).

    ``failure``: the property failure the picture is drawn for (``check``, ``replay``).  Its header names the
    property and check id and the picture shows that failure first, whatever its own builds show: a sync or a
    replay the picture's builds do not make, a hidden state they do not carry.  ``history``: the batches the
    failure needs built first on the same builder (a hidden-state failure, ``meta.history``); they are built
    before the picture's builds, so those meet the same state.
    """
    if builder is None:
        builder = get_builder(builder_name, device)
    if history:
        from metadata_builders.families.dsv4.properties.state import play_history

        play_history(builder, list(history))
    name, on = builder.name, str(builder.device if isinstance(builder, AuditedBuilder) else device)
    padding = _padding_of(builder)
    reference = ReferenceBuilder(padding)
    clean = batch.without_divergence()
    variants = variants_for(clean)
    labels = {v: short_label(batch, v) for v in variants}
    path: Path = "graph" if batch.graph is not None else "eager"
    expected = {v: reference.build(clean, v) for v in variants}
    drawn = expected[next(v for v in variants if v.path == path)]
    rows, cells = _layout(clean, drawn)
    notes: list[str] = []
    if on.startswith("meta"):
        notes.append("device meta: fields hold shapes, not values; metadata not compared")
    collector = Collector()
    built = {v: _build(builder, clean, v, labels[v], notes) for v in variants}
    if not on.startswith("meta"):
        compare_builds(collector, labels, expected, built)
    syncs = _sync_breaks(clean, labels, built, padding)
    notes += syncs
    kernel = builder.swa_store_rows if isinstance(builder, AuditedBuilder) and builder.capabilities.store_kernels \
        else None
    stores = [] if on.startswith("meta") else _store_breaks(clean, labels, built, padding, kernel)
    notes += stores
    faults = _faults(builder, reference, batch, labels, notes) if _diverges(batch) else []
    if batch.divergence is not None and getattr(batch.divergence, "seq_lens_cpu", None) is not None:
        notes += _stale_mirror_notes(builder, batch, labels, expected)
    records = collector.records()
    verdict = _verdict(name, on, len(variants), records, faults, notes, len(syncs), len(stores))
    lines = failure_lines(failure, history, batch.mode) if failure is not None else ()
    if lines:
        verdict = f"{lines[0]} -- the picture's own builds: {verdict.partition(', ')[2] or verdict}"
    return Analysis(
        summary=batch.describe(),
        verdict=verdict,
        failure=lines,
        path=path,
        rows=tuple(rows),
        cells=tuple(cells),
        num_real_tokens=batch.num_real_tokens,
        num_tokens=drawn.decision.num_tokens,
        graph_num_tokens=None if batch.graph is None else batch.graph.graph_num_tokens,
        variants=tuple(labels.values()),
        disagreements=tuple(records[:_MAX_RECORDS]),
        num_disagreements=len(records),
        flagged_tokens=frozenset(collector.flagged_tokens),
        flagged_rows=frozenset(collector.flagged_rows),
        faults=tuple(faults),
        notes=tuple(notes),
        by_token=_by_token(records),
    )


def failure_lines(failure: PropertyFailure, history: Sequence[VerifyBatch] = (), mode: str = "target_verify"
                  ) -> tuple[str, ...]:
    """What a picture says first about the failure it was drawn for: ``P7 FAILED (p7.contract, mode decode)
    [variant]``, then the message, the field with its index and values, where, and the history it needs."""
    ids = ", ".join(x for x in (failure.check, f"mode {mode}") if x)
    head = f"{failure.prop} FAILED ({ids})" + (f" [{failure.variant}]" if failure.variant else "")
    lines = [head, failure.message]
    if failure.field is not None:
        where = "" if failure.index is None else f", index {failure.index}"
        lines.append(f"field {failure.field}{where}: expected {failure.expected!r}, actual {failure.actual!r}")
    if failure.where:
        lines.append(f"at stage {failure.where}")
    if history:
        lines.append(f"after {len(history)} earlier batch(es) on the same builder (hidden state): "
                     + "; ".join(b.describe() for b in history[:3]) + (" ..." if len(history) > 3 else ""))
    return tuple(lines)


def _by_token(records: list[Disagreement]) -> dict[int, tuple[Disagreement, ...]]:
    out: dict[int, list[Disagreement]] = {}
    for d in records:
        if d.token is not None:
            out.setdefault(d.token, []).append(d)
    return {t: tuple(ds) for t, ds in out.items()}


# -- faults and the stale mirror ---------------------------------------------------------------------


def _diverges(batch: VerifyBatch) -> bool:
    return batch.divergence is not None and batch.divergence.extend_seq_lens is not None


def _modelled_faults(reference: Any, batch: VerifyBatch, variant: Variant) -> list[tuple[str, int]]:
    """``(kind, count)`` of the fault model for one variant.

    The model also counts a literal gather's out-of-bounds reads (``oob_read``,
    F2c), which no correct builder performs: left out, as
    ``tests/dsv4/test_reference.py::test_hip_equals_reference_on_every_variant`` does.
    """
    return [(f.kind, f.count) for f in reference.build(batch, variant).audit.faults if f.kind != "oob_read"]


def _faults(
    builder: Any, reference: Any, batch: VerifyBatch, labels: dict[Variant, str], notes: list[str],
) -> list[FaultMark]:
    """Faults of the builds *with* the divergence, grouped; notes where they leave the fault model."""
    groups: dict[tuple, list[str]] = {}
    for v, label in labels.items():
        md = _build(builder, batch, v, label + " (with divergence)", notes)
        if md is None:
            continue
        got = md.audit.faults
        for f in got:
            groups.setdefault((f.kind, f.count, f.output_size, f.device_sum), []).append(label)
        want = _modelled_faults(reference, batch, v)
        if [(f.kind, f.count) for f in got] != want:
            saw = ", ".join(f"{f.kind} x{f.count}" for f in got) or "no fault"
            exp = ", ".join(f"{k} x{c}" for k, c in want) or "no fault"
            notes.append(f"{label}: builder saw {saw}; the fault model expects {exp}")
    return [FaultMark(k, c, tuple(vs), o, s) for (k, c, o, s), vs in groups.items()]


def _stale_mirror_notes(
    builder: Any, batch: VerifyBatch, labels: dict[Variant, str], expected: dict[Variant, VerifyMetadata],
) -> list[str]:
    """What the stale host mirror alone does to each build: the first corrupted element, or the error raised."""
    assert batch.divergence is not None
    stale = batch.replace(divergence=dataclasses.replace(batch.divergence, extend_seq_lens=None))
    groups: dict[str, list[str]] = {}
    for v, label in labels.items():
        try:
            md = builder.build(stale, v)
        except Exception as exc:  # noqa: BLE001 - mirror validation raising is the wanted outcome, shown as a note
            groups.setdefault(f"raised {type(exc).__name__}: {exc}", []).append(label)
            continue
        first = first_difference(expected[v].fields, md.fields)
        if first is not None:
            where = element_name(first.field, first.index)
            groups.setdefault(f"silently corrupts {where}: expected {first.expected!r}, actual {first.actual!r}",
                              []).append(label)
    out = []
    for what, who in groups.items():
        more = f" +{len(who) - 1} more" if len(who) > 1 else ""
        out.append(f"stale host mirror {what} ({who[0]}{more})")
    return out


def _padding_of(builder: Any) -> Padding:
    """The tier padding convention ``builder`` declares (an audited builder, the reference); a picture may also
    be drawn of any object with ``build(batch, variant)``, judged by the default convention."""
    if isinstance(builder, (AuditedBuilder, ReferenceBuilder)):
        return builder.capabilities.padding
    return DEFAULT_PADDING


def _sync_breaks(batch: VerifyBatch, labels: dict[Variant, str], built: dict[Variant, Any],
                 padding: Padding = DEFAULT_PADDING) -> list[str]:
    """One note per variant whose host syncs break the contract (P7): what it read, where, and what it lacks."""
    from collections import Counter

    from metadata_builders.families.dsv4.properties.syncs import contract_key
    from metadata_builders.families.dsv4.reference import expected_host_syncs

    groups: dict[str, list[str]] = {}
    for v, md in built.items():
        if md is None:
            continue
        want = Counter((s.stage, s.kind) for s in expected_host_syncs(batch, v, padding=padding))
        got = md.audit.host_syncs
        seen = Counter(contract_key(s) for s in got)
        if want == seen:
            continue
        outside = [f"{s.op} in {s.stage} ({s.kind} read of {'+'.join(s.reads) or 'no input'})" for s in got
                   if (seen - want)[contract_key(s)] > 0]
        missing = [f"{stage} ({kind})" for (stage, kind), n in (want - seen).items() for _ in range(n)]
        parts = (["host sync outside the contract: " + "; ".join(outside)] if outside else []) + (
            ["contracted read missing: " + "; ".join(missing)] if missing else [])
        groups.setdefault(" / ".join(parts), []).append(labels[v])
    return _grouped("SYNC", groups)


def _store_breaks(batch: VerifyBatch, labels: dict[Variant, str], built: dict[Variant, Any],
                  padding: Padding, kernel: Any = None) -> list[str]:
    """One note per kind of KV store or read a build's metadata gets wrong (P10): the store, the row, its holder;
    ``kernel``: the builder's own store kernel, judged as P10 judges it (a consumer bug with every field equal)."""
    from metadata_builders.errors import PropertyFailure
    from metadata_builders.families.dsv4.properties.kv import judge_build, p10_applies

    if p10_applies(batch) is not None:
        return []
    groups: dict[str, list[str]] = {}
    for v, md in built.items():
        if md is None:
            continue
        try:
            judge_build(v, batch, md.fields, padding, kernel)
        except PropertyFailure as failure:
            groups.setdefault(f"{failure.check}: {failure.message}{_ring_drawing(batch, failure)}", []).append(
                labels[v])
    return _grouped("KV", groups)


def _ring_drawing(batch: VerifyBatch, failure: Any) -> str:
    """``; <the ring near the row>`` for a failure on an SWA ring row (``swa_loc``, the fp8 store), else ``""``."""
    from metadata_builders.families.dsv4.kv_state import Ring

    row = failure.actual
    if failure.field not in ("swa_loc", "verify_store_state_slot") or not isinstance(row, int):
        return ""
    ring = Ring(batch)
    if not 0 <= row < ring.rows:
        return ""
    return f"; {ring.drawing(row, f'token {failure.index}')}"


def _grouped(kind: str, groups: dict[str, list[str]]) -> list[str]:
    """One note per broken thing, with the variants it broke in: ``KV <what> (in 3 variant(s): graph ... +2 more)``."""
    return [f"{kind} {what} (in {len(who)} variant(s): {who[0]}" + (f" +{len(who) - 1} more)" if len(who) > 1 else ")")
            for what, who in groups.items()]


def _verdict(
    name: str, device: str, n: int, records: list[Disagreement], faults: list[FaultMark], notes: list[str],
    sync_breaks: int = 0, store_breaks: int = 0,
) -> str:
    fields = sorted({d.field for d in records}, key=lambda f: FIELD_ORDER.get(f, 99))
    if records:
        what = f"{len(records)} disagreement(s) in {', '.join(fields[:4])}{' ...' if len(fields) > 4 else ''}"
    elif sync_breaks:
        what = f"the sync contract broken ({sync_breaks} kind(s) of read; fields agree with the reference)"
    elif store_breaks:
        what = (f"KV stores or reads broken ({store_breaks} kind(s), P10; fields agree with the reference of "
                "their convention)")
    else:
        what = "metadata agrees with the reference"
    by_kind: dict[str, int] = {}
    for f in faults:
        by_kind[f.kind] = by_kind.get(f.kind, 0) + len(f.variants)
    fault = "" if not faults else "; faults: " + ", ".join(f"{k} in {n} variant(s)" for k, n in by_kind.items())
    errs = sum(": build raised" in n_ for n_ in notes)
    err = f"; {errs} build(s) raised" if errs else ""
    others = len(notes) - errs - sync_breaks - store_breaks
    note = f"; {others} note(s)" if others else ""
    return f"builder {name} on {device}, {n} variants: {what}{fault}{err}{note}"
