"""The worker's eager DP padding (issue 45): pad rows ``verify_batches(dp_pad=...)`` appends to an eager uniform
target-verify batch, as upstream's ``prepare_mlp_sync_batch -> _pad_inputs_to_size`` pads the verify step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

if TYPE_CHECKING:
    from metadata_builders import VerifyBatch

__all__ = ["MAX_DP_PAD_ROWS", "check_dp_pad", "draw_dp_pad"]

MAX_DP_PAD_ROWS = 3
"""The most DP pad rows drawn: a rank padded to another rank's few more requests."""


def check_dp_pad(dp_pad: bool | None, mode: str, graph: bool | None, ragged: bool | None, divergence: bool | None,
                 stale_mirror: bool | None, dspark_draft: bool | None) -> None:
    """``dp_pad=True`` needs the batch it pads pinned: target verify, ``graph=False``, ``ragged=False``, no divergence,
    no stale mirror, no DSpark draft worker (ragged + DP is unverified upstream, research note section 3)."""
    if dp_pad is not True:
        return
    pins = {"graph": graph, "ragged": ragged, "divergence": divergence, "stale_mirror": stale_mirror,
            "dspark_draft": dspark_draft}
    wrong = {k: v for k, v in pins.items() if v is not False}
    if mode != "target_verify" or wrong:
        raise InvalidArgument(f"dp_pad=True pads an eager uniform target-verify batch: pin mode='target_verify', "
                              f"graph=False, ragged=False, divergence=False, stale_mirror=False, dspark_draft=False "
                              f"(got mode={mode!r}, {wrong})")


def draw_dp_pad(draw: st.DrawFn, batch: VerifyBatch, dp_pad: bool | None, mode: str, *pins: bool | None
                ) -> VerifyBatch:
    """``batch`` with 1..3 DP pad rows (``dp_pad=True``), 0..3 (``None``, where the batch can take them), or as it is
    (``False``: no draw, so every other focus draws what it drew before).  ``pins``: ``verify_batches``' ``graph``,
    ``ragged``, ``divergence``, ``stale_mirror`` and ``dspark_draft``, as :func:`check_dp_pad` takes them."""
    check_dp_pad(dp_pad, mode, *pins)
    if dp_pad is False:
        return batch
    fits = (batch.mode == "target_verify" and batch.graph is None and not batch.is_ragged
            and batch.divergence is None and not batch.is_dspark_draft)
    if not fits:
        return batch
    rows = draw(st.integers(1 if dp_pad else 0, MAX_DP_PAD_ROWS))
    return batch.replace(dp_pad_rows=rows) if rows else batch
