"""Pictures of one batch: its requests as rows of token cells, its disagreements, its faults.

Engineers debugging a failure would rather look than read 500-element lists.
:func:`analyse` turns a batch into an :class:`Analysis` (pure data: rows, token
cells and their kinds, every place a builder disagrees with the reference, every
fault the device model saw); :func:`render_png` (matplotlib, Agg canvas) and
:func:`render_html` (one self-contained page, inline CSS/JS, hover tooltips) draw
the same analysis.  :func:`render_files` writes both next to a replay file.

Worked example -- the ragged EAGLE batch of :mod:`metadata_builders.reference`
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
disagreements land on the same cells.  matplotlib is imported only when a PNG is
drawn, so the package works without it.
"""

from __future__ import annotations

import dataclasses
import html
import os
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from metadata_builders.builders import get_builder
from metadata_builders.metadata import FIELD_NAMES
from metadata_builders.reference import ReferenceBuilder
from metadata_builders.variants import variants_for

if TYPE_CHECKING:
    from metadata_builders.batch import VerifyBatch
    from metadata_builders.builders import Builder
    from metadata_builders.metadata import FaultKind, VerifyMetadata
    from metadata_builders.variants import Path, Variant

__all__ = [
    "MAX_LISTED",
    "MAX_ROWS",
    "MAX_TOKENS_PER_ROW",
    "Analysis",
    "Cell",
    "Disagreement",
    "DrawnRow",
    "FaultMark",
    "Row",
    "analyse",
    "html_page",
    "render_files",
    "render_html",
    "render_png",
    "short_label",
    "write_doc_picture",
]

CellKind = Literal["verify", "slack", "pad", "uncovered"]
RowKind = Literal["real", "pad", "uncovered"]

MAX_ROWS = 32
"""Rows drawn at most; rows with a disagreement and the boundary rows are always kept."""
MAX_TOKENS_PER_ROW = 64
"""Token cells drawn per row at most; the middle of a longer row becomes one ellipsis cell."""
MAX_LISTED = 12
"""Disagreements listed in the PNG side panel (the HTML lists more, the cells show all)."""
_MAX_RECORDS = 5000
"""Distinct disagreements kept in an :class:`Analysis` (``num_disagreements`` counts all)."""
_PER_ROW_FIELDS = frozenset({"seq_lens", "extend_seq_lens", "extend_start_loc"})
_DECISION_FIELDS = ("num_tokens", "exact_num_tokens", "used_output_size", "max_seq_len")
_FIELD_ORDER = {name: i for i, name in enumerate(FIELD_NAMES + tuple(f"decision.{d}" for d in _DECISION_FIELDS))}

_COLOURS = {
    "prefix": "#d9d9d9",
    "verify": "#4c78a8",
    "slack": "#f58518",
    "pad": "#54a24b",
    "uncovered": "#b279a2",
    "bad": "#d62728",
    "oob": "#ffffff",
}
_KIND_LABELS = {
    "verify": "verify token",
    "slack": "tier slack absorbed by the last real row",
    "pad": "pad row token (tier slack, slot 0)",
    "uncovered": "uncovered tail of a capped tier (past num_tokens)",
}


# -- the analysis (pure data) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the drawn build: a real request, a pad row, or a capped tier's uncovered tail."""

    index: int
    """Row number in the drawn build (the uncovered tail is numbered after the last row)."""
    kind: RowKind
    """``real``, ``pad`` (slot 0, seq_len 1) or ``uncovered`` (tokens past ``num_tokens``)."""
    slot: int
    """Request slot; pad rows use slot 0, the uncovered tail the last row's slot."""
    prefix: int | None
    """Accepted-prefix length before verification (1 for a pad row, None for the tail)."""
    first_token: int
    """Index of the row's first token in the token map."""
    num_tokens: int
    """Tokens of the row (verify tokens plus any slack)."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One token of the drawn build."""

    token: int
    """Index in the token map (``0..padded_num_tokens-1``)."""
    row: int
    """The :class:`Row` it belongs to."""
    column: int
    """Its index within the row (the j-th verify token)."""
    kind: CellKind
    """``verify``, ``slack`` (last real row), ``pad`` (pad row) or ``uncovered`` (capped tail)."""
    position: int
    """``positions_casual`` of the token (reference)."""
    slot: int
    """``req_pool_indices_repeated`` of the token (reference)."""


@dataclass(frozen=True, slots=True)
class Disagreement:
    """One metadata element where a build differs from what it is compared against."""

    field: str
    """Metadata field (``FIELD_NAMES``) or ``decision.<name>``."""
    index: tuple[int, ...] | None
    """Element index (``(token, column)`` for 2-D fields); None when the lengths differ."""
    expected: Any
    actual: Any
    variants: tuple[str, ...]
    """Short labels of the variants that built ``actual``."""
    against: str = "reference"
    """``reference``, or the label of the variant of the same path it was compared with."""
    token: int | None = None
    """The token cell it belongs to (per-token fields)."""
    row: int | None = None
    """The row it belongs to (per-row fields)."""

    @property
    def where(self) -> str:
        return self.field if self.index is None else f"{self.field}[{', '.join(map(str, self.index))}]"

    def describe(self, max_variants: int = 1) -> str:
        """``pf_final_pos[0]: expected 7, actual 8 (eager mirror=host gate=dspark +8 more)``."""
        shown = ", ".join(self.variants[:max_variants])
        more = len(self.variants) - max_variants
        who = shown + (f" +{more} more" if more > 0 else "")
        vs = "" if self.against == "reference" else f" vs {self.against}"
        return f"{self.where}: expected {self.expected!r}, actual {self.actual!r} ({who}{vs})"

    def __str__(self) -> str:
        return self.describe()


