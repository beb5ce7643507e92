"""What a picture of one batch shows, as pure data: rows, token cells, disagreements, faults.

:func:`analyse` builds the batch on every variant with the builder and the
reference and compares them with :mod:`metadata_builders.metadata`'s comparison
(:func:`every_difference` is :func:`~metadata_builders.metadata.first_difference`
once per token or row, so a picture flags every cell, not only the first).
Whether a field is per row or per token comes from ``metadata.FIELDS``.

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
disagreements land on the same cells.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from metadata_builders.builders import get_builder
from metadata_builders.metadata import (
    FIELD_NAMES,
    FIELDS,
    Decision,
    Mismatch,
    first_difference,
)
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
    "CellKind",
    "Disagreement",
    "DrawnRow",
    "FaultMark",
    "Row",
    "RowKind",
    "analyse",
    "every_difference",
    "short_label",
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
_DECISION_FIELDS = tuple(f.name for f in dataclasses.fields(Decision))
_FIELD_ORDER = {name: i for i, name in enumerate(FIELD_NAMES + tuple(f"decision.{d}" for d in _DECISION_FIELDS))}
"""Sort key of a disagreement's field: pipeline order, then the decision."""


# -- the data ----------------------------------------------------------------------------------------


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

    @property
    def label(self) -> str:
        """How both pictures name the row: ``r0 slot 2``, ``r3 pad, slot 0``, ``tail, slot 3``."""
        if self.kind == "real":
            return f"r{self.index} slot {self.slot}"
        if self.kind == "pad":
            return f"r{self.index} pad, slot 0"
        return f"tail, slot {self.slot}"


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
        return _where(self.field, self.index)

    def describe(self, max_variants: int = 1) -> str:
        """``pf_final_pos[0]: expected 7, actual 8 (eager mirror=host gate=dspark +8 more)``."""
        shown = ", ".join(self.variants[:max_variants])
        more = len(self.variants) - max_variants
        who = shown + (f" +{more} more" if more > 0 else "")
        vs = "" if self.against == "reference" else f" vs {self.against}"
        return f"{self.where}: expected {self.expected!r}, actual {self.actual!r} ({who}{vs})"

    def __str__(self) -> str:
        return self.describe()


_FAULT_WORDS = {"oob_write": "out-of-bounds write", "uninitialized_tail": "uninitialised tail",
                "oob_read": "out-of-bounds read"}


@dataclass(frozen=True, slots=True)
class FaultMark:
    """Device-model faults of one kind and size, with the variants that hit them."""

    kind: FaultKind
    """``oob_write``, ``uninitialized_tail`` (or ``oob_read``, which no correct builder performs)."""
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
        what = _FAULT_WORDS.get(self.kind, self.kind)
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

    @property
    def is_clean(self) -> bool:
        """No disagreement, no fault and nothing to note: the verdict is good news."""
        return not (self.disagreements or self.faults or self.notes)

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

    def boundaries(self, drawn: list[DrawnRow]) -> list[tuple[int, str, str]]:
        """``(after drawn line i, label, style)`` for the horizontal lines between rows.

        In the worked example of this module: ``(2, "eager map end: 6 real tokens",
        "eager")`` between the last real row and the first pad row, then ``(4, "tier
        boundary: graph_num_tokens = 10", "tier")`` under the last line.  Styles:
        ``eager``, ``num_tokens`` (dashed) and ``tier`` (solid).
        """
        out: list[tuple[int, str, str]] = []
        for i in range(len(drawn) - 1):
            a, b = drawn[i].row, drawn[i + 1].row
            if a is None or b is None:
                continue
            if a.kind == "real" and b.kind == "uncovered":
                out.append((i, f"rows end: num_tokens = {self.num_tokens} (= eager map end)", "num_tokens"))
            elif a.kind == "real" and b.kind != "real":
                out.append((i, f"eager map end: {self.num_real_tokens} real tokens", "eager"))
            elif a.kind != "uncovered" and b.kind == "uncovered":
                out.append((i, f"num_tokens = {self.num_tokens} (host's belief; rows end here)", "num_tokens"))
        end = (f"tier boundary: graph_num_tokens = {self.graph_num_tokens}" if self.graph_num_tokens is not None
               else f"token map end: num_tokens = {self.num_tokens}")
        out.append((len(drawn) - 1, end, "tier"))
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


def _where(name: str, index: tuple[int, ...] | None) -> str:
    return name if index is None else f"{name}[{', '.join(map(str, index))}]"


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


# -- the comparison ----------------------------------------------------------------------------------


def every_difference(
    expected: Mapping[str, Any], actual: Mapping[str, Any], names: tuple[str, ...] = FIELD_NAMES
) -> list[Mismatch]:
    """:func:`~metadata_builders.metadata.first_difference` for every token (or row), not only the first.

    Per field in pipeline order, one :class:`~metadata_builders.metadata.Mismatch`
    per leading index that differs, at that entry's first differing element; a
    field whose lengths differ is one mismatch with ``index=None``.  Example:
    ``page_table`` ``[[0, 1], [2, 3], [4, 5]]`` against ``[[0, 1], [2, 9], [7, 5]]``
    gives ``page_table[1, 1]: 3 vs 9`` and ``page_table[2, 0]: 4 vs 7``.  Fields one
    side does not report are skipped, as ``first_difference`` does.
    """
    out: list[Mismatch] = []
    for name in names:
        if name not in expected or name not in actual:
            continue
        e, a = expected[name], actual[name]
        if not (isinstance(e, list) and isinstance(a, list)) or len(e) != len(a):
            whole = first_difference({name: e}, {name: a}, (name,))
            if whole is not None:
                out.append(dataclasses.replace(whole, index=whole.index or None))
            continue
        for i, (x, y) in enumerate(zip(e, a)):
            if x == y:
                continue
            # the one-entry slice's index starts with its own 0: rebase it on i
            m = first_difference({name: [x]}, {name: [y]}, (name,))
            assert m is not None and m.index is not None
            out.append(Mismatch(name, (i, *m.index[1:]), m.expected, m.actual))
    return out


