"""Both pictures of a batch written as files: next to a replay file, or into the docs."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Sequence

from metadata_builders.errors import PlotExtraMissing
from metadata_builders.families.dsv4.render.analysis import analyse
from metadata_builders.families.dsv4.render.html import render_html
from metadata_builders.families.dsv4.render.model import Analysis
from metadata_builders.families.dsv4.render.png import render_png

if TYPE_CHECKING:
    from metadata_builders.errors import PropertyFailure
    from metadata_builders.families.dsv4.batch import VerifyBatch
    from metadata_builders.families.dsv4.builders import Builder

__all__ = ["render_files", "write_doc_picture"]


def render_files(
    batch: VerifyBatch, replay_path: str | os.PathLike[str], *, builder_name: str = "hip", device: str = "cpu",
    analysis: Analysis | None = None, failure: PropertyFailure | None = None, history: Sequence[VerifyBatch] = (),
) -> list[str]:
    """Write ``<replay_path minus .json>.png`` and ``.html`` next to a replay file; returns both paths.

    The builds run once for both pictures.  The PNG needs matplotlib; without it
    only the HTML is written.  ``failure`` and ``history``: the failure the replay file holds, shown first
    (:func:`~metadata_builders.families.dsv4.render.analysis.analyse`).
    """
    stem = os.fspath(replay_path)
    stem = stem.removesuffix(".json")
    analysis = analysis or analyse(batch, builder_name, device, failure=failure, history=history)
    out: list[str] = []
    try:
        out.append(render_png(batch, stem + ".png", analysis=analysis))
    except PlotExtraMissing:
        pass  # the page alone still shows everything; `check` must not fail for want of a picture
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
