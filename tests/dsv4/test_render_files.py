"""Pictures of a batch: the PNG, the self-contained HTML page, the files written next to a replay file, and an
install without the ``plot`` extra.

The analysis behind them: ``test_render.py``.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _examples import EXAMPLES
from _render_batches import FALLEN_BEHIND, RUN_AHEAD, OffByOneFinalPos, _load

from metadata_builders.errors import PlotExtraMissing
from metadata_builders.families.dsv4.render import Analysis, analyse, html_page, render_files, render_html, render_png

matplotlib = pytest.importorskip("matplotlib")
np = pytest.importorskip("numpy")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RED = (0xD6 / 255, 0x27 / 255, 0x28 / 255)
REGRESSIONS = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(__file__)), "regressions", "*.json")))
AMD_FAULT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "regressions", "eagle_host_mirror_run_ahead.json")
"""The README's picture: EAGLE, host mirror, device lengths one token ahead."""


def _pixels(path: str):
    from matplotlib.image import imread

    return imread(path)


def _red_pixels(image) -> int:
    rgb = image[..., :3]
    return int((np.abs(rgb - np.array(RED)).max(axis=-1) < 0.06).sum())


def _drawn_cells(analysis: Analysis) -> list:
    return [c for line in analysis.drawn_rows() for c in line.cells if c is not None]


def _batches_to_draw() -> list:
    named = ["uniform_eagle_batch_of_three", "ragged_tier_slack_spread_over_pad_rows",
             "tier_slack_absorbed_by_last_real_row", "capped_tier_uncovered_tail", "single_request"]
    params = [pytest.param(EXAMPLES[n], id=n) for n in named]
    params.append(pytest.param(RUN_AHEAD, id="run_ahead_divergence"))
    for path in REGRESSIONS:
        params.append(pytest.param(path, id=f"regression:{os.path.basename(path)}"))
    return params


# -- the PNG ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", _batches_to_draw())
def test_png_is_a_real_picture(batch, tmp_path: Path) -> None:
    """The PNG has the PNG signature, a readable size and more than one colour."""
    batch = _load(batch)
    out = render_png(batch, tmp_path / "b.png", builder_name="hip", device="cpu")
    assert out == str(tmp_path / "b.png")
    assert Path(out).read_bytes()[:8] == PNG_SIGNATURE
    image = _pixels(out)
    h, w = image.shape[:2]
    assert 400 <= h <= 4000 and 800 <= w <= 4000
    assert len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) > 8


def test_png_outlines_the_disagreeing_cell_in_red(tmp_path: Path) -> None:
    """The same analysis drawn with and without its flagged cell differs by a red outline."""
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    a = analyse(batch, builder=OffByOneFinalPos())
    flagged = render_png(batch, tmp_path / "flagged.png", analysis=a)
    plain = render_png(batch, tmp_path / "plain.png", analysis=dataclasses.replace(a, flagged_tokens=frozenset()))
    assert _red_pixels(_pixels(flagged)) - _red_pixels(_pixels(plain)) > 100


def test_png_draws_out_of_bounds_cells(tmp_path: Path) -> None:
    """An oob_write fault adds hatched red cells past the map end."""
    a = analyse(RUN_AHEAD, "hip", "cpu")
    with_faults = render_png(RUN_AHEAD, tmp_path / "f.png", analysis=a)
    without = render_png(RUN_AHEAD, tmp_path / "n.png", analysis=dataclasses.replace(a, faults=()))
    assert _red_pixels(_pixels(with_faults)) > _red_pixels(_pixels(without)) + 100


# -- the HTML --------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", _batches_to_draw())
def test_html_is_self_contained_with_one_cell_per_drawn_token(batch, tmp_path: Path) -> None:
    """No network asset, one cell element (with a tooltip) per drawn token."""
    batch = _load(batch)
    a = analyse(batch, "hip", "cpu")
    out = render_html(batch, tmp_path / "b.html", analysis=a)
    page = Path(out).read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    cells = re.findall(r'<span class="cell (k-\w+)[^"]*" id="t(\d+)" title="([^"]*)"', page)
    drawn = _drawn_cells(a)
    assert len(cells) == len(drawn) == page.count('class="cell ')
    assert [int(t) for _, t, _ in cells] == [c.token for c in drawn]
    assert all(f"position {c.position}, slot {c.slot}" in tip for (_, _, tip), c in zip(cells, drawn))


def test_html_names_the_disagreeing_field_and_values() -> None:
    """The disagreeing cell is marked bad and its tooltip and the side list give field, index and both values."""
    a = analyse(EXAMPLES["ragged_tier_slack_spread_over_pad_rows"], builder=OffByOneFinalPos())
    page = html_page(a)
    cell = re.search(r'<span class="cell k-verify bad" id="t0" title="([^"]*)"', page)
    assert cell is not None and "pf_final_pos[0]: expected 7, actual 8" in cell.group(1)
    assert page.count(" bad\" id=") == 1
    assert '<li data-tokens="t0"' in page and "pf_final_pos[0]: expected 7, actual 8" in page


