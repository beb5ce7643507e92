"""Builders of your own: the bundled ``hip`` builder with its SWA-ring stage replaced (docs/BUILDERS.md).

``MyRingBuilder`` is correct; ``MyRingBuilderModWindow`` carries a bug of this domain (the ring slot taken modulo
the SWA window instead of the ring size, which is ``window + num_draft - 1``: a verify token's K lands on a row the
window still reads).  From ``docs/examples``::

    metadata-builders check --builder mypkg.builders:MyRingBuilder            # held
    metadata-builders check --builder mypkg.builders:MyRingBuilderModWindow   # red (P1, P10)
    python -m pytest test_my_builder.py --mb-builder mypkg.builders:MyRingBuilder
"""

from __future__ import annotations

import torch

from metadata_builders import HipBuilder, Layout
from metadata_builders import VerifyInputs


class MyRingBuilder(HipBuilder):
    """The bundled builder, every mode it builds, with the SWA ring stage written anew."""

    def decode_streams(self, inputs: VerifyInputs, layout: Layout, slots: torch.Tensor,
                       positions: torch.Tensor) -> dict[str, torch.Tensor]:
        tokens = torch.arange(slots.shape[0], device=slots.device)
        covered = layout.extend_start_loc[-1] + layout.extend_seq_lens[-1]  # where the device layout ends: no sync
        store_slot = torch.where(tokens < covered, slots, torch.zeros_like(slots))  # the uncovered tail: slot 0
        ring = inputs.geometry.ring_size
        swa_loc = store_slot.to(torch.int64) * ring + torch.remainder(positions.to(torch.int64), ring)
        return {"verify_store_state_slot": store_slot, "swa_loc": swa_loc.to(torch.int32)}


class MyRingBuilderModWindow(MyRingBuilder):
    """The same stage with a planted bug: the position taken modulo the SWA window, not the ring size (which is
    ``window + num_draft - 1``).  Window 4, ring 6: position 8 stores at row 0, not row 2 -- over position 4, which
    the window of the step's first token (positions 4..7) still reads."""

    def decode_streams(self, inputs: VerifyInputs, layout: Layout, slots: torch.Tensor,
                       positions: torch.Tensor) -> dict[str, torch.Tensor]:
        fields = super().decode_streams(inputs, layout, slots, positions)
        slot, geo = fields["verify_store_state_slot"].to(torch.int64), inputs.geometry
        fields["swa_loc"] = (slot * geo.ring_size + torch.remainder(positions.to(torch.int64),
                                                                     geo.swa_window)).to(torch.int32)
        return fields
