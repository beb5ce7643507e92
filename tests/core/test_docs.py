"""The documentation stays true: the README's CLI synopsis is the parsers', and every relative link and
``#anchor`` in the docs resolves (issue 40 item 7: drift made hard, not fixed once)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped (hyphens, underscores kept),
    spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _FENCE.sub("", page.read_text()).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = _slug(match.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text())
    text = re.sub(r"`[^`\n]*`", "", text)
    return [a or b for a, b in _LINK.findall(text)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    """A link to a file names one that exists; a ``#anchor`` names a heading of that page."""
    broken = []
    for target in _links(page):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(f"{target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in _anchors(where):
            broken.append(f"{target}: no heading #{anchor} in {where.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_cli_synopsis_is_the_parsers() -> None:
    """Every option of every subcommand, as ``metadata_builders.cli.synopsis()`` makes it from the parsers."""
    from metadata_builders.cli import synopsis

    readme = (ROOT / "README.md").read_text()
    assert synopsis() in readme, ("README.md's CLI synopsis is stale; replace its block with the output of "
                                  "python -c 'from metadata_builders.cli import synopsis; print(synopsis())'")


def test_the_slug_is_githubs() -> None:
    """The anchors GitHub makes for the headings the docs link to."""
    assert _slug("2. Domain model") == "2-domain-model"
    assert _slug("The `check` table") == "the-check-table"
    assert _slug("Mode `draft_extend` (issue 26)") == "mode-draft_extend-issue-26"


_CITATION = re.compile(r"""(README(?:\.md)?|docs/[A-Z]+\.md|\b[A-Z]+\.md)[,:]? ["'“]([A-Z][^"'”\n]{3,80})["'”]""")
_CITED_IN = sorted([*(ROOT / "metadata_builders").rglob("*.py"), *(ROOT / "strategies").rglob("*.py"),
                    *(p for p in (ROOT / "docs").rglob("*.py") if "research" not in p.parts),
                    *(ROOT / "tests").glob("*.py"), *PAGES])


def test_every_section_a_message_or_page_cites_by_name_exists() -> None:
    """``docs/BUILDERS.md, 'Declaring modes'`` and ``(README, "The pre-merge gate")`` name a heading of that page
    (a citation of a section that was renamed or never existed sends a reader nowhere)."""
    broken = []
    for source in _CITED_IN:
        if source == Path(__file__).resolve():
            continue
        for page, section in _CITATION.findall(source.read_text()):
            name = page.removeprefix("docs/")
            target = ROOT / ("README.md" if name.startswith("README") else f"docs/{name}")
            if not target.exists():
                broken.append(f"{source.relative_to(ROOT)}: {page} does not exist")
                continue
            headings = [_slug(h) for h in re.findall(r"^#{1,6}\s+(.*?)\s*$", _FENCE.sub("", target.read_text()),
                                                      re.M)]
            if not any(h.startswith(_slug(section)) for h in headings):
                broken.append(f"{source.relative_to(ROOT)}: {page} has no section {section!r}")
    assert not broken, "\n".join(broken)
