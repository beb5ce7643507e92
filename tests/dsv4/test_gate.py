"""The differential gate: red only on what head breaks, green on what base already had, deterministic.

Builders stand in for SGLang here (``--base-builder``/``--head-builder``, and a
miniature git repository whose ``python/`` tree holds a builder module), so the
verdict logic and the git mechanics are tested without SGLang installed;
tests/dsv4/test_gate_sglang.py runs the gate on a real SGLang release.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from metadata_builders.cli import main

MUTANT = "metadata_builders.families.dsv4.mutants:dropped_dspark_gate"
FAST = ["--properties", "P4", "--examples", "15", "--workers", "0", "--no-pictures"]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test its own side-result cache: nothing read from, or left in, the user's cache directory."""
    monkeypatch.setenv("METADATA_BUILDERS_CACHE", str(tmp_path / "gate-cache"))


def _gate(tmp_path, *args: str) -> int:
    return main(["gate", *args, *FAST, "--failures-dir", str(tmp_path / "failures")])


def test_a_regression_at_head_is_red_names_the_property_and_writes_a_replay_file(tmp_path, capsys) -> None:
    """hip at base, the dropped dspark gate at head: P4 is NEW, exit 1, and the replay file reproduces it."""
    assert _gate(tmp_path, "--base-builder", "hip", "--head-builder", MUTANT) == 1
    out = capsys.readouterr().out
    assert "P4" in out and "BLOCKS" in out and "NEW" in out and "gate: RED" in out
    files = sorted(f for f in os.listdir(tmp_path / "failures") if f.endswith(".json"))
    assert len(files) == 1 and files[0].startswith("P4-")
    path = str(tmp_path / "failures" / files[0])
    assert f"metadata-builders replay {path} --builder {MUTANT}" in out
    assert json.load(open(path))["meta"]["gate"] == "new"
    assert main(["replay", path, "--builder", MUTANT, "--device", "cpu"]) == 1
    assert main(["replay", path, "--builder", "hip", "--device", "cpu"]) == 0


def test_the_same_code_on_both_sides_is_green(tmp_path, capsys) -> None:
    """head = base: every property held, exit 0."""
    assert _gate(tmp_path, "--base-builder", "hip", "--head-builder", "hip") == 0
    assert "gate: GREEN" in capsys.readouterr().out


def test_a_failure_already_at_base_is_listed_not_blocking(tmp_path, capsys) -> None:
    """The same bug on both sides is pre-existing: listed, exit 0; a head that fixes it is listed as fixed."""
    assert _gate(tmp_path, "--base-builder", MUTANT, "--head-builder", MUTANT) == 0
    out = capsys.readouterr().out
    assert "pre-existing" in out and "already failing at base" in out and "gate: GREEN" in out
    assert _gate(tmp_path, "--base-builder", MUTANT, "--head-builder", "hip") == 0
    assert "fixed at head: P4" in capsys.readouterr().out


def test_two_runs_give_the_same_verdicts_and_replay_files(tmp_path, capsys) -> None:
    """Derandomized corpus, deterministic choice of the replay batch: identical output files run after run."""
    runs = []
    for n in range(2):
        failures = tmp_path / f"run{n}"
        main(["gate", "--base-builder", "hip", "--head-builder", MUTANT, *FAST, "--failures-dir", str(failures)])
        runs.append({name: (failures / name).read_text() for name in os.listdir(failures) if name.endswith(".json")})
        capsys.readouterr()
    assert runs[0] == runs[1] and runs[0]


BUILDER_MODULE = '''
"""A stand-in for the backend under review: hip, with an optional planted regression."""
from metadata_builders.families.dsv4.hip import HipBuilder

PLANTED = {planted}


class Backend(HipBuilder):
    def build(self, inputs):
        md = super().build(inputs)
        if PLANTED:
            md.fields["swa_topk_lengths"] = md.fields["swa_topk_lengths"].clamp(max=inputs.geometry.swa_window - 1)
        return md
'''


