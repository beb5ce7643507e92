"""The self-contained HTML page of an :class:`~metadata_builders.families.dsv4.render.model.Analysis`.

One file, no network: the style (``assets/page.css``) and the hover script
(``assets/page.js``) ship as package data and are inlined into every page.  The
page is a grid of rows and an aside::

    <h1>summary</h1> <p class="verdict ok|bad">
    <div class="grid">   one <div class="row"> per drawn line: label, prefix, one
                         <span class="cell k-KIND" id="tTOKEN" title="tooltip"> per token;
                         <div class="line STYLE"> per boundary; oob_write rows last
    <aside>              legend, disagreements (hover one: its cell is outlined),
                         faults, notes, variants built
"""

from __future__ import annotations

import functools
import html
import os
from importlib import resources
from typing import TYPE_CHECKING

from metadata_builders.families.dsv4.render._style import COLOURS, KIND_LABELS
from metadata_builders.families.dsv4.render.analysis import analyse
from metadata_builders.families.dsv4.render.model import MAX_TOKENS_PER_ROW, Analysis, Cell, DrawnRow

if TYPE_CHECKING:
    from collections.abc import Iterable

    from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = ["html_page", "render_html"]

_MAX_LISTED = 200
"""Disagreements listed in the aside (every cell still shows its own)."""

_esc = html.escape


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
    title = _esc(analysis.summary)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>\n{_asset('page.css')}</style></head><body>\n"
        f"<h1>{title}</h1>\n"
        f'<p class="verdict {"ok" if analysis.is_clean else "bad"}">{_esc(analysis.verdict)}</p>\n'
        '<div class="wrap"><div class="grid">\n' + "\n".join(_grid(analysis)) + "\n</div>\n"
        f"<aside>{_aside(analysis)}</aside></div>\n<script>\n{_asset('page.js')}</script>\n</body></html>\n"
    )


@functools.cache
def _asset(name: str) -> str:
    """``render/assets/<name>``, read once per process."""
    assets = resources.files("metadata_builders.families.dsv4.render").joinpath("assets")
    return assets.joinpath(name).read_text(encoding="utf-8")


# -- the grid ----------------------------------------------------------------------------------------


def _grid(analysis: Analysis) -> list[str]:
    """One element per drawn line, the boundary lines between them, then the oob_write rows."""
    uninit = analysis.uninitialised
    drawn = analysis.drawn_rows()
    lines_after: dict[int, list[tuple[str, str]]] = {}
    for after, label, style in analysis.boundaries(drawn):
        lines_after.setdefault(after, []).append((label, style))
    out: list[str] = []
    for i, line in enumerate(drawn):
        out.append(_row(analysis, line, uninit))
        out += [f'<div class="line {style}">{_esc(label)}</div>' for label, style in lines_after.get(i, [])]
    out += _oob_rows(analysis)
    return out


def _row(analysis: Analysis, line: DrawnRow, uninit: dict[int, tuple[str, ...]]) -> str:
    """A row's label, prefix box and cells; or the line standing for hidden rows."""
    if line.row is None:
        bad = " bad" if line.hidden_flagged else ""
        return f'<div class="row"><span class="label{bad}">... {line.hidden_rows} rows hidden</span></div>'
    row = line.row
    bad = " bad" if row.index in analysis.flagged_rows else ""
    tip = _esc(f"row {row.index}: {row.kind}, slot {row.slot}, prefix {row.prefix}, "
               f"tokens {row.first_token}..{row.first_token + row.num_tokens - 1}", quote=True)
    parts = [f'<div class="row"><span class="label{bad}" title="{tip}">{_esc(row.label)}</span>']
    if row.prefix is None:
        parts.append('<span class="noprefix"></span>')
    else:
        parts.append(f'<span class="prefix">prefix {row.prefix}</span>')
    parts += [_cell(analysis, line, cell, uninit) for cell in line.cells]
    parts.append("</div>")
    return "".join(parts)


def _cell(analysis: Analysis, line: DrawnRow, cell: Cell | None, uninit: dict[int, tuple[str, ...]]) -> str:
    """One token's span (its number is its position), or the ellipsis for the row's hidden tokens."""
    if cell is None:
        bad = " bad" if line.hidden_flagged else ""
        return (f'<span class="ellipsis{bad}" title="{line.hidden_cells} tokens hidden">'
                f"... +{line.hidden_cells} ...</span>")
    classes = f"cell k-{cell.kind}"
    if cell.token in analysis.flagged_tokens:
        classes += " bad"
    if cell.token in uninit:
        classes += " uninit"
    tip = _esc(_tooltip(analysis, cell, uninit), quote=True)
    return (f'<span class="{classes}" id="t{cell.token}" title="{tip}">'
            f"{cell.position if cell.position < 1000 else ''}</span>")


