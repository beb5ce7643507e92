"""The pytest plugin is light, prefixed and lazy: it coexists with other plugins and builds nothing unasked."""

from __future__ import annotations

import pytest


DUMMY_DEVICE_PLUGIN = '''
def pytest_addoption(parser):
    parser.addoption("--device", default="chromium", help="a browser, as pytest-playwright's --device")
'''


def test_the_plugin_loads_beside_a_plugin_that_defines_device(pytester: pytest.Pytester) -> None:
    """Its options are --mb-builder/--mb-device, so another plugin's --device still works, and so do ours."""
    pytester.makepyfile(dummy_device_plugin=DUMMY_DEVICE_PLUGIN)
    pytester.makepyfile(test_both="""
        def test_both(request, builder, device):
            assert request.config.getoption("--device") == "webkit"
            assert device == "cpu" and builder.name == "reference"
    """)
    result = pytester.runpytest_subprocess("-p", "dummy_device_plugin", "-p", "metadata_builders.plugin",
                                           "--device", "webkit", "--mb-device", "cpu", "--mb-builder", "reference")
    result.assert_outcomes(passed=1)


def test_loading_the_plugin_imports_no_torch_and_builds_nothing(pytester: pytest.Pytester) -> None:
    """A test session that never asks for ``builder`` never imports torch (the plugin auto-loads everywhere)."""
    pytester.makepyfile(test_plain="""
        import sys

        def test_plain():
            assert "torch" not in sys.modules
    """)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("name", ["nosuchbuilder", "nosuch_module_here:Thing"])
def test_an_unknown_builder_is_one_usage_line_before_any_test_runs(pytester: pytest.Pytester, name: str) -> None:
    """--mb-builder naming no builder is a usage error naming what is accepted: one line, not a traceback per
    test (a newcomer's mistyped module printed 424 lines)."""
    pytester.makepyfile(test_uses="""
        def test_uses(builder):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-builder", name)
    result.stderr.fnmatch_lines(["*--mb-builder*"])
    assert ("module:attr" if ":" not in name else "PYTHONPATH") in result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR and len(result.stderr.lines) <= 3, result.stderr.str()


# -- the plugin in someone else's project ------------------------------------------------------------------

EXAMPLE = __import__("pathlib").Path(__file__).resolve().parents[1] / "docs" / "examples" / "test_my_builder.py"


def _example_project(pytester: pytest.Pytester) -> None:
    """A project of the user's own: no conftest of ours, the example file as its test."""
    pytester.makepyfile(test_my_builder=EXAMPLE.read_text())


def test_the_documented_example_is_green_on_a_correct_builder(pytester: pytest.Pytester) -> None:
    """docs/examples/test_my_builder.py on the bundled builder: every test passes, no deadline trouble."""
    _example_project(pytester)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-builder", "hip", "--mb-device",
                                           "cpu", "--mb-profile", "ci", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*hypothesis profile metadata-builders-ci*"])


def test_the_documented_example_is_red_on_the_dropped_dspark_gate(pytester: pytest.Pytester) -> None:
    """The same file on the dropped dspark gate: the P6 test fails (its strategy draws divergences)."""
    _example_project(pytester)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-builder",
                                           "metadata_builders.tools.mutants:dropped_dspark_gate", "--mb-device", "cpu",
                                           "--mb-profile", "ci", "-p", "no:cacheprovider",
                                           "-k", "diverging")
    result.assert_outcomes(failed=1)
    assert len(result.outlines) < 400, "a failure prints a readable report, not the tables' repr"


def test_a_profile_of_the_users_own_is_kept(pytester: pytest.Pytester) -> None:
    """A project that loads its own Hypothesis profile keeps it; the plugin registers only prefixed names."""
    pytester.makeconftest("""
        from hypothesis import settings
        settings.register_profile("ci", max_examples=7)
        settings.load_profile("ci")
    """)
    pytester.makepyfile(test_theirs="""
        from hypothesis import settings

        def test_theirs():
            from metadata_builders.runs.profiles import load_profile

            assert load_profile("ci").max_examples == 100  # the harness's ci, under its own name
            assert settings.get_current_profile_name() == "ci" and settings.get_profile("ci").max_examples == 7
    """)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("device", ["cuda", "rocm"])
def test_an_unusable_device_stops_the_session_before_any_test(pytester: pytest.Pytester, device: str) -> None:
    """``--mb-device cuda`` without a GPU (or ``rocm``): a usage error naming it, no test run."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available() and device == "cuda":
        pytest.skip("this machine has a GPU")
    pytester.makepyfile(test_uses="""
        def test_uses(builder):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-device", device)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--mb-device {device}*"])


def test_a_test_under_a_folder_named_sglang_is_not_skipped(pytester: pytest.Pytester) -> None:
    """Skipping goes by marker: a plain test in ``tests/sglang/`` runs without SGLang installed."""
    folder = pytester.mkpydir("tests") / "sglang"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "test_plain.py").write_text("def test_sglang_named():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_property_failure_reads_as_check_prints_it(pytester: pytest.Pytester) -> None:
    """A failing property test shows the failure line and Hypothesis' falsifying example, not the harness's
    source (a newcomer's three failures printed 204 lines); ``--tb=long`` still gives the traceback."""
    pytester.makepyfile(test_gate="""
        from hypothesis import given, settings
        from metadata_builders import batches_for
        from metadata_builders.properties import check_p4_gate

        @settings(max_examples=30, deadline=None, database=None, derandomize=True)
        @given(batch=batches_for("P4"))
        def test_keeps_the_dspark_gate(builder, batch):
            check_p4_gate(builder, batch)
    """)
    args = ("-p", "metadata_builders.plugin", "--mb-builder", "metadata_builders.tools.mutants:dropped_dspark_gate")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*PropertyFailure: P4 *field=decision.used_output_size*",
                                 "*test_keeps_the_dspark_gate(*", "*batch=VerifyBatch(*"])
    out = result.stdout.str()
    assert "def check_p4_gate" not in out and "placement.py" not in out and len(result.stdout.lines) < 40, out
    assert "def check_p4_gate" in pytester.runpytest_subprocess(*args, "--tb=long").stdout.str()
