"""Graph replay on upstream: the adapter's two phases, recorded and re-executed as a GPU does it.

The adapter plays SGLang's decode graph runner (``families/dsv4/sglang/graph.py``):
capture runs ``init_forward_metadata_out_graph(in_capture=True)`` and records
``init_forward_metadata_in_graph``; every replay refills the static buffers, runs
the out-graph phase in Python and re-executes the recording.  These tests pin
that a recorded replay of upstream equals a fresh build of the same batch where
the model and upstream agree, that the raw-verify path (DSpark) really is
recorded work, and that a capped tier shows F13.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from dataclasses import dataclass

import pytest
from _examples import EXAMPLES, make_batch

from metadata_builders import GraphTier, Variant, get_builder
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.properties import check_p5_graph_vs_eager, check_p7_capture_safety
from metadata_builders.families.dsv4.properties._common import Partial
from metadata_builders.families.dsv4.runs.findings import known_finding

pytestmark = pytest.mark.sglang

def _graph_variant(builder, batch) -> Variant:
    """The production gate's graph variant with a host mirror, or the one the installed release has."""
    graph = [v for v in builder.variants_supported(batch) if v.path == "graph" and v.mirror == "host"]
    return next((v for v in graph if v.gate == "dspark"), graph[0])


def _replays_equal_builds(builder, first, *others) -> object:
    """Capture ``first``, replay each batch: equal to a fresh build (but ``swa_loc`` where F14 stales it)."""
    variant = _graph_variant(builder, first)
    stale = set() if builder.inner.upstream.capabilities.replay_copies_swa_loc else {"swa_loc"}
    captured = builder.capture(first, variant)
    for batch in (first, *others):
        replayed = builder.replay(captured, batch)
        fresh = builder.build(batch, variant)
        differ = [n for n in fresh.fields if replayed.fields.get(n) != fresh.fields[n]]
        assert set(differ) <= stale and (batch is first or stale <= set(differ)), differ
        assert replayed.decision == fresh.decision
    return captured


def test_sglang_names_both_phases(sglang) -> None:
    assert sglang.records_graph and sglang.can_replay


def test_uniform_eagle_replay_is_out_graph_python_plus_the_recorded_gather(sglang) -> None:
    """EAGLE's out-graph phase rebuilds the metadata in Python; the graph holds only the swa_out_cache_loc gather."""
    captured = _replays_equal_builds(sglang, EXAMPLES["uniform_eagle_batch_of_three"],
                                     make_batch([4, 6], [3, 2], 2, graph=GraphTier(4, 8)))
    assert {c.stage for c in captured.graph.calls} <= {"translate_loc_from_full_to_swa",
                                                       "init_forward_metadata_in_graph"}
    assert len(captured.graph.calls) == 2
    assert not captured.graph.host_reads


def test_uniform_dspark_replay_is_recorded_work(sglang) -> None:
    """DSpark stores the raw verify metadata: the whole upgrade is recorded, a Triton launch among it, no sync."""
    if not sglang.inner.upstream.capabilities.gate:
        pytest.skip(f"SGLang {sglang.inner.upstream.release} reaches no raw verify metadata (the dspark gate, 0.5.21+)")
    first = make_batch([5, 3, 7], [2, 1, 3], 2, graph=GraphTier(4, 8), is_dspark=True)
    second = make_batch([4, 6], [3, 2], 2, graph=GraphTier(4, 8), is_dspark=True)
    captured = _replays_equal_builds(sglang, first, second)
    calls = captured.graph.calls
    assert len(calls) > 20 and any(c.name.startswith("triton ") for c in calls)
    assert not sglang.replay(captured, second).audit.host_syncs


def test_ragged_uncapped_tier_replays_equal_builds(sglang) -> None:
    _replays_equal_builds(sglang, EXAMPLES["ragged_tier_slack_spread_over_pad_rows"],
                          make_batch([4, 6, 2], [3, 1, 2], 3, verify_lens=[1, 3, 2], graph=GraphTier(5, 11)))