def _tooltip(analysis: Analysis, cell: Cell, uninit: dict[int, tuple[str, ...]]) -> str:
    """Token, row, kind, position and slot; then up to eight disagreements; then who left it uninitialised."""
    lines = [f"token {cell.token} (row {cell.row}, j={cell.column}, {KIND_LABELS[cell.kind]})",
             f"position {cell.position}, slot {cell.slot}"]
    for d in analysis.by_token.get(cell.token, ())[:8]:
        lines.append(d.describe(max_variants=2))
    extra = len(analysis.by_token.get(cell.token, ())) - 8
    if extra > 0:
        lines.append(f"... {extra} more")
    if cell.token in uninit:
        lines.append(f"uninitialised by the token map: {'; '.join(uninit[cell.token][:3])}")
    return "\n".join(lines)


def _oob_rows(analysis: Analysis) -> list[str]:
    """One row per oob_write fault: a hatched box per element written past the map end, then the fault."""
    out = []
    for fault in (f for f in analysis.faults if f.kind == "oob_write"):
        boxes = '<span class="oob"></span>' * min(fault.count, MAX_TOKENS_PER_ROW)
        out.append(f'<div class="row"><span class="label bad">past map end</span><span class="noprefix"></span>{boxes}'
                   f'<span class="oobtext">{_esc(str(fault))}</span></div>')
    return out


# -- the aside ---------------------------------------------------------------------------------------


def _aside(analysis: Analysis) -> str:
    """Legend, disagreements, device faults, notes and the variants built."""
    side = [_legend(analysis)]
    if analysis.failure:
        side.append(f'<h2 class="bad">{_esc(analysis.failure[0])}</h2>' + _list(_esc(n) for n in analysis.failure[1:]))
    side += ["<h2>Disagreements</h2>", _disagreements(analysis), _faults(analysis)]
    if analysis.notes:
        side.append("<h2>Notes</h2>" + _list(_esc(n) for n in analysis.notes))
    side.append("<h2>Variants built</h2>" + _list(_esc(v) for v in analysis.variants))
    return "".join(side)


def _list(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"


def _disagreements(analysis: Analysis) -> str:
    """Up to ``_MAX_LISTED`` disagreements; hovering one outlines its token's cell."""
    if not analysis.disagreements:
        above = " (the failure above is not in these builds)" if analysis.failure else ""
        return f"<p>All {len(analysis.variants)} variants agree with the reference{above}.</p>"
    items = []
    for d in analysis.disagreements[:_MAX_LISTED]:
        ids = f"t{d.token}" if d.token is not None else ""
        items.append(f'<li data-tokens="{ids}" title="{_esc(", ".join(d.variants), quote=True)}">'
                     f"{_esc(d.describe(max_variants=2))}</li>")
    more = analysis.num_disagreements - min(len(analysis.disagreements), _MAX_LISTED)
    return "<ul>" + "".join(items) + (f"<li>... {more} more</li>" if more > 0 else "") + "</ul>"


def _faults(analysis: Analysis) -> str:
    """The device faults (hovering one outlines the cells it left uninitialised); none for a diverging batch."""
    if not (analysis.faults or "diverges" in analysis.summary):
        return ""
    head = "<h2>Device faults (batch with its divergence)</h2>"
    if not analysis.faults:
        return head + "<p>None: every map that trusted output_size matched the device lengths.</p>"
    return head + "<ul>" + "".join(
        f'<li data-tokens="{" ".join(f"t{t}" for t in f.tokens)}">{_esc(str(f))}</li>' for f in analysis.faults
    ) + "</ul>"


def _legend(analysis: Analysis) -> str:
    """A swatch per look the grid uses: the prefix, each cell kind present, outlines and hatches."""
    items = [(f"background:{COLOURS['prefix']}", "accepted prefix (summarised)")]
    kinds = {c.kind for c in analysis.cells}
    items += [(f"background:{COLOURS[k]}", KIND_LABELS[k]) for k in KIND_LABELS if k in kinds]
    if analysis.flagged_tokens:
        items.append((f"outline:2px solid {COLOURS['bad']}", "disagrees with reference (hover a cell)"))
    if analysis.uninitialised:
        items.append(("background:repeating-linear-gradient(45deg,#555 0 2px,#fff 2px 5px)",
                      "uninitialised (token map tail)"))
    if any(f.kind == "oob_write" for f in analysis.faults):
        items.append((f"background:repeating-linear-gradient(135deg,{COLOURS['bad']} 0 2px,#fff 2px 5px)",
                      "out-of-bounds write"))
    return '<div class="legend">' + "<br>".join(
        f'<span class="sw" style="{style}"></span>{_esc(label)}' for style, label in items
    ) + "</div>"