@dataclass(frozen=True, slots=True)
class FaultMark:
    """Device-model faults of one kind and size, with the variants that hit them."""

    kind: FaultKind
    """``oob_write`` or ``uninitialized_tail``."""
    count: int
    """Elements written out of bounds / left uninitialised."""
    variants: tuple[str, ...]
    """Short labels of the faulting variants."""
    output_size: int | None
    """The ``output_size`` (token map length) the kernel trusted."""
    device_sum: int | None
    """What the device-resident repeats summed to."""

    @property
    def tokens(self) -> tuple[int, ...]:
        """Uninitialised tail: the last ``count`` token indices of the map; OOB: none (past the end)."""
        if self.kind != "uninitialized_tail" or self.output_size is None:
            return ()
        return tuple(range(max(self.output_size - self.count, 0), self.output_size))

    def __str__(self) -> str:
        what = "out-of-bounds write" if self.kind == "oob_write" else "uninitialised tail"
        size = "" if self.output_size is None else f" (output_size={self.output_size}, device sum={self.device_sum})"
        return f"{what} x{self.count}{size}: {'; '.join(self.variants)}"


@dataclass(frozen=True, slots=True)
class DrawnRow:
    """One line of the picture: a row with its drawn cells, or a marker for hidden rows."""

    row: Row | None
    """The row, or None for an ellipsis line standing for ``hidden_rows`` rows."""
    cells: tuple[Cell | None, ...] = ()
    """Drawn cells in order; None is one ellipsis cell for ``hidden_cells`` hidden tokens."""
    hidden_cells: int = 0
    hidden_rows: int = 0
    hidden_flagged: bool = False
    """A hidden cell (or row) has a disagreement."""


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything a picture of one batch shows; both renderers draw this."""

    summary: str
    """One line: uniform/ragged, EAGLE/DSpark, bs, tier, divergence."""
    verdict: str
    """One line: builder, device, how many variants, disagreements and faults."""
    path: Path
    """The path drawn: ``graph`` when the batch has a tier, else ``eager``."""
    rows: tuple[Row, ...]
    cells: tuple[Cell, ...]
    """(padded_num_tokens,): one per token of the drawn build, in token order."""
    num_real_tokens: int
    """Tokens of the real requests (the eager map's length)."""
    num_tokens: int
    """Tokens covered by rows on the drawn path (the host's belief)."""
    graph_num_tokens: int | None
    """The tier boundary; None for an eager-only batch."""
    variants: tuple[str, ...]
    """Short labels of every variant built."""
    disagreements: tuple[Disagreement, ...]
    """Distinct disagreements in field order (at most ``_MAX_RECORDS``)."""
    num_disagreements: int
    """How many distinct disagreements there were in all."""
    flagged_tokens: frozenset[int]
    """Tokens with at least one disagreeing per-token field."""
    flagged_rows: frozenset[int]
    """Rows with a disagreeing per-row field."""
    faults: tuple[FaultMark, ...]
    """Device-model faults of the builder on the batch *with* its divergence."""
    notes: tuple[str, ...] = ()
    """Builder errors, fault-model mismatches, things a person should know."""
    by_token: dict[int, tuple[Disagreement, ...]] = field(default_factory=dict)
    """Disagreements per token, for tooltips."""

    @property
    def uninitialised(self) -> dict[int, tuple[str, ...]]:
        """Token -> variants that left it uninitialised."""
        out: dict[int, tuple[str, ...]] = {}
        for fault in self.faults:
            for t in fault.tokens:
                out[t] = out.get(t, ()) + fault.variants
        return out

    def drawn_rows(self, max_rows: int = MAX_ROWS, max_tokens: int = MAX_TOKENS_PER_ROW) -> list[DrawnRow]:
        """The rows and cells a picture draws: capped, with ellipses, flagged rows always kept.

        A row of ``n > max_tokens`` tokens shows its first ``max_tokens - 8`` and last
        7 cells around one ellipsis cell.  With more than ``max_rows`` rows the rows
        with a disagreement, the last real row, the first pad row and the last row are
        kept, then the first rows fill up to ``max_rows``.
        """
        cells_by_row: dict[int, list[Cell]] = {}
        for cell in self.cells:
            cells_by_row.setdefault(cell.row, []).append(cell)
        keep = self._rows_to_keep(max_rows)
        out: list[DrawnRow] = []
        previous = -1
        for i, row in enumerate(self.rows):
            if i not in keep:
                continue
            if i > previous + 1:
                out.append(self._hidden(self.rows[previous + 1 : i], cells_by_row))
            previous = i
            out.append(_cap_row(row, cells_by_row.get(row.index, []), max_tokens, self.flagged_tokens))
        if previous < len(self.rows) - 1:
            out.append(self._hidden(self.rows[previous + 1 :], cells_by_row))
        return out

    def _hidden(self, rows: tuple[Row, ...], cells_by_row: dict[int, list[Cell]]) -> DrawnRow:
        flagged = any(
            r.index in self.flagged_rows or any(c.token in self.flagged_tokens for c in cells_by_row.get(r.index, []))
            for r in rows
        )
        return DrawnRow(None, hidden_rows=len(rows), hidden_flagged=flagged)

    def _rows_to_keep(self, max_rows: int) -> set[int]:
        n = len(self.rows)
        if n <= max_rows:
            return set(range(n))
        keep = {i for i, r in enumerate(self.rows) if r.index in self.flagged_rows}
        keep |= {
            i for i, r in enumerate(self.rows)
            if any(t in self.flagged_tokens for t in range(r.first_token, r.first_token + r.num_tokens))
        }
        kinds = [r.kind for r in self.rows]
        for i in range(1, n):
            if kinds[i] != kinds[i - 1]:
                keep |= {i - 1, i}
        keep.add(n - 1)
        keep = set(sorted(keep)[:max_rows])
        for i in range(n):
            if len(keep) >= max_rows:
                break
            keep.add(i)
        return keep


def _cap_row(row: Row, cells: list[Cell], max_tokens: int, flagged: frozenset[int]) -> DrawnRow:
    if len(cells) <= max_tokens:
        return DrawnRow(row, tuple(cells))
    tail = min(7, max_tokens // 4)
    head = max_tokens - tail - 1
    hidden = cells[head : len(cells) - tail]
    return DrawnRow(
        row,
        tuple(cells[:head]) + (None,) + tuple(cells[len(cells) - tail :]),
        hidden_cells=len(hidden),
        hidden_flagged=any(c.token in flagged for c in hidden),
    )


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
    f = md.fields
    extend, starts = f["extend_seq_lens"], f["extend_start_loc"]
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


def _len_desc(value: Any) -> Any:
    return f"length {len(value)}" if isinstance(value, list) else value


def _field_diffs(expected: Any, actual: Any) -> list[tuple[tuple[int, ...] | None, Any, Any]]:
    """Every differing element: ``(token,)`` or ``(token, first differing column)``."""
    if not isinstance(expected, list) or not isinstance(actual, list) or len(expected) != len(actual):
        return [] if expected == actual else [(None, _len_desc(expected), _len_desc(actual))]
    out: list[tuple[tuple[int, ...] | None, Any, Any]] = []
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e == a:
            continue
        if isinstance(e, list) and isinstance(a, list) and len(e) == len(a):
            c = next(k for k, (x, y) in enumerate(zip(e, a)) if x != y)
            out.append(((i, c), e[c], a[c]))
        elif isinstance(e, list) or isinstance(a, list):
            out.append(((i,), _len_desc(e), _len_desc(a)))
        else:
            out.append(((i,), e, a))
    return out


def _metadata_diffs(
    expected: VerifyMetadata, actual: VerifyMetadata, *, decision: bool = True
) -> list[tuple[str, tuple[int, ...] | None, Any, Any]]:
    """Differing elements of every field, then of the decision (which legitimately varies across variants)."""
    out = [
        (name, idx, e, a)
        for name in FIELD_NAMES
        for idx, e, a in _field_diffs(expected.fields[name], actual.fields[name])
    ]
    for name in _DECISION_FIELDS if decision else ():
        e, a = getattr(expected.decision, name), getattr(actual.decision, name)
        if e != a:
            out.append((f"decision.{name}", None, e, a))
    return out


class _Collector:
    """Groups identical disagreements across variants and remembers which cells they flag."""

    def __init__(self) -> None:
        self.groups: dict[tuple, list[str]] = {}
        self.flagged_tokens: set[int] = set()
        self.flagged_rows: set[int] = set()
        self.values: dict[tuple, tuple[Any, Any]] = {}
        self.seen: set[tuple[str, str, int | None]] = set()
        """(variant, field, token-or-row) already explained by a reference disagreement."""

    def add(self, label: str, against: str, diffs: list[tuple[str, tuple[int, ...] | None, Any, Any]]) -> None:
        for name, idx, e, a in diffs:
            lead = None if idx is None else idx[0]
            if against == "reference":
                self.seen.add((label, name, lead))
            if name in _PER_ROW_FIELDS:
                if lead is not None:
                    self.flagged_rows.add(lead)
            elif lead is not None and not name.startswith("decision."):
                self.flagged_tokens.add(lead)
            key = (name, idx, repr(e), repr(a), against)
            if key not in self.groups:
                self.groups[key] = [label]
                self.values[key] = (e, a)
            elif label not in self.groups[key]:
                self.groups[key].append(label)

    def records(self) -> list[Disagreement]:
        out = []
        for key, labels in self.groups.items():
            name, idx, _, _, against = key
            e, a = self.values[key]
            lead = None if idx is None else idx[0]
            per_row = name in _PER_ROW_FIELDS
            token = None if per_row or name.startswith("decision.") else lead
            out.append(Disagreement(name, idx, e, a, tuple(labels), against, token, lead if per_row else None))
        out.sort(key=lambda d: (_FIELD_ORDER.get(d.field, 99), d.index or (), d.against))
        return out


def _build(builder: Any, batch: VerifyBatch, variant: Variant, label: str, notes: list[str]) -> VerifyMetadata | None:
    try:
        return builder.build(batch, variant)
    except Exception as exc:  # noqa: BLE001 - a failing build is shown in the picture, not raised
        notes.append(f"{label}: build raised {type(exc).__name__}: {exc}")
        return None


def analyse(
    batch: VerifyBatch, builder_name: str = "hip", device: str = "cpu", *, builder: Builder | None = None
) -> Analysis:
    """Build ``batch`` on every variant with the builder and the reference, and say where they differ.

    Metadata is compared on the batch *without* its divergence (P1: every variant
    equals the reference; variants of one path also against each other, which is
    what catches an inconsistent reference).  The device-model faults are read from
    builds of the batch *with* its divergence and checked against the fault model.
    ``builder`` overrides ``builder_name`` (a builder object, e.g. a test's).
    """
    if builder is None:
        builder = get_builder(builder_name, device)
    name = getattr(builder, "name", builder_name)
    reference = ReferenceBuilder()
    clean = batch if batch.divergence is None else batch.replace(divergence=None)
    variants = variants_for(clean)
    labels = {v: short_label(batch, v) for v in variants}
    path: Path = "graph" if batch.graph is not None else "eager"
    expected = {v: reference.build(clean, v) for v in variants}
    drawn = next(v for v in variants if v.path == path)
    rows, cells = _layout(clean, expected[drawn])
    notes: list[str] = []
    on_meta = str(getattr(builder, "device", device)).startswith("meta")
    if on_meta:
        notes.append("device meta: fields hold shapes, not values; metadata not compared")

    collector = _Collector()
    built: dict[Variant, VerifyMetadata | None] = {v: _build(builder, clean, v, labels[v], notes) for v in variants}
    if not on_meta:
        for v in variants:
            md = built[v]
            if md is not None:
                collector.add(labels[v], "reference", _metadata_diffs(expected[v], md))
        first_of_path: dict[str, Variant] = {}
        for v in variants:
            first_of_path.setdefault(v.path, v)
        for v in variants:
            base = first_of_path[v.path]
            md, base_md = built[v], built[base]
            if v == base or md is None or base_md is None:
                continue
            fresh = [d for d in _metadata_diffs(base_md, md, decision=False)
                     if (labels[v], d[0], None if d[1] is None else d[1][0]) not in collector.seen
                     and (labels[base], d[0], None if d[1] is None else d[1][0]) not in collector.seen]
            collector.add(labels[v], labels[base], fresh)

    diverges = batch.divergence is not None and batch.divergence.extend_seq_lens is not None
    faults = _faults(builder, batch, variants, labels, notes) if diverges else []
    if batch.divergence is not None and getattr(batch.divergence, "seq_lens_cpu", None) is not None:
        notes += _stale_mirror_notes(builder, batch, variants, labels, expected)
    records = collector.records()
    by_token: dict[int, list[Disagreement]] = {}
    for d in records:
        if d.token is not None:
            by_token.setdefault(d.token, []).append(d)
    md0 = expected[drawn]
    verdict = _verdict(name, str(getattr(builder, "device", device)), len(variants), records, faults, notes)
    return Analysis(
        summary=batch.describe(),
        verdict=verdict,
        path=path,
        rows=tuple(rows),
        cells=tuple(cells),
        num_real_tokens=batch.num_real_tokens,
        num_tokens=md0.decision.num_tokens,
        graph_num_tokens=None if batch.graph is None else batch.graph.graph_num_tokens,
        variants=tuple(labels[v] for v in variants),
        disagreements=tuple(records[:_MAX_RECORDS]),
        num_disagreements=len(records),
        flagged_tokens=frozenset(collector.flagged_tokens),
        flagged_rows=frozenset(collector.flagged_rows),
        faults=tuple(faults),
        notes=tuple(notes),
        by_token={t: tuple(ds) for t, ds in by_token.items()},
    )


def _faults(
    builder: Any, batch: VerifyBatch, variants: list[Variant], labels: dict[Variant, str], notes: list[str],
) -> list[FaultMark]:
    """Faults of the builds *with* the divergence, grouped; notes where they leave the fault model."""
    reference = ReferenceBuilder()
    groups: dict[tuple, list[str]] = {}
    for v in variants:
        md = _build(builder, batch, v, labels[v] + " (with divergence)", notes)
        want = [(f.kind, f.count) for f in reference.build(batch, v).audit.faults]
        got = [] if md is None else md.audit.faults
        for f in got:
            groups.setdefault((f.kind, f.count, f.output_size, f.device_sum), []).append(labels[v])
        if md is not None and [(f.kind, f.count) for f in got] != want:
            saw = ", ".join(f"{k} x{c}" for k, c in [(f.kind, f.count) for f in got]) or "no fault"
            exp = ", ".join(f"{k} x{c}" for k, c in want) or "no fault"
            notes.append(f"{labels[v]}: builder saw {saw}; the fault model expects {exp}")
    return [FaultMark(k, c, tuple(vs), o, s) for (k, c, o, s), vs in groups.items()]


def _stale_mirror_notes(
    builder: Any, batch: VerifyBatch, variants: list[Variant], labels: dict[Variant, str],
    expected: dict[Variant, VerifyMetadata],
) -> list[str]:
    """What the stale host mirror alone does to each build: the first corrupted element, or the error raised."""
    assert batch.divergence is not None
    stale = batch.replace(divergence=dataclasses.replace(batch.divergence, extend_seq_lens=None))
    groups: dict[str, list[str]] = {}
    for v in variants:
        try:
            md = builder.build(stale, v)
        except Exception as exc:  # noqa: BLE001 - mirror validation raising is the wanted outcome, shown as a note
            groups.setdefault(f"raised {type(exc).__name__}: {exc}", []).append(labels[v])
            continue
        diffs = _metadata_diffs(expected[v], md, decision=False)
        if diffs:
            name, idx, e, a = diffs[0]
            where = name if idx is None else f"{name}[{', '.join(map(str, idx))}]"
            groups.setdefault(f"silently corrupts {where}: expected {e!r}, actual {a!r}", []).append(labels[v])
    out = []
    for what, who in groups.items():
        more = f" +{len(who) - 1} more" if len(who) > 1 else ""
        out.append(f"stale host mirror {what} ({who[0]}{more})")
    return out


def _verdict(
    name: str, device: str, n: int, records: list[Disagreement], faults: list[FaultMark], notes: list[str]
) -> str:
    fields = sorted({d.field for d in records}, key=lambda f: _FIELD_ORDER.get(f, 99))
    if records:
        what = f"{len(records)} disagreement(s) in {', '.join(fields[:4])}{' ...' if len(fields) > 4 else ''}"
    else:
        what = "metadata agrees with the reference"
    by_kind: dict[str, int] = {}
    for f in faults:
        by_kind[f.kind] = by_kind.get(f.kind, 0) + len(f.variants)
    fault = "" if not faults else "; faults: " + ", ".join(f"{k} in {n} variant(s)" for k, n in by_kind.items())
    errs = sum(": build raised" in n_ for n_ in notes)
    err = f"; {errs} build(s) raised" if errs else ""
    others = len(notes) - errs
    note = f"; {others} note(s)" if others else ""
    return f"builder {name} on {device}, {n} variants: {what}{fault}{err}{note}"


def _tooltip(analysis: Analysis, cell: Cell, uninit: dict[int, tuple[str, ...]]) -> str:
    lines = [f"token {cell.token} (row {cell.row}, j={cell.column}, {_KIND_LABELS[cell.kind]})",
             f"position {cell.position}, slot {cell.slot}"]
    for d in analysis.by_token.get(cell.token, ())[:8]:
        lines.append(d.describe(max_variants=2))
    extra = len(analysis.by_token.get(cell.token, ())) - 8
    if extra > 0:
        lines.append(f"... {extra} more")
    if cell.token in uninit:
        lines.append(f"uninitialised by the token map: {'; '.join(uninit[cell.token][:3])}")
    return "\n".join(lines)


def _row_label(row: Row) -> str:
    if row.kind == "real":
        return f"r{row.index} slot {row.slot}"
    if row.kind == "pad":
        return f"r{row.index} pad, slot 0"
    return f"tail, slot {row.slot}"


def _boundaries(analysis: Analysis, drawn: list[DrawnRow]) -> list[tuple[int, str, str]]:
    """``(after drawn line i, label, style)`` for the horizontal lines between rows."""
    out: list[tuple[int, str, str]] = []
    for i in range(len(drawn) - 1):
        a, b = drawn[i].row, drawn[i + 1].row
        if a is None or b is None:
            continue
        if a.kind == "real" and b.kind == "uncovered":
            out.append((i, f"rows end: num_tokens = {analysis.num_tokens} (= eager map end)", "num_tokens"))
        elif a.kind == "real" and b.kind != "real":
            out.append((i, f"eager map end: {analysis.num_real_tokens} real tokens", "eager"))
        elif a.kind != "uncovered" and b.kind == "uncovered":
            out.append((i, f"num_tokens = {analysis.num_tokens} (host's belief; rows end here)", "num_tokens"))
    end = (f"tier boundary: graph_num_tokens = {analysis.graph_num_tokens}" if analysis.graph_num_tokens is not None
           else f"token map end: num_tokens = {analysis.num_tokens}")
    out.append((len(drawn) - 1, end, "tier"))
    return out


# -- PNG -------------------------------------------------------------------------------------------


def render_png(
    batch: VerifyBatch, path: str | os.PathLike[str], *, builder_name: str = "hip", device: str = "cpu",
    analysis: Analysis | None = None,
) -> str:
    """Draw the batch (rows of token cells, boundaries, disagreements, faults) to a PNG; returns the path.

    ``analysis`` skips the builds (e.g. one from :func:`analyse` with a custom builder).
    Needs matplotlib; draws on an Agg canvas, leaving pyplot's backend alone.
    """
    analysis = analysis or analyse(batch, builder_name, device)
    figure = _png_figure(analysis)
    path = os.fspath(path)
    figure.savefig(path, dpi=100)
    return path


def _png_figure(analysis: Analysis) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import PatchCollection
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle

    drawn = analysis.drawn_rows()
    oob = [f for f in analysis.faults if f.kind == "oob_write"]
    uninit = analysis.uninitialised
    ncols = max([len(d.cells) for d in drawn] + [min(f.count, MAX_TOKENS_PER_ROW) for f in oob] + [2])
    prefix_w = 3.0 if ncols <= 8 else 5.0
    lines = len(drawn) + len(oob)
    cell_in = 0.34 if ncols <= 16 else (0.26 if ncols <= 32 else 0.19)
    text_in = 4.2 if oob else 3.4
    text_w = text_in / cell_in
    main_w = (prefix_w + ncols + 0.6) * cell_in + text_in + 0.4
    side_w = 6.2
    height = max(0.3 * lines + 2.0, 4.5)
    figure = Figure(figsize=(main_w + side_w, height))
    FigureCanvasAgg(figure)
    grid = figure.add_gridspec(1, 2, width_ratios=[main_w, side_w], left=1.3 / (main_w + side_w), right=0.99,
                               top=1 - 1.45 / height, bottom=0.3 / height, wspace=0.04)
    ax = figure.add_subplot(grid[0, 0])
    side = figure.add_subplot(grid[0, 1])
    side.set_axis_off()

    fills, colours, outlines, hatched = [], [], [], []
    show_numbers = ncols <= 24
    ylabels: list[tuple[float, str, bool]] = []
    for y, line in enumerate(drawn):
        if line.row is None:
            ylabels.append((y, f"... {line.hidden_rows} rows", line.hidden_flagged))
            continue
        row = line.row
        ylabels.append((y, _row_label(row), row.index in analysis.flagged_rows))
        if row.prefix is not None:
            fills.append(Rectangle((-prefix_w - 0.3, y - 0.4), prefix_w, 0.8))
            colours.append(_COLOURS["prefix"])
            ax.text(-0.3 - prefix_w / 2, y, f"prefix {row.prefix}", ha="center", va="center", fontsize=7)
        for x, cell in enumerate(line.cells):
            if cell is None:
                ax.text(x + 0.45, y, "...", ha="center", va="center", fontsize=7,
                        color=_COLOURS["bad"] if line.hidden_flagged else "black")
                continue
            fills.append(Rectangle((x, y - 0.4), 0.9, 0.8))
            colours.append(_COLOURS[cell.kind])
            if cell.token in analysis.flagged_tokens:
                outlines.append(Rectangle((x - 0.02, y - 0.44), 0.94, 0.88))
            if cell.token in uninit:
                hatched.append(Rectangle((x, y - 0.4), 0.9, 0.8))
            if show_numbers:
                ax.text(x + 0.45, y, str(cell.position), ha="center", va="center", fontsize=6, color="white")
        notes = [f"({line.hidden_cells} hidden)"] if line.hidden_cells else []
        if any(c is not None and c.token in uninit for c in line.cells):
            notes.append("<- uninitialised")
        if notes:
            ax.text(len(line.cells) + 0.2, y, "  ".join(notes), va="center", fontsize=6.5)
    ax.add_collection(PatchCollection(fills, facecolors=colours, edgecolors="none"))
    if outlines:
        ax.add_collection(PatchCollection(outlines, facecolors="none", edgecolors=_COLOURS["bad"], linewidths=1.8))
    if hatched:
        ax.add_collection(PatchCollection(hatched, facecolors="none", edgecolors="black", hatch="xxx", linewidths=0))
    for after, label, style in _boundaries(analysis, drawn):
        y = after + 0.5
        ax.axhline(y, color="black" if style == "tier" else "grey", linestyle="-" if style == "tier" else "--",
                   linewidth=1.4 if style == "tier" else 0.9)
        ax.text(ncols + 0.3, y, label, va="center", ha="left", fontsize=7,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})
    for k, fault in enumerate(oob):
        y = len(drawn) + k
        shown = min(fault.count, MAX_TOKENS_PER_ROW)
        ax.add_collection(PatchCollection(
            [Rectangle((x, y - 0.4), 0.9, 0.8) for x in range(shown)],
            facecolors=_COLOURS["oob"], edgecolors=_COLOURS["bad"], hatch="////", linewidths=0.8,
        ))
        extra = f" (+{fault.count - shown})" if fault.count > shown else ""
        ax.text(shown + 0.3, y, f"out-of-bounds write x{fault.count}{extra} past output_size={fault.output_size} "
                f"({fault.variants[0]}"
                f"{f' +{len(fault.variants) - 1}' if len(fault.variants) > 1 else ''})", va="center", fontsize=7,
                color=_COLOURS["bad"])
        ylabels.append((y, "past map end", True))
    ax.set_xlim(-prefix_w - 0.6, ncols + text_w)
    # a few rows still get cells of the usual height: the short axis is padded below, not stretched
    ax.set_ylim(max(lines, int((height - 2.0) / 0.3)) - 0.5, -0.7)
    ax.set_yticks([y for y, _, _ in ylabels])
    ax.set_yticklabels([t for _, t, _ in ylabels], fontsize=7)
    for tick, (_, _, bad) in zip(ax.get_yticklabels(), ylabels):
        if bad:
            tick.set_color(_COLOURS["bad"])
    step = 1 if ncols <= 16 else (4 if ncols <= 32 else 8)
    # past an ellipsis the display column is no longer j, so ticks stop there
    true_cols = min([d.cells.index(None) for d in drawn if None in d.cells] + [ncols])
    ax.set_xticks([x + 0.45 for x in range(0, true_cols, step)])
    ax.set_xticklabels([str(x) for x in range(0, true_cols, step)])
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("verify token j within the row (cell = one token" + ("; number = position)" if show_numbers else ")"),
                  fontsize=8)
    ax.set_ylabel(f"request row ({analysis.path} path)", fontsize=8)
    # ticks on top, next to the first rows, so a short batch is not read across an empty axis
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    for spine in ("bottom", "right"):
        ax.spines[spine].set_visible(False)
    figure.suptitle(analysis.summary, fontsize=10, x=0.01, ha="left", y=1 - 0.25 / height)
    figure.text(0.01, 1 - 0.6 / height, analysis.verdict, fontsize=8, ha="left",
                color=_COLOURS["bad"] if analysis.disagreements or analysis.faults or analysis.notes else "#2a7f2a")

    handles = [Patch(facecolor=_COLOURS["prefix"], label="accepted prefix (summarised)")]
    kinds = {c.kind for c in analysis.cells}
    handles += [Patch(facecolor=_COLOURS[k], label=_KIND_LABELS[k]) for k in _KIND_LABELS if k in kinds]
    if analysis.flagged_tokens:
        handles.append(Patch(facecolor="none", edgecolor=_COLOURS["bad"], linewidth=1.8, label="disagrees with reference"))
    if uninit:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="xxx", label="uninitialised (token map tail)"))
    if oob:
        handles.append(Patch(facecolor="white", edgecolor=_COLOURS["bad"], hatch="////", label="out-of-bounds write"))
    side.legend(handles=handles, loc="upper left", fontsize=7, frameon=False, borderaxespad=0)
    side.annotate(_side_text(analysis), xy=(0.0, 1.0), xycoords="axes fraction", xytext=(0, -11 * (len(handles) + 1.5)),
                  textcoords="offset points", va="top", ha="left", fontsize=7, family="monospace")
    return figure


