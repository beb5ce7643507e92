"""The mutant tools: Hypothesis finds the boundary mutants and shrinks them, a recorded killer runs first, the
``mutants`` command and its JSON, where the tools live and who imports whom, the command line's registrars.

The catalogue itself (each mutant real, documented, different from ``hip`` and killed on its witness):
``test_mutants.py``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import multiprocessing
import pathlib
import subprocess
import sys

import pytest
from hypothesis import Phase, settings

from metadata_builders import BuilderNotFound, get_builder
from metadata_builders.cli import main as cli_main
from metadata_builders.families.dsv4.__main__ import SUBCOMMANDS, build_parser
from metadata_builders.families.dsv4.mutants import MUTANTS, MutantDoesNotApply, MutantSpec, mutant_builder
from metadata_builders.families.dsv4.properties import PROPERTIES
from metadata_builders.families.dsv4.runs.runner import run_property


# -- Hypothesis finds them -------------------------------------------------------------------------------

_QUICK = settings(max_examples=40, derandomize=True, database=None, deadline=None, phases=[Phase.generate])


@pytest.mark.parametrize(
    ("name", "prop"),
    [("sentinel_minus1_reads_swa0", "P1"), ("dropped_dspark_gate", "P6"), ("zero_length_row_check", "P7")],
)
def test_hypothesis_finds_boundary_mutants(name: str, prop: str) -> None:
    """The strategies reach a -1 table hole, a diverging device length and a hidden read unaided."""
    spec = next(p for p in PROPERTIES if p.name == prop)
    run = run_property(spec, mutant_builder(name), _QUICK, stop_at_first=True)
    assert not run.passed, f"{prop} missed {name} in {run.examples} examples"


def test_a_recorded_killing_focus_runs_first_and_kills_on_the_same_batches() -> None:
    """Each focus keeps the seed of its index, so the focus that killed a mutant before, run first, kills it again
    on the batches it drew in the plain order, without the examples every earlier focus ran (``--killers``' focus
    half: the catalogue's long kills end in their own focus's first examples)."""
    spec = next(p for p in PROPERTIES if p.name == "P2")
    plain = run_property(spec, mutant_builder("mirror_validation_by_sum"), _QUICK, stop_at_first=True)
    assert not plain.passed and plain.failed_focus == 1
    first = run_property(spec, mutant_builder("mirror_validation_by_sum"), _QUICK, stop_at_first=True,
                         first_focus=plain.failed_focus)
    assert not first.passed and first.failed_focus == 1
    assert first.examples_to_failure == plain.examples_to_failure - _QUICK.max_examples  # focus 0's examples saved
    assert first.failure.field == plain.failure.field


def test_no_shrink_kills_the_same_mutants_by_the_same_properties_on_the_same_examples(tmp_path, capsys) -> None:
    """``--no-shrink`` (the pre-merge run): the kill, its property and its examples-to-failure as with shrinking;
    the counterexample is the batch as drawn, and the table says so."""
    rows = {}
    for flag in ((), ("--no-shrink",)):
        out = tmp_path / f"mutants{len(flag)}.json"
        assert cli_main(["mutants", "--only", "causal_start_off_by_one", "--max-examples", "10", "--jobs", "1",
                         "--json", str(out), *flag]) == 0
        rows[bool(flag)] = json.loads(out.read_text())["mutants"]
    same = [(r["mutant"], r["killed"], r["property"], r["examples_to_failure"]) for r in rows[False]]
    assert same == [(r["mutant"], r["killed"], r["property"], r["examples_to_failure"]) for r in rows[True]]
    assert [r["shrunk"] for r in rows[True]] == [False] and rows[False][0]["shrunk"] is True
    assert "(not shrunk)" in capsys.readouterr().out


def test_hypothesis_shrinks_the_off_by_one_to_one_token() -> None:
    """Shrinking reduces the causal off-by-one to a single request verifying a single token."""
    shrinking = settings(_QUICK, phases=[Phase.generate, Phase.shrink])
    run = run_property(PROPERTIES[0], mutant_builder("causal_start_off_by_one"), shrinking)
    assert run.failure is not None and run.failure.field == "seq_lens_casual"
    assert (run.batch.bs, run.batch.num_real_tokens) == (1, 1)


def test_mutants_cli_prints_kills_and_writes_json(tmp_path, capsys) -> None:
    """`metadata-builders mutants --only ...` prints the killer per mutant, writes JSON, exits 0 when all die."""
    out = tmp_path / "mutants.json"
    code = cli_main(["mutants", "--only", "causal_start_off_by_one,page_table_floor_page_count",
                     "--max-examples", "10", "--jobs", "1", "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())["mutants"]
    assert [(r["mutant"], r["killed"], r["property"]) for r in rows] == [
        ("causal_start_off_by_one", True, "P1"), ("page_table_floor_page_count", True, "P1"),
    ]
    assert rows[0]["counterexample"]["bs"] == 1
    assert "2/2 mutants killed" in capsys.readouterr().out


def test_a_recorded_killer_is_tried_first_and_the_verdict_is_the_same(tmp_path, capsys) -> None:
    """`--killers` (an earlier kill table) runs a mutant's recorded killer first: a mutant P7 kills no longer waits on
    P1..P6's full runs; a wrong or missing record falls back to the plain order; an unreadable table is a usage
    error."""
    from metadata_builders.errors import UsageError
    from metadata_builders.families.dsv4.mutants.runner import property_order, recorded_killers

    assert [p.name for p in property_order("P7")][:2] == ["P7", "P1"]
    assert [p.name for p in property_order(None)][0] == [p.name for p in property_order("P99")][0] == "P1"
    table = tmp_path / "killers.json"
    table.write_text(json.dumps({"mutants": [
        {"mutant": "debug_log_formats_device_tensor", "killed": True, "property": "P7"},
        {"mutant": "causal_start_off_by_one", "killed": True, "property": "P9"},  # stale: P9 does not kill it
    ]}))
    assert recorded_killers(str(table))["debug_log_formats_device_tensor"] == ("P7", None)
    out = tmp_path / "mutants.json"
    assert cli_main(["mutants", "--only", "debug_log_formats_device_tensor,causal_start_off_by_one",
                     "--max-examples", "10", "--jobs", "1", "--json", str(out), "--killers", str(table)]) == 0
    rows = json.loads(out.read_text())["mutants"]
    assert [(r["mutant"], r["property"]) for r in rows] == [("debug_log_formats_device_tensor", "P7"),
                                                           ("causal_start_off_by_one", "P1")]
    assert "recorded killer" in capsys.readouterr().out
    with pytest.raises(UsageError):
        recorded_killers(str(tmp_path / "missing.json"))


# -- the house: where the tools live and who imports whom ------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _imported(path: pathlib.Path) -> set[str]:
    """Every module a file names in an import statement, at module level or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_the_tools_import_each_other_one_way_only() -> None:
    """power imports the mutants package; no module of the mutants package imports power or bench.

    (No import cycle at all among the harness's modules: tests/core/test_layout.py.)
    """
    family = ROOT / "metadata_builders" / "families" / "dsv4"
    power, mutants = sorted((family / "tools" / "power").glob("*.py")), sorted((family / "mutants").glob("*.py"))
    assert power and mutants, "the family's tools moved: update this test's paths"
    assert "metadata_builders.families.dsv4.mutants" in set().union(*map(_imported, power))
    for path in mutants:
        assert not {n for n in _imported(path) if n.endswith((".power", ".bench"))}, path.name


