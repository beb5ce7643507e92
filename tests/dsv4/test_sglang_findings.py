"""The installed SGLang's findings and planted bugs (docs/SGLANG.md, docs/FINDINGS.md): realistic edits of upstream's
code fail the property that names them, the DSpark draft worker's two draft counts, the replay files, draft extend.

Skipped unless SGLang is importable (``ci/install-sglang.sh --version X``).  Every
supported release (0.5.18 .. 0.5.23) runs the same tests; where a release
disagrees with the model, the disagreement is a finding of docs/FINDINGS.md,
pinned as a replay file in ``tests/regressions/sglang/`` whose ``meta`` says on
which releases, through which property and on which fields it shows -- and
that it shows nowhere else.  The named batches, variant kinds and kernel routes: ``test_sglang_adapter.py``.
"""

from __future__ import annotations

import functools
import inspect
import json
from pathlib import Path

import pytest
import torch
from _examples import EXAMPLES, make_batch
from _sglang_support import known_findings, plant

from metadata_builders import Divergence, Geometry, GraphTier, Variant, VerifyBatch, get_builder
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.properties import (
    check_p1_reference,
    check_p4_gate,
    check_p5_graph_vs_eager,
    check_p6_fault_model,
    check_p7_capture_safety,
    check_p8_inputs_untouched,
    p1_differences,
)
from metadata_builders.families.dsv4.properties.kv import check_p10_kv_state
from metadata_builders.families.dsv4.runs.findings import known_finding

pytestmark = pytest.mark.sglang

REGRESSIONS = Path(__file__).parents[1] / "regressions" / "sglang"


def _replay(name: str) -> tuple[VerifyBatch, dict]:
    d = json.loads((REGRESSIONS / name).read_text())
    return VerifyBatch.from_dict(d), d["meta"]


# -- planted bugs: the gate catches realistic edits of upstream's code ----------------------------------


DIVERGED = make_batch([5, 3, 7], [2, 1, 3], 3, graph=GraphTier(4, 12)).replace(
    divergence=Divergence(extend_seq_lens=[4, 3, 3])
)


def test_planted_bug_dropping_the_dspark_gate_fails_p4_and_p6(sglang, upstream, monkeypatch) -> None:
    """Without ``and self.is_dspark`` EAGLE's token map trusts the host count: P4 fails, and P6 sees the fault."""
    if not upstream.capabilities.gate:
        pytest.skip(f"SGLang {upstream.release} has no dspark gate")
    check_p4_gate(sglang, DIVERGED.replace(divergence=None))
    plant(monkeypatch, upstream, "init_forward_metadata_target_verify_old",
           "exact_num_tokens = exact_num_tokens and self.is_dspark", "exact_num_tokens = exact_num_tokens")
    with pytest.raises(PropertyFailure) as p4:
        check_p4_gate(sglang, DIVERGED.replace(divergence=None))
    assert (p4.value.field, p4.value.variant) == ("decision.used_output_size",
                                                  "eager/mirror=host/layout_total=host/gate=dspark")
    with pytest.raises(PropertyFailure) as p6:
        check_p6_fault_model(sglang, DIVERGED)
    assert "EAGLE faulted under the dspark gate" in p6.value.message


def test_planted_bug_dropping_the_verify_extension_fails_p1(sglang, upstream, monkeypatch) -> None:
    """Without ``max_seq_len += num_draft_tokens`` the page table misses the page the verify tokens reach."""
    batch = EXAMPLES["page_boundary_one_past"]
    if upstream.capabilities.exact_token_map:
        check_p1_reference(sglang, batch)
    plant(monkeypatch, upstream, "init_forward_metadata_target_verify_old",
           "max_seq_len += self.target_verify_num_draft_tokens", "max_seq_len += 0")
    with pytest.raises(PropertyFailure) as info:
        check_p1_reference(sglang, batch)
    assert (info.value.prop, info.value.field) == ("P1", "page_table")