def _clip(text: str, width: int = 78) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _side_text(analysis: Analysis) -> str:
    out: list[str] = []
    if analysis.disagreements:
        n = analysis.num_disagreements
        out.append(f"Disagreements ({min(n, MAX_LISTED)} of {n}):" if n > MAX_LISTED else f"Disagreements ({n}):")
        for d in analysis.disagreements[:MAX_LISTED]:
            vs = "" if d.against == "reference" else f" vs {d.against}"
            more = f" +{len(d.variants) - 1} more" if len(d.variants) > 1 else ""
            out.append(" " + _clip(f"{d.where}: expected {d.expected!r}, actual {d.actual!r}"))
            out.append("   " + _clip(f"({d.variants[0]}{more}{vs})", 76))
    else:
        out.append(f"All {len(analysis.variants)} variants agree with the reference.")
    if analysis.faults:
        out.append("")
        out.append("Device faults (batch with its divergence):")
        for f in analysis.faults:
            kind = "oob_write" if f.kind == "oob_write" else "uninitialized_tail"
            out.append(f" {kind} x{f.count} (output_size={f.output_size}, device sum={f.device_sum}):")
            out += ["   " + _clip(v, 74) for v in f.variants[:6]]
            if len(f.variants) > 6:
                out.append(f"   +{len(f.variants) - 6} more")
    elif "diverges" in analysis.summary:
        out += ["", "Device faults: none (every map that trusted", " output_size matched the device lengths)."]
    if analysis.notes:
        out.append("")
        out.append("Notes:")
        for n in analysis.notes[:8]:
            out += textwrap.wrap(n, 78, initial_indent=" ", subsequent_indent="   ")
    return "\n".join(out)


