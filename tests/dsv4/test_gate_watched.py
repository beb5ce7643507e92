"""The gate names what it never ran: a changed watched file whose changed code did not run is never GREEN.

What the side's processes import and run is measured (``metadata_builders/gate/trace.py``); a
miniature repository shaped like SGLang's stands in for it, with a builder of the harness
(``gate_backend:Backend``) that imports and calls one watched module, so none of this needs SGLang.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from metadata_builders.cli import main
from metadata_builders.families.dsv4.gate.watched import WATCHED, Change, SideTrace, change_of, is_watched, not_run

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAST = ["--properties", "P4", "--examples", "6", "--workers", "0", "--no-pictures"]
RUNNER = "python/sglang/srt/model_executor/runner/decode_cuda_graph_runner.py"
RAGGED = "python/sglang/srt/speculative/ragged_verify.py"

BACKEND = '''
from metadata_builders.families.dsv4.hip import HipBuilder
from sglang.srt.speculative.ragged_verify import shift


class Backend(HipBuilder):
    def build(self, inputs):
        md = super().build(inputs)
        md.fields["pf_final_pos"] = md.fields["pf_final_pos"] + shift()
        return md
'''
"""The backend under review: it runs ``ragged_verify.shift`` on every build, and never imports the runner."""

RAGGED_SOURCE = '''
LIMIT = {limit}


def shift():
    """How far the backend moves pf_final_pos: nothing."""
    return 0


def unused():
    return {limit}
'''

RUNNER_SOURCE = '''
class DecodeCudaGraphRunner:
    def load_batch(self, batch):
        return {value}
'''


def _git(repo, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True)
    return done.stdout


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("METADATA_BUILDERS_CACHE", str(tmp_path / "gate-cache"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def mini(tmp_path):
    """SGLang's shape: the backend (not watched), ``ragged_verify.py`` (watched, run) and the runner (watched,
    never imported), committed on ``main``."""
    repo = tmp_path / "repo"
    for rel, text in ((RAGGED, RAGGED_SOURCE.format(limit=1)), (RUNNER, RUNNER_SOURCE.format(value=1)),
                      ("python/gate_backend.py", BACKEND)):
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in ("python/sglang", "python/sglang/srt", "python/sglang/srt/speculative"):
        (repo / folder / "__init__.py").write_text("")
    (repo / ".gitignore").write_text("__pycache__/\nbuild/\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    return repo


def _branch(repo, name: str, rel: str, text: str) -> None:
    _git(repo, "checkout", "-q", "-b", name, "main")
    (repo / rel).write_text(text)
    _git(repo, "commit", "-q", "-am", name)
    _git(repo, "checkout", "-q", "main")


def _verdict(out: str) -> str:
    return next(line for line in reversed(out.splitlines()) if line.startswith("gate: "))


def _gate(repo, head: str, *extra: str) -> int:
    return main(["gate", "--base", "main", "--head", head, "--repo", str(repo), "--builder", "gate_backend:Backend",
                 *FAST, *extra])


def test_a_change_to_a_runner_no_side_ran_is_not_judged_by_name(mini, tmp_path, capsys) -> None:
    """The runner changed, never imported: NOT JUDGED, the file and its function named, exit 1 -- never GREEN."""
    _branch(mini, "runner", RUNNER, RUNNER_SOURCE.format(value=2))
    summary = tmp_path / "summary.md"
    code = _gate(mini, "runner", "--summary-md", str(summary))
    out = capsys.readouterr().out
    assert code == 1, out
    line = _verdict(out)
    assert line.startswith("gate: NOT JUDGED (decode_cuda_graph_runner.py changed: "
                           "DecodeCudaGraphRunner.load_batch never ran at head (the file was never imported)"), line
    assert "GREEN" not in line
    assert f"not run by the gate: {RUNNER}" in out
    markdown = summary.read_text()
    assert "NOT JUDGED" in markdown and f"`{RUNNER}`" in markdown


def test_a_change_to_a_watched_function_the_builds_ran_is_judged(mini, capsys) -> None:
    """``shift`` changed (a docstring) and every build calls it: GREEN, nothing named."""
    _branch(mini, "ran", RAGGED, RAGGED_SOURCE.format(limit=1).replace("nothing.", "nothing at all."))
    assert _gate(mini, "ran") == 0
    out = capsys.readouterr().out
    assert _verdict(out).startswith("gate: GREEN"), out
    assert "not run by the gate" not in out


def test_a_function_of_a_run_file_that_never_ran_is_named(mini, capsys) -> None:
    """``unused`` changed in a file whose other function runs: the function is named (a file is not judged whole)."""
    _branch(mini, "unused", RAGGED, RAGGED_SOURCE.format(limit=1).replace("return 1", "return 2"))
    assert _gate(mini, "unused") == 1
    line = _verdict(capsys.readouterr().out)
    assert "ragged_verify.py changed: unused never ran at head" in line and "never imported" not in line, line


def test_module_level_code_of_an_imported_file_is_judged(mini, capsys) -> None:
    """A constant changed (module level): the file was imported, its module body ran -- GREEN."""
    _branch(mini, "constant", RAGGED, RAGGED_SOURCE.format(limit=1).replace("LIMIT = 1", "LIMIT = 2"))
    assert _gate(mini, "constant") == 0
    assert "gate: GREEN" in capsys.readouterr().out


def test_the_release_against_itself_stays_green(mini, capsys) -> None:
    """No change, nothing to name: GREEN."""
    assert _gate(mini, "main") == 0
    out = capsys.readouterr().out
    assert _verdict(out).startswith("gate: GREEN") and "NOT JUDGED" not in out


def test_the_trace_turns_itself_off_once_the_watched_functions_ran(tmp_path) -> None:
    """In a side's process: armed on the watched module's import, off once its watched function ran; the record
    names what ran and what was imported, not what was only imported."""
    root = tmp_path / "tree"
    (root / "pkgw").mkdir(parents=True)
    (root / "pkgw" / "__init__.py").write_text("")
    (root / "pkgw" / "runs.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    (root / "pkgw" / "idle.py").write_text("def h():\n    return 3\n")
    script = (
        "import json, sys\n"
        "from metadata_builders.gate import trace\n"
        "trace.start()\n"
        "assert sys.gettrace() is None\n"
        "import pkgw.runs, pkgw.idle\n"
        "armed = sys.gettrace() is not None\n"
        "pkgw.runs.f()\n"
        "off_after_f = sys.gettrace() is None\n"
        "trace.dump(sys.argv[1])\n"
        "print(json.dumps([armed, off_after_f]))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(ROOT)]),
               MB_GATE_TRACE=json.dumps({"root": str(root), "functions": {"pkgw/runs.py": [1], "pkgw/idle.py": [1]}}))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True,
                          check=True)
    armed, off_after_f = json.loads(done.stdout)
    record = json.loads(next(tmp_path.glob("trace-*.json")).read_text())
    assert armed and not off_after_f  # idle.h was imported and never ran: the trace stays on for it
    assert record["ran"] == [["pkgw/runs.py", 1]]
    assert {"pkgw/runs.py", "pkgw/idle.py"} <= set(record["imported"])


def test_change_of_finds_the_innermost_function_of_each_changed_line() -> None:
    """A decorated method starts at its decorator (its code's first line); a class body is module level."""
    source = "import x\nclass R:\n    a = 1\n    @dec\n    def load(self):\n        return 1\n"
    assert change_of(source, [3, 6]) == Change({4: "R.load"}, module_level=True)


def test_not_run_judges_deleted_files_by_what_the_base_imported() -> None:
    """A deleted file is judged when the base imported it; one no side imported is named."""
    base = SideTrace(imported={RAGGED})
    found = not_run({}, {RAGGED, RUNNER}, SideTrace(), base)
    assert found == [(RUNNER, "deleted; no side imported it")]


def test_every_watched_path_list_is_the_one_in_watched_py() -> None:
    """ci/premerge.sh's array and the workflow's ``paths:`` filter list exactly :data:`WATCHED`, runners included."""
    premerge = (ROOT / "ci" / "premerge.sh").read_text()
    array = re.search(r"^watched=\(\n(.*?)^\)", premerge, re.MULTILINE | re.DOTALL).group(1).split()
    assert tuple(array) == WATCHED
    workflow = (ROOT / "ci" / "workflows" / "metadata-builders-gate.yml").read_text()
    block = workflow.split("    paths:\n", 1)[1].split("  schedule:", 1)[0]
    paths = re.findall(r'- "([^"]+)"', block)
    assert tuple(p.removesuffix("/**") for p in paths) == WATCHED
    assert is_watched(RUNNER) and is_watched("python/sglang/srt/speculative/dspark_components/dspark_verify.py")


def test_the_dsa_familys_files_are_watched_and_left_to_its_own_gate() -> None:
    """pad.py (the DSA family's): watched, judged by ``gate --family dsa``; the DSV4 gate names nothing of it."""
    from metadata_builders.families.dsv4.gate.watched import DSA_WATCHED

    pad = "python/sglang/kernels/ops/attention/pad.py"
    assert set(DSA_WATCHED) <= set(WATCHED)
    assert is_watched(pad) and is_watched(pad, "dsa") and not is_watched(pad, "dsv4")
    assert is_watched(RUNNER, "dsv4") and not is_watched(RUNNER, "dsa")
    change = Change({330: "_seqlens_expand_kernel"})
    assert not_run({pad: change, RUNNER: change}, set(), SideTrace(), SideTrace()) == [
        (RUNNER, "_seqlens_expand_kernel never ran at head (the file was never imported)")]