def _dispatcher(upstream) -> str:
    """Where upstream's eager dispatcher chooses ``max_seq_len``: ``_build_forward_metadata`` (0.5.22+), before it
    ``init_forward_metadata`` itself."""
    return "_build_forward_metadata" if hasattr(upstream.backend_cls, "_build_forward_metadata") else \
        "init_forward_metadata"


def test_eager_builds_go_through_upstreams_dispatcher_where_its_step_would(sglang, upstream, monkeypatch) -> None:
    """``init_forward_metadata(forward_batch)`` runs for every eager build of the public entry point with the
    dispatcher's own mirror (a host tensor, or 0.5.22+ none); the gate recipes (``..._old``), ``mirror=tolist``
    and the graph path call what they always called."""
    calls: list = []
    dispatch = upstream.backend_cls.init_forward_metadata

    def counted(self, forward_batch):
        calls.append(forward_batch)
        return dispatch(self, forward_batch)

    monkeypatch.setattr(upstream.backend_cls, "init_forward_metadata", counted)
    caps = upstream.capabilities
    through = []
    upstream_page = Geometry()  # page 256; the dispatcher asserts page_size % 128 == 0
    batches = [make_batch([7, 3], [1, 2], 2, is_dspark=dspark) for dspark in (False, True)]
    batches.append(make_batch([7, 3], [1, 2], 3, verify_lens=[3, 1]))
    for batch in batches:
        batch = batch.replace(geometry=upstream_page)
        for variant in sglang.variants_supported(batch):
            calls.clear()
            sglang.build(batch, variant)
            public = variant.gate == "dspark" or not caps.exact_token_map
            expected = variant.path == "eager" and public and variant.mirror in ("host", "device")
            assert len(calls) == expected, variant
            if calls:
                through.append(variant)
                mirror = calls[0].seq_lens_cpu
                assert (mirror is None) == (variant.mirror == "device"), variant
    assert through, "no variant went through the dispatcher"
    small_page = make_batch([7, 3], [1, 2], 2)  # page 4: upstream's dispatcher would assert; the direct call
    calls.clear()
    sglang.build(small_page, sglang.variants_supported(small_page)[0])
    assert not calls


def test_planted_bug_in_the_dispatchers_max_seq_len_fails_p1(sglang, upstream, monkeypatch) -> None:
    """The dispatcher's ``max_seq_len`` taken from the batch's last request (as if batches were sorted): the page
    table is cut at the last request's length. Only the dispatcher chooses it, so only an eager build through it
    sees the bug."""
    if not upstream.capabilities.exact_token_map:
        pytest.skip(f"SGLang {upstream.release}: F5 (max_seq_len not extended by the verify tokens) is red already")
    batch = make_batch([7, 3], [1, 2], 2, is_dspark=True).replace(geometry=Geometry())  # public entry, any release
    check_p1_reference(sglang, batch)
    plant(monkeypatch, upstream, _dispatcher(upstream), "max_seq_len = int(seq_lens_cpu.max().item())",
           "max_seq_len = int(seq_lens_cpu[-1].item())")
    with pytest.raises(PropertyFailure) as info:
        check_p1_reference(sglang, batch)
    assert info.value.prop == "P1" and info.value.variant.startswith("eager/mirror=host"), info.value


def test_planted_bug_updating_seq_lens_in_place_fails_p8(sglang, upstream, monkeypatch) -> None:
    """``seq_lens += draft`` writes into the caller's tensor (the classic graph-replay bug): P8 fails."""
    batch = EXAMPLES["single_request"]
    check_p8_inputs_untouched(sglang, batch)
    plant(monkeypatch, upstream, "init_forward_metadata_target_verify_old",
           "seq_lens = seq_lens + self.target_verify_num_draft_tokens",
           "seq_lens += self.target_verify_num_draft_tokens")
    with pytest.raises(PropertyFailure) as info:
        check_p8_inputs_untouched(sglang, batch)
    assert (info.value.prop, info.value.field) == ("P8", "seq_lens")


# -- the DSpark draft worker's block verify: two draft counts (issue 45) --------------------------------------

DSPARK_DRAFT = make_batch([5, 3, 7], [2, 1, 3], 3, is_dspark=True, graph=GraphTier(4, 12)).replace(
    speculative_num_draft_tokens=4)