# -- HTML ------------------------------------------------------------------------------------------

_CSS = """
body{font:13px/1.35 system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:16px;margin:0 0 4px}.verdict{margin:0 0 12px}.verdict.bad{color:#d62728}.verdict.ok{color:#2a7f2a}
.wrap{display:flex;gap:24px;align-items:flex-start}.grid{flex:0 0 auto}aside{flex:1 1 320px;min-width:280px}
.row{display:flex;align-items:center;height:20px;margin:2px 0;white-space:nowrap}
.label{width:120px;font-size:11px;text-align:right;padding-right:6px;flex:0 0 auto}.label.bad{color:#d62728;font-weight:bold}
.prefix{width:80px;height:16px;background:#d9d9d9;font-size:10px;text-align:center;line-height:16px;margin-right:4px;flex:0 0 auto}
.noprefix{width:80px;margin-right:4px;flex:0 0 auto}
.cell{width:18px;height:16px;margin-right:2px;font-size:9px;color:#fff;text-align:center;line-height:16px;flex:0 0 auto;
 box-sizing:border-box;position:relative;cursor:default}
.k-verify{background:#4c78a8}.k-slack{background:#f58518}.k-pad{background:#54a24b}.k-uncovered{background:#b279a2}
.cell.bad{outline:2px solid #d62728;outline-offset:0}
.cell.uninit{background-image:repeating-linear-gradient(45deg,rgba(0,0,0,.55) 0 2px,transparent 2px 5px)}
.cell.hl{outline:3px solid #000}
.ellipsis{width:auto;padding:0 4px;font-size:11px}.ellipsis.bad{color:#d62728;font-weight:bold}
.oob{width:18px;height:16px;margin-right:2px;flex:0 0 auto;box-sizing:border-box;border:1px solid #d62728;
 background:repeating-linear-gradient(135deg,#d62728 0 2px,#fff 2px 5px)}
.oobtext{color:#d62728;font-size:11px;padding-left:6px}
.line{border-top:2px solid #000;margin:3px 0;font-size:11px;padding-left:210px}
.line.eager,.line.num_tokens{border-top:1px dashed #888;color:#555}
.legend span.sw{display:inline-block;width:14px;height:12px;margin-right:6px;vertical-align:middle}
ul{padding-left:18px;margin:4px 0}li{font-family:monospace;font-size:12px}h2{font-size:14px;margin:12px 0 4px}
"""

