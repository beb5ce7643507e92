"""The command line: check, replay, variants; exit codes mean what the README says."""

from __future__ import annotations

import glob
import json
import xml.etree.ElementTree as ET

import pytest

from metadata_builders.cli import main
from metadata_builders.families.dsv4.properties import PROPERTIES

BUGGY = '''
from metadata_builders.families.dsv4.hip import HipBuilder


class RingOffByOne(HipBuilder):
    """Wrong only when a position wraps the SWA ring at least once."""

    def build(self, inputs):
        md = super().build(inputs)
        ring = inputs.geometry.ring_size
        loc = md.fields["swa_loc"]
        pos = md.fields["positions_casual"]
        md.fields["swa_loc"] = loc + (pos >= ring).to(loc.dtype)
        return md
'''


@pytest.fixture
def buggy_module(tmp_path, monkeypatch):
    (tmp_path / "cli_buggy_builders.py").write_text(BUGGY)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "cli_buggy_builders:RingOffByOne"


def test_check_holds_on_the_bundled_builder_and_writes_junit(tmp_path, capsys):
    """``check`` exits 0 on the hip builder and writes one JUnit testcase per property."""
    junit = tmp_path / "junit.xml"
    code = main(["check", "--profile", "ci", "--max-examples", "5", "--device", "cpu",
                 "--junit-xml", str(junit), "--failures-dir", str(tmp_path / "failures")])
    out = capsys.readouterr().out
    assert code == 0
    assert "P7" in out and "FAILED" not in out
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == str(len(PROPERTIES)) == "10" and suite.get("failures") == "0"


def test_check_fails_on_a_narrow_bug_writes_a_replay_file_that_reproduces(tmp_path, buggy_module, capsys):
    """A ring-wrap-only bug fails check; its replay file fails with that builder and passes with hip."""
    failures = tmp_path / "failures"
    code = main(["check", "--builder", buggy_module, "--profile", "ci", "--device", "cpu",
                 "--properties", "P1", "--failures-dir", str(failures)])
    out = capsys.readouterr().out
    assert code == 1
    # a replay file per mode the bug shows in (the bug is in stage 5, which every mode's ring target shares)
    files = glob.glob(str(failures / "P1-*.json"))
    assert files and all(f"metadata-builders replay {path} --builder {buggy_module}" in out for path in files)
    # the target worker's verify (a DSpark draft worker's verify is a build of its own, with a file of its own)
    files = [path for path in files if "mode" not in json.load(open(path))
             and "speculative_num_draft_tokens" not in json.load(open(path))]
    assert len(files) == 1
    with open(files[0]) as fh:
        meta = json.load(fh)["meta"]
    assert meta["property"] == "P1" and meta["field"] == "swa_loc"
    assert main(["replay", files[0], "--builder", buggy_module, "--device", "cpu"]) == 1
    replay_out = capsys.readouterr().out
    assert "field swa_loc" in replay_out
    assert main(["replay", files[0], "--builder", "hip", "--device", "cpu"]) == 0


