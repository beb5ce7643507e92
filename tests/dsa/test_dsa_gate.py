"""The DSA family's gate end to end on real SGLang code: a miniature repository, base as released, a tracker bug
planted in a copy of upstream's file.

The repository is :func:`~metadata_builders.gate.mini_repo.make_mini_repo`'s, with the DSA family's upstream files
(:data:`DSA_FILES`) as real files.  ``pr-floor`` plants sglang #30378 as upstream's own one-line edit: the
``seqlens_expand`` kernel (``kernels/ops/attention/pad.py``) without its floor at 0, so a draft-extend replay's pad
row (``seq_len`` 1, ``N >= 2``) expands to a negative length.  The gate is red on it, naming P5 (and P1) in
``draft_extend`` with the head's replay file, and green for the release against itself.  Both gates run one mode
and two properties with 30 examples per search (the floor's bug needs a pad row: ``dev``'s 6 batches draw none).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from metadata_builders.families.dsa.__main__ import main
from metadata_builders.families.dsa.gate import side_env
from metadata_builders.gate.mini_repo import EDITABLE, make_mini_repo

pytestmark = pytest.mark.sglang

DSA_FILES = (
    ("srt", "layers", "attention", "dsa_backend.py"),
    ("kernels", "ops", "attention", "pad.py"),
    ("kernels", "ops", "attention", "dsa", "metadata.py"),
)
"""The family's upstream files (gate/watched.py's DSA entries), real files of the miniature repository."""

PAD = DSA_FILES[1]
FLOOR = "    values = tl.maximum(start + offs, 0)\n"
NO_FLOOR = "    values = start + offs\n"
"""sglang #30378 re-created: the floor upstream added, removed (every release 0.5.18-0.5.23 has the line)."""

FUSED = DSA_FILES[2]
FUSED_FLOOR = "        expanded_seq = tl.maximum(expanded_seq, 0)\n"
FUSED_NO_FLOOR = "        expanded_seq = expanded_seq + 0\n"
"""The same bug in the fused draft-extend replay kernel (``dsa/metadata.py``, 0.5.23: the HIP route when
``kpool <= 1``): its own floor removed, a second, independent plant."""

FAST = ["--modes", "draft_extend", "--properties", "P1,P5", "--max-examples", "30"]


@pytest.fixture(scope="module")
def planted_repo(tmp_path_factory) -> str:
    """``main`` = the installed release; ``pr-floor`` = #30378 planted in upstream's ``pad.py``."""
    pytest.importorskip("sglang")
    repo = str(tmp_path_factory.mktemp("sglang-mini-dsa"))
    make_mini_repo(repo, (*EDITABLE, *DSA_FILES))
    for path in DSA_FILES:
        assert os.path.isfile(os.path.join(repo, "python", "sglang", *path)), path
        assert not os.path.islink(os.path.join(repo, "python", "sglang", *path)), path
    pad = os.path.join(repo, "python", "sglang", *PAD)
    with open(pad) as fh:
        source = fh.read()
    assert source.count(FLOOR) == 1, "the release's seqlens_expand kernel moved: update FLOOR"

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", repo, "-c", "user.email=gate@test", "-c", "user.name=gate", *args],
                       check=True, capture_output=True)

    git("checkout", "-q", "-b", "pr-floor", "main")
    with open(pad, "w") as fh:
        fh.write(source.replace(FLOOR, NO_FLOOR, 1))
    git("commit", "-q", "-am", "planted: sglang #30378, seqlens_expand without its floor at 0")
    fused = os.path.join(repo, "python", "sglang", *FUSED)
    with open(fused) as fh:
        source = fh.read()
    if source.count(FUSED_FLOOR) == 1:  # 0.5.23's fused kernels; earlier releases keep them elsewhere
        git("checkout", "-q", "-b", "pr-fused-floor", "main")
        with open(fused, "w") as fh:
            fh.write(source.replace(FUSED_FLOOR, FUSED_NO_FLOOR, 1))
        git("commit", "-q", "-am", "planted: sglang #30378 in the fused draft-extend replay kernel")
    git("checkout", "-q", "main")
    return repo