_JS = """
document.querySelectorAll('[data-tokens]').forEach(function(li){
  var ids=li.getAttribute('data-tokens').split(' ').filter(Boolean);
  li.addEventListener('mouseenter',function(){ids.forEach(function(i){var c=document.getElementById(i);if(c)c.classList.add('hl');});});
  li.addEventListener('mouseleave',function(){ids.forEach(function(i){var c=document.getElementById(i);if(c)c.classList.remove('hl');});});
});
"""


def render_html(
    batch: VerifyBatch, path: str | os.PathLike[str], *, builder_name: str = "hip", device: str = "cpu",
    analysis: Analysis | None = None,
) -> str:
    """Write one self-contained HTML page (inline CSS/JS, no network) of the batch; returns the path.

    Each token is a ``<span class="cell ...">`` whose ``title`` tooltip gives
    its token index, row, position, slot and any disagreeing field values; hovering a
    listed disagreement outlines its cell (inline script).
    """
    analysis = analysis or analyse(batch, builder_name, device)
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(html_page(analysis))
    return path


def html_page(analysis: Analysis) -> str:
    """The page :func:`render_html` writes, as a string."""
    esc = html.escape
    uninit = analysis.uninitialised
    drawn = analysis.drawn_rows()
    lines_after: dict[int, list[tuple[str, str]]] = {}
    for after, label, style in _boundaries(analysis, drawn):
        lines_after.setdefault(after, []).append((label, style))
    body: list[str] = []
    for i, line in enumerate(drawn):
        if line.row is None:
            bad = " bad" if line.hidden_flagged else ""
            body.append(f'<div class="row"><span class="label{bad}">... {line.hidden_rows} rows hidden</span></div>')
        else:
            row = line.row
            bad = " bad" if row.index in analysis.flagged_rows else ""
            tip = esc(f"row {row.index}: {row.kind}, slot {row.slot}, prefix {row.prefix}, "
                      f"tokens {row.first_token}..{row.first_token + row.num_tokens - 1}", quote=True)
            parts = [f'<div class="row"><span class="label{bad}" title="{tip}">{esc(_row_label(row))}</span>']
            if row.prefix is None:
                parts.append('<span class="noprefix"></span>')
            else:
                parts.append(f'<span class="prefix">prefix {row.prefix}</span>')
            for cell in line.cells:
                if cell is None:
                    eb = " bad" if line.hidden_flagged else ""
                    parts.append(f'<span class="ellipsis{eb}" title="{line.hidden_cells} tokens hidden">'
                                 f'... +{line.hidden_cells} ...</span>')
                    continue
                classes = f"cell k-{cell.kind}"
                if cell.token in analysis.flagged_tokens:
                    classes += " bad"
                if cell.token in uninit:
                    classes += " uninit"
                tip = esc(_tooltip(analysis, cell, uninit), quote=True)
                parts.append(f'<span class="{classes}" id="t{cell.token}" title="{tip}">'
                             f"{cell.position if cell.position < 1000 else ''}</span>")
            parts.append("</div>")
            body.append("".join(parts))
        for label, style in lines_after.get(i, []):
            body.append(f'<div class="line {style}">{esc(label)}</div>')
    for fault in (f for f in analysis.faults if f.kind == "oob_write"):
        shown = min(fault.count, MAX_TOKENS_PER_ROW)
        boxes = "".join('<span class="oob"></span>' for _ in range(shown))
        body.append(f'<div class="row"><span class="label bad">past map end</span><span class="noprefix"></span>{boxes}'
                    f'<span class="oobtext">{esc(str(fault))}</span></div>')

    ok = not (analysis.disagreements or analysis.faults or analysis.notes)
    side = [_html_legend(analysis, uninit), "<h2>Disagreements</h2>"]
    if analysis.disagreements:
        items = []
        for d in analysis.disagreements[:200]:
            ids = f"t{d.token}" if d.token is not None else ""
            items.append(f'<li data-tokens="{ids}" title="{esc(", ".join(d.variants), quote=True)}">'
                         f"{esc(d.describe(max_variants=2))}</li>")
        more = analysis.num_disagreements - min(len(analysis.disagreements), 200)
        side.append("<ul>" + "".join(items) + (f"<li>... {more} more</li>" if more > 0 else "") + "</ul>")
    else:
        side.append(f"<p>All {len(analysis.variants)} variants agree with the reference.</p>")
    if analysis.faults or "diverges" in analysis.summary:
        side.append("<h2>Device faults (batch with its divergence)</h2>")
        if analysis.faults:
            side.append("<ul>" + "".join(
                f'<li data-tokens="{" ".join(f"t{t}" for t in f.tokens)}">{esc(str(f))}</li>' for f in analysis.faults
            ) + "</ul>")
        else:
            side.append("<p>None: every map that trusted output_size matched the device lengths.</p>")
    if analysis.notes:
        side.append("<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in analysis.notes) + "</ul>")
    side.append("<h2>Variants built</h2><ul>" + "".join(f"<li>{esc(v)}</li>" for v in analysis.variants) + "</ul>")
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(analysis.summary)}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>{esc(analysis.summary)}</h1>\n"
        f'<p class="verdict {"ok" if ok else "bad"}">{esc(analysis.verdict)}</p>\n'
        f'<div class="wrap"><div class="grid">\n' + "\n".join(body) + "\n</div>\n"
        f"<aside>{''.join(side)}</aside></div>\n<script>{_JS}</script>\n</body></html>\n"
    )


