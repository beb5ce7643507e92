"""A release says one version everywhere, and CHANGELOG.md says what changed."""

from __future__ import annotations

import pathlib
import re

import metadata_builders

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / "ci" / "workflows").glob("*.yml"))


def _pyproject_version() -> str:
    """``[project] version`` of pyproject.toml (read as text: tomllib is Python 3.11+)."""
    project = (ROOT / "pyproject.toml").read_text().split("[project]", 1)[1].split("\n[", 1)[0]
    match = re.search(r'^version\s*=\s*"([^"]+)"', project, re.MULTILINE)
    assert match, "pyproject.toml's [project] table has no version"
    return match.group(1)


def _harness_refs() -> dict[str, str]:
    """``HARNESS_REF`` of every workflow that pins the harness, by file name."""
    refs = {}
    for path in WORKFLOWS:
        match = re.search(r"^\s*HARNESS_REF:\s*['\"]?([^'\"\s#]+)", path.read_text(), re.MULTILINE)
        if match:
            refs[path.name] = match.group(1)
    return refs


def test_the_package_says_the_version_pyproject_says() -> None:
    """metadata_builders.__version__ is pyproject.toml's version."""
    assert metadata_builders.__version__ == _pyproject_version()


def test_the_workflow_pins_the_harness_at_this_version() -> None:
    """Every workflow's HARNESS_REF is ``v`` + pyproject.toml's version: bump both together."""
    refs = _harness_refs()
    assert refs, f"no HARNESS_REF in {[p.name for p in WORKFLOWS]}"
    assert refs == dict.fromkeys(refs, f"v{_pyproject_version()}")


def test_the_ci_guide_checks_out_the_pinned_ref() -> None:
    """docs/CI.md's manual checkout uses the same ref as the workflow."""
    pinned = re.findall(r"checkout (v[0-9][^\s]*)", (ROOT / "docs" / "CI.md").read_text())
    assert pinned and set(pinned) == {f"v{_pyproject_version()}"}


def test_the_changelog_opens_with_unreleased_and_covers_this_version() -> None:
    """CHANGELOG.md: an Unreleased section first, then one per release, this one and 0.1.0 included."""
    text = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## \[?([^\]\s]+)\]?", text, re.MULTILINE)
    assert sections[0] == "Unreleased"
    assert _pyproject_version() in sections and "0.1.0" in sections
    assert sections[1:] == sorted(sections[1:], key=lambda v: tuple(map(int, v.split("."))), reverse=True)