def test_p5_and_p7_judge_recorded_replays_without_partial(sglang) -> None:
    """P5's replay sequence and P7's capture safety run through the recorder on upstream: no ``partial`` left."""
    if not sglang.inner.upstream.capabilities.replay_copies_swa_loc:
        pytest.skip("F14 fails P5 here (test_replays_keep_the_captured_swa_loc_f14)")
    for name in ("uniform_eagle_batch_of_three", "ragged_tier_slack_spread_over_pad_rows"):
        notes = check_p5_graph_vs_eager(sglang, EXAMPLES[name]) + check_p7_capture_safety(sglang, EXAMPLES[name])
        # What may remain: variants the installed release cannot express (mirror=device before 0.5.22), and the
        # runner's note that full_coverage widens a row past the captured width (F15: a convention, not a partial).
        assert not any(isinstance(n, Partial) and "cannot express" not in n for n in notes), notes
        assert all("cannot express" in n or "F15" in n for n in notes), notes


def test_capped_tier_replay_holds_under_full_coverage_f13(sglang) -> None:
    """F13, settled: upstream's out-graph phase pads without the tier's cap (the last row absorbs the slack).
    That is the ``full_coverage`` convention the adapter declares, so the reference of its own agrees and P5 holds
    on every release (F6 needs an uncovered tail, which full_coverage never leaves); 0.5.18/0.5.19 fail first on
    their own known findings (F5, F14)."""
    batch = EXAMPLES["capped_tier_uncovered_tail"]
    assert sglang.capabilities.padding == "full_coverage"
    try:
        check_p5_graph_vs_eager(sglang, batch)
    except PropertyFailure as failure:
        assert not sglang.inner.upstream.capabilities.replay_copies_swa_loc, str(failure)
        assert known_finding(failure, batch) is not None, str(failure)


def test_a_cap_that_clamps_nothing_holds_p7_under_full_coverage_f13(sglang) -> None:
    """P7's side of F13, settled: under full_coverage the capped build has the host total it pads to, so build
    and replay sync alike (here the cap, 3, clamps no row of a 4-row / 7-token tier)."""
    from metadata_builders.families.dsv4.tier import tier_verify_lens

    batch = make_batch([5, 3], [2, 1], 2, verify_lens=[1, 2], graph=GraphTier(4, 7, cap=3))
    assert tier_verify_lens(batch.verify_lens, 4, 7, 3) == tier_verify_lens(batch.verify_lens, 4, 7, None)
    check_p7_capture_safety(sglang, batch)


def test_a_runner_replay_is_wider_than_any_captured_row_f15(sglang) -> None:
    """F15: every tier is captured with rows <= captured_req_width (3); upstream's out-graph phase re-pads the live
    layout uncapped, so [1, 1, 1] replayed on the tier of 4 rows / 9 tokens is built [1, 1, 1, 6] (full_coverage),
    where hip (pad_rows_only) builds [1, 1, 1, 3]. P5 holds with a note: a convention, not a replay fault."""
    from metadata_builders.families.dsv4.graph_runner import GraphRunner, RunnerSpec

    live = make_batch([5, 3, 7], [2, 1, 3], 3, verify_lens=[1, 1, 1], graph=GraphTier(4, 9, cap=3))
    variant = next(v for v in sglang.variants_supported(live) if v.path == "graph")
    built = {}
    for name, builder in (("sglang", sglang), ("hip", get_builder("hip"))):
        runner = GraphRunner(builder, variant, RunnerSpec((1, 2, 3, 4), 3, True), live).capture()
        assert all(max(runner.captured[t].inputs.verify_lens_cpu) <= 3 for t in runner.order)
        built[name] = runner.replay(live).fields["extend_seq_lens"]
    assert built == {"sglang": [1, 1, 1, 6], "hip": [1, 1, 1, 3]}
    if not sglang.inner.upstream.capabilities.replay_copies_swa_loc:
        pytest.skip("0.5.18/0.5.19: F14 (the replay rebinds swa_loc) fails P5 before F15's note")
    notes = check_p5_graph_vs_eager(sglang, EXAMPLES["ragged_tier_slack_spread_over_pad_rows"])
    assert any("F15" in n for n in notes), notes