def test_a_tracker_bug_in_upstreams_file_gates_red_naming_the_property(planted_repo, tmp_path, capsys) -> None:
    """#30378 planted in pad.py: red, ``draft_extend P5`` named, the head's replay file written; replayed with the
    head's tree it fails P5, with base's it holds."""
    failures = tmp_path / "failures"
    code = main(["gate", "--base", "main", "--head", "pr-floor", "--repo", planted_repo, *FAST,
                 "--failures-dir", str(failures)])
    out = capsys.readouterr().out
    assert code == 1, out
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("gate: RED (") and "draft_extend P5" in verdict, out
    assert "ok/FAIL" in next(line for line in out.splitlines() if line.startswith("draft_extend ")), out
    replay = failures / "dsa-draft_extend-P5.json"
    assert replay.exists() and f"replay file: {replay}" in out, out
    assert f"metadata-builders replay {replay} --family dsa --builder sglang --properties P5" in out, out
    codes = {ref: _replay(planted_repo, ref, str(replay), tmp_path) for ref in ("pr-floor", "main")}
    assert codes == {"pr-floor": 1, "main": 0}, codes  # the printed command fails at head, holds at base


@pytest.mark.slow
def test_the_fused_kernels_floor_removed_gates_red(planted_repo, tmp_path, capsys) -> None:
    """The fused draft-extend kernel without its floor (``dsa/metadata.py``): red in ``draft_extend`` on the fused
    route's replay (nightly: a second whole gate)."""
    branches = subprocess.run(["git", "-C", planted_repo, "branch", "--list", "pr-fused-floor"],
                              capture_output=True, text=True, check=True).stdout
    if not branches.strip():
        pytest.skip("this release keeps its fused kernels elsewhere than kernels/ops/attention/dsa/metadata.py")
    code = main(["gate", "--base", "main", "--head", "pr-fused-floor", "--repo", planted_repo, *FAST,
                 "--failures-dir", str(tmp_path / "failures")])
    out = capsys.readouterr().out
    assert code == 1, out
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("gate: RED (") and "draft_extend P" in verdict, out


def _replay(repo: str, ref: str, replay: str, tmp_path) -> int:
    """The replay command the red gate prints, with ``ref``'s tree first on the path: its exit status."""
    tree = str(tmp_path / f"tree-{ref}")
    subprocess.run(["git", "-C", repo, "worktree", "add", "--detach", tree, ref], check=True, capture_output=True)
    try:
        return subprocess.run([sys.executable, "-m", "metadata_builders.families.dsa", "replay", replay, "--builder",
                               "sglang", "--properties", "P5"], env=side_env(os.path.join(tree, "python")),
                              capture_output=True, text=True, cwd=str(tmp_path)).returncode
    finally:
        subprocess.run(["git", "-C", repo, "worktree", "remove", "--force", tree], capture_output=True)


def test_the_release_against_itself_gates_green(planted_repo, tmp_path, capsys) -> None:
    """Head = base (both the release): green, every cell ``ok/ok``."""
    code = main(["gate", "--base", "main", "--head", "main", "--repo", planted_repo, *FAST,
                 "--failures-dir", str(tmp_path / "failures")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.strip().splitlines()[-1].startswith("gate: GREEN (no new failures) in "), out
    assert "FAIL" not in next(line for line in out.splitlines() if line.startswith("draft_extend ")), out


def test_a_side_that_cannot_run_is_a_setup_error(planted_repo, capsys) -> None:
    """An unknown ref: exit 2, said plainly, no verdict."""
    assert main(["gate", "--base", "nosuch", "--repo", planted_repo, *FAST]) == 2
    err = capsys.readouterr().err
    assert "unknown ref `nosuch`" in err and "gate:" not in err, err
