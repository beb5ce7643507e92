"""The installed SGLang's decode modes -- ``decode`` and EAGLE's multi-step ``draft_decode`` -- against the reference,
through upstream's own dispatcher, graph runner phases and ``DeepseekV4MultiStepBackend`` (docs/SGLANG.md, "Modes
decode and draft_decode").  Skipped unless SGLang is importable; where a release disagrees with the model the
disagreement is a finding (F22, F23) pinned as a replay file in ``tests/regressions/sglang/``."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from _examples import kv_tables
from _sglang_support import known_findings
from hypothesis import HealthCheck, given, settings

from metadata_builders import Compression, Geometry, GraphTier, Variant, VerifyBatch, get_builder
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.metadata import FIELDS
from metadata_builders.families.dsv4.properties import check_p1_reference, check_p5_graph_vs_eager
from metadata_builders.families.dsv4.reference.decode import decode_plans
from metadata_builders.families.dsv4.runs.findings import known_finding
from strategies import verify_batches

pytestmark = pytest.mark.sglang

UPSTREAM_GEOMETRY = Geometry(page_size=256, swa_window=128, ring_size=131, unified_swa_window=128,
                             page_index_align=64, compression=Compression(index_topk=512, c4_ring_size=16,
                                                                          c128_ring_size=256, unified_swa_pages=5))
"""Upstream's constants (page 256, window 128, rings 16 / 256, ``index_topk`` 512): every compressed group built."""
LOW_RATIOS = dataclasses.replace(UPSTREAM_GEOMETRY, compression=dataclasses.replace(
    UPSTREAM_GEOMETRY.compression, low_ratios=(1, 2)))


@pytest.fixture(scope="module")
def reference():
    return get_builder("reference")


def _batch(mode: str, *, graph: GraphTier | None = None, geometry: Geometry = Geometry(), step: int = 1,
           prefixes: tuple[int, ...] = (7, 3)) -> VerifyBatch:
    """reference/decode.py's worked example: slots 1 and 2, four draft tokens (three steps; steps 0 and 1 run a
    forward), the shared buffer request-major, each position its own location."""
    width = 12 if geometry.compression is None else 300
    table, full_to_swa = kv_tables(4, width)
    steps = 3 if mode == "draft_decode" else 1
    if mode == "idle":  # a rank with no request: the tier's pad rows alone
        prefixes, steps = (), 0
    out = [slot * width + s + j for slot, s in zip((1, 2), prefixes) for j in range(steps)]
    return VerifyBatch(seq_lens=list(prefixes), req_pool_indices=[1, 2][:len(prefixes)], verify_lens=None,
                       num_draft_tokens=4,
                       out_cache_loc=out, req_to_token=table, full_to_swa=full_to_swa, geometry=geometry,
                       graph=graph, mode=mode, draft_step=step if mode == "draft_decode" else None)


def _release_has_step_offset(sglang) -> bool:
    """0.5.20+: a draft-decode child adds ``speculative_step_id + 1`` to ``seq_lens`` (F22 before)."""
    return sglang.inner.upstream.capabilities.draft_decode_step_offset


@pytest.mark.parametrize("mode", ["decode", "draft_decode", "idle"])
@pytest.mark.parametrize("geometry", [Geometry(), UPSTREAM_GEOMETRY, LOW_RATIOS], ids=["plain", "compressed", "v4.1"])
@pytest.mark.parametrize("path", ["eager", "graph"])
def test_upstreams_decode_modes_equal_the_reference_field_for_field(sglang, reference, mode, geometry, path) -> None:
    """Every field the mode has (decode plans, ``swa_out_cache_loc`` and the ring target included), on the
    dispatcher (eager), on the runner's padded tier and on an idle rank's replay (upstream's out-graph ``IDLE``
    branch), equals the reference's -- but for what a known finding of the installed release changes, which differs
    exactly there."""
    if mode == "idle" and path == "eager":
        pytest.skip("an idle rank builds nothing eagerly (upstream's init_forward_metadata returns early)")
    batch = _batch(mode, graph=GraphTier(3, 3) if path == "graph" else None, geometry=geometry)
    got, want = sglang.build(batch, Variant(path)), reference.build(batch, Variant(path))
    known = set().union(*(fields for finding, fields in known_findings(batch, sglang.inner.upstream).items()
                          if finding != "F23"))  # F23 is a replay's (P5)
    # a release without the V4.1 low ratios (0.5.18-0.5.21) builds none of them: not produced there, named
    unbuilt = set() if sglang.inner.upstream.capabilities.low_ratios else {
        n for n in want.fields if FIELDS[n].group == "low_ratios"}
    assert set(got.not_observable) == unbuilt
    differing = {n for n in want.fields if n not in unbuilt and got.fields[n] != want.fields[n]}
    assert differing <= known
    for finding, fields in known_findings(batch, sglang.inner.upstream).items():
        assert finding == "F23" or differing & fields, f"{finding} no longer reproduces on SGLang's {mode}"
    assert {n: v for n, v in got.fields.items() if n not in known} == {n: v for n, v in want.fields.items()
                                                                         if n not in known | unbuilt}
    assert got.audit.host_syncs == [] and got.audit.faults == []