def test_replays_keep_the_captured_swa_loc_f14(sglang) -> None:
    """F14 (0.5.18/0.5.19): the replay's copy_ rebinds swa_loc, the graph keeps the captured one; fixed in 0.5.20."""
    batch = EXAMPLES["uniform_eagle_batch_of_three"]
    if sglang.inner.upstream.capabilities.replay_copies_swa_loc:
        notes = check_p5_graph_vs_eager(sglang, batch)
        assert all("cannot express" in str(n) for n in notes), notes  # mirror=device before 0.5.22
        return
    with pytest.raises(PropertyFailure) as info:
        check_p5_graph_vs_eager(sglang, batch)
    failure = info.value
    assert failure.field == "swa_loc" and known_finding(failure, batch) == "F14", str(failure)
    from metadata_builders.families.dsv4.properties.runner import check_runner_replays

    with pytest.raises(PropertyFailure) as info:  # the runner half sees the same stale swa_loc: the same finding
        check_runner_replays(sglang, batch)
    assert info.value.check == "p5.runner_replay_vs_fresh" and known_finding(info.value, batch) == "F14", \
        str(info.value)


# -- graph-replay regressions planted in upstream's raw-verify path -----------------------------------


@dataclass(frozen=True)
class GraphPlant:
    """One edit of one upstream method (a copy of its source, recompiled in its module), and what must go red."""

    what: str
    owner: str
    """``backend_cls`` or a name in the backend module."""
    method: str
    find: str
    replace: str
    prop: str
    field: str


GRAPH_PLANTS = (
    GraphPlant(
        # make_forward_metadata_from_raw_verify (DSpark's in-graph upgrade) stages the uniform extend lengths in a
        # host buffer and copies them over asynchronously instead of torch.full_like on the device. The values
        # stay right (num_draft_tokens is constant), so every build and replay compares equal; but the graph
        # recorded a copy from pageable host memory made during capture, which a GPU replays from whatever that
        # memory holds later. Only the recorder sees it.
        "the raw-verify upgrade stages its extend lengths in host memory made during capture",
        "backend_cls", "make_forward_metadata_from_raw_verify",
        "extend_seq_lens = torch.full_like(seq_lens, num_draft_tokens)",
        "extend_seq_lens = torch.tensor([num_draft_tokens] * bs, dtype=seq_lens.dtype).to(\n"
        "                seq_lens.device, non_blocking=True\n            )",
        "P7", "in_graph (make_forward_metadata_from_raw_verify)",
    ),
    GraphPlant(
        # DSV4RawVerifyMetadata.copy_ (out-graph, before every DSpark replay) assigns the replay's out_cache_loc
        # (the live tensor, padded to the tier) instead of copying it into the captured one (built on zeros at
        # capture): Python holds the new locations, the recorded upgrade reads the captured storage, so every
        # replay writes KV at the capture's locations. A Python replay() that re-runs the upgrade stays green.
        # (Rebinding seq_lens instead would be harmless: the captured raw metadata holds the runner's static
        # seq_lens buffer itself, which the runner refills in place.)
        "the raw verify metadata's copy_ rebinds out_cache_loc instead of copying into the captured buffer",
        "DSV4RawVerifyMetadata", "copy_",
        "self.out_cache_loc.copy_(other.out_cache_loc)", "self.out_cache_loc = other.out_cache_loc",
        "P5", "raw_out_loc",
    ),
)


def _planted(owner: type, plant: GraphPlant):
    """``owner.method`` with the plant's one edit, compiled from upstream's own source in upstream's module."""
    source = inspect.getsource(getattr(owner, plant.method))
    assert source.count(plant.find) == 1, plant.find
    namespace: dict = {}
    exec(compile(textwrap.dedent(source.replace(plant.find, plant.replace)), inspect.getsourcefile(owner), "exec"),
         vars(sys.modules[owner.__module__]), namespace)
    return namespace[plant.method]


