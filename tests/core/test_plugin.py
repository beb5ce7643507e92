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

EXAMPLE = __import__("pathlib").Path(__file__).resolve().parents[2] / "docs" / "examples" / "test_my_builder.py"


def _example_project(pytester: pytest.Pytester) -> None:
    """A project of the user's own: no conftest of ours, the example file as its test."""
    pytester.makepyfile(test_my_builder=EXAMPLE.read_text())


def test_the_documented_example_is_green_on_a_correct_builder(pytester: pytest.Pytester) -> None:
    """docs/examples/test_my_builder.py on the bundled builder: every focus of every test passes (one per focused
    run of ``check``: 7 of P1, 1 of P6, 6 of P7, 6 of P10), no deadline trouble.  The ``dev`` profile (30 examples a
    focus): the same properties at the ``ci`` profile's 100 on ``hip`` are ``.ci/run``'s ``check --profile ci``, and
    the ``ci`` profile in force under ``CI`` is its own test; this one cost 196 s of a worker at ``ci`` (issue 44)."""
    from metadata_builders.families.dsv4.properties import focuses_for

    _example_project(pytester)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-builder", "hip", "--mb-device",
                                           "cpu", "--mb-profile", "dev", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=sum(len(focuses_for(p)) for p in ("P1", "P6", "P7", "P10")))
    result.stdout.fnmatch_lines(["*hypothesis profile metadata-builders-dev*"])


def test_the_documented_example_is_red_on_the_dropped_dspark_gate(pytester: pytest.Pytester) -> None:
    """The same file on the dropped dspark gate: the P6 test fails (its strategy draws divergences)."""
    _example_project(pytester)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-builder",
                                           "metadata_builders.families.dsv4.mutants:dropped_dspark_gate",
                                           "--mb-device", "cpu", "--mb-profile", "ci", "-p", "no:cacheprovider",
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
        from metadata_builders.families.dsv4.properties import check_p4_gate

        @settings(max_examples=30, deadline=None, database=None, derandomize=True)
        @given(batch=batches_for("P4"))
        def test_keeps_the_dspark_gate(builder, batch):
            check_p4_gate(builder, batch)
    """)
    args = ("-p", "metadata_builders.plugin",
            "--mb-builder", "metadata_builders.families.dsv4.mutants:dropped_dspark_gate")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*PropertyFailure: P4 *field=decision.used_output_size*",
                                 "*test_keeps_the_dspark_gate(*", "*batch=VerifyBatch(*"])
    out = result.stdout.str()
    assert "def check_p4_gate" not in out and "placement.py" not in out and len(result.stdout.lines) < 40, out
    assert "def check_p4_gate" in pytester.runpytest_subprocess(*args, "--tb=long").stdout.str()


def test_the_documented_example_is_red_on_a_draft_decode_bug(pytester: pytest.Pytester) -> None:
    """The copied example file draws the modes the builder declares (issue 40 item 2): a draft-decode child that
    reads its step's locations step-major -- a bug ``check`` fails on P1 -- is red, not "4 passed"."""
    _example_project(pytester)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-builder",
                                           "metadata_builders.families.dsv4.mutants:draft_decode_step_slice_step_major",
                                           "--mb-device", "cpu", "--mb-profile", "ci", "-p", "no:cacheprovider",
                                           "-k", "reference")
    from metadata_builders.families.dsv4.properties import focuses_for

    result.assert_outcomes(failed=1, passed=len(focuses_for("P1")) - 1)
    result.stdout.fnmatch_lines(["FAILED*test_every_variant_equals_the_reference*draft_decode*"])


