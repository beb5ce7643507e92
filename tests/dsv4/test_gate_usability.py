"""What a gate user tripped over, each pinned: plain errors, honest summaries, runnable commands, no litter.

Builders stand in for SGLang (``--base-builder``/``--head-builder``, a miniature
git repository shaped like SGLang's), so none of this needs SGLang installed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
from _modules import importable_module

from metadata_builders.cli import main
from metadata_builders.errors import Origin
from metadata_builders.families.dsv4.gate import PER_KIND, build_corpus, corpus_focuses, shorten
from metadata_builders.families.dsv4.properties import PROPERTIES

MUTANT = "metadata_builders.families.dsv4.mutants:dropped_dspark_gate"
FAST = ["--properties", "P4", "--examples", "6", "--workers", "0", "--no-pictures"]

HEADS = '''
from metadata_builders.families.dsv4.hip import HipBuilder


class NoReplay(HipBuilder):
    """hip without graph replay (neither its two phases nor capture()/replay()): P5's replay half cannot be judged."""

    graph_state = out_graph = in_graph = None
    capture = None
    replay = None


class OffByOne(HipBuilder):
    """A regression in one field."""

    def build(self, inputs):
        md = super().build(inputs)
        md.fields["pf_final_pos"] = md.fields["pf_final_pos"] + 1
        return md
'''


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Each test its own side-result cache."""
    monkeypatch.setenv("METADATA_BUILDERS_CACHE", str(tmp_path / "gate-cache"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def heads(tmp_path, monkeypatch):
    """The module ``gate_heads``, importable here and by the gate's child processes (not installed anywhere)."""
    folder = tmp_path / "heads"
    folder.mkdir()
    (folder / "gate_heads.py").write_text(HEADS)
    monkeypatch.setenv("PYTHONPATH", str(folder) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.syspath_prepend(str(folder))
    return folder


BACKEND = '''
from metadata_builders.families.dsv4.hip import HipBuilder


class Backend(HipBuilder):
    def build(self, inputs):
        md = super().build(inputs)
        md.fields["pf_final_pos"] = md.fields["pf_final_pos"] + {shift}
        return md