GEOMETRY_PLANT = GraphPlant(
    # init_forward_metadata_out_graph pads the live ragged layout to the live request count instead of the
    # captured width (padded_bs=bs): the capture (the smallest batch of P5's sequence) and every replay with
    # another request count then build metadata of another request geometry than the captured graph holds.
    # Upstream copies it into the captured DSV4Metadata; here the shapes disagree and the copy raises (a GPU
    # replay with such a geometry reads and writes past the captured rows).
    "out-graph pads the ragged layout to the live request count instead of the captured width",
    "backend_cls", "init_forward_metadata_out_graph",
    "ragged_layout = ragged_layout.padded_to_bucket(padded_bs=bs)",
    "ragged_layout = ragged_layout.padded_to_bucket(padded_bs=ragged_layout.bs)",
    "P5", "",
)
"""Issue 18's third mutant in upstream: a replay whose request geometry differs from the capture."""

RUNNER_KEY_PLANT = GraphPlant(
    # init_forward_metadata_out_graph keys a compact ragged tier's captured metadata by bs, as it keys a uniform
    # one, instead of by its token count. In compact mode every tier of at least max_bs tokens shares bs = max_bs,
    # so the second such tier captured finds the first one's metadata under its key and copies into it: two
    # recorded graphs read one DSV4Metadata, and a replay of either after the other reads the other's tokens.
    # Invisible with one tier per backend; red only when a runner captures several on one backend (issue 28).
    "out-graph keys a compact ragged tier by bs instead of graph_num_tokens (two tiers share one metadata)",
    "backend_cls", "init_forward_metadata_out_graph",
    "graph_key = num_tokens_v", "graph_key = bs",
    "P5", "",
)
"""Issue 28's runner regression in upstream: tiers that share ``bs`` collide in the backend's per-tier store."""


@pytest.mark.parametrize("plant", [*GRAPH_PLANTS, GEOMETRY_PLANT, RUNNER_KEY_PLANT],
                         ids=lambda p: p.method + ("[runner_key]" if p is RUNNER_KEY_PLANT else ""))
def test_a_graph_replay_regression_in_upstream_fails_through_the_recorder(sglang, monkeypatch, plant) -> None:
    """Issue 18's bugs in upstream's two graph phases: red through the recorded replay, green unplanted."""
    from metadata_builders.families.dsv4.properties import PROPERTIES
    from metadata_builders.families.dsv4.properties.spec import verdict

    up = sglang.inner.upstream
    if plant in (GEOMETRY_PLANT, RUNNER_KEY_PLANT) and not up.capabilities.replay_copies_swa_loc:
        pytest.skip("F14 fails P5 here unplanted (test_replays_keep_the_captured_swa_loc_f14)")
    if plant is RUNNER_KEY_PLANT and "graph_key = num_tokens_v" not in inspect.getsource(up.backend_cls):
        pytest.skip(f"SGLang {up.release} keys no ragged tier by its token count")
    if plant is GEOMETRY_PLANT:
        batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]  # 3 requests on a tier of 5 rows
    elif plant is RUNNER_KEY_PLANT:
        batch = make_batch([5, 3], [1, 2], 3, verify_lens=[1, 2], graph=GraphTier(2, 3, cap=3))  # 2 tiers share bs 2
    elif not up.capabilities.gate:
        pytest.skip(f"SGLang {up.release} reaches no raw verify metadata (the dspark gate, 0.5.21+)")
    else:
        batch = make_batch([5, 3, 7], [2, 1, 3], 2, graph=GraphTier(4, 8), is_dspark=True)
    spec = next(p for p in PROPERTIES if p.name == plant.prop)
    assert verdict(spec, sglang, batch).status in ("held", "partial")  # partial: a release without some variant
    owner = up.backend_cls if plant.owner == "backend_cls" else getattr(up.backend_module, plant.owner)
    monkeypatch.setattr(owner, plant.method, _planted(owner, plant))
    result = verdict(spec, sglang, batch)
    assert result.status == "failed", result
    if plant is RUNNER_KEY_PLANT:  # the second tier's copy into the first one's metadata raises, or a replay differs
        assert result.failure.check.startswith("p5.runner") or "builder raised" in str(result.failure), \
            str(result.failure)
    elif plant.field:
        assert result.failure.field == plant.field, str(result.failure)
    else:  # the copy into the captured metadata raises
        assert "builder raised RuntimeError" in str(result.failure), str(result.failure)


