"""A seeded run draws from its seed and its strategies alone (``metadata_builders.runs.profiles.seed_alone``)."""

from __future__ import annotations

import importlib
import sys

from hypothesis import Phase, given, seed, settings
from hypothesis import strategies as st

from metadata_builders.runs.profiles import seed_alone


def _draws(strategy, n: int = 40) -> list:
    out: list = []

    @seed(20261205)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None)
    @given(strategy)
    def collect(value) -> None:
        out.append(value)

    collect()
    return out


def _import_new_constants(tmp_path, monkeypatch, name: str) -> None:
    """A local module (outside site-packages) with 20 integers no module had: new constants for Hypothesis to
    mine, as a gate's side that imports its own SGLang tree brings.  It leaves ``sys.modules`` with the test."""
    (tmp_path / f"{name}.py").write_text("INTS = [" + ", ".join(str(7919 * i + 104729) for i in range(20)) + "]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, name, importlib.import_module(name))


def test_new_local_constants_change_a_seeded_run_but_not_one_under_seed_alone(tmp_path, monkeypatch) -> None:
    """Without it, importing a module of new literals changes what one seed draws (Hypothesis mines local source);
    under ``seed_alone`` the same seed draws the same values before and after the import."""
    strategy = st.lists(st.integers(0, 10**6), min_size=4, max_size=8)
    with seed_alone():
        before = _draws(strategy)
    plain_before = _draws(strategy)
    _import_new_constants(tmp_path, monkeypatch, "mb_new_constants")
    with seed_alone():
        after = _draws(strategy)
    assert after == before
    assert _draws(strategy) != plain_before, "Hypothesis no longer mines local constants: seed_alone may go"


def test_seed_alone_restores_hypothesis_as_it_was() -> None:
    """The block's switch is undone on exit (a user's own draws keep Hypothesis' behaviour), and the installed
    Hypothesis still has the patch point (an upgrade that moved it fails here, not silently)."""
    from hypothesis.internal.conjecture import providers

    mined = providers._get_local_constants
    with seed_alone():
        assert providers._get_local_constants is not mined
    assert providers._get_local_constants is mined
