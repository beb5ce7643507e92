"""Builder ``"reference"``: the specification's stages chained, per mode of the MTP step (pure Python, no torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from metadata_builders.families.dsv4.metadata import Audit, Decision, VerifyMetadata
from metadata_builders.families.dsv4.reference.decode import DECODE_MODES, decode_build
from metadata_builders.families.dsv4.reference.draft_extend import draft_extend_build
from metadata_builders.families.dsv4.reference.in_graph import swa_out_cache_loc
from metadata_builders.families.dsv4.reference.pipeline import (causal_expansion, compression_groups, core_metadata,
                                                                decode_streams, expected_faults, expected_host_syncs,
                                                                index_streams, store_slots, unified_prefill_meta,
                                                                verify_extension)
from metadata_builders.families.dsv4.tier import DEFAULT_PADDING, Padding
from metadata_builders.families.dsv4.variants import BUILT_MODES, check_variant

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.capabilities import GraphContract
    from metadata_builders.families.dsv4.tier import CaptureGeometry
    from metadata_builders.families.dsv4.batch import VerifyBatch
    from metadata_builders.families.dsv4.variants import Variant

__all__ = ["ReferenceBuilder"]


class ReferenceBuilder:
    """Builder ``"reference"``: the five stages above, chained; keeps no state.

    ``padding``: the tier padding convention its graph path follows.  The properties
    judge a builder against the reference of the builder's own convention;
    ``get_builder("reference")`` is the ``pad_rows_only`` one (a real row never widens,
    so the specification never reads past its own table: DESIGN.md section 2).
    """

    # Its capabilities, declared (docs/BUILDERS.md, "Declaring capabilities"): what a subclass, which is audited,
    # inherits; the reference itself states them in :attr:`capabilities`, its padding the instance's own.
    name = "reference"
    graph_contract: ClassVar[GraphContract] = "none"
    """No graph replay of its own: it *is* the graph path's answer."""
    mirror_validation: ClassVar[bool] = False
    expresses_variants: ClassVar[bool] = False
    """Every variant."""
    capture_layout: ClassVar[bool] = False
    capture_slots: ClassVar[bool] = False
    store_kernels: ClassVar[bool] = False
    seq_len_fill_value: ClassVar[int] = 1
    """A graph pad row's ``seq_len`` (DESIGN.md section 2)."""
    modes: ClassVar[tuple[str, ...]] = BUILT_MODES
    """Every build of the MTP step the batch model knows."""
    padding_convention: ClassVar[Padding] = DEFAULT_PADDING
    """The constructor's default; an instance follows its own ``padding``."""
    capture_geometry: ClassVar[CaptureGeometry] = "token_slots"
    """The capture geometry it declares: the released runner's, as ``hip`` (the rule under which tiers share
    ``bs``); it captures nothing itself, and :mod:`metadata_builders.families.dsv4.tier` computes both rules."""

    def __init__(self, padding: Padding = DEFAULT_PADDING) -> None:
        self.padding: Padding = padding

    @property
    def capabilities(self) -> Any:
        """The specification's, as its class declares them, with the instance's padding convention."""
        from metadata_builders.families.dsv4.capabilities import Capabilities

        return Capabilities(build="batch", graph=self.graph_contract, padding=self.padding,
                            mirror_validation=self.mirror_validation, expresses=self.expresses_variants,
                            modes=self.modes, seq_len_fill_value=self.seq_len_fill_value,
                            store_kernels=self.store_kernels, capture_layout=self.capture_layout,
                            capture_geometry=self.capture_geometry, capture_slots=self.capture_slots)

    def build(self, batch: VerifyBatch, variant: Variant) -> VerifyMetadata:
        check_variant(batch, variant)
        if batch.mode == "draft_extend":
            return draft_extend_build(batch, variant)
        if batch.mode in DECODE_MODES:
            return decode_build(batch, variant)
        rows = verify_extension(batch, variant, self.padding)
        casual, slots = causal_expansion(rows)
        fields: dict[str, list] = {
            "seq_lens": rows.seq_lens,
            "extend_seq_lens": rows.extend_seq_lens,
            "extend_start_loc": rows.extend_start_loc,
        }
        fields.update(core_metadata(batch, rows, casual, slots))
        fields.update(unified_prefill_meta(batch, rows, slots))
        fields.update(decode_streams(batch, store_slots(rows, slots, self.padding), fields["positions_casual"]))
        fields["swa_out_cache_loc"] = swa_out_cache_loc(batch.full_to_swa, fields["raw_out_loc"])  # the in-graph block
        if batch.geometry.compression is not None:
            fields.update(compression_groups(batch, rows, fields))
        if batch.geometry.swa_window == batch.geometry.unified_swa_window:
            fields.update(index_streams(batch, fields))
        decision = Decision(rows.num_tokens, rows.used_output_size, rows.used_output_size, rows.max_seq_len)
        audit = Audit(expected_host_syncs(batch, variant, rows, self.padding),
                      expected_faults(batch, variant, rows, self.padding))
        return VerifyMetadata(fields, decision, audit)
