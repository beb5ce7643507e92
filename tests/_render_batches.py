"""The batches and the corrupting builder the picture tests share (tests/dsv4/test_render*.py)."""

from __future__ import annotations

from pathlib import Path

from _examples import make_batch

from metadata_builders import Divergence, GraphTier, VerifyBatch, VerifyMetadata, get_builder

UNIFORM_EAGLE = make_batch([5, 3, 7], [2, 1, 3], 2, graph=GraphTier(4, 8))
"""Three requests verifying 2 tokens each, one pad row in a tier of 8 tokens."""
RUN_AHEAD = UNIFORM_EAGLE.replace(divergence=Divergence([2, 2, 3]))
"""The device lengths sum to 7 where the host believes 6: an out-of-bounds write of 1 if trusted."""
FALLEN_BEHIND = UNIFORM_EAGLE.replace(divergence=Divergence([2, 2, 1]))
"""The device lengths sum to 5 where the host believes 6: one uninitialised tail element if trusted."""


class OffByOneFinalPos:
    """The hip builder with ``pf_final_pos[0]`` one too large: a disagreement on token 0."""

    name = "off_by_one_final_pos"

    def __init__(self) -> None:
        self.inner = get_builder("hip", "cpu")

    def build(self, batch: VerifyBatch, variant) -> VerifyMetadata:
        md = self.inner.build(batch, variant)
        fields = dict(md.fields)
        fields["pf_final_pos"] = [fields["pf_final_pos"][0] + 1, *fields["pf_final_pos"][1:]]
        return VerifyMetadata(fields, md.decision, md.audit)


def _load(batch_or_path) -> VerifyBatch:
    if isinstance(batch_or_path, VerifyBatch):
        return batch_or_path
    return VerifyBatch.from_json(Path(batch_or_path).read_text())