'''
"""The backend under review in the miniature repository: clean at base, a regression on branch ``pr``."""


def _git(repo, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True)
    return done.stdout


@pytest.fixture
def mini_sglang(tmp_path):
    """A git repository shaped like SGLang's, with SGLang's ``build/`` ignore rule; branch ``pr`` regresses."""
    repo = tmp_path / "repo"
    (repo / "python" / "sglang").mkdir(parents=True)
    (repo / "python" / "sglang" / "__init__.py").write_text("")
    (repo / ".gitignore").write_text("__pycache__/\nbuild/\n")  # as SGLang's .gitignore has them
    module = repo / "python" / "gate_backend.py"
    module.write_text(BACKEND.format(shift=0))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "pr")
    module.write_text(BACKEND.format(shift=1))
    _git(repo, "commit", "-q", "-am", "regression")
    return repo


# -- plain errors ----------------------------------------------------------------------------------------


def test_an_unknown_ref_says_unknown_ref(mini_sglang, capsys) -> None:
    """``--base nosuch`` is ``unknown ref `nosuch```, exit 2, not a git command line and its exit status."""
    assert main(["gate", "--base", "nosuch", "--repo", str(mini_sglang), *FAST]) == 2
    err = capsys.readouterr().err
    assert "unknown ref `nosuch`" in err and "rev-parse" not in err and "exit 1" not in err


def test_outside_a_git_repository_says_so(tmp_path, capsys) -> None:
    """A ``--repo`` that is no git repository is named as such, exit 2."""
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    assert main(["gate", "--base", "main", "--repo", str(plain), *FAST]) == 2
    assert f"{plain} is not inside a git repository" in capsys.readouterr().err


# -- what the gate prints --------------------------------------------------------------------------------


def test_keep_workdir_prints_where_it_kept_it(tmp_path, capsys) -> None:
    """``--keep-workdir`` names the directory it kept, and the corpus is there."""
    assert main(["gate", "--base-builder", "hip", "--head-builder", "hip", *FAST, "--keep-workdir"]) == 0
    kept = re.search(r"workdir kept: (\S+)", capsys.readouterr().out)
    assert kept and os.path.isfile(os.path.join(kept.group(1), "corpus.jsonl"))


SYNCS = ("P7 [eager/mirror=host/gate=dspark]: a path that claims to be sync-free synced field=audit.host_syncs "
         "index=None expected=[] actual=[" + ", ".join(
             f"'item@uniform_layout (reads seq_lens, verify_lens) #{n}'" for n in range(30)) + "]")


def test_a_long_sync_list_is_cut_between_entries() -> None:
    """The ``NEW at head`` line keeps whole entries, says how many it left out, and closes the list."""
    short = shorten(SYNCS, 400)
    assert len(short) <= 430 and short.endswith(" more)]")
    listed = short[short.index("actual=[") + len("actual=["):short.rindex(", …")]
    entries = re.findall(r"'[^']*'", listed)
    assert listed == ", ".join(entries) and all(e.startswith("'item@uniform_layout (reads seq_lens, verify_lens) #")
                                                for e in entries)
    kept = len(entries)
    assert f"(+{30 - kept} more)" in short


def test_the_new_at_head_line_of_a_sync_regression_ends_on_a_whole_entry(tmp_path, capsys) -> None:
    """End to end: a head that syncs everywhere prints whole sync entries only."""
    head = "metadata_builders.families.dsv4.mutants:uniform_total_host_loop"
    assert main(["gate", "--base-builder", "hip", "--head-builder", head, "--properties", "P7", "--examples", "4",
                 "--workers", "0", "--no-pictures", "--failures-dir", str(tmp_path / "f")]) == 1
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("P7 NEW at head:"))
    assert line.count("'") % 2 == 0 and line.count("[") == line.count("]") and line.count("(") == line.count(")")


def test_a_module_builder_replay_command_says_how_to_import_it(heads, tmp_path, capsys) -> None:
    """The printed replay command runs as printed, from anywhere: ``PYTHONPATH=<its folder> metadata-builders ...``."""
    failures = tmp_path / "f"
    assert main(["gate", "--base-builder", "hip", "--head-builder", "gate_heads:OffByOne", "--properties", "P1",
                 "--examples", "3", "--workers", "0", "--no-pictures", "--failures-dir", str(failures)]) == 1
    command = next(row for row in capsys.readouterr().out.splitlines() if "replay: " in row).split("replay: ", 1)[1]
    assert command.startswith(f"PYTHONPATH={heads} metadata-builders replay ")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # The console script sits beside this interpreter: found whether or not the venv is activated.
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    done = subprocess.run(command + " --device cpu --properties P1", shell=True, env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stdout + done.stderr  # reproduced, not "builder not found" (exit 2)


def test_a_green_gate_says_what_it_could_not_judge(heads, tmp_path, capsys) -> None:
    """A head without capture/replay: GREEN, and the verdict line itself names P5 as not judged, with why."""
    assert main(["gate", "--base-builder", "hip", "--head-builder", "gate_heads:NoReplay", "--properties", "P4,P5",
                 "--per-kind", "2", "--workers", "0", "--no-pictures", "--failures-dir", str(tmp_path / "f")]) == 0
    out = capsys.readouterr().out
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("gate: GREEN") and "not judged: P5 on" in verdict and "P4" not in verdict
    assert "P5 replay not checked" in out and "has no capture()/replay()" in out


# -- defaults that leave no litter -------------------------------------------------------------------------


def test_the_default_failures_dir_is_ignored_by_sglangs_rules(mini_sglang, capsys) -> None:
    """Red gate with the default ``--failures-dir``: the replay file lands under build/, git status stays clean."""
    args = ["gate", "--base", "main", "--repo", str(mini_sglang), "--builder", "gate_backend:Backend",
            "--properties", "P1", "--examples", "3", "--workers", "0", "--no-pictures"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert str(mini_sglang / "build" / "metadata-builders" / "failures") in out
    assert _git(mini_sglang, "status", "--porcelain", "--untracked-files=all") == ""


# -- the corpus knob ------------------------------------------------------------------------------------------


def test_the_corpus_is_a_knob_per_kind(capsys) -> None:
    """``--per-kind N`` draws N batches of every kind the properties focus on; the ci default is PER_KIND['ci']."""
    kinds = len(corpus_focuses(PROPERTIES))
    assert main(["gate", "--base-builder", "hip", "--head-builder", "hip", "--properties", "P3,P5", "--per-kind",
                 "2", "--workers", "0", "--no-pictures", "--failures-dir", "unused"]) == 0
    # P3 any batch; P5 graph, ragged graph, DSpark uniform graph, and draft extend, decode, draft decode on graph
    # tiers, an idle rank, a DSpark draft worker's uniform graph
    out = capsys.readouterr().out
    assert "corpus: 18 batches over 9 kinds" in out
    # the per-mode rows: P3 judges no other mode, P5 judged each mode's two batches
    for mode in ("draft_extend", "decode", "draft_decode", "idle"):
        assert f"{mode:<13}  -   2" in out, out
    assert "judged per mode of the MTP step" in out
    assert PER_KIND["ci"] >= 10 and kinds >= 5
    small = build_corpus(PROPERTIES[:1], [2] * len(corpus_focuses(PROPERTIES[:1])))
    assert small == build_corpus(PROPERTIES[:1], [2] * len(corpus_focuses(PROPERTIES[:1])))  # derandomized


# -- the base cache ---------------------------------------------------------------------------------------------


def test_base_results_are_cached_by_side_and_harness(tmp_path, capsys) -> None:
    """A re-run, and a sweep to another head, read the base from the cache; --no-cache and another corpus do not."""
    cache = tmp_path / "cache"
    args = ["gate", "--base-builder", "hip", *FAST, "--cache-dir", str(cache), "--failures-dir", str(tmp_path / "f")]
    assert main([*args, "--head-builder", MUTANT]) == 1
    first = capsys.readouterr().out
    assert "from the cache" not in first and len(os.listdir(cache)) == 2
    other = "metadata_builders.families.dsv4.mutants:tier_cap_ignored"
    main([*args, "--head-builder", other])
    again = capsys.readouterr().out
    assert "base: 6 outcomes from the cache" in again and "head: 6 outcomes from the cache" not in again
    assert main([*args, "--head-builder", "hip", "--no-cache"]) == 0
    assert "from the cache" not in capsys.readouterr().out
    entries = len(os.listdir(cache))
    assert main([*args, "--examples", "7", "--head-builder", "hip"]) == 0  # another corpus
    out = capsys.readouterr().out
    assert not re.search(r"^  base: \d+ outcomes from the cache", out, re.M)  # base evaluated afresh
    assert len(os.listdir(cache)) == entries + 1  # under a key of its own (head = base's builder: its entry)
    entry = json.loads((cache / min(os.listdir(cache))).read_text())
    assert {"side", "harness", "corpus", "properties", "device", "torch"} <= set(entry["key"])


# -- the Markdown summary -----------------------------------------------------------------------------------


def test_a_markdown_summary_for_the_pull_request_page(tmp_path, monkeypatch, capsys) -> None:
    """--summary-md and $GITHUB_STEP_SUMMARY: verdict table, not judged, the replay command, the picture."""
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    out_dir = tmp_path / "build"
    summary = out_dir / "gate-summary.md"
    assert main(["gate", "--base-builder", "hip", "--head-builder", MUTANT, "--properties", "P4", "--examples", "6",
                 "--workers", "0", "--failures-dir", str(out_dir / "failures"), "--summary-md", str(summary)]) == 1
    capsys.readouterr()
    text = summary.read_text()
    assert "## metadata-builders gate: 🔴 RED" in text and "| P4 | gate decision table | BLOCKS |" in text
    assert "### Not judged" in text and "### P4 NEW at head" in text
    assert f"metadata-builders replay {out_dir / 'failures'}" in text and f"--builder {MUTANT}" in text
    picture = re.search(r"!\[[^]]*\]\(([^)]+\.png)\)", text)
    assert picture and (out_dir / picture.group(1)).is_file()
    appended = step.read_text()
    assert appended.startswith("earlier step\n") and "### P4 NEW at head" in appended \
        and ".png` in the uploaded" in appended


# -- findings --------------------------------------------------------------------------------------------------


def test_both_f2c_batches_are_labelled_f2c() -> None:
    """P1 judges a diverging batch without its divergence: an F2c batch drawn with one is F2c too, as on the other."""
    from metadata_builders.families.dsv4.runs.findings import Seen, _absorbs_past_width, known_finding

    p6 = [p for p in PROPERTIES if p.name == "P6"]
    diverging = [b for b in build_corpus(p6, 30) if _absorbs_past_width(b.without_divergence())]
    assert diverging and all(b.divergence is not None for b in diverging)
    seen = Seen("P1", "p1.oob_read", "audit.faults", "get_swa_page_indices")
    for batch in diverging:
        assert known_finding(seen, batch) == "F2c"
        assert known_finding(seen, batch.without_divergence()) == "F2c"
        assert known_finding(Seen("P1", "p1.fault_on_clean", "audit.faults"), batch) is None  # a write is no F2c


def test_a_stale_length_reaching_the_decode_streams_is_f8_only_under_divergence() -> None:
    """The streams' segments read back leave their buffer (check ``p<N>.stream_out_of_bounds``): F8 on a diverged
    batch, for P6 and P8 (which build it diverged); on a clean batch it is a new failure, not F8; a builder that
    merely raised in the same function is no F8 (recognised by check id, never by where it raised)."""
    from metadata_builders.families.dsv4.runs.findings import Seen, known_finding

    batch = next(b for b in build_corpus([p for p in PROPERTIES if p.name == "P6"], 10) if b.divergence is not None)
    raised = Origin("StreamOutOfBounds", "metadata_builders/families/dsv4/reference/streams.py", 233,
                    "canonical_streams")
    assert known_finding(Seen("P8", "p8.stream_out_of_bounds", "hca_indices", origin=raised), batch) == "F8"
    assert known_finding(Seen("P6", "p6.stream_out_of_bounds", "swa_indices", origin=raised), batch) == "F8"
    assert known_finding(Seen("P8", "p8.stream_out_of_bounds", origin=raised), batch.without_divergence()) is None
    assert known_finding(Seen("P1", "p1.stream_out_of_bounds", origin=raised), batch) is None  # P1: no divergence
    assert known_finding(Seen("P8", "raised", origin=raised), batch) is None


def test_f11_is_known_only_where_the_installed_release_keeps_c4_state_in_the_swa_pool(monkeypatch) -> None:
    """A c4 plan difference is F11 on 0.5.18/0.5.19 (their semantics); on any later release it is a bug."""
    import metadata_builders.families.dsv4.runs.findings as findings
    from metadata_builders.families.dsv4.batch import VerifyBatch

    d = json.loads((pathlib.Path(__file__).parents[1] / "regressions" / "sglang"
                    / "f11_c4_state_in_swa_pool_before_0_5_20.json").read_text())
    batch = VerifyBatch.from_dict(d)
    def seen(field):
        return findings.Seen("P1", "p1.vs_reference", field)

    for lacks_ring, want in ((True, "F11"), (False, None)):
        monkeypatch.setattr(findings, "_installed_release_lacks_req_ring", lambda lacks=lacks_ring: lacks)
        assert findings.known_finding(seen("c4_compress_plan"), batch) == want
        assert findings.known_finding(seen("swa_loc"), batch) is None
        uncompressed = batch.replace(geometry=dataclasses.replace(batch.geometry, compression=None))
        assert findings.known_finding(seen("c4_write_plan"), uncompressed) is None


def test_f12_is_known_where_p8_builds_the_diverged_batch() -> None:
    """P8 builds a batch with its divergence: upstream's assertion on the stale ragged total is F12 there."""
    from metadata_builders.families.dsv4.batch import VerifyBatch
    from metadata_builders.families.dsv4.runs.findings import Seen, known_finding

    d = json.loads((pathlib.Path(__file__).parents[1] / "regressions" / "sglang"
                    / "f12_compression_asserts_on_stale_ragged_device_total.json").read_text())
    batch = VerifyBatch.from_dict(d)
    origin = Origin("AssertionError", "/x/deepseek_v4_backend_hip_radix.py", 589, "init_compression_metadata")
    assert known_finding(Seen("P8", "raised", "", "", origin), batch) == "F12"
    assert known_finding(Seen("P8", "raised", "", "", origin), batch.without_divergence()) is None
    assert known_finding(Seen("P1", "raised", "", "", origin), batch) is None
    assert known_finding(Seen("P8", "raised", "", "", Origin("AssertionError", "x.py", 3, "elsewhere")), batch) is None


# -- GREEN only when something was judged ------------------------------------------------------------------

RAISING = '''
from metadata_builders.families.dsv4.hip import HipBuilder


