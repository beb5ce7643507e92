"""The installed SGLang's target-verify builders agree with the reference (docs/SGLANG.md).

Skipped unless SGLang is importable (``ci/install-sglang.sh``).  Known
disagreements are pinned as replay files in ``tests/regressions/sglang/`` and
documented in docs/FINDINGS.md; each one is checked to still reproduce, so a
fix upstream or in our model shows up here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings

from metadata_builders import Geometry, Variant, VerifyBatch, get_builder, variants_for
from metadata_builders.errors import PropertyFailure
from metadata_builders.properties import (
    check_p1_reference,
    check_p2_mirror,
    check_p3_sync_free,
    check_p4_gate,
    check_p7_capture_safety,
)
from strategies import geometries, verify_batches
from tests._examples import EXAMPLES, make_batch

pytestmark = pytest.mark.sglang

REGRESSIONS = Path(__file__).parent / "regressions" / "sglang"

KNOWN = {
    "capped_tier_uncovered_tail": "F2: upstream's padded_to_bucket lets the last real row absorb capped slack",
}
"""Named examples that hit a finding of docs/FINDINGS.md, with the finding."""


@pytest.fixture(scope="module")
def sglang():
    """The audited ``"sglang"`` builder on CPU."""
    return get_builder("sglang", "cpu")


@pytest.fixture(scope="module")
def sglang_torch_kernels():
    """The adapter keeping upstream's CPU dispatch (its torch reference kernels)."""
    from metadata_builders.builders import AuditedBuilder
    from metadata_builders.sglang_adapter import SGLangBuilder

    return AuditedBuilder(SGLangBuilder("cpu", kernels="torch"), "cpu", "sglang-torch")


@pytest.mark.parametrize("name", [n for n in EXAMPLES if n not in KNOWN])
def test_named_batches_match_reference(sglang, name: str) -> None:
    """Every variant of each named batch equals the reference, decision included."""
    check_p1_reference(sglang, EXAMPLES[name])


@pytest.mark.parametrize("name", [n for n in EXAMPLES if n not in KNOWN])
def test_named_batches_keep_the_sync_contract(sglang, name: str) -> None:
    """Upstream syncs exactly where the contract says, and nowhere on sync-free paths."""
    check_p7_capture_safety(sglang, EXAMPLES[name])


def test_every_variant_is_supported(sglang) -> None:
    """The gate knob maps onto ``is_dspark``, so upstream expresses every variant."""
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    assert sglang.inner.variants_supported(batch) == variants_for(batch)


@settings(max_examples=10, deadline=None)
@given(geometries(ring_size=6).flatmap(lambda geo: verify_batches(geometry=geo, graph=False)))
def test_eager_batches_match_reference(sglang, batch: VerifyBatch) -> None:
    """Drawn eager batches: reference, mirror, sync-free map, gate table and sync contract."""
    for check in (check_p1_reference, check_p2_mirror, check_p3_sync_free, check_p4_gate, check_p7_capture_safety):
        if check is check_p2_mirror and batch.is_ragged:
            continue
        check(sglang, batch)


def test_torch_kernels_match_reference_with_a_mirror(sglang_torch_kernels) -> None:
    """Upstream's CPU torch fallbacks agree wherever a host mirror exists."""
    batch = EXAMPLES["uniform_eagle_batch_of_three"]
    reference = get_builder("reference")
    for gate in ("dspark", "ungated", "always_sync"):
        md = sglang_torch_kernels.build(batch, Variant("eager", "host", "host", gate))
        assert md.fields == reference.build(batch, Variant("eager", "host", "host", gate)).fields


def _replay(name: str) -> VerifyBatch:
    return VerifyBatch.from_dict(json.loads((REGRESSIONS / name).read_text()))


def test_f1_mirrorless_verify_asserts_on_torch_fallback(sglang_torch_kernels) -> None:
    """F1: without a mirror, upstream's CPU expand_prefill_causally asserts seq_lens_cpu."""
    batch = _replay("f1_mirrorless_torch_fallback.json")
    with pytest.raises(AssertionError):
        sglang_torch_kernels.build(batch, Variant("eager", "device", "host", "dspark"))


def test_f1_mirrorless_verify_matches_on_triton(sglang) -> None:
    """F1's batch is fine on the triton kernels a GPU runs."""
    check_p1_reference(sglang, _replay("f1_mirrorless_torch_fallback.json"))


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("f2_capped_tier_last_row_absorbs.json", "seq_lens"),
        ("f2b_cap_clamps_real_row.json", "seq_lens"),
        ("f3_raw_verify_max_seq_len.json", "decision.max_seq_len"),
        ("f4_swa_loc_int32.json", "swa_loc"),
    ],
)
def test_findings_still_reproduce(sglang, name: str, field: str) -> None:
    """Each documented disagreement still fails P1 on the field docs/FINDINGS.md names."""
    with pytest.raises(PropertyFailure) as info:
        check_p1_reference(sglang, _replay(name))
    assert info.value.field == field


def test_f2b_changes_the_fault_count(sglang) -> None:
    """F2b via P6: a real row clamped by the cap changes num_tokens and so the overrun."""
    from metadata_builders.properties import check_p6_fault_model

    with pytest.raises(PropertyFailure) as info:
        check_p6_fault_model(sglang, _replay("f2b_p6_cap_clamps_real_row_fault_count.json"))
    assert info.value.field == "audit.faults"


def test_f2c_absorbed_token_indexes_past_the_table(sglang) -> None:
    """F2c: the capped slack absorbed at the table edge gathers past req_to_token's width."""
    batch = _replay("f2c_capped_absorb_past_table_width.json")
    with pytest.raises(IndexError):
        sglang.build(batch, Variant("graph", "host", "host", "dspark"))


def test_regression_files_explain_themselves() -> None:
    """Every replay file has the schema and a one-line ``why``."""
    files = sorted(REGRESSIONS.glob("*.json"))
    assert files
    for path in files:
        d = json.loads(path.read_text())
        assert d["schema"] == "metadata-builders/verify-batch@1"
        assert d["why"] and "\n" not in d["why"]


@pytest.mark.parametrize("draft", [1, 3])
def test_upstream_geometry(sglang, draft: int) -> None:
    """Upstream's own constants (page 256, window 128, align 64) agree across a page edge."""
    batch = make_batch([5, 254], [2, 1], draft, num_slots=3, width=600).replace(geometry=Geometry())
    check_p1_reference(sglang, batch)
