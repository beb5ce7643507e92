"""The DSV4 family's own error: the host mirror found stale by a builder's opt-in validation (P2)."""

from __future__ import annotations

from metadata_builders.errors import MetadataBuildersError

__all__ = ["StaleMirror"]


class StaleMirror(MetadataBuildersError, AssertionError):
    """Opt-in mirror validation: the host mirror ``seq_lens_cpu`` disagrees with the device.

    A stale mirror is never used silently when validation is on; validation costs
    one D2H sync (it reads ``seq_lens`` back), so it is a debugging aid, off by default.
    """

    def __init__(self, index: int, expected: int, actual: int) -> None:
        self._data("seq_lens_cpu", index, expected, actual)
        super().__init__(f"seq_lens_cpu[{index}]={actual} is stale: the device holds seq_lens[{index}]={expected}")
