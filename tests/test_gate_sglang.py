"""The gate end to end on real SGLang code: a miniature SGLang repository, base as released, head planted.

The repository is made from the installed release: ``python/sglang`` holds the
HIP backend module as a real file and everything else as symlinks into the
installed package (git stores them), so a worktree of any commit imports the
whole release with that commit's backend.  Base is the release; branch ``pr``
plants a realistic regression in ``deepseek_v4_backend_hip_radix.py``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest

from metadata_builders.cli import main

pytestmark = pytest.mark.sglang

BACKEND = ("srt", "layers", "attention", "deepseek_v4_backend_hip_radix.py")

REGRESSIONS = (
    # (what, find, replace, property that must go red)
    ("the dspark gate dropped (the AMD memory access fault)",
     "exact_num_tokens = exact_num_tokens and self.is_dspark", "exact_num_tokens = exact_num_tokens", "P4"),
    ("pf_final_pos one past the last position",
     "final_pos = (seq_lens - 1)[bid]", "final_pos = seq_lens[bid]", "P1"),
)
"""Realistic regressions; the first whose line the installed release has is planted."""


def _mirror(installed: str, repo: str) -> str:
    """``repo/python/sglang``: real directories along the backend's path, symlinks for everything else."""
    here, there = installed, os.path.join(repo, "python", "sglang")
    for part in BACKEND:
        os.makedirs(there, exist_ok=True)
        for entry in sorted(os.listdir(here)):
            if entry in (part, "__pycache__"):
                continue
            os.symlink(os.path.join(here, entry), os.path.join(there, entry))
        here, there = os.path.join(here, part), os.path.join(there, part)
    with open(here) as src, open(there, "w") as dst:
        dst.write(src.read())
    return there


@pytest.fixture(scope="module")
def planted_repo(tmp_path_factory):
    """(repo, regression): commit ``main`` = the installed release, branch ``pr`` = one planted regression."""
    spec = importlib.util.find_spec("sglang")
    installed = os.path.dirname(spec.origin)
    repo = str(tmp_path_factory.mktemp("sglang-mini"))
    backend = _mirror(installed, repo)

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", repo, "-c", "user.email=gate@test", "-c", "user.name=gate", *args],
                       check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "release as installed")
    source = open(backend).read()
    regression = next(r for r in REGRESSIONS if source.count(r[1]) == 1)
    git("checkout", "-q", "-b", "pr")
    with open(backend, "w") as fh:
        fh.write(source.replace(regression[1], regression[2]))
    git("commit", "-q", "-am", f"planted: {regression[0]}")
    return repo, regression


def _gate(repo: str, tmp_path, *extra: str) -> int:
    return main(["gate", "--base", "main", "--repo", repo, "--builder", "sglang", "--properties", "P1,P4",
                 "--examples", "8", "--workers", "2", "--failures-dir", str(tmp_path / "failures"), *extra])


def test_a_planted_regression_gates_red_naming_the_property(planted_repo, tmp_path, capsys) -> None:
    """Head with the regression: red, the expected property NEW, a replay file written."""
    repo, (what, _, _, prop) = planted_repo
    assert _gate(repo, tmp_path) == 1, what
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith(prop + " "))
    assert "BLOCKS" in line and "NEW" in line, out
    assert any(name.startswith(prop + "-") for name in os.listdir(tmp_path / "failures"))


def test_the_release_against_itself_gates_green(planted_repo, tmp_path, capsys) -> None:
    """Head = base (both the release): green; whatever fails at both is listed as pre-existing."""
    repo, _ = planted_repo
    assert _gate(repo, tmp_path, "--head", "main") == 0
    assert "gate: GREEN" in capsys.readouterr().out
