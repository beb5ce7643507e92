"""The family's entry point judges every mode, writes replay files that reproduce, and its CLI exits by verdict."""

from __future__ import annotations

import json

import pytest

from metadata_builders.errors import InvalidDeclaration
from metadata_builders.families.dsa.__main__ import main
from metadata_builders.families.dsa.batch import MODES
from metadata_builders.families.dsa.builder import DSABuilder
from metadata_builders.families.dsa.check import replay_file, run_check
from metadata_builders.families.dsa.mutants.patching import mutant_builder


def test_dev_profile_holds_on_every_mode() -> None:
    """The bundled builder holds in every mode; the table has a row per mode and names what does not apply."""
    report = run_check("dev")
    assert report.ok and [m.mode for m in report.modes] == list(MODES)
    assert all(m.examples >= 6 for m in report.modes)
    table = report.table()
    assert "n/a P4" in table and "coverage: 17/17" in table and "holds in" in table


def test_a_failure_is_written_and_replays(tmp_path) -> None:
    """A mutant's failure is shrunk, written as a replay file naming its family, and fails again on replay;
    the search goes on past it (the other properties are still judged)."""
    builder = mutant_builder("verify_cache_without_drafts")
    report = run_check("dev", builder=builder, modes=["target_verify"], failures_dir=tmp_path)
    failure = report.failures[0]
    assert (failure.prop, failure.check) == ("P1", "dsa.p1.vs_reference")
    data = json.loads((tmp_path / "dsa-target_verify-P1.json").read_text())
    assert data["family"] == "dsa" and data["meta"]["check"] == "dsa.p1.vs_reference"
    assert [f.prop for f in replay_file(failure.replay_file, builder=builder, only=("P1",))] == ["P1"]
    assert replay_file(failure.replay_file, only=("P1",)) == []
    assert report.modes[0].verdict("P7") in ("holds", "FAILS dsa.p7.sync_contract")


def test_cli_check_exits_zero_when_everything_holds(capsys) -> None:
    """``python -m metadata_builders.families.dsa check`` prints the table and exits 0 on the bundled builder."""
    assert main(["check", "--profile", "dev", "--modes", "decode,idle", "--only", "P1,P7"]) == 0
    assert "dsa family, builder dsa-torch, profile dev: holds" in capsys.readouterr().out


def test_cli_mutants_exits_zero_when_killed(capsys) -> None:
    """``mutants --only`` runs the named mutants and exits 0 when each is killed."""
    assert main(["mutants", "--only", "decode_writes_caller_extend_list"]) == 0
    assert "1/1 mutants killed" in capsys.readouterr().out


class _NoModes(DSABuilder):
    modes = ()


class _LetterModes(DSABuilder):
    modes = "decode"


class _DSV4Modes(DSABuilder):
    modes = ("target_verify", "draft_verify")


@pytest.mark.parametrize("cls", [_NoModes, _LetterModes, _DSV4Modes], ids=lambda c: c.__name__)
def test_a_modes_declaration_the_family_cannot_take_is_refused_before_anything_runs(cls) -> None:
    """``modes = ()`` would run no mode and report ``ok``: a green that judged nothing (issue 40's blocker, on the
    second family too)."""
    with pytest.raises(InvalidDeclaration, match=f"{cls.__name__}.*modes"):
        run_check("dev", builder=cls, max_examples=1)


def test_cli_names_a_factory_that_cannot_make_a_builder_in_one_line(capsys) -> None:
    assert main(["check", "--builder", "json:dumps", "--profile", "dev"]) == 2
    err = capsys.readouterr().err
    assert "json:dumps" in err and "TypeError" in err and "Traceback" not in err
    assert main(["check", "--builder", "json:JSONDecoder", "--profile", "dev"]) == 2
    assert "has no build" in capsys.readouterr().err


def test_the_documented_dsa_builder_holds_and_its_off_by_one_is_red(monkeypatch, capsys, no_mypkg) -> None:
    """docs/examples/mypkg/dsa.py, as docs/BUILDERS.md runs it: green, draft decode named as not run; the planted
    off-by-one red on P1 at ``real_page_table``."""
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "docs" / "examples"))
    assert main(["check", "--builder", "mypkg.dsa:MyDSABuilder", "--profile", "dev"]) == 0
    assert "not run draft_decode" in capsys.readouterr().out
    assert main(["check", "--builder", "mypkg.dsa:MyDSABuilderOffByOne", "--profile", "dev", "--modes", "decode",
                 "--properties", "P1"]) == 1
    assert "P1 dsa.p1.vs_reference" in capsys.readouterr().out
