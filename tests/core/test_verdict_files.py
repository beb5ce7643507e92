"""The nightly's verdict files (issue 44 item 4): two shards' files merged into one summary in the gate's format;
a conflicting or malformed file is exit 2 naming the file and the field; the shard plugin splits deterministically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metadata_builders.cli import main
from metadata_builders.gate.verdict_files import (
    SCHEMA,
    VerdictFileError,
    from_junit,
    load,
    merge,
)
from metadata_builders.tools.shard import shard_of

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.test_gate_sglang" name="test_pr_red" time="1.0"/>
<testcase classname="tests.test_sglang_adapter" name="test_worked_example" time="2.0">
  <failure message="AssertionError: P1 failed">P1 cu_seqlens_k[2]: 7 != 9</failure></testcase>
<testcase classname="tests.test_sglang_decode" name="test_f5" time="0.5">
  <failure message="P1 failed: known finding F5 (docs/FINDINGS.md)">...</failure></testcase>
<testcase classname="tests.test_sglang_graph" name="test_rocm_only" time="0.0">
  <skipped message="needs a GPU"/></testcase>
</testsuite></testsuites>
"""


def _shard(tmp_path: Path, name: str, shard: str, rows: list[tuple[str, str]], release: str = "0.5.23",
           family: str = "dsv4") -> str:
    counts = {s: sum(1 for _, st in rows if st == s) for s in ("held", "failed", "known-finding", "skipped")}
    data = {"schema": SCHEMA, "release": release, "family": family, "shard": shard, "seconds": 10.0,
            "counts": counts, "rows": [{"id": i, "status": s, "finding": "F5" if s == "known-finding" else None,
                                        "message": "boom" if s == "failed" else ""} for i, s in rows]}
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_two_shards_merge_into_one_summary_that_names_the_failure(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    one = _shard(tmp_path, "a.json", "1/2", [("tests/t.py::a", "held"), ("tests/t.py::b", "known-finding")])
    two = _shard(tmp_path, "b.json", "2/2", [("tests/t.py::c", "held"), ("tests/t.py::d", "failed")])
    dsa = _shard(tmp_path, "c.json", "1/1", [("tests/dsa/t.py::e", "held")], family="dsa")
    cells = merge([one, two, dsa])
    assert [(c.release, c.family, dict(c.counts)) for c in cells] == [
        ("0.5.23", "dsa", {"held": 1}), ("0.5.23", "dsv4", {"held": 2, "known-finding": 1, "failed": 1})]
    out = tmp_path / "summary.md"
    assert main(["verdicts", "merge", one, two, dsa, "--markdown", str(out)]) == 1
    md = out.read_text()
    assert md.startswith("## metadata-builders nightly: 🔴 RED")
    assert "| 0.5.23 dsv4 | 2/2 | BLOCKS | FAILED 1/4; known finding (F5 x1) 1/4 |" in md
    assert "| 0.5.23 dsa | 1/1 | ok | held 1/1 |" in md
    assert "- **0.5.23 dsv4** shard 2/2: `tests/t.py::d`: boom" in md
    assert "`nightly: RED (0.5.23 dsv4 failing) in 30s`" in md
    assert capsys.readouterr().out.strip() == "nightly: RED (0.5.23 dsv4 failing) in 30s"


def test_green_merge_names_a_missing_shard(tmp_path: Path, monkeypatch) -> None:
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    one = _shard(tmp_path, "a.json", "1/3", [("tests/t.py::a", "held")])
    assert main(["verdicts", "merge", one]) == 0
    md = summary.read_text()
    assert "🟢 GREEN" in md and "shard(s) 2, 3 of 3 wrote no verdict file" in md
    assert "not judged: 0.5.23 dsv4 shard 2,3/3 (no verdict file)" in md


@pytest.mark.parametrize(("second", "field", "says"), [
    ({"shard": "1/2"}, "shard", "is also in"),
    ({"shard": "2/3"}, "shard", "splits 0.5.23 dsv4 into 3"),
    ({"shard": "2/2", "same_id": True}, "rows[0].id", "the shards overlap"),
])
def test_a_conflicting_file_is_exit_2_naming_file_and_field(tmp_path: Path, capsys, second, field, says) -> None:
    one = _shard(tmp_path, "a.json", "1/2", [("tests/t.py::a", "held")])
    rows = [("tests/t.py::a" if second.get("same_id") else "tests/t.py::z", "held")]
    two = _shard(tmp_path, "b.json", second["shard"], rows)
    with pytest.raises(VerdictFileError) as info:
        merge([one, two])
    assert info.value.path == two and info.value.field == field and says in str(info.value)
    assert main(["verdicts", "merge", one, two]) == 2
    assert f"{two}: {field}: " in capsys.readouterr().err


@pytest.mark.parametrize(("change", "field"), [
    ({"schema": "other@1"}, "schema"),
    ({"family": "mla"}, "family"),
    ({"shard": "3/2"}, "shard"),
    ({"seconds": "fast"}, "seconds"),
    ({"counts": {"held": 2}}, "counts.held"),
    ({"rows": [{"id": "x", "status": "passed"}]}, "rows[0].status"),
])
def test_a_malformed_file_names_the_field(tmp_path: Path, change, field) -> None:
    path = Path(_shard(tmp_path, "a.json", "1/1", [("tests/t.py::a", "held")]))
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    with pytest.raises(VerdictFileError) as info:
        load(str(path))
    assert (info.value.path, info.value.field) == (str(path), field)


def test_not_json_is_a_clear_error(tmp_path: Path, capsys) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    assert main(["verdicts", "merge", str(path)]) == 2
    assert f"{path}: (file): not JSON" in capsys.readouterr().err


def test_write_reads_junit_rows(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    out = tmp_path / "v.json"
    assert main(["verdicts", "write", "--junit", str(junit), "--release", "0.5.18", "--cell-family", "dsa",
                 "--shard", "2/4", "--seconds", "12.34", "--out", str(out)]) == 0
    data = load(str(out))
    assert data["counts"] == {"held": 1, "failed": 1, "known-finding": 1, "skipped": 1}
    assert (data["release"], data["family"], data["shard"], data["seconds"]) == ("0.5.18", "dsa", "2/4", 12.3)
    assert data["rows"][1] == {"id": "tests.test_sglang_adapter::test_worked_example", "status": "failed",
                               "finding": None, "message": "AssertionError: P1 failed"}
    assert data["rows"][2]["finding"] == "F5"
    assert from_junit([str(junit)], release="r", family="dsv4", shard="1/1", seconds=0)["counts"]["held"] == 1


def test_shards_partition_the_selection_deterministically(pytester: pytest.Pytester) -> None:
    ids = [f"tests/test_x.py::test_{i}" for i in range(200)]
    shards = [[i for i in ids if shard_of(i, 3) == k] for k in (1, 2, 3)]
    assert sorted(i for shard in shards for i in shard) == sorted(ids) and all(shards)
    node = "tests/dsv4/test_gate_sglang.py::test_pr_red"
    assert shard_of(node, 4) == shard_of(node, 4)
    pytester.makepyfile(test_many="\n".join(f"def test_{i}(): pass" for i in range(12)))
    seen = []
    for k in (1, 2):
        result = pytester.runpytest("-p", "metadata_builders.tools.shard", f"--mb-shard={k}/2", "-q",
                                    "-p", "no:randomly")
        seen.append(result.parseoutcomes().get("passed", 0))
    assert sum(seen) == 12
    refused = pytester.runpytest("-p", "metadata_builders.tools.shard", "--mb-shard=3/2")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