def test_the_catalogue_imports_without_torch() -> None:
    """Importing the mutants package (catalogue and factories included) does not import torch."""
    code = ("import sys, metadata_builders.families.dsv4.mutants as m; m.dropped_dspark_gate; "
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("old", ["mutants", "power", "bench"])
def test_the_0_1_tool_paths_are_gone(old: str) -> None:
    """metadata_builders.mutants, .power and .bench (0.1 paths, aliased for one release) no longer import."""
    assert not (ROOT / "metadata_builders" / f"{old}.py").exists()
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"metadata_builders.{old}")
    with pytest.raises(BuilderNotFound):
        get_builder(f"metadata_builders.{old}:dropped_dspark_gate")


class _Recorder:
    """A stand-in for argparse's subparsers that records the name of each parser added."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._sub = argparse.ArgumentParser().add_subparsers()

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        self.names.append(name)
        return self._sub.add_parser(name, **kwargs)


def test_every_subcommand_is_registered_once_from_one_list() -> None:
    """Each registrar of cli.SUBCOMMANDS adds exactly one subcommand; together they are the eight of --help."""
    added = []
    for register in SUBCOMMANDS:
        recorder = _Recorder()
        register(recorder)
        added.append(recorder.names)
    assert added == [["check"], ["replay"], ["variants"], ["gate"], ["mutants"], ["power"], ["bench"], ["verdicts"]]
    usage = build_parser().format_help()
    assert "{check,replay,variants,gate,mutants,power,bench,verdicts}" in usage


_STALE = MutantSpec("stale_in_a_worker", "core_metadata", "test", "test", "this text is not in hip.py", "")
"""A mutant whose find text is not in hip.py: compiling it raises MutantDoesNotApply."""


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork", reason="the stale mutant reaches workers by fork")
def test_a_mutant_that_no_longer_applies_in_a_worker_arrives_as_itself(monkeypatch, capsys) -> None:
    """With --jobs 2 a worker's MutantDoesNotApply reaches the command whole (not a broken pool): exit 2."""
    from metadata_builders.families.dsv4.mutants.runner import _run_jobs

    monkeypatch.setitem(MUTANTS, _STALE.name, _STALE)
    with pytest.raises(MutantDoesNotApply) as info:
        _run_jobs([(_STALE.name, 1, "cpu", "[1/1]")], workers=2)
    assert (info.value.name, info.value.stage, info.value.occurrences) == (_STALE.name, "core_metadata", 0)
    assert cli_main(["mutants", "--only", _STALE.name, "--jobs", "2", "--json", ""]) == 2
    assert "error: MutantDoesNotApply" in capsys.readouterr().err
