"""The gate's replay examples shrink as check's do: simpler batches on which head still fails the same check and
base still holds (issue 40 item 6: a P10 example with a 429,496,728-row ring)."""

from __future__ import annotations

import dataclasses
import json

from _examples import EXAMPLES
from hypothesis import HealthCheck, given, settings

from metadata_builders.cli import main
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.gate.shrink import shrink, simpler
from strategies import verify_batches


def test_a_batch_that_always_fails_shrinks_to_one_eager_request_on_a_readable_ring() -> None:
    """With a predicate every batch meets, the greedy search ends at the simplest batch reachable."""
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    batch = batch.replace(geometry=dataclasses.replace(batch.geometry, ring_size=429_496_728))
    shrunk, steps = shrink(batch, lambda b: True, seconds=30)
    assert steps > 0 and shrunk.bs == 1 and shrunk.graph is None
    assert shrunk.geometry.ring_size == shrunk.geometry.unified_swa_window + shrunk.num_draft_tokens - 1
    assert shrunk.seq_lens == (1,) and shrunk.num_draft_tokens == 1


def test_shrinking_keeps_what_the_predicate_needs() -> None:
    """A failure that needs a position past the window keeps one; a failure that needs two requests keeps two."""
    batch = EXAMPLES["uniform_eagle_batch_of_three"]
    shrunk, _ = shrink(batch, lambda b: b.bs >= 2, seconds=30)
    assert shrunk.bs == 2
    shrunk, _ = shrink(batch, lambda b: max(b.seq_lens) >= 5, seconds=30)
    assert max(shrunk.seq_lens) >= 5 and shrunk.bs == 1


@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=verify_batches())
def test_every_simplification_is_a_valid_other_batch(batch: VerifyBatch) -> None:
    """Each candidate is a valid batch of the same mode (validated on construction) and not the batch itself."""
    for candidate in simpler(batch):
        assert candidate != batch and candidate.mode == batch.mode
        assert VerifyBatch.from_json(candidate.to_json()) == candidate


def test_the_gates_replay_file_is_the_shrunk_example_and_replays_red(tmp_path, monkeypatch, capsys) -> None:
    """End to end: the ring taken modulo the window, P10: the replay file holds a shrunk batch (meta.shrunk), on a
    ring of upstream's size, and replays red at head, green on hip."""
    monkeypatch.setenv("METADATA_BUILDERS_CACHE", str(tmp_path / "cache"))
    head = "metadata_builders.families.dsv4.mutants:ring_modulo_by_window"
    failures = tmp_path / "f"
    assert main(["gate", "--base-builder", "hip", "--head-builder", head, "--properties", "P10", "--per-kind", "3",
                 "--workers", "0", "--no-pictures", "--failures-dir", str(failures)]) == 1
    assert "shrunk P10's example" in capsys.readouterr().out
    (path,) = failures.glob("P10-*.json")
    data = json.loads(path.read_text())
    assert data["meta"]["shrunk"]["steps"] >= 1 and data["meta"]["check"].startswith("p10.")
    batch = VerifyBatch.from_json(path.read_text())
    assert batch.geometry.ring_size < 1 << 16
    assert main(["replay", str(path), "--builder", head, "--properties", "P10", "--device", "cpu"]) == 1
    assert main(["replay", str(path), "--builder", "hip", "--properties", "P10", "--device", "cpu"]) == 0
