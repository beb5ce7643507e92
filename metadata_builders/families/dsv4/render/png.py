"""The PNG picture of an :class:`~metadata_builders.families.dsv4.render.model.Analysis` (matplotlib, Agg canvas).

The figure is a grid of token cells on the left and a side panel on the right::

    summary (batch.describe())                          legend
    verdict                                             Disagreements / faults / notes
    r0 slot 2  [prefix 5] [5][6][7]
    ...        one line per DrawnRow, then one per oob_write fault ("past map end")

The grid's unit is one cell: cell ``j`` of a line spans ``x = j .. j+0.9``, line
``y`` spans ``y-0.4 .. y+0.4``; the prefix box sits left of ``x = -0.3``.  Each
function below draws one of those parts.  matplotlib is imported inside the
functions that draw, so importing this module does not need it;
:func:`render_png` raises :class:`~metadata_builders.errors.PlotExtraMissing`
when it is missing.
"""

from __future__ import annotations

import importlib
import os
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metadata_builders.errors import PlotExtraMissing
from metadata_builders.families.dsv4.render._style import COLOURS, KIND_LABELS
from metadata_builders.families.dsv4.render.analysis import analyse
from metadata_builders.families.dsv4.render.model import (
    MAX_LISTED,
    MAX_TOKENS_PER_ROW,
    Analysis,
    DrawnRow,
    FaultMark,
)

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = ["render_png"]

_YLabel = tuple[float, str, bool]
"""``(y, text, bad)``: a row's tick label, red when ``bad``."""


def render_png(
    batch: VerifyBatch, path: str | os.PathLike[str], *, builder_name: str = "hip", device: str = "cpu",
    analysis: Analysis | None = None,
) -> str:
    """Draw the batch (rows of token cells, boundaries, disagreements, faults) to a PNG; returns the path.

    ``analysis`` skips the builds (e.g. one from :func:`analyse` with a custom builder).
    Needs matplotlib (the ``plot`` extra: :class:`PlotExtraMissing` before any build
    without it); draws on an Agg canvas, leaving pyplot's backend alone.
    """
    _require_matplotlib()
    analysis = analysis or analyse(batch, builder_name, device)
    figure = _png_figure(analysis)
    path = os.fspath(path)
    figure.savefig(path, dpi=100)
    return path


def _require_matplotlib() -> None:
    try:
        importlib.import_module("matplotlib")
    except ImportError as exc:
        raise PlotExtraMissing("the PNG picture") from exc


def _png_figure(analysis: Analysis) -> Any:
    """The whole figure: the grid of rows, its boundaries and faults, axes, titles, side panel."""
    drawn = analysis.drawn_rows()
    oob = [f for f in analysis.faults if f.kind == "oob_write"]
    side_lines = len(_side_text(analysis).splitlines())
    geometry = _Geometry.of(drawn, oob, side_lines=side_lines, legend=len(_legend_handles(analysis, bool(oob))))
    figure, ax, side = _new_figure(geometry)
    ylabels = _draw_rows(ax, analysis, drawn, geometry)
    _draw_boundaries(ax, analysis.boundaries(drawn), geometry.ncols)
    ylabels += _draw_oob_writes(ax, oob, first_line=len(drawn))
    _label_rows(ax, ylabels, geometry)
    _label_columns(ax, analysis, drawn, geometry)
    _draw_titles(figure, analysis, geometry.height)
    _draw_side_panel(side, analysis, has_oob=bool(oob))
    return figure


# -- geometry and the figure -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Geometry:
    """Sizes of the picture: the grid in cells, the figure in inches."""

    ncols: int
    """Widest line in cells (a drawn row or an oob_write fault), at least 2."""
    lines: int
    """Drawn rows plus one line per oob_write fault."""
    prefix_w: float
    """Width of the prefix box, in cells."""
    cell_in: float
    """Inches per cell: smaller cells for wider grids."""
    text_in: float
    """Inches right of the cells for boundary and fault labels."""
    main_w: float
    """Inches of the grid's column (prefix, cells, labels)."""
    side_w: float
    """Inches of the side panel."""
    height: float
    """Inches of the figure: 0.3 per line plus 2 for titles and ticks, at least 4.5."""

    @classmethod
    def of(cls, drawn: list[DrawnRow], oob: list[FaultMark], *, side_lines: int = 0, legend: int = 0) -> _Geometry:
        ncols = max([len(d.cells) for d in drawn] + [min(f.count, MAX_TOKENS_PER_ROW) for f in oob] + [2])
        prefix_w = 3.0 if ncols <= 8 else 5.0
        cell_in = 0.34 if ncols <= 16 else (0.26 if ncols <= 32 else 0.19)
        text_in = 4.2 if oob else 3.4
        main_w = (prefix_w + ncols + 0.6) * cell_in + text_in + 0.4
        lines = len(drawn) + len(oob)
        # The side panel starts 1.45 in below the top, under the legend (11 pt a swatch), its text 7 pt
        # monospace at about 8.5 pt a line: the figure is tall enough for every note to show.
        side = 1.45 + (11 * (legend + 1.5) + 8.6 * side_lines) / 72 + 0.45
        return cls(ncols, lines, prefix_w, cell_in, text_in, main_w, 6.2, max(0.3 * lines + 2.0, 4.5, side))

    @property
    def text_w(self) -> float:
        """The label space right of the cells, in cells."""
        return self.text_in / self.cell_in

    @property
    def show_numbers(self) -> bool:
        """Cells are wide enough to carry their position."""
        return self.ncols <= 24