def test_replay_of_a_missing_file_is_a_usage_error(tmp_path, capsys):
    """A file that cannot be read exits 2 and says which file."""
    assert main(["replay", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err


def test_replay_of_an_invalid_batch_names_the_field(tmp_path, capsys):
    """A malformed batch file exits 2 with InvalidBatch naming field and value."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"seq_lens": [0], "req_pool_indices": [1], "num_draft_tokens": 1,
                                "out_cache_loc": [0], "req_to_token": [[0, 1], [0, 1]], "full_to_swa": [0, -1]}))
    assert main(["replay", str(path)]) == 2
    assert "seq_lens[0]=0" in capsys.readouterr().err


def test_unknown_builder_is_a_usage_error(capsys):
    """An unknown builder name exits 2 and explains the accepted names."""
    assert main(["check", "--builder", "nosuchbuilder", "--max-examples", "1"]) == 2
    assert "module:attr" in capsys.readouterr().err


def test_variants_lists_sync_contract_and_fault_exposure(capsys):
    """``variants`` shows each variant's syncs and which ones fault under divergence."""
    assert main(["variants"]) == 0
    out = capsys.readouterr().out
    assert "FAULTS if device lengths diverge" in out and "Tensor.tolist" in out and "Tensor.item" in out


DYING = '''
import os

from metadata_builders.families.dsv4.hip import HipBuilder


class DiesInItsWorker(HipBuilder):
    """Ends its process on the first build of a graph-path variant (a native crash, as far as check can tell)."""

    def build(self, inputs):
        if inputs.variant.path == "graph":
            os._exit(3)
        return super().build(inputs)
'''


def _table(out: str) -> list[list[str]]:
    rows = [line.split() for line in out.splitlines() if line[:2] in {f"P{i}" for i in range(1, 10)}]
    return [[row[0], row[-4], row[-3], row[-1]] for row in rows]  # property, examples, failures, result


def test_check_on_workers_prints_the_table_a_single_process_prints(tmp_path, capsys):
    """``--workers 2``: the same properties, examples and verdicts, in the same order, as ``--workers 1``."""
    tables = []
    for workers in ("1", "2"):
        code = main(["check", "--profile", "ci", "--max-examples", "4", "--device", "cpu", "--properties",
                     "P4,P3,P8", "--workers", workers, "--failures-dir", str(tmp_path / "failures")])
        assert code == 0
        tables.append(_table(capsys.readouterr().out))
    assert tables[0] == tables[1] and [row[0] for row in tables[0]] == ["P4", "P3", "P8"]


def test_a_worker_that_dies_fails_its_property_and_says_how_to_rerun_it(tmp_path, monkeypatch, capsys):
    (tmp_path / "cli_dying_builders.py").write_text(DYING)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["check", "--builder", "cli_dying_builders:DiesInItsWorker", "--profile", "ci", "--max-examples", "3",
                 "--device", "cpu", "--properties", "P5,P4", "--workers", "2", "--failures-dir", str(tmp_path / "f")])
    out = capsys.readouterr().out
    assert code == 1
    assert "P5 FAILED: P5: its worker process died" in out and "--properties P5 --workers 1" in out


def test_workers_must_be_auto_or_a_positive_count(capsys):
    assert main(["check", "--properties", "P4", "--max-examples", "1", "--workers", "none"]) == 2
    assert "--workers" in capsys.readouterr().err


# -- one line for every bad input ----------------------------------------------------------------------

NEWCOMER = '''
from metadata_builders.families.dsv4.hip import HipBuilder


class BrokenInit(HipBuilder):
    def __init__(self, device="cpu"):
        raise ValueError("no config file at /etc/mybackend.toml")


class ReturnsDict(HipBuilder):
    def build(self, inputs):
        return dict(super().build(inputs).fields)
'''


@pytest.fixture
def newcomer(tmp_path, monkeypatch):
    (tmp_path / "cli_newcomer.py").write_text(NEWCOMER)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "cli_newcomer"


@pytest.mark.parametrize("device", ["cuda", "gpu", "rocm", "cuda:7"])
def test_check_on_a_device_this_machine_cannot_use_is_exit_2_before_anything_runs(tmp_path, device, capsys):
    """``check --device cuda`` without a GPU (or a misspelt device): one line naming it, exit 2, no replay files."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code = main(["check", "--device", device, "--failures-dir", str(tmp_path / "failures")])
    captured = capsys.readouterr()
    assert code == 2 and f"--device {device}" in captured.err and "Traceback" not in captured.err
    assert "FAILED" not in captured.out and not (tmp_path / "failures").exists()


def test_replay_on_an_unusable_device_is_exit_2(tmp_path, capsys):
    """``replay FILE --device cuda`` without a GPU: exit 2, naming the device."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["replay", "tests/regressions/stale_host_mirror.json", "--device", "cuda"]) == 2
    assert "--device cuda" in capsys.readouterr().err


@pytest.mark.parametrize("examples", ["0", "-5"])
def test_a_non_positive_max_examples_is_one_line(examples, capsys):
    """``--max-examples 0`` (or -5) is a usage error naming the option, not a Hypothesis traceback."""
    assert main(["check", "--profile", "nightly", "--max-examples", examples, "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--max-examples" in err and "Traceback" not in err


def test_a_builder_whose_init_raises_is_one_line(newcomer, capsys):
    """A builder that cannot be constructed: exit 2, the exception and where, never a traceback."""
    assert main(["check", "--builder", f"{newcomer}:BrokenInit", "--device", "cpu", "--max-examples", "2"]) == 2
    err = capsys.readouterr().err
    assert "constructing it raised ValueError: no config file" in err and "cli_newcomer.py" in err


def test_a_build_that_returns_a_dict_names_the_contract(newcomer, capsys):
    """``build()`` returning a dict fails naming the contract and the fix, not ``'dict' has no attribute``."""
    from _examples import EXAMPLES

    from metadata_builders import Variant, get_builder
    from metadata_builders.errors import BuilderContractError

    builder = get_builder(f"{newcomer}:ReturnsDict", "cpu")
    with pytest.raises(BuilderContractError) as info:
        builder.build(EXAMPLES["single_request"], Variant("eager", "host", "host", "dspark"))
    message = str(info.value)
    assert "build(inputs) must return a VerifyMetadata, returned dict" in message and "Decision(" in message


def test_version(capsys):
    """``metadata-builders --version`` prints the source's version, not an editable install's stale metadata."""
    import metadata_builders

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 \
        and capsys.readouterr().out.split() == ["metadata-builders", metadata_builders.__version__]


def test_replay_into_a_closed_pipe_is_quiet(tmp_path):
    """``replay FILE | head -1``: no BrokenPipeError traceback."""
    import subprocess
    import sys

    done = subprocess.run(f"{sys.executable} -m metadata_builders.cli replay "
                          "tests/regressions/stale_host_mirror.json --device cpu | head -1",
                          shell=True, capture_output=True, text=True, check=False)
    assert "BrokenPipeError" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_replay_without_builder_uses_the_files_builder(tmp_path, buggy_module, capsys):
    """A replay file written for another builder replays with that builder, and says so."""
    failures = tmp_path / "failures"
    assert main(["check", "--builder", buggy_module, "--profile", "ci", "--device", "cpu", "--properties", "P1",
                 "--failures-dir", str(failures)]) == 1
    path = glob.glob(str(failures / "P1-*.json"))[0]
    capsys.readouterr()
    assert main(["replay", path, "--device", "cpu", "--properties", "P1"]) == 1
    out = capsys.readouterr().out
    assert f"builder={buggy_module} (the file's meta.builder)" in out


def test_check_ends_with_one_overall_line(tmp_path, capsys):
    """``check`` with one builder ends with a line saying held or which properties failed."""
    assert main(["check", "--profile", "ci", "--max-examples", "2", "--device", "cpu", "--properties", "P3,P4",
                 "--failures-dir", str(tmp_path / "f"), "--workers", "1"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("check --builder hip: held")


def test_check_leaves_one_hidden_folder_that_git_ignores(tmp_path, buggy_module):
    """A failing ``check`` in a user's project leaves only ``.metadata-builders/`` (no failures/, .hypothesis/,
    build/)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "metadata_builders.cli", "check", "--builder", buggy_module,
                           "--profile", "dev", "--device", "cpu", "--properties", "P1", "--workers", "1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cli_buggy_builders.py") == [".metadata-builders"]
    assert (tmp_path / ".metadata-builders" / ".gitignore").read_text().strip().endswith("*")
    assert list((tmp_path / ".metadata-builders" / "failures").glob("P1-*.json"))


# -- a newcomer's own project (issue 27's walkthrough) ---------------------------------------------------


def test_a_builder_package_in_the_working_directory_imports_as_python_m_would(tmp_path, monkeypatch) -> None:
    """``check --builder mypkg.builders:B`` from the folder holding ``mypkg/``: found there (a console script's
    path lacks the working directory), and the printed command carries ``PYTHONPATH=<that folder>``."""
    import sys

    from metadata_builders.builders.loading import replay_env
    from metadata_builders.families.dsv4.builders.registry import check_builder_name

    package = tmp_path / "newcomer_pkg_cwd"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "builders.py").write_text("from metadata_builders.families.dsv4.hip import HipBuilder as Mine\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    check_builder_name("newcomer_pkg_cwd.builders:Mine")
    assert replay_env("newcomer_pkg_cwd.builders:Mine") == f"PYTHONPATH={tmp_path}"
    with pytest.raises(Exception, match="PYTHONPATH"):
        check_builder_name("no_such_pkg_anywhere.builders:Mine")


def test_the_printed_replay_command_names_the_file_absolutely(tmp_path, monkeypatch) -> None:
    """It runs as printed from any directory (a relative path only worked where ``check`` ran)."""
    from metadata_builders.families.dsv4.runs.report import replay_command

    monkeypatch.chdir(tmp_path)
    assert replay_command(".metadata-builders/failures/P4-x.json", "hip", env="") == \
        f"metadata-builders replay {tmp_path}/.metadata-builders/failures/P4-x.json --builder hip"


def test_the_gate_folder_in_a_users_repository_ignores_itself(tmp_path) -> None:
    """``build/metadata-builders/`` gets a ``.gitignore`` of ``*``: a later gate must not see the replay files
    of the last one as the head's uncommitted change."""
    import argparse

    from metadata_builders.families.dsv4.gate.command import _failures_dir

    path = _failures_dir(argparse.Namespace(failures_dir=None, base="main", repo=str(tmp_path)))
    assert path == str(tmp_path / "build" / "metadata-builders" / "failures")
    assert (tmp_path / "build" / "metadata-builders" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_a_bad_workers_count_is_refused_before_anything_is_printed(capsys) -> None:
    """``check --workers 0``: one usage line, exit 2, and no header claiming a run started."""
    assert main(["check", "--workers", "0"]) == 2
    captured = capsys.readouterr()
    assert "metadata-builders check: builder=" not in captured.out and "--workers" in captured.err


def test_a_crash_inside_torch_is_placed_at_the_builder_line_that_called_it() -> None:
    """``Origin`` skips torch's and Triton's own frames: a size mismatch raised in ``torch/_ops.py`` is placed at
    the builder's line (what identifies one bug across batches, and what the report shows)."""
    import torch

    from metadata_builders.errors import Origin
    from metadata_builders.families.dsv4.properties.spec import raised_failure

    def out_graph() -> None:
        torch.zeros(1).copy_(torch.zeros(2))

    try:
        out_graph()
    except RuntimeError as exc:
        origin, failure = Origin.of(exc), raised_failure("P5", exc)
    assert origin.function == "out_graph" and origin.filename == __file__, origin
    assert "in out_graph)" in str(failure), str(failure)



# -- nothing that failed is shown as fine (issue 40 item 4) ---------------------------------------------------


def test_a_failure_line_names_its_mode_and_its_label_claims_no_knob_the_mode_has_not(tmp_path, capsys) -> None:
    """The first failure of a property names its mode, and a draft-decode variant is labelled by its path alone
    (no ``mirror=host`` on a mode with no mirror knob)."""
    code = main(["check", "--builder", "metadata_builders.families.dsv4.mutants:draft_decode_step_slice_step_major",
                 "--properties", "P1", "--profile", "ci", "--workers", "1", "--failures-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    line = next(line for line in out.splitlines() if line.startswith("P1 FAILED"))
    assert line.startswith("P1 FAILED (mode draft_decode): P1 [eager/mode=draft_decode]"), line
    assert "mirror=" not in line


def test_replay_of_a_file_that_did_not_reproduce_says_so_first_and_last(tmp_path, capsys) -> None:
    """A file ``check`` wrote with ``reproduces_on_fresh_builder: false`` never replays as a plain green: the first
    and last lines say it did not reproduce, and the exit is 1 (docs/FAILURES.md section 4)."""
    from _examples import EXAMPLES

    from metadata_builders.families.dsv4.runs.report import write_replay_file

    path = write_replay_file(str(tmp_path), "P2", EXAMPLES["single_request"], None, "hip",
                             {"reproduces_on_fresh_builder": False})
    assert main(["replay", path, "--properties", "P2"]) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines[1].startswith("NOT REPRODUCED") and lines[-1].startswith("NOT REPRODUCED"), lines


FLAKY = '''
from metadata_builders.families.dsv4.hip import HipBuilder

BUILDS = [0]


class WrongOnce(HipBuilder):
    """Wrong on the process's first build only: nothing a fresh builder (or a replay file) can reproduce."""

    def build(self, inputs):
        md = super().build(inputs)
        BUILDS[0] += 1
        if BUILDS[0] == 1:
            md.fields["seq_lens"] = md.fields["seq_lens"] + 1
        return md
'''


def test_check_lists_a_replay_file_that_did_not_reproduce_apart(tmp_path, monkeypatch, capsys) -> None:
    """A failure a fresh builder does not reproduce: its replay command is listed under its own warning."""
    (tmp_path / "cli_flaky_builders.py").write_text(FLAKY)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["check", "--builder", "cli_flaky_builders:WrongOnce", "--properties", "P1", "--profile", "dev",
                 "--max-examples", "3", "--workers", "1", "--failures-dir", str(tmp_path / "f")])
    out = capsys.readouterr().out
    assert code == 1
    after = out.split("did NOT reproduce on a fresh builder", 1)
    assert len(after) == 2 and "replay P1:" in after[1] and "replay P1:" not in after[0].split("P1 FAILED")[-1]


def test_the_family_option_runs_the_dsa_family_and_refuses_an_unknown_one(capsys) -> None:
    """``check --family dsa`` hands the command line to the DSA family (its table, its verdict); an unknown family
    is one line naming the known ones, exit 2."""
    assert main(["check", "--family", "dsa", "--profile", "dev", "--properties", "P1", "--modes", "decode"]) == 0
    out = capsys.readouterr().out
    assert "dsa family, builder dsa-torch" in out and "holds" in out
    assert main(["check", "--family=dsv5"]) == 2
    assert "--family: dsv5 (one of dsv4, dsa)" in capsys.readouterr().err
