"""Every mutant of the DSA catalogue applies to the bundled builder and is killed in ``ci`` by its property."""

from __future__ import annotations

import pytest

from metadata_builders.errors import MutantDoesNotApply, UnknownMutant
from metadata_builders.families.dsa.batch import MODES
from metadata_builders.families.dsa.check import run_mutants
from metadata_builders.families.dsa.mutants import MUTANTS
from metadata_builders.families.dsa.mutants.catalogue import DSAMutantSpec
from metadata_builders.families.dsa.mutants.patching import (
    mutant_spec,
    mutated_function,
)

TRACKER = ("expand_no_floor", "draft_extend_replay_tolist", "draft_extend_replay_data_dependent_repeat",
           "eager_fallback_assumes_mirror", "kv_indptr_from_bs")
"""The tracker's bugs (sglang #30378, #29413 twice, #29798, #38746): run in every CI job."""


def test_catalogue_is_large_and_well_formed() -> None:
    """At least 15 mutants, unique names, modes of the family, each with the property that kills it."""
    assert len(MUTANTS) >= 15
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    for m in MUTANTS:
        assert set(m.modes) <= set(MODES) and m.killed_by.startswith("P") and m.find != m.replace
    assert {m.name for m in MUTANTS} >= set(TRACKER)


@pytest.mark.parametrize("name", [m.name for m in MUTANTS])
def test_mutant_applies_exactly_once(name: str) -> None:
    """Each find text occurs exactly once in its stage; the edit compiles."""
    assert callable(mutated_function(name))


def test_stale_find_text_raises() -> None:
    """A mutant whose text no longer occurs fails loudly; an unknown name names the catalogue."""
    stale = DSAMutantSpec("stale", "eager.decode_branch", "x", "x", "no such text", "y", ("decode",), "P1")
    from metadata_builders.families.dsa.mutants import patching

    original = patching.MUTANTS
    patching.MUTANTS = (*original, stale)
    try:
        with pytest.raises(MutantDoesNotApply):
            patching.mutated_function("stale")
    finally:
        patching.MUTANTS = original
    with pytest.raises(UnknownMutant):
        mutant_spec("no-such-mutant")


def _check_killed(names: tuple[str, ...], tmp_path) -> None:
    results = run_mutants("ci", only=names, failures_dir=tmp_path)
    assert [r.name for r in results] == list(names)
    for r in results:
        spec = mutant_spec(r.name)
        assert r.killed, r.name
        assert r.prop == spec.killed_by, (r.name, r.prop, r.check)
        assert r.reproduced, r.name


def test_tracker_mutants_are_killed(tmp_path) -> None:
    """The tracker's bugs are killed by their property in ci, each with a replay file that fails again."""
    _check_killed(TRACKER, tmp_path)


@pytest.mark.slow
def test_whole_catalogue_is_killed(tmp_path) -> None:
    """Every other mutant is killed by its property in ci (about 40 s on 2 cores), replay files reproduce."""
    _check_killed(tuple(m.name for m in MUTANTS if m.name not in TRACKER), tmp_path)