"""A DSpark draft worker's block verify: gamma 3 a request, configured 4, a tier with one pad row."""


def test_a_dspark_draft_batch_is_built_on_the_draft_workers_backend(sglang, upstream, monkeypatch) -> None:
    """Every path builds on a backend holding what upstream's ``__init__`` leaves on a DSpark draft worker: the
    configured gamma + 1, the active gamma, ``is_dspark_draft`` and ``is_draft_worker`` (``need_compress`` off);
    the target worker's batch on one count, neither flag."""
    seen: list[tuple] = []
    attach = upstream.backend_cls._attach_unified_kv_prefill_meta

    @functools.wraps(attach)  # the double's spy binds upstream's signature
    def watched(self, *args, **kwargs):
        seen.append((self.speculative_num_draft_tokens, self.target_verify_num_draft_tokens, self.is_dspark_draft,
                     self.is_draft_worker, getattr(self, "need_compress", False)))
        return attach(self, *args, **kwargs)

    monkeypatch.setattr(upstream.backend_cls, "_attach_unified_kv_prefill_meta", watched)
    for batch, want in ((DSPARK_DRAFT, (4, 3, True, True, False)),
                        (DSPARK_DRAFT.replace(speculative_num_draft_tokens=None), (3, 3, False, False, False))):
        for variant in sglang.variants_supported(batch):
            seen.clear()
            sglang.build(batch, variant)
            assert seen and set(seen) == {want}, (variant, seen)


def _new_p1_differences(sglang, upstream, monkeypatch, method: str, old: str, new: str,
                        batch: VerifyBatch) -> tuple[set[str], set[str]]:
    """What planting ``old`` -> ``new`` in ``method`` adds to P1's differences (the gate's question: a known
    finding of the release, F5 on 0.5.18/0.5.19, stays out of it): on ``batch``'s target-worker twin (one count for
    both), and on ``batch``, a DSpark draft worker's."""
    target = batch.replace(speculative_num_draft_tokens=None)
    before = {b: p1_differences(sglang, b) for b in (target, batch)}
    plant(monkeypatch, upstream, method, old, new)
    return (p1_differences(sglang, target) - before[target]), (p1_differences(sglang, batch) - before[batch])


def test_the_configured_count_read_for_the_verify_width_fails_p1_on_a_draft_worker(sglang, upstream,
                                                                                   monkeypatch) -> None:
    """Upstream #31026's bug planted in upstream's own verify extension (``seq_lens + speculative_num_draft_tokens``):
    the target worker's batch, one count for both, gains no difference; the draft worker's every eager variant is
    red, every request's positions one past its block."""
    target, draft = _new_p1_differences(sglang, upstream, monkeypatch, "init_forward_metadata_target_verify_old",
                                        "seq_lens = seq_lens + self.target_verify_num_draft_tokens",
                                        "seq_lens = seq_lens + self.speculative_num_draft_tokens",
                                        DSPARK_DRAFT.replace(graph=None))
    assert not target, target
    assert "seq_lens" in {d.split("|")[1] for d in draft}, draft


def test_the_configured_count_read_by_the_raw_verify_upgrade_fails_p1_on_the_draft_runners_graph(
        sglang, upstream, monkeypatch) -> None:
    """The same bug in DSpark's raw verify upgrade (0.5.20+: the uniform graph build deferred into the graph): on the
    graph path every request verifies gamma + 1 tokens, and P1 names both counts (``p1.active_width``)."""
    upgrade, calls = upstream.backend_cls.make_forward_metadata_from_raw_verify, []
    with monkeypatch.context() as watch:
        watch.setattr(upstream.backend_cls, "make_forward_metadata_from_raw_verify",
                      lambda self, raw: calls.append(raw) or upgrade(self, raw))
        sglang.build(DSPARK_DRAFT, next(v for v in sglang.variants_supported(DSPARK_DRAFT) if v.path == "graph"))
    if not calls:
        pytest.skip(f"SGLang {upstream.release} builds DSpark's uniform graph out-graph (raw verify: 0.5.20+)")
    target, draft = _new_p1_differences(sglang, upstream, monkeypatch, "make_forward_metadata_from_raw_verify",
                                        "bs, num_draft_tokens = len(seq_lens), self.target_verify_num_draft_tokens",
                                        "bs, num_draft_tokens = len(seq_lens), self.speculative_num_draft_tokens",
                                        DSPARK_DRAFT)
    assert not target, target
    assert any(d.startswith("graph/") and d.endswith("|extend_seq_lens") for d in draft), draft
    with pytest.raises(PropertyFailure) as info:
        check_p1_reference(sglang, DSPARK_DRAFT)
    assert info.value.check == "p1.active_width" and info.value.variant.startswith("graph/"), info.value


