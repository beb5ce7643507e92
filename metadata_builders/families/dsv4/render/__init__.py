"""Pictures of one batch: its requests as rows of token cells, its disagreements, its faults.

Engineers debugging a failure would rather look than read 500-element lists.
The package has one module per job, each importing only the ones above it:

============  ==============================================================================
model         :class:`Analysis` and its parts as pure data (rows, token cells and their
              kinds, disagreements, faults) and what of it a picture draws
differences   every place a builder disagrees with the reference (or a variant of its
              path with another), on top of ``metadata.first_difference`` and
              ``metadata.FIELDS``
analysis      :func:`analyse` turns a batch into an :class:`Analysis`: runs the builds,
              lays out the drawn one, compares, reads the faults; its docstring walks
              through a worked example
png           :func:`render_png` draws an analysis with matplotlib (Agg canvas); without
              matplotlib it raises ``PlotExtraMissing`` naming the ``plot`` extra
html          :func:`render_html` writes one self-contained page (CSS and script from
              ``assets/``, inlined; hover tooltips)
files         :func:`render_files` writes both next to a replay file (the builds run once)
============  ==============================================================================

matplotlib is imported only when a PNG is drawn, so the package works without it.
"""

from __future__ import annotations

from metadata_builders.families.dsv4.render.analysis import analyse, short_label
from metadata_builders.families.dsv4.render.files import render_files, write_doc_picture
from metadata_builders.families.dsv4.render.html import html_page, render_html
from metadata_builders.families.dsv4.render.model import (
    MAX_LISTED,
    MAX_ROWS,
    MAX_TOKENS_PER_ROW,
    Analysis,
    Cell,
    Disagreement,
    DrawnRow,
    FaultMark,
    Row,
)
from metadata_builders.families.dsv4.render.png import render_png

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