def _new_figure(geometry: _Geometry) -> tuple[Any, Any, Any]:
    """An Agg figure with the grid's axes on the left and the (axis-less) side panel on the right."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    g = geometry
    figure = Figure(figsize=(g.main_w + g.side_w, g.height))
    FigureCanvasAgg(figure)
    grid = figure.add_gridspec(1, 2, width_ratios=[g.main_w, g.side_w], left=1.3 / (g.main_w + g.side_w), right=0.99,
                               top=1 - 1.45 / g.height, bottom=0.3 / g.height, wspace=0.04)
    ax = figure.add_subplot(grid[0, 0])
    side = figure.add_subplot(grid[0, 1])
    side.set_axis_off()
    return figure, ax, side


# -- the grid ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Patches:
    """Rectangles ``(x, y, width, height)`` gathered row by row, drawn as three collections at the end.

    One collection per look (filled, outlined in red, hatched) rather than one
    artist per cell keeps a 2,000-token picture fast.
    """

    fills: list[tuple[float, float, float, float]] = field(default_factory=list)
    colours: list[str] = field(default_factory=list)
    """One per fill."""
    outlines: list[tuple[float, float, float, float]] = field(default_factory=list)
    hatched: list[tuple[float, float, float, float]] = field(default_factory=list)

    def fill(self, box: tuple[float, float, float, float], colour: str) -> None:
        self.fills.append(box)
        self.colours.append(colour)

    def add_to(self, ax: Any) -> None:
        from matplotlib.collections import PatchCollection

        ax.add_collection(PatchCollection(_rectangles(self.fills), facecolors=self.colours, edgecolors="none"))
        if self.outlines:
            ax.add_collection(PatchCollection(_rectangles(self.outlines), facecolors="none",
                                              edgecolors=COLOURS["bad"], linewidths=1.8))
        if self.hatched:
            ax.add_collection(PatchCollection(_rectangles(self.hatched), facecolors="none", edgecolors="black",
                                              hatch="xxx", linewidths=0))


def _rectangles(boxes: list[tuple[float, float, float, float]]) -> list[Any]:
    from matplotlib.patches import Rectangle

    return [Rectangle((x, y), w, h) for x, y, w, h in boxes]


def _draw_rows(ax: Any, analysis: Analysis, drawn: list[DrawnRow], geometry: _Geometry) -> list[_YLabel]:
    """Every drawn line: its prefix box, its token cells, its notes; returns the lines' tick labels."""
    patches = _Patches()
    uninit = analysis.uninitialised
    ylabels: list[_YLabel] = []
    for y, line in enumerate(drawn):
        if line.row is None:
            ylabels.append((y, f"... {line.hidden_rows} rows", line.hidden_flagged))
            continue
        ylabels.append((y, line.row.label, line.row.index in analysis.flagged_rows))
        if line.row.prefix is not None:
            _draw_prefix(ax, patches, y, line.row.prefix, geometry.prefix_w)
        _draw_cells(ax, patches, y, line, analysis, uninit, geometry.show_numbers)
        _draw_row_notes(ax, y, line, uninit)
    patches.add_to(ax)
    return ylabels


def _draw_prefix(ax: Any, patches: _Patches, y: int, prefix: int, width: float) -> None:
    """The grey box standing for the accepted prefix, left of the row's first cell."""
    patches.fill((-width - 0.3, y - 0.4, width, 0.8), COLOURS["prefix"])
    ax.text(-0.3 - width / 2, y, f"prefix {prefix}", ha="center", va="center", fontsize=7)