# -- replay files: each finding shows exactly where docs/FINDINGS.md says ----------------------------------

def _as_failure(check):
    """A check whose builder raising is the property's failure, as a run reports it (``builder raised ...``)."""
    from metadata_builders.families.dsv4.properties.spec import raised_failure

    def run(builder, batch):
        try:
            return check(builder, batch)
        except PropertyFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - upstream raising is what the replay file pins
            raise raised_failure(check.__name__, exc) from exc

    return run


_CHECKS = {"P1": check_p1_reference, "P5": check_p5_graph_vs_eager, "P6": check_p6_fault_model,
           "P7": check_p7_capture_safety, "P8": _as_failure(check_p8_inputs_untouched), "P10": check_p10_kv_state}


@pytest.mark.parametrize("name", sorted(p.name for p in REGRESSIONS.glob("*.json")))
def test_replay_files_reproduce_on_the_releases_they_name(sglang, upstream, name: str) -> None:
    """A replay file fails its property on its field on the releases in ``meta.fails_on``, and holds elsewhere."""
    batch, meta = _replay(name)
    check = _CHECKS[meta["check"]]
    if meta.get("kernels") == "torch":
        pytest.skip("run by test_f1_mirrorless_verify_asserts_on_torch_fallback")
    judged = get_builder(meta["builder"], "cpu") if "builder" in meta else sglang  # a route the file was found on
    if (outside := judged.outside_switches(batch)) is not None:
        pytest.skip(outside)
    known = known_findings(batch, upstream)
    if upstream.release in meta["fails_on"]:
        with pytest.raises(PropertyFailure) as info:
            check(judged, batch)
        # An older finding on the same batch may show first (F5 precedes F6 on 0.5.18/0.5.19).
        assert info.value.field in set(meta["fields"]).union(*known.values()), str(info.value)
    elif not known.keys() - {meta["finding"]}:
        check(judged, batch)


def test_regression_files_explain_themselves() -> None:
    """Every replay file is valid input with the schema, a one-line ``why`` and what it expects."""
    files = sorted(REGRESSIONS.glob("*.json"))
    assert files
    for path in files:
        d = json.loads(path.read_text())
        VerifyBatch.from_dict(d)
        assert d["schema"] == "metadata-builders/verify-batch@1"
        assert d["why"] and "\n" not in d["why"]
        assert {"finding", "check", "fails_on", "fields"} <= d["meta"].keys()


def test_f7_on_the_torch_route_the_expansion_trusts_the_host_count(sglang, upstream, sglang_torch_kernels) -> None:
    """F7, torch route: ExpandPrefillCausally's fallback passes the host's count as output_size; a stale layout
    leaves uninitialised tails (P6, known F7), while the Triton route holds P6 on the same batch."""
    batch, meta = _replay("f7_torch_route_expansion_trusts_host_count.json")
    if upstream.release not in meta["fails_on"]:
        pytest.skip(f"not checked on SGLang {upstream.release} (docs/FINDINGS.md, F7)")
    with pytest.raises(PropertyFailure) as info:
        check_p6_fault_model(sglang_torch_kernels, batch)
    assert info.value.field == "audit.faults" and "expand_prefill_causally" in info.value.message
    assert known_finding(info.value, batch) == "F7"
    check_p6_fault_model(sglang, batch)


