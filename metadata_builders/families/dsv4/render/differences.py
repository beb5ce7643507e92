"""Where a build differs: every differing element, grouped across variants, each flagging its cell or row.

:func:`every_difference` is :func:`~metadata_builders.families.dsv4.metadata.first_difference`
once per token or row, so a picture flags every cell, not only the first.
:func:`compare_builds` compares every variant's build with the reference, then
each variant with the first variant of its path; a :class:`Collector` groups
identical disagreements across variants.  Whether a field is per row or per
token comes from ``metadata.FIELDS``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from metadata_builders.families.dsv4.metadata import (
    FIELD_NAMES,
    FIELDS,
    Decision,
    Mismatch,
    first_difference,
)
from metadata_builders.families.dsv4.render.model import Disagreement

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.metadata import VerifyMetadata
    from metadata_builders.families.dsv4.variants import Variant

__all__ = ["FIELD_ORDER", "Collector", "compare_builds", "every_difference"]

_DECISION_FIELDS = tuple(f.name for f in dataclasses.fields(Decision))
FIELD_ORDER = {name: i for i, name in enumerate(FIELD_NAMES + tuple(f"decision.{d}" for d in _DECISION_FIELDS))}
"""Sort key of a disagreement's field: pipeline order, then the decision."""


def every_difference(
    expected: Mapping[str, Any], actual: Mapping[str, Any], names: tuple[str, ...] = FIELD_NAMES
) -> list[Mismatch]:
    """:func:`~metadata_builders.families.dsv4.metadata.first_difference` for every token (or row), not only the first.

    Per field in pipeline order, one :class:`~metadata_builders.families.dsv4.metadata.Mismatch`
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


class Collector:
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
        out.sort(key=lambda d: (FIELD_ORDER.get(d.field, 99), d.index or (), d.against))
        return out


def compare_builds(
    collector: Collector, labels: dict[Variant, str], expected: dict[Variant, VerifyMetadata],
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

