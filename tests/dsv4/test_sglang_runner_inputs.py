"""What the runner double hands upstream's backend at a capture and at a replay is what upstream's runner hands it
(issue 45 item 1; docs/research/sglang-runner-inputs.md, table D): one test per input, on the installed release."""

from __future__ import annotations

import pytest
from _examples import make_batch

from metadata_builders import get_builder
from metadata_builders.families.dsv4.batch import GraphTier
from metadata_builders.families.dsv4.variants import variants_for

pytestmark = pytest.mark.sglang


@pytest.fixture()
def seen(monkeypatch):
    """Every forward batch the backend's out-graph phase was handed, and every post-warmup hook call, in order."""
    from metadata_builders.families.dsv4.sglang.releases import load_upstream

    cls = load_upstream("cpu").backend_module.DeepseekV4HipRadixBackend
    calls: list[tuple[str, dict]] = []
    out_graph, hook = cls.init_forward_metadata_out_graph, cls.on_after_cuda_graph_warmup

    def spy_out_graph(self, forward_batch, in_capture=False):
        calls.append(("out_graph", {"in_capture": in_capture, "out_cache_loc": forward_batch.out_cache_loc,
                                    "layout": getattr(forward_batch.spec_info, "ragged_verify_layout", None)}))
        return out_graph(self, forward_batch, in_capture=in_capture)

    def spy_hook(self):
        calls.append(("warmup_hook", {}))
        return hook(self)

    monkeypatch.setattr(cls, "init_forward_metadata_out_graph", spy_out_graph)
    monkeypatch.setattr(cls, "on_after_cuda_graph_warmup", spy_hook)
    return calls


def _capture_and_replay(batch, again):
    builder = get_builder("sglang")
    variant = next(v for v in variants_for(batch) if v.path == "graph" and v.gate == "dspark")
    builder.replay(builder.capture(batch, variant), again)
    return builder


def _out_graphs(calls):
    return [args for name, args in calls if name == "out_graph"]


def test_uniform_target_verify_replays_hand_the_live_unpadded_out_cache_loc(seen) -> None:
    """Capture: the tier-sized static buffer (upstream's capture branch ignores it); replay: the live tensor of the
    real tokens (``raw_bs * W``), which the backend pads to the tier itself (D1)."""
    batch = make_batch([5, 3], [2, 1], 3, graph=GraphTier(4, 12))
    _capture_and_replay(batch, batch)
    capture, replay = _out_graphs(seen)
    assert capture["in_capture"] and capture["out_cache_loc"].numel() == 12
    assert not replay["in_capture"] and replay["out_cache_loc"].tolist() == list(batch.out_cache_loc)


def test_compact_ragged_replays_hand_a_tier_length_window_and_a_device_only_layout(seen) -> None:
    """DSpark's compact window is already tier-length (D2); the scheduled layout has no host copy or total (D10)."""
    batch = make_batch([5, 3], [2, 1], 3, verify_lens=[2, 1], graph=GraphTier(3, 6), is_dspark=True)
    _capture_and_replay(batch, batch)
    _, replay = _out_graphs(seen)
    assert replay["out_cache_loc"].numel() == 6
    layout = replay["layout"]
    assert layout.verify_lens_cpu is None and layout.total_verify_tokens is None


def test_draft_extend_replays_hand_the_static_buffers_raw_length_view(seen) -> None:
    """Draft extend's runner hands ``buffers.out_cache_loc[:raw_bs * n]``: a view of the static buffer (D3)."""
    batch = make_batch([7, 3], [1, 2], 3, graph=GraphTier(4, 12)).replace(mode="draft_extend")
    _capture_and_replay(batch, batch)
    _, replay = _out_graphs(seen)
    assert replay["out_cache_loc"].numel() == 6 and replay["out_cache_loc"]._base is not None


def test_decode_replays_hand_the_live_out_cache_loc(seen) -> None:
    """Decode's runner hands the live ``raw_bs`` tensor (D5); the backend pads it to the tier."""
    batch = make_batch([7, 3], [1, 2], 4).replace(mode="decode", out_cache_loc=[19, 27], graph=GraphTier(3, 3))
    _capture_and_replay(batch, batch)
    _, replay = _out_graphs(seen)
    assert replay["out_cache_loc"].tolist() == [19, 27]


def test_every_capture_runs_the_post_warmup_hook_before_the_recording(seen) -> None:
    """Upstream's runner warms up (the in-graph upgrade on the host), then calls ``on_after_cuda_graph_warmup``,
    then records (D14): once per capture, after the capture's out-graph call."""
    batch = make_batch([5, 3], [2, 1], 3, graph=GraphTier(4, 12), is_dspark=True)
    _capture_and_replay(batch, batch)
    names = [name for name, _ in seen]
    assert names == ["out_graph", "warmup_hook", "out_graph"]