def _html_legend(analysis: Analysis, uninit: dict[int, tuple[str, ...]]) -> str:
    items = [("background:#d9d9d9", "accepted prefix (summarised)")]
    kinds = {c.kind for c in analysis.cells}
    items += [(f"background:{_COLOURS[k]}", _KIND_LABELS[k]) for k in _KIND_LABELS if k in kinds]
    if analysis.flagged_tokens:
        items.append(("outline:2px solid #d62728", "disagrees with reference (hover a cell)"))
    if uninit:
        items.append(("background:repeating-linear-gradient(45deg,#555 0 2px,#fff 2px 5px)", "uninitialised (token map tail)"))
    if any(f.kind == "oob_write" for f in analysis.faults):
        items.append(("background:repeating-linear-gradient(135deg,#d62728 0 2px,#fff 2px 5px)", "out-of-bounds write"))
    return '<div class="legend">' + "<br>".join(
        f'<span class="sw" style="{style}"></span>{html.escape(label)}' for style, label in items
    ) + "</div>"


# -- files -----------------------------------------------------------------------------------------


def render_files(
    batch: VerifyBatch, replay_path: str | os.PathLike[str], *, builder_name: str = "hip", device: str = "cpu",
    analysis: Analysis | None = None,
) -> list[str]:
    """Write ``<replay_path minus .json>.png`` and ``.html`` next to a replay file; returns both paths.

    The builds run once for both pictures.  The PNG needs matplotlib; without it
    only the HTML is written.
    """
    stem = os.fspath(replay_path)
    if stem.endswith(".json"):
        stem = stem[: -len(".json")]
    analysis = analysis or analyse(batch, builder_name, device)
    out: list[str] = []
    try:
        import matplotlib  # noqa: F401 - only to know whether a PNG can be drawn
    except ImportError:
        pass
    else:
        out.append(render_png(batch, stem + ".png", analysis=analysis))
    out.append(render_html(batch, stem + ".html", analysis=analysis))
    return out


def write_doc_picture(
    batch: VerifyBatch, name: str, *, directory: str | os.PathLike[str] = "docs/img", builder_name: str = "hip",
    device: str = "cpu", builder: Builder | None = None,
) -> list[str]:
    """Write ``<directory>/<name>.png`` and ``.html`` for the docs; returns the paths.

    ``builder`` (e.g. a mutant) shows what a disagreement looks like.
    """
    os.makedirs(directory, exist_ok=True)
    analysis = analyse(batch, builder_name, device, builder=builder)
    return render_files(batch, os.path.join(os.fspath(directory), name), analysis=analysis)
