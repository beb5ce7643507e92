"""One harness session: whatever the harness switches on for a run, the user's torch gets back unchanged."""

from __future__ import annotations

import pytest
import torch

from metadata_builders.audit import launch_memo
from metadata_builders.cli import main
from metadata_builders.harness import harness_session, torch_flags

MEMO_WANTING = '''
from metadata_builders.audit import launch_memo
from metadata_builders.families.dsv4.hip import HipBuilder


class WantsTheMemo(HipBuilder):
    """As the SGLang builder does on CPU: asks for the launch memo when made."""

    def __init__(self, device="cpu"):
        super().__init__(device)
        launch_memo.want()
'''


@pytest.fixture
def wants_memo(tmp_path, monkeypatch):
    from _modules import importable_module

    importable_module(tmp_path, monkeypatch, "session_builders", MEMO_WANTING)
    monkeypatch.setattr(launch_memo, "_WANTED", False)
    yield "session_builders:WantsTheMemo"
    launch_memo.deactivate()


def test_an_in_process_check_leaves_torch_as_it_found_it(wants_memo, tmp_path) -> None:
    """A check whose builder wants the launch memo (deterministic algorithms, filled memory): torch restored after."""
    before = torch_flags()
    assert not before.deterministic
    assert main(["check", "--builder", wants_memo, "--profile", "ci", "--max-examples", "2", "--device", "cpu",
                 "--properties", "P1,P3", "--workers", "1", "--failures-dir", str(tmp_path / "f")]) == 0
    assert torch_flags() == before
    assert not launch_memo.enabled()


def test_the_memo_is_on_only_inside_a_session(wants_memo) -> None:
    """Inside a session torch's deterministic algorithms (which fill uninitialised memory) are on; outside, off."""
    from metadata_builders import get_builder

    builder = get_builder(wants_memo, "cpu")
    before = torch_flags()
    assert not before.deterministic
    with harness_session():
        assert launch_memo.enabled() and torch.utils.deterministic.fill_uninitialized_memory
        assert torch.are_deterministic_algorithms_enabled()
    assert not launch_memo.enabled() and torch_flags() == before
    assert builder.name == wants_memo


def test_a_users_own_flags_survive(wants_memo) -> None:
    """A user who runs with deterministic algorithms on (not warn-only) keeps exactly that."""
    from metadata_builders import get_builder

    torch.use_deterministic_algorithms(True)
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        before = torch_flags()
        get_builder(wants_memo, "cpu")
        with harness_session():
            assert launch_memo.enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
            assert torch.utils.deterministic.fill_uninitialized_memory
        assert torch_flags() == before
    finally:
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def test_the_plugin_in_process_leaves_torch_as_it_found_it(pytester: pytest.Pytester, wants_memo) -> None:
    """A plugin run (in this process) on a memo-wanting builder: torch's flags are what they were."""
    pytester.makepyfile(test_uses="""
        from hypothesis import given, settings
        from metadata_builders.families.dsv4.properties import batches_for, check_p1_reference

        @settings(max_examples=3)
        @given(batch=batches_for("P1"))
        def test_p1(builder, batch):
            check_p1_reference(builder, batch)
    """)
    before = torch_flags()
    result = pytester.runpytest_inprocess("-p", "metadata_builders.plugin", "--mb-builder", wants_memo,
                                          "--mb-device", "cpu", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert torch_flags() == before


@pytest.mark.sglang
def test_an_in_process_check_on_sglang_leaves_torch_as_it_found_it(tmp_path) -> None:
    """``check --builder sglang`` in this process (the memo on, interpreted kernels): torch's flags restored."""
    before = torch_flags()
    assert main(["check", "--builder", "sglang", "--profile", "ci", "--max-examples", "1", "--device", "cpu",
                 "--properties", "P3", "--workers", "1", "--failures-dir", str(tmp_path / "f")]) in (0, 1)
    assert torch_flags() == before