def _draw_cells(
    ax: Any, patches: _Patches, y: int, line: DrawnRow, analysis: Analysis, uninit: dict[int, tuple[str, ...]],
    numbers: bool,
) -> None:
    """One line's cells: coloured by kind, outlined when flagged, hatched when uninitialised, numbered with
    their position when ``numbers``; an ellipsis cell reads ``...`` (red when it hides a flagged token)."""
    for x, cell in enumerate(line.cells):
        if cell is None:
            ax.text(x + 0.45, y, "...", ha="center", va="center", fontsize=7,
                    color=COLOURS["bad"] if line.hidden_flagged else "black")
            continue
        patches.fill((x, y - 0.4, 0.9, 0.8), COLOURS[cell.kind])
        if cell.token in analysis.flagged_tokens:
            patches.outlines.append((x - 0.02, y - 0.44, 0.94, 0.88))
        if cell.token in uninit:
            patches.hatched.append((x, y - 0.4, 0.9, 0.8))
        if numbers:
            ax.text(x + 0.45, y, str(cell.position), ha="center", va="center", fontsize=6, color="white")


def _draw_row_notes(ax: Any, y: int, line: DrawnRow, uninit: dict[int, tuple[str, ...]]) -> None:
    """Right of a line's cells: how many it hides, and an arrow when one is uninitialised."""
    notes = [f"({line.hidden_cells} hidden)"] if line.hidden_cells else []
    if any(c is not None and c.token in uninit for c in line.cells):
        notes.append("<- uninitialised")
    if notes:
        ax.text(len(line.cells) + 0.2, y, "  ".join(notes), va="center", fontsize=6.5)


def _draw_boundaries(ax: Any, boundaries: list[tuple[int, str, str]], ncols: int) -> None:
    """The lines between rows (:meth:`Analysis.boundaries`): solid for the tier, dashed otherwise, labelled."""
    for after, label, style in boundaries:
        y = after + 0.5
        ax.axhline(y, color="black" if style == "tier" else "grey", linestyle="-" if style == "tier" else "--",
                   linewidth=1.4 if style == "tier" else 0.9)
        ax.text(ncols + 0.3, y, label, va="center", ha="left", fontsize=7,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})


