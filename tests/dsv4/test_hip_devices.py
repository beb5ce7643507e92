"""The hip builder on other torch devices: shapes on ``meta``, values on a GPU."""

from __future__ import annotations

import pytest
import torch
from _examples import EXAMPLES

from metadata_builders import get_builder, variants_for
from metadata_builders.families.dsv4.metadata import first_difference
from metadata_builders.families.dsv4.metadata import PER_ENTRY, fields_for

# Graph-path batches whose shapes do not depend on values: a uniform tier and an uncapped ragged tier.
META_CASES = ["uniform_eagle_batch_of_three", "ragged_tier_slack_spread_over_pad_rows"]


def _shape(value: list) -> list[int]:
    """The shape of a plain (possibly 2-D) list, as meta fields report it."""
    if value and isinstance(value[0], list):
        return [len(value), len(value[0])]
    return [len(value)]


@pytest.mark.parametrize("name", META_CASES, ids=META_CASES)
def test_meta_build_gives_the_cpu_build_shapes(name: str) -> None:
    """On meta, every graph variant without a host read-back returns each field's shape, equal to the CPU build's."""
    batch = EXAMPLES[name]
    meta, cpu = get_builder("hip", device="meta"), get_builder("hip", device="cpu")
    variants = [v for v in variants_for(batch) if v.path == "graph" and v.mirror != "tolist"]
    assert variants
    for variant in variants:
        shapes = meta.build(batch, variant).fields
        values = cpu.build(batch, variant).fields
        for field in fields_for(batch.geometry):
            if field not in PER_ENTRY:  # a plan's valid entries are values, not a shape
                assert shapes[field] == _shape(values[field]), f"{variant.label}: {field}"


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA or ROCm device (torch.cuda.is_available() is false)"
)
@pytest.mark.parametrize("name", list(EXAMPLES), ids=list(EXAMPLES))
def test_gpu_build_equals_reference(name: str) -> None:
    """On a CUDA/ROCm device the hip builder equals the reference on every variant, with the same syncs and faults."""
    batch = EXAMPLES[name]
    reference, hip = get_builder("reference"), get_builder("hip", device="cuda")
    for variant in variants_for(batch):
        want, got = reference.build(batch, variant), hip.build(batch, variant)
        mismatch = first_difference(want.fields, got.fields)
        assert mismatch is None, f"{variant.label}: {mismatch}"
        assert got.decision == want.decision, variant.label
        assert len(got.audit.host_syncs) == len(want.audit.host_syncs), variant.label
        assert got.audit.faults == [f for f in want.audit.faults if f.kind != "oob_read"], variant.label