def test_a_focus_of_a_mode_the_builder_does_not_declare_is_skipped_saying_so(pytester: pytest.Pytester) -> None:
    """The copied file on a builder that declares target verify alone: the other modes' focuses are skipped with
    the reason (as ``check`` says ``not applicable``), never run and never silently passed."""
    _example_project(pytester)
    pytester.makepyfile(mine="""
        from metadata_builders.families.dsv4.hip import HipBuilder

        class VerifyOnly(HipBuilder):
            modes = ("target_verify",)
    """)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-builder", "mine:VerifyOnly",
                                           "--mb-profile", "dev", "-p", "no:cacheprovider", "-k", "reference",
                                           "-rs")
    from metadata_builders.families.dsv4.properties import focuses_for

    verify = sum(f.mode == "target_verify" for f in focuses_for("P1"))
    result.assert_outcomes(passed=verify, skipped=len(focuses_for("P1")) - verify)
    result.stdout.fnmatch_lines(["*does not build mode draft_extend*"])


def test_batches_for_draws_the_modes_of_the_builder_under_test(pytester: pytest.Pytester) -> None:
    """In a test that takes ``builder``, ``batches_for(prop)`` draws that builder's declared modes; a builder that
    declares target verify alone meets target-verify batches only."""
    pytester.makepyfile(mine="""
        from metadata_builders.families.dsv4.hip import HipBuilder

        class VerifyOnly(HipBuilder):
            modes = ("target_verify",)
    """)
    pytester.makepyfile(test_modes="""
        from hypothesis import given, settings
        from metadata_builders import batches_for

        SEEN = set()

        @settings(max_examples=80, deadline=None, database=None, derandomize=True)
        @given(batch=batches_for("P1"))
        def test_draws(builder, batch):
            SEEN.add(batch.mode)

        def test_seen(builder):
            assert SEEN == set(builder.capabilities.modes), SEEN
    """)
    for name in ("hip", "mine:VerifyOnly"):
        result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-builder", name,
                                               "-p", "no:cacheprovider", "-p", "no:randomly")
        result.assert_outcomes(passed=2)


def test_under_CI_the_harness_profile_is_in_force(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``CI`` set Hypothesis loads its own ``ci`` profile by itself: that is no choice of the user's, so the
    harness's ``metadata-builders-ci`` applies (issue 40 item 3); ``--hypothesis-profile ci`` still wins."""
    monkeypatch.setenv("CI", "1")
    pytester.makepyfile(test_profile="""
        from hypothesis import settings

        def test_profile(builder):
            print("PROFILE", settings.get_current_profile_name())
    """)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "-s", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*hypothesis profile metadata-builders-ci", "*PROFILE metadata-builders-ci*"])
    chosen = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "-s", "-p", "no:cacheprovider",
                                           "--hypothesis-profile", "ci")
    chosen.stdout.fnmatch_lines(["*hypothesis profile ci (yours*", "*PROFILE ci*"])


@pytest.mark.parametrize("modes", ["()", '"draft_decode"', '("target_verify", "draft_verify")', '("decode", 3)'])
def test_a_malformed_modes_declaration_is_a_usage_error(pytester: pytest.Pytester, modes: str) -> None:
    """``modes = ()``, a string, an unknown name, a non-string: one line naming the class, the value and the modes
    the batch model knows, before any test runs (issue 40 item 1: ``modes = ()`` gave a silent green)."""
    pytester.makepyfile(mine=f"""
        from metadata_builders.families.dsv4.hip import HipBuilder

        class Bad(HipBuilder):
            modes = {modes}
    """)
    pytester.makepyfile(test_uses="""
        def test_uses(builder):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-builder", "mine:Bad")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*Bad.modes = *must be a non-empty tuple of mode names*target_verify*"])
    assert len(result.stderr.lines) <= 3, result.stderr.str()


def test_the_plugin_loads_light_in_a_session_that_names_no_builder(pytester: pytest.Pytester) -> None:
    """The entry point loads in every pytest session of an environment where the harness is installed: with no
    option of its own given and no fixture of its own taken, it imports no builder, no property and no family."""
    pytester.makepyfile(test_plain="""
        import sys

        def test_plain():
            loaded = sorted(m for m in sys.modules if m.startswith("metadata_builders."))
            assert not [m for m in loaded if m.split(".")[1] in ("builders", "families", "properties", "harness",
                                                                  "audit")], loaded
    """)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin")
    result.assert_outcomes(passed=1)
