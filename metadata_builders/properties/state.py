"""P8 (inputs untouched) and P9 (no hidden state between builds)."""

from __future__ import annotations

from metadata_builders.batch import VerifyBatch
from metadata_builders.properties._common import Partial, _fail, _name, _variants
from metadata_builders.reference import ReferenceBuilder


def check_p8_inputs_untouched(builder, batch: VerifyBatch) -> list[str]:
    """P8: a build leaves every input it was handed bit-identical (device tensors and host mirrors).

    In-place updates of a caller's ``seq_lens`` are the classic graph-replay bug.
    Replays are checked by P5, which refills the runner's static buffers.
    """
    if isinstance(builder, ReferenceBuilder):
        return ["the reference has no device inputs; nothing to check"]
    if getattr(builder, "takes_batch", False):
        return [Partial(f"builder {_name(builder)!r} builds its own inputs from the batch (deprecated "
                        "build(batch, variant)); nothing of the harness's to check")]
    notes: list[str] = []
    for variant in _variants(builder, batch, notes):
        actual = builder.build(batch, variant)
        if actual.audit.inputs_written:
            change = actual.audit.inputs_written[0]
            raise _fail("P8", variant, "the build modified an input it was handed", field=change.name,
                        index=change.index, expected=change.before, actual=change.after)
    return notes