def _metadata_diffs(expected: VerifyMetadata, actual: VerifyMetadata, *, decision: bool = True) -> list[Mismatch]:
    """Differing elements of every field, then of the decision (which legitimately varies across variants)."""
    out = every_difference(expected.fields, actual.fields)
    for name in _DECISION_FIELDS if decision else ():
        e, a = getattr(expected.decision, name), getattr(actual.decision, name)
        if e != a:
            out.append(Mismatch(f"decision.{name}", None, e, a))
    return out


def _lead(index: tuple[int, ...] | None) -> int | None:
    """The token (per-token field) or row (per-row field) an index points into."""
    return None if index is None else index[0]


def _per_row(name: str) -> bool:
    return name in FIELDS and FIELDS[name].per == "row"


def _per_token(name: str) -> bool:
    return name in FIELDS and FIELDS[name].per == "token"


class _Collector:
    """Groups identical disagreements across variants and remembers which cells they flag."""

    def __init__(self) -> None:
        self.groups: dict[tuple, list[str]] = {}
        self.flagged_tokens: set[int] = set()
        self.flagged_rows: set[int] = set()
        self.values: dict[tuple, tuple[Any, Any]] = {}
        self.seen: set[tuple[str, str, int | None]] = set()
        """(variant, field, token-or-row) already explained by a reference disagreement."""

    def add(self, label: str, against: str, diffs: list[Mismatch]) -> None:
        for d in diffs:
            lead = _lead(d.index)
            if against == "reference":
                self.seen.add((label, d.field, lead))
            if lead is not None and _per_row(d.field):
                self.flagged_rows.add(lead)
            elif lead is not None and _per_token(d.field):
                self.flagged_tokens.add(lead)
            key = (d.field, d.index, repr(d.expected), repr(d.actual), against)
            if key not in self.groups:
                self.groups[key] = [label]
                self.values[key] = (d.expected, d.actual)
            elif label not in self.groups[key]:
                self.groups[key].append(label)

    def explained(self, label: str, d: Mismatch) -> bool:
        """``label``'s build already disagrees with the reference at this field and token (or row)."""
        return (label, d.field, _lead(d.index)) in self.seen

    def records(self) -> list[Disagreement]:
        out = []
        for key, labels in self.groups.items():
            name, idx, _, _, against = key
            e, a = self.values[key]
            lead = _lead(idx)
            token = lead if _per_token(name) else None
            row = lead if _per_row(name) else None
            out.append(Disagreement(name, idx, e, a, tuple(labels), against, token, row))
        out.sort(key=lambda d: (_FIELD_ORDER.get(d.field, 99), d.index or (), d.against))
        return out


def _build(builder: Any, batch: VerifyBatch, variant: Variant, label: str, notes: list[str]) -> VerifyMetadata | None:
    try:
        return builder.build(batch, variant)
    except Exception as exc:  # noqa: BLE001 - a failing build is shown in the picture, not raised
        notes.append(f"{label}: build raised {type(exc).__name__}: {exc}")
        return None


def _compare(
    collector: _Collector, labels: dict[Variant, str], expected: dict[Variant, VerifyMetadata],
    built: dict[Variant, VerifyMetadata | None],
) -> None:
    """Every build against the reference, then each variant against the first variant of its path.

    The second comparison catches a reference that is inconsistent across variants;
    it leaves out what the first already explains.
    """
    for v, md in built.items():
        if md is not None:
            collector.add(labels[v], "reference", _metadata_diffs(expected[v], md))
    first_of_path: dict[str, Variant] = {}
    for v in built:
        first_of_path.setdefault(v.path, v)
    for v, md in built.items():
        base = first_of_path[v.path]
        base_md = built[base]
        if v == base or md is None or base_md is None:
            continue
        fresh = [d for d in _metadata_diffs(base_md, md, decision=False)
                 if not collector.explained(labels[v], d) and not collector.explained(labels[base], d)]
        collector.add(labels[v], labels[base], fresh)


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
    name, on = getattr(builder, "name", builder_name), str(getattr(builder, "device", device))
    reference = ReferenceBuilder()
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
    collector = _Collector()
    built = {v: _build(builder, clean, v, labels[v], notes) for v in variants}
    if not on.startswith("meta"):
        _compare(collector, labels, expected, built)
    faults = _faults(builder, reference, batch, labels, notes) if _diverges(batch) else []
    if batch.divergence is not None and getattr(batch.divergence, "seq_lens_cpu", None) is not None:
        notes += _stale_mirror_notes(builder, batch, labels, expected)
    records = collector.records()
    return Analysis(
        summary=batch.describe(),
        verdict=_verdict(name, on, len(variants), records, faults, notes),
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
    ``tests/test_reference.py::test_hip_equals_reference_on_every_variant`` does.
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
            where = _where(first.field, first.index)
            groups.setdefault(f"silently corrupts {where}: expected {first.expected!r}, actual {first.actual!r}",
                              []).append(label)
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