@pytest.mark.parametrize("mode", ["decode", "draft_decode", "idle"])
@pytest.mark.parametrize("step", [0, 1])
def test_upstreams_recorded_replays_refresh_every_child_that_runs_a_forward(sglang, mode, step) -> None:
    """P5 on upstream's graph phases: the multi-step backend refreshes child 0 out-graph and copies its raw metadata,
    with each child's own row, into children 1 .. steps - 2; every replay equals a fresh build."""
    if mode != "draft_decode" and step:
        pytest.skip(f"{mode} has no step")
    batch = _batch(mode, graph=GraphTier(3, 3), geometry=UPSTREAM_GEOMETRY, step=step)
    caps = sglang.inner.upstream.capabilities
    if mode == "draft_decode" and not caps.draft_decode_step_rows:
        with pytest.raises(PropertyFailure) as info:  # F23: child 0's slice truncated from the whole buffer, copied
            check_p5_graph_vs_eager(sglang, batch)
        assert known_finding(info.value, batch) == "F23", info.value
        return
    check_p5_graph_vs_eager(sglang, batch)


def test_every_field_upstream_fills_in_a_decode_step_is_judged_or_named(sglang) -> None:
    """Coverage per mode: the target's decode fills 30 fields with compression, all judged, and with the V4.1 low
    ratios (0.5.22+) 14 more, all judged; a draft child fills 15, all judged."""
    from metadata_builders.families.dsv4.sglang.coverage import coverage_of

    decode = coverage_of(sglang, _batch("decode", geometry=UPSTREAM_GEOMETRY), Variant("eager"))
    assert decode.mode == "decode" and not decode.not_observable and len(decode.judged) == len(decode.produced)
    assert decode.line().startswith(f"coverage of decode: {len(decode.judged)} judged / {len(decode.judged)} produced")
    if sglang.inner.upstream.capabilities.low_ratios:
        assert len(decode.judged) == 30
    if sglang.inner.upstream.capabilities.low_ratios:
        low = coverage_of(sglang, _batch("decode", geometry=LOW_RATIOS), Variant("eager"))
        assert {"core_attn_metadata.c1_out_loc", "c2_indexer_metadata", "low_ratio_pos_i64"} <= set(low.judged)
        assert not low.not_observable and len(low.judged) == len(low.produced) == 44
        small = dataclasses.replace(LOW_RATIOS, page_size=128)  # upstream's indexer asserts page 256: named, why
        named = coverage_of(sglang, _batch("decode", geometry=small), Variant("eager")).not_observable
        assert "asserts page_size == 256" in named["c2_indexer_metadata"], named
    draft = coverage_of(sglang, _batch("draft_decode", graph=GraphTier(3, 3), geometry=UPSTREAM_GEOMETRY),
                        Variant("graph"))
    assert len(draft.judged) == 15
    if sglang.inner.upstream.capabilities.forced_compression:  # F24: named, with why
        assert draft.not_observable and all("F24" in why for why in draft.not_observable.values())
    else:
        assert not draft.not_observable


@pytest.mark.parametrize("use_req_ring", [True, False], ids=["request_ring", "paged_state"])
def test_the_decode_planners_model_is_upstreams_plan_decode(use_req_ring: bool) -> None:
    """``plan_decode``'s model on the per-request ring equals the reference's decode plans; without the ring
    (0.5.18/0.5.19's c4) it plans from the SWA state location, as ``c_plan.cuh`` does."""
    from metadata_builders.families.dsv4.sglang.plan_decode import plan_decode

    table, full_to_swa = kv_tables(4, 40)
    slots, seq_lens = [1, 2, 0], [9, 37, 1]
    plan = plan_decode(torch.tensor(slots), torch.tensor(table, dtype=torch.int32), torch.tensor(full_to_swa),
                       torch.tensor(seq_lens), 4, 128, 16, use_req_ring).view(torch.int32).view(-1, 4).tolist()
    if use_req_ring:
        assert plan == decode_plans(UPSTREAM_GEOMETRY.compression, slots, seq_lens)["c4_decode_plan"]
        assert plan[0] == [9, 1 * 16 + 8, (16 + 4) // 4, 24 // 4]  # the module docstring's worked example
    else:
        state = full_to_swa[table[1][8]]  # slot 1, position 8: the SWA location the state page follows
        write = (state // 128) * 16 + state % 16
        assert plan[0][:2] == [9, write] and plan[0][3] == write // 4


def test_a_release_whose_children_miss_the_step_offset_fails_p1_on_every_step(sglang) -> None:
    """F22 (0.5.18/0.5.19): a draft-decode child builds the accepted prefix's lengths, not ``prefix + step + 1``:
    its token attends without itself.  Red on P1 there, on ``seq_lens``; held on 0.5.20+."""
    batch = _batch("draft_decode", step=0)
    if _release_has_step_offset(sglang):
        check_p1_reference(sglang, batch)
        return
    with pytest.raises(PropertyFailure) as info:
        check_p1_reference(sglang, batch)
    assert info.value.field in ("seq_lens", "seq_lens_casual") and info.value.check == "p1.vs_reference"


@settings(max_examples=12, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=verify_batches(mode="decode", compression=True))
def test_drawn_decode_steps_build_as_the_reference(sglang, batch: VerifyBatch) -> None:
    """Held, or a known finding of the installed release (F11's c4 decode plan on 0.5.18/0.5.19)."""
    try:
        check_p1_reference(sglang, batch)
    except PropertyFailure as failure:
        assert known_finding(failure, batch) in known_findings(batch, sglang.inner.upstream), failure