def test_f1_mirrorless_verify_asserts_on_torch_fallback(sglang, upstream, sglang_torch_kernels) -> None:
    """F1: without a mirror, upstream's CPU expand_prefill_causally asserts; the triton kernel builds it."""
    if not upstream.capabilities.mirrorless:
        pytest.skip(f"SGLang {upstream.release} has no mirror-less verify")
    batch, _ = _replay("f1_mirrorless_torch_fallback.json")
    with pytest.raises(AssertionError):
        sglang_torch_kernels.build(batch, Variant("eager", "device", "host", "dspark"))
    check_p1_reference(sglang, batch)


def test_torch_kernels_match_reference_with_a_mirror(sglang_torch_kernels, upstream) -> None:
    """Upstream's CPU torch fallbacks agree wherever a host mirror exists."""
    batch = EXAMPLES["uniform_eagle_batch_of_three"]
    reference = get_builder("reference")
    for gate in upstream.capabilities.gates(batch.is_dspark):
        variant = Variant("eager", "host", "host", gate)
        md = sglang_torch_kernels.build(batch, variant)
        assert known_findings(batch, upstream) or md.fields == {
            k: v for k, v in reference.build(batch, variant).fields.items() if k in md.fields
        }


def _draft_extend_backend(sglang, upstream, monkeypatch) -> tuple:
    """Upstream's backend double as a target-verify build of slots 1, 2 (prefixes 7, 3, three drafts) made it,
    with that build's inputs and batch -- to call its ``init_forward_metadata_draft_extend`` (skips where the
    release has none taking ``num_tokens_per_req``)."""
    from metadata_builders.families.dsv4.sglang import double

    entry = getattr(upstream.backend_cls, "init_forward_metadata_draft_extend", None)
    if entry is None or "num_tokens_per_req" not in inspect.signature(entry).parameters:
        pytest.skip(f"SGLang {upstream.release} has no init_forward_metadata_draft_extend(num_tokens_per_req=)")
    made: list = []
    make = double.make_backend
    monkeypatch.setattr("metadata_builders.families.dsv4.sglang.builder.make_backend",
                        lambda *a: made.append((a[1], make(*a))) or made[-1][1])
    batch = make_batch([7, 3], [1, 2], 3).replace(geometry=Geometry())
    sglang.build(batch, next(v for v in sglang.variants_supported(batch) if v.mirror == "host" and v.path == "eager"))
    inputs, backend = made[-1]
    return inputs, backend, batch


