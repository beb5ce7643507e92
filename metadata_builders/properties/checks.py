"""Every check a property makes, by id: what a failure *is*, as data (never its message's wording).

A :class:`~metadata_builders.errors.PropertyFailure` carries one of these ids in
``check`` (and, when the builder raised, an :class:`~metadata_builders.errors.Origin`).
Known findings (each family's ``findings``), the gate and the tests match on
``(property, check, field, where)`` and the batch's shape.  Worked example: P5's
replay sequence finds replay 3 of 5 different from a fresh build of the same
batch at ``swa_loc[4]``: ``check="p5.replay_vs_fresh"``, ``field="swa_loc"``;
F14 is exactly that on 0.5.18/0.5.19, whatever the message says.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["CHECKS", "CheckId"]

CheckId = Literal[
    "raised",
    "p1.vs_reference", "p1.active_width", "p1.decision", "p1.dtype", "p1.oob_read", "p1.fault_on_clean",
    "p1.capture_sync", "p1.forward_tokens",
    "p2.host_reads_seq_lens", "p2.mirror_vs_host", "p2.mirror_reads", "p2.validation_wrong_row",
    "p2.stale_mirror_silent",
    "p3.vs_synced", "p3.map_synced",
    "p4.used_output_size", "p4.exact_num_tokens", "p4.output_size_value", "p4.gate_vs_gate",
    "p5.graph_vs_eager_row", "p5.graph_vs_eager_token", "p5.plan_entries", "p5.pad_plan_ring", "p5.field_short",
    "p5.pads_cover_tier", "p5.pad_slot", "p5.pad_reads_nothing", "p5.pad_paged_store", "p5.tail_inert",
    "p5.tail_store_guard", "p5.tail_ring",
    "p5.capture_sync", "p5.replay_shape", "p5.replay_storage", "p5.replay_writes_input", "p5.replay_vs_fresh",
    "p5.in_graph_vs_reference",
    "p5.runner_replay_storage", "p5.runner_replay_vs_fresh", "p5.runner_geometry", "p5.capture_geometry",
    "p5.capture_convention",
    "p6.planner_overflow", "p6.oob_read", "p6.synced_map_faulted", "p6.eagle_faulted_under_dspark",
    "p6.uncapped_output_size", "p6.faults_vs_model",
    "p7.sync_free_synced", "p7.contract_extra", "p7.contract_missing", "p7.replay_contract",
    "p7.capture_sync", "p7.capture_host_read",
    "p8.input_written",
    "p9.vs_fresh_builder", "p9.decision", "p9.fault_after_history",
    "p10.store_rows", "p10.oob_write", "p10.real_writes_collide", "p10.pad_overwrites_live",
    "p10.pad_writes_other_slot", "p10.live_row_lost", "p10.window_read", "p10.compressed_store",
    "p10.pad_compressed_store", "p10.compressed_read", "p10.store_dropped", "p10.real_writes_other_slot",
    "p10.state_write_misplaced", "p10.full_store_misplaced", "p10.pad_full_store",
    "p10.page_read", "p10.paged_store_misplaced", "p10.pad_paged_store", "p10.paged_window_read",
    "p10.low_ratio_position",
    "p1.stream_out_of_bounds", "p2.stream_out_of_bounds", "p3.stream_out_of_bounds", "p4.stream_out_of_bounds",
    "p5.stream_out_of_bounds", "p6.stream_out_of_bounds", "p7.stream_out_of_bounds", "p8.stream_out_of_bounds",
    "p9.stream_out_of_bounds", "p10.stream_out_of_bounds",
    "run.worker_died",
]
"""Every check id; ``raised`` is any property whose builder raised (its origin says where), except a decode index
stream whose segment leaves its buffer (the read a kernel would make past it): ``p<N>.stream_out_of_bounds``, for
whichever property built it (P6 and P8 build a diverged batch: FINDINGS F8)."""

CHECKS: tuple[str, ...] = get_args(CheckId)
