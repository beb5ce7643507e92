"""The DSA family's findings (docs/FINDINGS.md F27, F28): their replay files reproduce on the bundled builder and on
the installed SGLang release they name, and ``check --family dsa`` labels a known finding as known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metadata_builders.families.dsa.audited import DSASubject
from metadata_builders.families.dsa.batch import DSABatch
from metadata_builders.families.dsa.check import DSAFailure, DSAReport, ModeResult, replay_file
from metadata_builders.families.dsa.examples import worked_example
from metadata_builders.families.dsa.findings import KNOWN, KnownFinding, known_finding
from metadata_builders.families.dsa.properties.state import check_p9_no_hidden_state
from metadata_builders.families.dsa.variants import variants_for

REPLAYS = Path(__file__).resolve().parents[1] / "regressions" / "dsa"
F27 = REPLAYS / "f27_fused_replay_stale_columns_past_kv_len.json"
F28 = REPLAYS / "f28_host_sized_expansion_oob_write_under_divergence.json"


def _load(path: Path) -> tuple[DSABatch, dict]:
    return DSABatch.from_json(path.read_text()), json.loads(path.read_text())["meta"]


def _stale_columns_shown_and_unread(factory) -> None:
    """F27: after a history, P9 counts stale page-table entries past the read lengths; every property holds (P10:
    no consumer reads them)."""
    batch, meta = _load(F27)
    notes = check_p9_no_hidden_state(DSASubject(factory) if factory else DSASubject(), batch)
    assert len(notes) == 1 and "stale tail" in notes[0], notes
    assert int(notes[0].split()[1]) >= meta["stale_entries_min"]
    assert replay_file(F27, builder=factory) == []


def _oob_write_intercepted(factory) -> None:
    """F28: eager draft extend, device lengths [3, 4] against a host total of 6: the harness reports oob_write 1 on
    every eager variant (the store is modelled, never made) and P6 holds."""
    batch, meta = _load(F28)
    subject = DSASubject(factory) if factory else DSASubject()
    for variant in variants_for(batch):
        got = [[f.kind, f.count] for f in subject.build(batch, variant).faults]
        assert got == (meta["faults"] if variant.path == "eager" else []), (variant.label, got)
    assert replay_file(F28, builder=factory, only=("P6",)) == []


def test_f27_stale_columns_on_the_bundled_builder() -> None:
    _stale_columns_shown_and_unread(None)


def test_f28_fault_site_on_the_bundled_builder() -> None:
    _oob_write_intercepted(None)


def test_known_finding_is_keyed_by_check_and_release() -> None:
    table = (KnownFinding("F99", "dsa.p1.field", ("0.5.18",), "an example"),)
    assert known_finding("dsa.p1.field", "0.5.18", table) == "F99"
    assert known_finding("dsa.p1.field", "0.5.19", table) is None
    assert known_finding("dsa.p5.pad_negative", "0.5.18", table) is None
    assert known_finding("dsa.p1.field", None, table) is None  # not upstream's code: never known
    assert all(f.id.startswith("F") and f.releases for f in KNOWN)


def test_report_is_green_apart_from_labelled_findings() -> None:
    """A known failure is labelled and leaves the verdict green; an unknown one fails it."""
    batch = worked_example()
    known = DSAFailure("decode", "P1", "dsa.p1.field", "differs", batch, None, "F99")
    mode = ModeResult("decode", 6, [known])
    report = DSAReport("dev", "dsa-sglang", [mode], 1.0, ("P1", "P2"), "coverage: x", release="0.5.18")
    assert report.ok and mode.verdict("P1") == "known F99 dsa.p1.field"
    table = report.table()
    assert "KNOWN F99 decode P1 dsa.p1.field" in table
    assert "holds apart from 1 known finding(s)" in table and "SGLang 0.5.18" in table
    mode.failures.append(DSAFailure("decode", "P2", "dsa.p2.mirror", "differs", batch))
    assert not report.ok and "FAILS (1 failure(s))" in report.table()


@pytest.mark.sglang
@pytest.mark.parametrize("replay", [F27, F28], ids=["F27", "F28"])
def test_finding_reproduces_on_the_installed_release(replay: Path) -> None:
    """Each replay file reproduces on the installed SGLang when the release is one it names (the adapter)."""
    from metadata_builders.families.dsa.adapter.loading import load

    try:
        mods = load()
    except ImportError as exc:
        pytest.skip(f"needs an importable SGLang with DSA ({exc})")
    from metadata_builders.families.dsa.adapter.builder import SGLangDSABuilder

    if mods.version not in _load(replay)[1]["releases"]:
        pytest.skip(f"{replay.name} names {_load(replay)[1]['releases']}, not {mods.version}")
    (_stale_columns_shown_and_unread if replay == F27 else _oob_write_intercepted)(SGLangDSABuilder)
