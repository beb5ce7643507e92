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


def test_an_unknown_builder_fails_the_test_that_asks_for_it(pytester: pytest.Pytester) -> None:
    """--mb-builder with no such builder errors where the fixture is used, naming the accepted names."""
    pytester.makepyfile(test_uses="""
        def test_uses(builder):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "metadata_builders.plugin", "--mb-builder", "nosuchbuilder")
    result.stdout.fnmatch_lines(["*--mb-builder*module:attr*"])
    assert result.ret != 0
