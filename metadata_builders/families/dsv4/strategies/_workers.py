"""Whose verify a drawn batch is: the target worker's (one draft count), or a DSpark draft worker's block verify.

Upstream's DSpark draft worker verifies its draft block with the target-verify builders on its own backend: the
configured ``speculative_num_draft_tokens`` is gamma + 1 (the server argument), the active width
``target_verify_num_draft_tokens`` gamma, and its pool has no compressed KV (``need_compress = not
is_draft_worker``).  Worked example: gamma 3 -> ``num_draft_tokens=3``, ``speculative_num_draft_tokens=4``, every
request verifying 3 tokens (:attr:`~metadata_builders.families.dsv4.batch.VerifyBatch.is_dspark_draft`).
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from metadata_builders.families.dsv4.batch import Geometry

__all__ = ["check_dspark_draft", "draw_worker", "ragged_odds"]

_WORKER_RAGGED = (False, False, True)
"""A draft worker's batch is uniform two times in three: upstream's draft block is uniform (its spec info carries no
ragged layout); ragged is the backend's other route for the same counts."""


def check_dspark_draft(dspark_draft: bool | None, mode: str, is_dspark: bool | None, compression: bool | None,
                       geometry: Geometry | None) -> None:
    """``dspark_draft=True`` is DSpark target verify on a pool without compressed KV: refuse a pin against it."""
    if not dspark_draft:
        return
    if mode != "target_verify" or is_dspark is False:
        raise InvalidArgument(f"dspark_draft=True with mode={mode!r}, is_dspark={is_dspark!r}: a DSpark draft "
                              "worker's block verify is DSpark target verify")
    if compression or (geometry is not None and geometry.compression is not None):
        raise InvalidArgument("dspark_draft=True with a compressed geometry: the draft worker's pool has no "
                              "compressed KV (need_compress = not is_draft_worker)")


def draw_worker(draw: st.DrawFn, is_dspark: bool | None, dspark_draft: bool | None, compression: bool | None,
                geometry: Geometry | None) -> tuple[bool, bool, bool | None]:
    """(DSpark, a draft worker's block verify, the ``compression`` pin then): ``dspark_draft=True`` pins the first two
    and forbids compression, ``False`` (the default) draws the algorithm alone as before (the same draws: corpora
    drawn without it stay the same), ``None`` draws whether a DSpark batch is the draft worker's where its geometry
    may be uncompressed.  Shrinks towards the target worker."""
    dspark = bool(dspark_draft) or (draw(st.booleans()) if is_dspark is None else is_dspark)
    free = dspark_draft is None and not compression and (geometry is None or geometry.compression is None)
    worker = dspark and (draw(st.booleans()) if free else bool(dspark_draft))
    return dspark, worker, False if worker else compression


def ragged_odds(worker: bool, has_graph: bool) -> tuple[bool, ...]:
    """The odds of a ragged batch: ragged tiers have many more shapes than uniform ones, so graph batches draw them
    twice as often; a draft worker's batch is mostly uniform, as upstream's draft block is."""
    if worker:
        return _WORKER_RAGGED
    return (False, True, True) if has_graph else (False, True)