class NoGpuHere(HipBuilder):
    """What a ROCm job without its GPU sees: every build raises the same setup exception."""

    def build(self, inputs):
        raise RuntimeError("Torch not compiled with CUDA enabled")
'''


@pytest.fixture
def raising(tmp_path, monkeypatch):
    return importable_module(tmp_path, monkeypatch, "gate_raising", RAISING)


def test_an_unusable_device_is_a_setup_error_before_anything_runs(tmp_path, capsys) -> None:
    """``--device cuda`` without a GPU: exit 2 naming the device, in a second, no side evaluated (was GREEN)."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    import time

    start = time.monotonic()
    code = main(["gate", "--base-builder", "hip", "--head-builder", MUTANT, *FAST, "--device", "cuda",
                 "--failures-dir", str(tmp_path / "f")])
    err = capsys.readouterr().err
    assert code == 2 and "--device cuda" in err and "torch.cuda.is_available() is False" in err
    assert time.monotonic() - start < 10 and not (tmp_path / "f").exists()


@pytest.mark.parametrize("option", ["--per-kind", "--examples"])
def test_an_empty_corpus_is_refused(tmp_path, option, capsys) -> None:
    """``--per-kind 0`` / ``--examples 0`` would judge nothing and say GREEN: exit 2, saying why."""
    argv = ["gate", "--base-builder", "hip", "--head-builder", MUTANT, "--properties", "P4", option, "0",
            "--workers", "0", "--no-pictures"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert option in err and "empty corpus" in err


def test_a_side_that_raises_on_every_batch_is_a_setup_error_not_pre_existing(raising, tmp_path, capsys) -> None:
    """Both sides raise one setup exception everywhere (a job without its GPU): exit 2, never GREEN."""
    code = main(["gate", "--base-builder", "gate_raising:NoGpuHere", "--head-builder", "gate_raising:NoGpuHere",
                 *FAST, "--failures-dir", str(tmp_path / "f")])
    captured = capsys.readouterr()
    assert code == 2, captured.out
    assert "base side" in captured.err and "same exception on every batch" in captured.err
    assert "Torch not compiled with CUDA enabled" in captured.err and "gate: GREEN" not in captured.out


def test_an_unknown_head_builder_is_said_before_the_base_runs(tmp_path, capsys) -> None:
    """A head builder whose module does not exist is refused in a second, not after the base's evaluation."""
    import time

    start = time.monotonic()
    code = main(["gate", "--base-builder", "hip", "--head-builder", "no_such_pkg.builders:B", *FAST])
    err = capsys.readouterr().err
    assert code == 2 and "--head-builder" in err and "no_such_pkg" in err and "PYTHONPATH" in err
    assert time.monotonic() - start < 5


def test_base_ref_and_base_builder_together_are_one_line(mini_sglang, capsys) -> None:
    """``--base`` with ``--base-builder`` is a usage error in one line, not pytest failures."""
    code = main(["gate", "--base", "main", "--base-builder", "hip", "--head-builder", "hip", "--repo",
                 str(mini_sglang), *FAST])
    captured = capsys.readouterr()
    assert code == 2 and "choose one" in captured.err and len(captured.err.strip().splitlines()) == 1
    assert captured.out.strip() == ""


def test_a_gate_that_judged_nothing_is_never_green() -> None:
    """Every batch not applicable or not judged: the verdict line says NOTHING JUDGED, not GREEN."""
    from metadata_builders.families.dsv4.gate.model import Side
    from metadata_builders.families.dsv4.gate.summary import GateResult
    from metadata_builders.families.dsv4.gate.verdicts import PropertyVerdict

    pv = PropertyVerdict("P5", "graph = eager")
    pv.batches, pv.counts["not judged"] = 4, 4
    result = GateResult(Side("base", "hip"), Side("head", "hip"), 4, [pv])
    assert result.judged == 0 and not result.red
    line = result.verdict_line()
    assert "NOTHING JUDGED" in line and "GREEN" not in line and "P5 NOT JUDGED (4/4 batches)" in line


def test_a_change_to_a_file_modelled_on_cpu_is_not_green_on_cpu(mini_sglang, capsys) -> None:
    """The PR touches ``c_plan.cuh`` (modelled on CPU): the CPU gate names it and the job that judges it, exit 1."""
    kernel = mini_sglang / "python" / "sglang" / "kernels" / "jit" / "csrc" / "deepseek_v4" / "c_plan.cuh"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("// a change to the compress-plan kernel\n")
    _git(mini_sglang, "checkout", "-q", "main")
    _git(mini_sglang, "checkout", "-q", "-b", "kernel-only")
    _git(mini_sglang, "add", ".")
    _git(mini_sglang, "commit", "-q", "-m", "touch the plan kernel")
    code = main(["gate", "--base", "main", "--head", "kernel-only", "--repo", str(mini_sglang), "--builder",
                 "gate_backend:Backend", *FAST])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "NOT GREEN ON CPU" in out and "c_plan.cuh" in out and "ROCm GPU job" in out


def test_the_gate_runs_on_a_users_own_repository_without_python_sglang(tmp_path, capsys) -> None:
    """A repository of one's own (``src/mybackend``), no ``python/sglang``: the gate judges a module:attr builder."""
    repo = tmp_path / "own"
    package = repo / "src" / "mybackend"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "builders.py").write_text(BACKEND.format(shift=0))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "pr")
    (package / "builders.py").write_text(BACKEND.format(shift=1))
    _git(repo, "commit", "-q", "-am", "regression")
    argv = ["gate", "--base", "main", "--repo", str(repo), "--builder", "mybackend.builders:Backend",
            "--properties", "P1", "--examples", "4", "--workers", "0", "--no-pictures",
            "--failures-dir", str(tmp_path / "f")]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "gate: RED (P1 blocking)" in out and f"PYTHONPATH={repo / 'src'} metadata-builders replay" in out


def test_a_head_builder_in_the_current_directory_imports_as_check_imports_it(tmp_path, monkeypatch, capsys) -> None:
    """``gate --base-builder hip --head-builder mypkg...`` from the folder that holds ``mypkg/``, as ``check`` is run:
    the sides import it (no ``No module named 'mypkg'``), and the header names both builders (issue 40 item 6)."""
    package = tmp_path / "gatepkg_cwd"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mine.py").write_text("from metadata_builders.families.dsv4.hip import HipBuilder\n\n\n"
                                     "class Mine(HipBuilder):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("METADATA_BUILDERS_CACHE", str(tmp_path / "cache"))
    code = main(["gate", "--base-builder", "hip", "--head-builder", "gatepkg_cwd.mine:Mine", "--properties", "P4",
                 "--examples", "3", "--workers", "0", "--no-pictures", "--failures-dir", str(tmp_path / "f")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "builders hip (base) and gatepkg_cwd.mine:Mine (head)" in out.splitlines()[0]


def test_a_route_is_the_rows_data_and_a_finding_matches_the_property_alone() -> None:
    """A gate row on another kernel route is (property, route) as data: ``P1-torch`` is a label made from it, the
    property stays ``P1`` for everything that matches on it (known findings, the shrinker's child, the verdict)."""
    from metadata_builders.families.dsv4.gate.verdicts import PropertyVerdict
    from metadata_builders.families.dsv4.runs.findings import Seen, _absorbs_past_width, known_finding

    primary, torch_route = PropertyVerdict("P1", "every variant = reference"), PropertyVerdict("P1", "t", route="torch")
    assert (primary.row, torch_route.row, torch_route.prop) == ("P1", "P1-torch", "P1")
    batch = next(b for b in build_corpus([p for p in PROPERTIES if p.name == "P6"], 30)
                 if _absorbs_past_width(b.without_divergence()))
    assert known_finding(Seen("P1", "p1.oob_read", "audit.faults", "get_swa_page_indices"), batch) == "F2c"
    assert known_finding(Seen("P1-torch", "p1.oob_read", "audit.faults", "get_swa_page_indices"), batch) is None