def _draw_oob_writes(ax: Any, oob: list[FaultMark], first_line: int) -> list[_YLabel]:
    """One line per oob_write fault under the grid: a hatched red cell per element written past the map end."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    ylabels: list[_YLabel] = []
    for k, fault in enumerate(oob):
        y = first_line + k
        shown = min(fault.count, MAX_TOKENS_PER_ROW)
        ax.add_collection(PatchCollection(
            [Rectangle((x, y - 0.4), 0.9, 0.8) for x in range(shown)],
            facecolors=COLOURS["oob"], edgecolors=COLOURS["bad"], hatch="////", linewidths=0.8,
        ))
        extra = f" (+{fault.count - shown})" if fault.count > shown else ""
        others = f" +{len(fault.variants) - 1}" if len(fault.variants) > 1 else ""
        ax.text(shown + 0.3, y, f"out-of-bounds write x{fault.count}{extra} past output_size={fault.output_size} "
                f"({fault.variants[0]}{others})", va="center", fontsize=7, color=COLOURS["bad"])
        ylabels.append((y, "past map end", True))
    return ylabels


# -- axes, titles, side panel ------------------------------------------------------------------------


def _label_rows(ax: Any, ylabels: list[_YLabel], geometry: _Geometry) -> None:
    """The axis limits and one tick label per line, red where the row disagrees."""
    g = geometry
    ax.set_xlim(-g.prefix_w - 0.6, g.ncols + g.text_w)
    # a few rows still get cells of the usual height: the short axis is padded below, not stretched
    ax.set_ylim(max(g.lines, int((g.height - 2.0) / 0.3)) - 0.5, -0.7)
    ax.set_yticks([y for y, _, _ in ylabels])
    ax.set_yticklabels([t for _, t, _ in ylabels], fontsize=7)
    for tick, (_, _, bad) in zip(ax.get_yticklabels(), ylabels):
        if bad:
            tick.set_color(COLOURS["bad"])


def _label_columns(ax: Any, analysis: Analysis, drawn: list[DrawnRow], geometry: _Geometry) -> None:
    """Column ticks (token j within the row) on top, the axis titles, and no bottom or right frame."""
    ncols = geometry.ncols
    step = 1 if ncols <= 16 else (4 if ncols <= 32 else 8)
    # past an ellipsis the display column is no longer j, so ticks stop there
    true_cols = min([d.cells.index(None) for d in drawn if None in d.cells] + [ncols])
    ax.set_xticks([x + 0.45 for x in range(0, true_cols, step)])
    ax.set_xticklabels([str(x) for x in range(0, true_cols, step)])
    ax.tick_params(axis="x", labelsize=7)
    numbers = "; number = position)" if geometry.show_numbers else ")"
    ax.set_xlabel("verify token j within the row (cell = one token" + numbers, fontsize=8)
    ax.set_ylabel(f"request row ({analysis.path} path)", fontsize=8)
    # ticks on top, next to the first rows, so a short batch is not read across an empty axis
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    for spine in ("bottom", "right"):
        ax.spines[spine].set_visible(False)


def _draw_titles(figure: Any, analysis: Analysis, height: float) -> None:
    """The summary line, and under it the verdict: green when clean, red otherwise."""
    figure.suptitle(analysis.summary, fontsize=10, x=0.01, ha="left", y=1 - 0.25 / height)
    figure.text(0.01, 1 - 0.6 / height, analysis.verdict, fontsize=8, ha="left",
                color=COLOURS["ok"] if analysis.is_clean else COLOURS["bad"])


def _draw_side_panel(side: Any, analysis: Analysis, *, has_oob: bool) -> None:
    """The legend, and under it the disagreements, faults and notes as monospace text."""
    handles = _legend_handles(analysis, has_oob)
    side.legend(handles=handles, loc="upper left", fontsize=7, frameon=False, borderaxespad=0)
    side.annotate(_side_text(analysis), xy=(0.0, 1.0), xycoords="axes fraction", xytext=(0, -11 * (len(handles) + 1.5)),
                  textcoords="offset points", va="top", ha="left", fontsize=7, family="monospace")


def _legend_handles(analysis: Analysis, has_oob: bool) -> list[Any]:
    """A swatch per look the grid uses: the prefix, each cell kind present, outlines and hatches."""
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=COLOURS["prefix"], label="accepted prefix (summarised)")]
    kinds = {c.kind for c in analysis.cells}
    handles += [Patch(facecolor=COLOURS[k], label=KIND_LABELS[k]) for k in KIND_LABELS if k in kinds]
    if analysis.flagged_tokens:
        handles.append(Patch(facecolor="none", edgecolor=COLOURS["bad"], linewidth=1.8,
                             label="disagrees with reference"))
    if analysis.uninitialised:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="xxx", label="uninitialised (token map tail)"))
    if has_oob:
        handles.append(Patch(facecolor="white", edgecolor=COLOURS["bad"], hatch="////", label="out-of-bounds write"))
    return handles


# -- the side panel's text ---------------------------------------------------------------------------


def _clip(text: str, width: int = 78) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _side_text(analysis: Analysis) -> str:
    return "\n".join(_failure_lines(analysis) + _disagreement_lines(analysis) + _fault_lines(analysis)
                     + _note_lines(analysis))


def _failure_lines(analysis: Analysis) -> list[str]:
    """The failure the picture was drawn for, first: the property, check id, what failed (empty without one)."""
    if not analysis.failure:
        return []
    return [_clip(analysis.failure[0])] + [" " + _clip(line, 77) for line in analysis.failure[1:]] + [""]


def _disagreement_lines(analysis: Analysis) -> list[str]:
    """The first ``MAX_LISTED`` disagreements, two lines each; or that every variant agrees."""
    if not analysis.disagreements:
        agree = f"All {len(analysis.variants)} variants agree with the reference."
        return [agree + (" (the failure above is not in these builds)" if analysis.failure else "")]
    n = analysis.num_disagreements
    out = [f"Disagreements ({min(n, MAX_LISTED)} of {n}):" if n > MAX_LISTED else f"Disagreements ({n}):"]
    for d in analysis.disagreements[:MAX_LISTED]:
        vs = "" if d.against == "reference" else f" vs {d.against}"
        more = f" +{len(d.variants) - 1} more" if len(d.variants) > 1 else ""
        out.append(" " + _clip(f"{d.where}: expected {d.expected!r}, actual {d.actual!r}"))
        out.append("   " + _clip(f"({d.variants[0]}{more}{vs})", 76))
    return out


def _fault_lines(analysis: Analysis) -> list[str]:
    """Each fault with up to six of its variants; for a diverging batch without faults, that there were none."""
    if not analysis.faults:
        if "diverges" not in analysis.summary:
            return []
        return ["", "Device faults: none (every map that trusted", " output_size matched the device lengths)."]
    out = ["", "Device faults (batch with its divergence):"]
    for f in analysis.faults:
        out.append(f" {f.kind} x{f.count} (output_size={f.output_size}, device sum={f.device_sum}):")
        out += ["   " + _clip(v, 74) for v in f.variants[:6]]
        if len(f.variants) > 6:
            out.append(f"   +{len(f.variants) - 6} more")
    return out


def _note_lines(analysis: Analysis) -> list[str]:
    """The first eight notes, wrapped."""
    if not analysis.notes:
        return []
    out = ["", "Notes:"]
    for n in analysis.notes[:8]:
        out += textwrap.wrap(n, 78, initial_indent=" ", subsequent_indent="   ")
    return out