def test_the_runner_captures_on_upstreams_own_capture_layout(sglang) -> None:
    """The adapter brings upstream's ``build_capture_verify_lens``: a change to it is what the captures run on
    (tests/dsv4/test_gate_sglang.py plants one); on the released code it is the harness's model on every runner tier."""
    from metadata_builders.families.dsv4.tier import capture_verify_lens, runner_tiers

    assert sglang.capabilities.capture_layout
    for width in (1, 2, 3, 6):
        for max_bs in (1, 2, 5, 8):
            for slots, tokens in runner_tiers(tuple(range(1, max_bs + 1)), width, ragged=True):
                assert sglang.capture_verify_lens(tokens, slots, width) == capture_verify_lens(tokens, slots, width)


def test_the_adapter_declares_the_releases_capture_geometry_and_brings_its_runners_rule(sglang) -> None:
    """The adapter declares ``token_slots`` and brings upstream's ``DecodeCudaGraphRunner._ragged_capture_slots``
    (bound on a stand-in, as upstream's own tests call it): on the installed release it is the released rule's
    reference on every runner tier, so P5's convention check holds -- and upstream's own #34384 regression test,
    which asserts the fixed rule, fails on the release's runner (tier 192 captured with 192 slots)."""
    import importlib

    from metadata_builders.families.dsv4.tier import ragged_capture_slots

    assert sglang.capabilities.capture_geometry == "token_slots" and sglang.capabilities.capture_slots
    runner = importlib.import_module("sglang.srt.model_executor.runner.decode_cuda_graph_runner")
    assert hasattr(runner.DecodeCudaGraphRunner, "_ragged_capture_slots")  # upstream's, not the fallback
    for width in (1, 2, 3, 6):
        for max_bs in (1, 2, 5, 8):
            for b in range(1, max_bs + 1):
                assert sglang.ragged_capture_slots(b * width, max_bs, width) == ragged_capture_slots(
                    b * width, max_bs, width, "token_slots")
    assert sglang.ragged_capture_slots(42, 8, 6) == 8  # #39257's reproduction: 8 slots, not the 7 requests
    width, max_bs = 6, 1152  # upstream's TestRaggedVerifyCaptureGeometry: tier 192 is made by 32 requests
    assert sglang.ragged_capture_slots(192, max_bs, width) == 192 != 192 // width



def test_an_installed_runner_with_39257s_fix_fails_the_released_declaration(sglang, monkeypatch) -> None:
    """#39257's fix planted in upstream's runner (``_ragged_capture_slots`` returning ``T // W``) while the adapter
    still declares ``token_slots``: P5's runner half is red before capturing anything, naming the fixed rule --
    what a release with the fix shows until the declaration follows it."""
    import importlib

    runner = importlib.import_module("sglang.srt.model_executor.runner.decode_cuda_graph_runner")
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    monkeypatch.setattr(runner.DecodeCudaGraphRunner, "_ragged_capture_slots",
                        lambda self, num_tokens: num_tokens // self.captured_req_width)
    with pytest.raises(PropertyFailure) as info:
        check_p5_graph_vs_eager(sglang, batch)
    assert info.value.check == "p5.capture_convention" and "the request_slots rule" in str(info.value), \
        str(info.value)
