"""The examples the docs tell users to copy run as the docs say (docs/examples, docs/BUILDERS.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from metadata_builders.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


@pytest.fixture()
def in_examples(monkeypatch, no_mypkg):
    """Run from docs/examples, as BUILDERS.md says (the package imports from the current directory)."""
    monkeypatch.chdir(EXAMPLES)
    yield


def test_the_replaced_stage_builder_holds_and_its_planted_bug_is_red(in_examples, tmp_path, capsys) -> None:
    """``mypkg.builders:MyRingBuilder`` (one stage of the bundled builder replaced) holds P1 and P10 on every mode;
    its subclass with the ring taken modulo the window fails both."""
    common = ["--properties", "P1,P10", "--profile", "dev", "--max-examples", "20", "--workers", "1",
              "--failures-dir", str(tmp_path)]
    assert main(["check", "--builder", "mypkg.builders:MyRingBuilder", *common]) == 0
    assert main(["check", "--builder", "mypkg.builders:MyRingBuilderModWindow", *common]) == 1
    out = capsys.readouterr().out
    assert "P10 FAILED" in out and "swa_loc" in out


def test_builders_md_shows_the_example_file_as_it_is() -> None:
    """The code block of BUILDERS.md's 'Replacing one stage' is the class in docs/examples/mypkg/builders.py."""
    page = (EXAMPLES.parent / "BUILDERS.md").read_text()
    block = re.search(r"```python\n# mypkg/builders.py[^\n]*\n(.*?)```", page, re.S).group(1)
    source = (EXAMPLES / "mypkg" / "builders.py").read_text()
    shown = block[block.index("class MyRingBuilder"):]
    assert shown.strip() in source