def test_html_shows_faults_and_uninitialised_cells() -> None:
    """oob_write cells appear past the map end; uninitialised cells carry the uninit class and say so."""
    run_ahead = html_page(analyse(RUN_AHEAD, "hip", "cpu"))
    assert run_ahead.count('<span class="oob"></span>') == 2
    assert "out-of-bounds write x1" in run_ahead and "gate=ungated" in run_ahead
    behind = html_page(analyse(FALLEN_BEHIND, "hip", "cpu"))
    uninit = re.findall(r'class="cell [^"]*uninit" id="t(\d+)" title="([^"]*)"', behind)
    assert {int(t) for t, _ in uninit} == {5, 7}
    assert all("uninitialised by the token map" in tip for _, tip in uninit)


def _chromium() -> str | None:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def test_html_renders_in_headless_chromium(tmp_path: Path) -> None:
    """A headless browser draws the page: the screenshot exists and is not blank."""
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium not installed")
    page = render_html(RUN_AHEAD, tmp_path / "page.html", device="cpu")
    shot = tmp_path / "s.png"
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
           f"--screenshot={shot}", "--window-size=1200,800", Path(page).resolve().as_uri()]
    subprocess.run(cmd, check=False, timeout=120, capture_output=True)
    assert shot.exists() and shot.read_bytes()[:8] == PNG_SIGNATURE
    image = _pixels(str(shot))
    assert len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) > 8


# -- files -----------------------------------------------------------------------------------------


def test_render_files_writes_png_and_html_next_to_the_replay_file(tmp_path: Path) -> None:
    """``failures/P6.json`` gets ``failures/P6.png`` and ``failures/P6.html``, as cli check expects."""
    replay = tmp_path / "P6.json"
    replay.write_text(RUN_AHEAD.to_json(why="test"))
    out = render_files(RUN_AHEAD, str(replay), builder_name="hip", device="cpu")
    assert out == [str(tmp_path / "P6.png"), str(tmp_path / "P6.html")]
    assert all(Path(p).stat().st_size > 1000 for p in out)


def test_the_page_inlines_the_packaged_style_and_script() -> None:
    """The page carries render/assets/page.css and page.js inline: installed, they ship as package data."""
    from importlib import resources

    assets = resources.files("metadata_builders.families.dsv4.render").joinpath("assets")
    page = html_page(analyse(RUN_AHEAD, "hip", "cpu"))
    css = assets.joinpath("page.css").read_text(encoding="utf-8")
    js = assets.joinpath("page.js").read_text(encoding="utf-8")
    assert ".cell{" in css and "data-tokens" in js
    assert f"<style>\n{css}</style>" in page and f"<script>\n{js}</script>" in page


# -- without matplotlib ----------------------------------------------------------------------------


@pytest.fixture
def without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every matplotlib module unimportable, as in an install without the ``plot`` extra."""
    for name in [n for n in sys.modules if n == "matplotlib" or n.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_replay_png_without_matplotlib_exits_2_naming_the_plot_extra(
    without_matplotlib: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``replay --png`` without matplotlib exits 2, saying the PNG needs the plot extra and how to install it."""
    from metadata_builders.cli import main

    out = tmp_path / "x.png"
    assert main(["replay", AMD_FAULT, "--png", str(out)]) == 2
    err = capsys.readouterr().err
    assert "PlotExtraMissing" in err and "the PNG picture needs matplotlib" in err
    assert "pip install 'metadata-builders[plot]'" in err
    assert not out.exists()


def test_render_png_without_matplotlib_fails_before_any_build(without_matplotlib: None, tmp_path: Path) -> None:
    """PlotExtraMissing comes first: a builder that cannot even be found is never reached."""
    with pytest.raises(PlotExtraMissing) as info:
        render_png(RUN_AHEAD, tmp_path / "x.png", builder_name="no_such_module:nothing")
    assert info.value.field == "matplotlib" and isinstance(info.value, ImportError)


def test_render_files_without_matplotlib_writes_the_page_alone(without_matplotlib: None, tmp_path: Path) -> None:
    """``check`` still gets a picture of a failure without the plot extra: the HTML page."""
    out = render_files(RUN_AHEAD, str(tmp_path / "P6.json"), builder_name="hip", device="cpu")
    assert out == [str(tmp_path / "P6.html")]
    assert not (tmp_path / "P6.png").exists()


def test_importing_render_does_not_import_matplotlib() -> None:
    """matplotlib is imported only when a PNG is drawn, so the package works without it."""
    code = "import sys, metadata_builders.families.dsv4.render; sys.exit('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
