"""The pinned regression batches in tests/regressions/*.json behave as their ``meta.expect`` says."""

from __future__ import annotations

import glob
import json
import os

import pytest

from metadata_builders import StaleMirror, VerifyBatch, variants_for
from metadata_builders.cli import main as cli_main
from metadata_builders.families.dsv4.properties import run_all
from metadata_builders.families.dsv4.reference import ReferenceBuilder

HERE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "regressions")
FILES = sorted(glob.glob(os.path.join(HERE, "*.json")))


def _load(path: str) -> tuple[VerifyBatch, dict]:
    with open(path) as fh:
        raw = json.load(fh)
    return VerifyBatch.from_dict(raw), raw


def _matches(variant, selector: dict) -> bool:
    return all(getattr(variant, k) == v for k, v in selector.items())


def test_regression_files_exist():
    """The regression suite is not empty: each AMD-fault scenario is pinned."""
    names = {os.path.basename(p)[:-5] for p in FILES}
    assert {
        "eagle_host_mirror_run_ahead",
        "dspark_host_mirror_run_ahead",
        "uncapped_tier_never_output_size",
        "capped_tier_uncovered_tail",
        "ungated_equals_dspark_without_divergence",
        "stale_host_mirror",
    } <= names


@pytest.mark.parametrize("path", FILES, ids=[os.path.basename(p)[:-5] for p in FILES])
def test_regression_file_meets_its_expectations(builder, path):
    """Every expectation pinned in the file holds on each matching variant, and the file explains itself."""
    batch, raw = _load(path)
    assert raw.get("why"), "each regression file carries a one-line why"
    expectations = raw["meta"]["expect"]
    checked = 0
    for variant in variants_for(batch):
        for expect in expectations:
            if not _matches(variant, expect["variant"]):
                continue
            md = builder.build(batch, variant)
            assert [[f.kind, f.count] for f in md.audit.faults] == expect["faults"], variant.label
            if "used_output_size" in expect:
                assert md.decision.used_output_size is expect["used_output_size"], variant.label
            checked += 1
    assert checked >= len(expectations)


@pytest.mark.parametrize("path", FILES, ids=[os.path.basename(p)[:-5] for p in FILES])
def test_every_property_holds_on_each_regression(builder, path):
    """The bundled builder behaves as the model says on every pinned batch (faults included)."""
    batch, _ = _load(path)
    failures = {k: r.failure for k, r in run_all(builder, batch).items() if r.failure is not None}
    assert failures == {}


def test_crash_passed_review_because_ungated_equals_dspark_without_divergence(builder):
    """Without divergence the ungated rule's metadata is identical to the dspark gate's."""
    batch, _ = _load(os.path.join(HERE, "ungated_equals_dspark_without_divergence.json"))
    for variant in variants_for(batch):
        if variant.gate != "ungated":
            continue
        from metadata_builders import Variant

        gated = builder.build(batch, Variant(variant.path, variant.mirror, variant.layout_total, "dspark"))
        assert builder.build(batch, variant).fields == gated.fields


def test_capped_tier_with_output_size_equal_to_the_tier_would_fault():
    """Trusting output_size=tier on a capped tier with an uncovered tail leaves the tail uninitialised."""
    import torch

    from metadata_builders.audit import DEVICE_NAME, DeviceAudit

    batch, _ = _load(os.path.join(HERE, "capped_tier_uncovered_tail.json"))
    lens = [3, 1, 2, 3, 3]  # the tier-padded lengths: pad rows' shares of 4 clamped to cap=3
    audit = DeviceAudit()
    with audit:
        repeats = torch.tensor(lens, device=DEVICE_NAME)
        torch.repeat_interleave(torch.arange(5, device=DEVICE_NAME), repeats, output_size=batch.graph.graph_num_tokens)
    assert [(f.kind, f.count) for f in audit.faults] == [("uninitialized_tail", 2)]


def test_stale_mirror_is_caught_by_validation_and_corrupts_metadata_without_it(builder):
    """Opt-in validation raises StaleMirror naming request 2; without it the page table silently narrows."""
    batch, _ = _load(os.path.join(HERE, "stale_host_mirror.json"))
    from metadata_builders import Variant

    variant = Variant("eager", "host", "host", "dspark")
    with pytest.raises(StaleMirror) as info:
        builder.with_mirror_validation().build(batch, variant)
    assert (info.value.index, info.value.expected, info.value.actual) == (2, 7, 4)
    silent = builder.build(batch, variant)
    truth = ReferenceBuilder().build(batch.replace(divergence=None), variant)
    assert silent.decision.max_seq_len == 5 + 3 and truth.decision.max_seq_len == 7 + 3  # max of the stale mirror
    assert len(silent.fields["page_table"][0]) < len(truth.fields["page_table"][0])


@pytest.mark.parametrize("name", ["eagle_host_mirror_run_ahead", "dspark_host_mirror_run_ahead"])
def test_replay_prints_the_fault_and_exits_zero_when_the_model_holds(capsys, name):
    """``replay`` of a fault regression prints the oob_write and exits 0: the builder behaves as modelled."""
    code = cli_main(["replay", os.path.join(HERE, f"{name}.json"), "--device", "cpu"])
    out = capsys.readouterr().out
    assert code == 0
    assert "oob_write x1" in out
