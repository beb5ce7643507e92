"""The DSA gate's verdict from two sides' verdicts (no SGLang): new, pre-existing, fixed, nothing judged."""

from __future__ import annotations

from metadata_builders.families.dsa.gate import SideResult, compare, table

KEY = ("draft_extend", "P5")


def _side(name: str, verdicts: dict, failures: dict | None = None) -> SideResult:
    return SideResult(name, f"{name} at 0123456789", "", verdicts, failures or {}, 1.0, ["draft_decode"])


def test_held_at_base_failing_at_head_is_red_and_named() -> None:
    base = _side("base", {KEY: "holds", ("decode", "P5"): "FAILS dsa.p5.x"})
    head = _side("head", {KEY: "FAILS dsa.p5.pad_negative", ("decode", "P5"): "FAILS dsa.p5.x"},
                 {KEY: {"check": "dsa.p5.pad_negative", "message": "negative"}})
    result = compare(base, head)
    assert result.exit_code == 1 and result.new == [KEY] and result.pre_existing == [("decode", "P5")]
    assert result.verdict_line().startswith("gate: RED (draft_extend P5 blocking) in ")
    text = table(result)
    assert "ok/FAIL" in text and "NEW draft_extend P5 (dsa.p5.pad_negative): negative" in text
    assert "not run at head draft_decode" in text


def test_failing_on_both_sides_is_green_and_listed() -> None:
    base = _side("base", {KEY: "FAILS dsa.p5.x"})
    head = _side("head", {KEY: "FAILS dsa.p5.x"})
    result = compare(base, head)
    assert result.exit_code == 0 and result.verdict_line().endswith("; pre-existing: draft_extend P5")


def test_nothing_run_on_both_sides_is_not_a_verdict() -> None:
    result = compare(_side("base", {KEY: "n/a"}), _side("head", {KEY: "n/a"}))
    assert result.exit_code == 2 and result.verdict_line().startswith("gate: NOTHING JUDGED")
