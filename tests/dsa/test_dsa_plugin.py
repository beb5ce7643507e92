"""The pytest plugin on the DSA family (``--mb-family dsa``): docs/examples/test_my_dsa_builder.py in a project of
the user's own is green on the bundled builder, red on a tracker bug planted in it, and a builder the family cannot
take is one usage line before any test runs."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "test_my_dsa_builder.py"
PLUGIN = ("-p", "metadata_builders.plugin", "-p", "no:cacheprovider", "--mb-family", "dsa", "--mb-device", "cpu")


def _example_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_my_dsa_builder=EXAMPLE.read_text())


def test_the_dsa_example_is_green_on_the_bundled_builder(pytester: pytest.Pytester) -> None:
    """Every (property, mode) judged, the ones ``check`` does not judge skipped saying why: P3 on the three decode
    modes, P4 everywhere."""
    _example_project(pytester)
    result = pytester.runpytest_subprocess(*PLUGIN, "--mb-profile", "dev", "-rs")
    result.assert_outcomes(passed=50 - 8, skipped=8)
    result.stdout.fnmatch_lines(["*--mb-family dsa, --mb-builder the family's bundled builder*",
                                 "*P3 does not apply to decode*"])


def test_the_dsa_example_is_red_on_the_trackers_negative_pad_length(pytester: pytest.Pytester) -> None:
    """sglang #30378 planted in the bundled builder (the catalogue's ``expand_no_floor``): P1 on draft extend."""
    _example_project(pytester)
    result = pytester.runpytest_subprocess(*PLUGIN, "--mb-profile", "ci", "-k", "P1-draft_extend",
                                           "--mb-builder", "metadata_builders.families.dsa.mutants:expand_no_floor")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*PropertyFailure*P1*"])


@pytest.mark.parametrize("name", ["json:dumps", "metadata_builders.families.dsa.mutants:no_such_mutant"])
def test_a_builder_the_family_cannot_take_is_one_usage_line(pytester: pytest.Pytester, name: str) -> None:
    _example_project(pytester)
    result = pytester.runpytest_subprocess(*PLUGIN, "--mb-builder", name)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--mb-builder*{name.partition(':')[2]}*"])
    assert "Traceback" not in result.stderr.str()
