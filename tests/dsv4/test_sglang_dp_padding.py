"""Upstream's backend on the worker's DP-padded eager verify step (issue 45 item 3): the adapter hands it the padded
forward batch (``batch_size`` the padded rows, ``out_cache_loc`` the padded tokens), and it agrees with the
reference, every token of the forward covered."""

from __future__ import annotations

import pytest
from _examples import make_batch

from metadata_builders.families.dsv4.properties import check_p1_reference

pytestmark = pytest.mark.sglang

PADDED = make_batch([5, 3, 7], [2, 1, 3], 3).replace(dp_pad_rows=2)


@pytest.mark.parametrize("is_dspark", [False, True], ids=["eagle", "dspark"])
def test_upstream_agrees_with_the_reference_on_a_dp_padded_eager_step(sglang, is_dspark: bool) -> None:
    batch = PADDED.replace(is_dspark=is_dspark)
    check_p1_reference(sglang, batch)  # raises a PropertyFailure: p1.forward_tokens first, then every field
    for variant in sglang.variants_supported(batch):
        md = sglang.build(batch, variant)
        assert len(md.fields["positions_casual"]) == 15 and md.decision.num_tokens == 15, variant.label