def test_the_draft_extend_pad_length_lead_upstreams_graph_pad_rows_get_nonpositive_swa_lengths(sglang, upstream,
                                                                                                 monkeypatch) -> None:
    """Issue 26's lead, answered on the installed release (docs/FINDINGS.md "L2"): a draft-extend graph bucket's
    pad rows (``seq_len`` 1, the runner's fill value) extended by ``n = 3`` tokens get ``seq_lens_casual = 2 - n + j``
    = -1, 0, 1, and ``swa_topk_lengths = clamp(max=window)`` passes the -1 through (no floor).  Their index rows are
    all -1 and every HIP decode kernel compares the length as a signed int, so nothing is read; the CUDA backend
    clamps it to 1 only for trtllm-gen.  Pinned here so a release that changes either side is seen."""
    from metadata_builders.families.dsv4.sglang import double

    inputs, backend, _ = _draft_extend_backend(sglang, upstream, monkeypatch)
    with double.upstream_patched(upstream, inputs):
        md = backend.init_forward_metadata_draft_extend(
            max_seq_len=256, req_pool_indices=torch.tensor([1, 2, 0, 0]), seq_lens=torch.tensor([10, 6, 1, 1]),
            seq_lens_cpu=[10, 6, 1, 1], num_tokens_per_req=3, out_cache_loc=None, use_prefill_cuda_graph=True)
    core = md.core_attn_metadata
    assert core.swa_topk_lengths.tolist() == [8, 9, 10, 4, 5, 6, -1, 0, 1, -1, 0, 1]
    assert core.raw_out_loc[6:].tolist() == [0] * 6  # pad tokens store at the reserved location 0
    for t in (6, 7, 9, 10):  # a non-positive length: its index row reads nothing either
        assert set(core.swa_page_indices[t].tolist()) == {-1}


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_the_draft_extend_reference_is_upstreams_draft_extend(sglang, upstream, monkeypatch, graph) -> None:
    """Mode ``draft_extend``'s reference (``reference/draft_extend.py``) field for field against upstream's own
    ``init_forward_metadata_draft_extend`` on the installed release, eager and with the graph runner's pad rows
    (``seq_len`` 1, slot 0, ``out_cache_loc`` 0): the harness's rows, upstream's numbers."""
    from metadata_builders.families.dsv4.reference.draft_extend import FIELDS, draft_extend_fields
    from metadata_builders.families.dsv4.sglang import double

    inputs, backend, verify = _draft_extend_backend(sglang, upstream, monkeypatch)
    batch = verify.replace(mode="draft_extend", graph=GraphTier(4, 12) if graph else None)
    n, pad = 3, 2 if graph else 0
    seq = [s + n for s in batch.seq_lens] + [1] * pad
    out = list(batch.out_cache_loc) + [0] * (n * pad)
    with double.upstream_patched(upstream, inputs):
        md = backend.init_forward_metadata_draft_extend(
            max_seq_len=256, req_pool_indices=torch.tensor(list(batch.req_pool_indices) + [0] * pad),
            seq_lens=torch.tensor(seq), seq_lens_cpu=seq, num_tokens_per_req=n, out_cache_loc=torch.tensor(out),
            use_prefill_cuda_graph=graph)
    core = md.core_attn_metadata
    want = draft_extend_fields(batch, graph=graph)
    for name in (n for n in FIELDS if n not in ("seq_lens", "extend_seq_lens")):  # stage arguments: the next test
        holder = core.unified if name.startswith("pf_") else core
        got = getattr(holder, name, None)
        if got is None and name == "req_pool_indices_repeated":
            continue  # upstream keeps it local to the build: not a field of its metadata
        assert got is not None, name
        assert got.tolist() == want[name], (name, got.tolist()[:12], want[name][:12])


@pytest.mark.parametrize("route", ["triton", "torch"])
def test_the_adapter_builds_draft_extend_through_upstreams_entry_and_graph_phases(sglang, route) -> None:
    """Mode ``draft_extend`` on the installed release: upstream's ``init_forward_metadata_draft_extend`` eager, and
    its ``init_forward_metadata_out_graph`` with a ``DRAFT_EXTEND_V2`` forward batch on the graph path (the whole
    build out-graph, copied into the bucket's metadata), judged by every property that judges the mode -- all held,
    no field unobserved."""
    from metadata_builders.families.dsv4.builders import AuditedBuilder
    from metadata_builders.families.dsv4.properties import PROPERTIES
    from metadata_builders.families.dsv4.properties.spec import verdict
    from metadata_builders.families.dsv4.sglang import SGLangBuilder, torch_route

    # every release 0.5.18+ has the entry; P9 needs a factory (a fresh twin)
    builder = sglang if route == "triton" else AuditedBuilder(SGLangBuilder("cpu", kernels="torch"), "cpu",
                                                              "sglang[torch]", factory=torch_route)
    batch = make_batch([7, 3], [1, 2], 3, graph=GraphTier(4, 12)).replace(mode="draft_extend", geometry=Geometry())
    from metadata_builders.families.dsv4.runs.findings import known_finding

    one_page = builder.inner.upstream.capabilities.draft_extend_one_page
    for spec in PROPERTIES:
        result = verdict(spec, builder, batch)
        if spec.name == "P1" and not one_page:  # 0.5.18-0.5.21: the placeholder page table is max_seq_len wide
            assert result.status == "failed" and known_finding(result.failure, batch) == "F21", result
        elif spec.name in ("P1", "P5", "P7", "P8", "P9"):
            assert result.status == "held", result
        else:
            assert result.status == "not applicable", result
    md = builder.build(batch, Variant("graph"))
    assert md.not_observable == () and md.fields["swa_topk_lengths"][6:] == [-1, 0, 1, -1, 0, 1]
