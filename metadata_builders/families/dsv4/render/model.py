"""What a picture of one batch shows, as data: rows, token cells, disagreements, faults, the drawn lines.

:class:`Analysis` is everything both renderers draw; :meth:`Analysis.drawn_rows`
caps it to what fits a picture (ellipsis rows and cells, flagged rows always
kept) and :meth:`Analysis.boundaries` places the lines between rows; both are
walked through on :mod:`~metadata_builders.families.dsv4.render.analysis`'s worked example
(the ragged EAGLE batch on its graph tier: three real rows, two pad rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.metadata import FaultKind
    from metadata_builders.families.dsv4.variants import Path

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
    "element_name",
]

CellKind = Literal["verify", "slack", "pad", "uncovered"]
RowKind = Literal["real", "pad", "uncovered"]

MAX_ROWS = 32
"""Rows drawn at most; rows with a disagreement and the boundary rows are always kept."""
MAX_TOKENS_PER_ROW = 64
"""Token cells drawn per row at most; the middle of a longer row becomes one ellipsis cell."""
MAX_LISTED = 12
"""Disagreements listed in the PNG side panel (the HTML lists more, the cells show all)."""


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
        return element_name(self.field, self.index)

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
                "oob_read": "out-of-bounds read", "stale_async_copy": "stale asynchronous copy"}


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
    failure: tuple[str, ...] = ()
    """The property failure the picture was drawn for (``check``'s and ``replay``'s), as lines: the property, its
    check id and variant, then what failed (field, index, values); the history it needs.  Empty: a picture of a batch.
    A picture with a failure is never drawn as good news, whatever its own builds show."""

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
        """No failure, no disagreement, no fault and nothing to note: the verdict is good news."""
        return not (self.failure or self.disagreements or self.faults or self.notes)

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

        In :mod:`~metadata_builders.families.dsv4.render.analysis`'s worked example: ``(2, "eager map end: 6 real
        tokens",
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


def element_name(name: str, index: tuple[int, ...] | None) -> str:
    """How a picture names one element: ``pf_final_pos[0]``, ``page_table[1, 1]``, or the bare field."""
    return name if index is None else f"{name}[{', '.join(map(str, index))}]"