@pytest.fixture
def mini_repo(tmp_path):
    """A git repository shaped like SGLang's (``python/sglang``): base commit clean, branch ``pr`` planted."""
    repo = tmp_path / "repo"
    (repo / "python" / "sglang").mkdir(parents=True)
    (repo / "python" / "sglang" / "__init__.py").write_text("")
    module = repo / "python" / "gate_backend_under_review.py"
    module.write_text(textwrap.dedent(BUILDER_MODULE.format(planted=False)))

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "base")
    git("checkout", "-q", "-b", "pr")
    module.write_text(textwrap.dedent(BUILDER_MODULE.format(planted=True)))
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-am", "planted regression")
    return repo


def test_the_gate_tests_each_refs_own_tree(mini_repo, tmp_path, capsys) -> None:
    """--base main vs the checkout on branch pr: each side imports its own python/ tree; the regression is red."""
    args = ["--repo", str(mini_repo), "--builder", "gate_backend_under_review:Backend", "--properties", "P1",
            "--examples", "10", "--workers", "0", "--failures-dir", str(tmp_path / "f")]
    assert main(["gate", "--base", "main", *args]) == 1
    out = capsys.readouterr().out
    assert "base = main at" in out and "head = checkout at" in out and "NEW" in out
    assert main(["gate", "--base", "main", "--head", "main", *args]) == 0
    assert "gate: GREEN" in capsys.readouterr().out
    worktrees = subprocess.run(["git", "-C", str(mini_repo), "worktree", "list"], capture_output=True, text=True)
    assert len(worktrees.stdout.strip().splitlines()) == 1, "the gate removes the worktrees it made"


def test_an_unknown_ref_or_a_tree_without_sglang_is_a_usage_error(mini_repo, tmp_path, capsys) -> None:
    """Setup errors exit 2 and say what is wrong, never a verdict."""
    assert main(["gate", "--base", "no-such-ref", "--repo", str(mini_repo), *FAST]) == 2
    assert "unknown ref `no-such-ref`" in capsys.readouterr().err
    assert main(["gate", "--base", "main", "--repo", str(tmp_path), *FAST]) == 2
    assert "is not inside a git repository" in capsys.readouterr().err
    subprocess.run(["git", "-C", str(mini_repo), "checkout", "-q", "main"], check=True)
    subprocess.run(["git", "-C", str(mini_repo), "rm", "-q", "-r", "python/sglang"], check=True)
    subprocess.run(["git", "-C", str(mini_repo), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m",
                    "no sglang"], check=True)
    assert main(["gate", "--base", "main", "--repo", str(mini_repo), "--builder", "sglang", *FAST]) == 2
    assert "has no python/sglang" in capsys.readouterr().err


TWO_BUGS = '''
from metadata_builders.families.dsv4.hip import HipBuilder


class KnownBug(HipBuilder):
    """A failure on every batch, as F5 is on SGLang 0.5.18/0.5.19: max_seq_len one draft short."""

    def build(self, inputs):
        md = super().build(inputs)
        return type(md)(md.fields, md.decision.__class__(md.decision.num_tokens, md.decision.exact_num_tokens,
                                                         md.decision.used_output_size, md.decision.max_seq_len - 1))


class KnownBugAndANewOne(KnownBug):
    """The same, plus a regression in another field."""

    def build(self, inputs):
        md = super().build(inputs)
        md.fields["pf_final_pos"] = md.fields["pf_final_pos"] + 1
        return md
'''


def test_a_failure_on_every_batch_at_base_does_not_hide_a_new_one(tmp_path, monkeypatch, capsys) -> None:
    """P1 already fails everywhere at base; head adds a difference in another field: NEW, red."""
    (tmp_path / "gate_two_bugs.py").write_text(TWO_BUGS)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["gate", "--base-builder", "gate_two_bugs:KnownBug", "--properties", "P1", "--examples", "10",
            "--workers", "0", "--failures-dir", str(tmp_path / "f")]
    assert main([*args, "--head-builder", "gate_two_bugs:KnownBug"]) == 0
    assert "pre-existing 10/10" in capsys.readouterr().out
    assert main([*args, "--head-builder", "gate_two_bugs:KnownBugAndANewOne"]) == 1
    assert "NEW 10/10" in capsys.readouterr().out
