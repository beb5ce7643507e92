"""The installed SGLang's target-verify builders, reached through the adapter, agree with the reference
(docs/SGLANG.md): the named batches, each variant kind, how upstream's pieces are found and run, drawn batches, the
two kernel routes, the device handle and upstream's pinned staging.

Skipped unless SGLang is importable (``ci/install-sglang.sh --version X``).  Every supported release (0.5.18 ..
0.5.23) runs the same tests.  Planted bugs, the replay files of docs/FINDINGS.md and draft extend:
``test_sglang_findings.py``.
"""

from __future__ import annotations

import pickle
from collections import Counter
from pathlib import Path

import pytest
import torch
from _examples import EXAMPLES, make_batch
from _sglang_support import known_findings
from hypothesis import given, settings

from metadata_builders import Geometry, Variant, VerifyBatch, get_builder, variants_for
from metadata_builders.errors import InvalidVariant, PropertyFailure
from metadata_builders.families.dsv4.metadata import first_difference
from metadata_builders.families.dsv4.properties import (
    check_p1_reference,
    check_p2_mirror,
    check_p3_sync_free,
    check_p4_gate,
    check_p7_capture_safety,
    check_p8_inputs_untouched,
    contract_role,
)
from metadata_builders.families.dsv4.reference import CONTRACT_STAGES, expected_host_syncs
from metadata_builders.families.dsv4.runs.findings import known_finding
from strategies import geometries, verify_batches

pytestmark = pytest.mark.sglang


# -- the named batches -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_named_batches_match_reference(sglang, upstream, name: str) -> None:
    """Every variant of each named batch equals the reference, or fails only through a known finding."""
    batch = EXAMPLES[name]
    known = known_findings(batch, upstream)
    try:
        check_p1_reference(sglang, batch)
    except PropertyFailure as failure:
        allowed = set().union(*known.values()) if known else set()
        assert failure.field in allowed, f"{failure} (known findings on SGLang {upstream.release}: {sorted(known)})"
    else:
        assert "F5" not in known and "F6" not in known, f"{sorted(known)} no longer reproduce on {name}"


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_named_batches_keep_the_sync_contract(sglang, name: str) -> None:
    """Upstream syncs exactly where the contract says, and nowhere on sync-free paths.

    A capped tier's recorded replay pads without the cap (F13), which moves its token-map sync.
    """
    batch = EXAMPLES[name]
    try:
        check_p7_capture_safety(sglang, batch)
    except PropertyFailure as failure:
        assert known_finding(failure, batch) == "F13", str(failure)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_named_batches_leave_inputs_untouched(sglang, name: str) -> None:
    """No upstream build writes into the device tensors or host lists the caller handed it."""
    check_p8_inputs_untouched(sglang, EXAMPLES[name])


@pytest.mark.parametrize("draft", [1, 3])
def test_upstream_geometry(sglang, upstream, draft: int) -> None:
    """Upstream's own constants (page 256, window 128, align 64) agree across a page edge."""
    batch = make_batch([5, 254], [2, 1], draft, num_slots=3, width=600).replace(geometry=Geometry())
    if not upstream.capabilities.exact_token_map:
        with pytest.raises(PropertyFailure) as info:
            check_p1_reference(sglang, batch)
        assert info.value.field in known_findings(batch, upstream)["F5"]
        return
    check_p1_reference(sglang, batch)


# -- each variant kind ---------------------------------------------------------------------------

UNIFORM = EXAMPLES["uniform_eagle_batch_of_three"].replace(is_dspark=True)
RAGGED = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]


def _contract(md) -> Counter:
    return Counter((CONTRACT_STAGES.get(contract_role(s) or "", s.stage), s.kind) for s in md.audit.host_syncs)


KINDS = {"uniform_dspark": UNIFORM, "ragged_eagle": RAGGED}


@pytest.mark.parametrize(
    ("kind", "variant"),
    [(kind, v) for kind, batch in KINDS.items() for v in variants_for(batch)],
    ids=[f"{kind}:{v.label}" for kind, batch in KINDS.items() for v in variants_for(batch)],
)
def test_each_variant_kind_reaches_upstream(sglang, upstream, kind: str, variant: Variant) -> None:
    """Each knob value the release expresses builds the reference's fields with the contracted syncs."""
    batch = KINDS[kind]
    if variant not in sglang.variants_supported(batch):
        with pytest.raises(InvalidVariant):
            sglang.build(batch, variant)
        return
    md = sglang.build(batch, variant)
    want = get_builder("reference").build(batch, variant)
    if not known_findings(batch, upstream):
        assert first_difference(want.fields, md.fields) is None
        assert md.decision == want.decision
    assert md.decision.used_output_size == want.decision.used_output_size
    assert _contract(md) == Counter((s.stage, s.kind) for s in expected_host_syncs(batch, variant))
    assert md.audit.inputs_written == []


def _native(upstream, batch: VerifyBatch) -> Variant:
    """The eager host-mirror variant under the release's first expressible gate."""
    return Variant(gate=upstream.capabilities.gates(batch.is_dspark)[0])


def test_uniform_extend_start_loc_is_not_observable(sglang, upstream) -> None:
    """Upstream passes no ``extend_start_loc`` for a uniform batch; the adapter does not derive one."""
    batch = EXAMPLES["single_request"]
    md = sglang.build(batch, _native(upstream, batch))
    assert md.not_observable == ("extend_start_loc",) and "extend_start_loc" not in md.fields
    ragged = sglang.build(RAGGED, _native(upstream, RAGGED))
    assert ragged.not_observable == () and ragged.fields["extend_start_loc"] == [0, 3, 4]


def test_mirror_tolist_is_the_only_read_of_seq_lens(sglang, upstream) -> None:
    """``mirror=tolist`` reads ``seq_lens`` back once (the adapter as the pre-fix caller); ``host`` never."""
    batch = EXAMPLES["single_request"]
    gate = upstream.capabilities.gates(batch.is_dspark)[0]
    reads = {m: [s for s in sglang.build(batch, Variant("eager", m, "host", gate)).audit.host_syncs
                 if "seq_lens" in s.reads and contract_role(s) != "token_map"] for m in ("host", "tolist")}
    assert reads["host"] == []
    assert [(s.op, s.kind, contract_role(s)) for s in reads["tolist"]] == [("Tensor.tolist", "copy", "mirror")]


@pytest.mark.parametrize(
    ("release", "eagle", "dspark", "mirrorless"),
    [
        ("0.5.18", ("always_sync",), ("always_sync",), False),
        ("0.5.19", ("always_sync",), ("always_sync",), False),
        ("0.5.20", ("ungated",), ("dspark", "ungated"), False),
        ("0.5.21", ("dspark", "ungated", "always_sync"), ("dspark", "ungated", "always_sync"), False),
        ("0.5.22", ("dspark", "ungated", "always_sync"), ("dspark", "ungated", "always_sync"), True),
        ("0.5.23", ("dspark", "ungated", "always_sync"), ("dspark", "ungated", "always_sync"), True),
        ("0.5.24.dev0", ("dspark", "ungated", "always_sync"), ("dspark", "ungated", "always_sync"), True),
    ],
)
def test_capabilities_per_release(release: str, eagle: tuple, dspark: tuple, mirrorless: bool) -> None:
    """0.5.18/0.5.19 always sync, 0.5.20 is ungated, the gate is 0.5.21+, mirror-less verify 0.5.22+."""
    from metadata_builders.families.dsv4.sglang import Capabilities

    caps = Capabilities.of(release)
    assert (caps.gates(False), caps.gates(True), caps.mirrorless) == (eagle, dspark, mirrorless)


def test_variants_supported_follow_the_installed_release(sglang, upstream) -> None:
    """``variants_supported`` is ``variants_for`` less the gates and mirrors the release lacks."""
    caps = upstream.capabilities
    for batch in (UNIFORM, UNIFORM.replace(is_dspark=False), RAGGED):
        want = [v for v in variants_for(batch) if v.gate in caps.gates(batch.is_dspark)
                and (v.mirror != "device" or caps.mirrorless)]
        assert sglang.variants_supported(batch) == want


# -- how upstream's pieces are found and run ---------------------------------------------------------


def test_pieces_are_found_where_the_backend_imports_them(upstream) -> None:
    """The gate, runtime and kernels modules are the ones the backend's functions import at call time."""
    from metadata_builders.families.dsv4.sglang.finding import imports_in

    cls = upstream.backend_cls
    assert upstream.gate_module.__name__ in imports_in(cls._attach_unified_kv_prefill_meta)
    assert upstream.runtime_module.__name__ in imports_in(cls._attach_unified_kv_decode_streams)
    assert upstream.expand_module.__name__ in imports_in(cls.init_forward_metadata_prefill)
    assert upstream.release in upstream.describe()


def test_a_missing_piece_names_itself_the_release_and_every_place_looked(upstream) -> None:
    """``UpstreamNotFound`` carries the piece, the release and each candidate, and survives pickling."""
    from metadata_builders.families.dsv4.sglang import UpstreamNotFound
    from metadata_builders.families.dsv4.sglang.finding import find_module

    with pytest.raises(UpstreamNotFound) as info:
        find_module("frobnicate (a piece no release has)", upstream.release,
                     ["sglang.no_such_module", upstream.gate_module.__name__],
                     lambda m: hasattr(m, "frobnicate"), "def frobnicate_nowhere(")
    err = info.value
    assert isinstance(err, ImportError) and err.release == upstream.release
    assert any("sglang.no_such_module" in place for place in err.looked)
    assert any(upstream.gate_module.__name__ in place for place in err.looked)
    assert pickle.loads(pickle.dumps(err)).looked == err.looked


def _launched(monkeypatch) -> Counter:
    """Kernel name -> interpreted runs from now on (earlier launches forgotten: a remembered one does not run)."""
    from triton.runtime.interpreter import InterpretedFunction

    from metadata_builders.audit import launch_memo

    launch_memo.forget()
    launches: Counter = Counter()
    run = InterpretedFunction.run

    def counting(self, *args, **kwargs):
        launches[self.fn.__name__] += 1
        return run(self, *args, **kwargs)

    monkeypatch.setattr(InterpretedFunction, "run", counting)
    return launches


def _refuse(*_args, **_kwargs):
    raise AssertionError("a CPU torch fallback ran instead of the triton kernel a GPU runs")


def test_kernels_run_as_on_a_gpu(sglang, upstream, monkeypatch) -> None:
    """Every dispatched kernel takes its triton implementation; no CPU torch fallback runs."""
    kernels = upstream.ragged_kernels_module
    for cls in (kernels.PaddedToBucket, kernels.BuildQoIndptr, upstream.expand_module.ExpandPrefillCausally):
        monkeypatch.setattr(cls, "torch", classmethod(_refuse))
    launches = _launched(monkeypatch)
    for batch in (RAGGED, UNIFORM):
        for variant in sglang.variants_supported(batch):
            sglang.build(batch, variant)
    assert launches["_padded_to_bucket_kernel"] and launches["_qo_indptr_kernel"]
    assert launches["_expand_prefill_causally_kernel"]
    # Upstream's own decode index streams run (their outputs are not compared).
    assert launches["_v4_paged_decode_indices_kernel"]


def test_decode_streams_are_stubbed_only_where_their_kernel_cannot_run(sglang, monkeypatch) -> None:
    """``build_decode_streams`` runs unless ``swa_window > unified_swa_window`` would overrun its buffers."""
    launches = _launched(monkeypatch)
    wide = EXAMPLES["single_request"]
    narrow = wide.replace(geometry=Geometry(page_size=4, swa_window=4, ring_size=6, unified_swa_window=2,
                                            page_index_align=8))
    variant = _native(sglang.inner.upstream, wide)
    sglang.build(narrow, variant)
    assert launches["_v4_paged_decode_indices_kernel"] == 0
    sglang.build(wide, variant)
    assert launches["_v4_paged_decode_indices_kernel"] == 1


# -- drawn batches ----------------------------------------------------------------------------------


@settings(max_examples=8, deadline=None, derandomize=True)
@given(geometries(ring_size=6).flatmap(lambda geo: verify_batches(geometry=geo, graph=False)))
def test_eager_batches_match_reference(sglang, upstream, batch: VerifyBatch) -> None:
    """Drawn eager batches: reference, mirror, sync-free map, gate table and sync contract."""
    checks = [check_p2_mirror, check_p3_sync_free, check_p4_gate, check_p7_capture_safety]
    if not known_findings(batch, upstream):
        checks.insert(0, check_p1_reference)
    for check in checks:
        if check is check_p2_mirror and batch.is_ragged:
            continue
        check(sglang, batch)


# -- the two kernel routes (metadata_builders/families/dsv4/builders/registry.py) ------------------------------


def test_sglang_stands_for_both_kernel_routes_each_a_builder_get_builder_resolves(upstream) -> None:
    """``--builder sglang`` is the triton route then the torch route (and the gate's ``gasm`` route, which ``check``
    names and does not run); each route's name resolves on its own."""
    from metadata_builders.families.dsv4.builders import routes_of

    triton, torch_, gasm = routes_of("sglang")
    assert (gasm.label, gasm.primary, gasm.gate_only) == ("gasm", False, True)
    assert (triton.label, triton.builder, triton.primary) == ("triton", "sglang", True)
    assert (torch_.label, torch_.primary) == ("torch", False)
    built = get_builder(torch_.builder, "cpu")
    assert (built.inner.kernels, built.inner.upstream) == ("torch", upstream)
    assert routes_of("hip") == routes_of("hip")[:1] and routes_of("hip")[0].primary


def test_the_torch_route_runs_upstreams_fallbacks_and_no_routed_kernel(sglang_torch_kernels, upstream,
                                                                      monkeypatch) -> None:
    """On the torch route the three dispatched kernels take upstream's torch fallbacks, and agree with the reference."""
    launches = _launched(monkeypatch)
    reference = get_builder("reference")
    for batch in (RAGGED, UNIFORM):
        for variant in sglang_torch_kernels.variants_supported(batch):
            md = sglang_torch_kernels.build(batch, variant)
            if not known_findings(batch, upstream):
                assert first_difference(reference.build(batch, variant).fields, md.fields) is None, variant.label
    assert not launches["_padded_to_bucket_kernel"] and not launches["_qo_indptr_kernel"]
    assert not launches["_expand_prefill_causally_kernel"]


def test_the_torch_route_leaves_out_mirrorless_uniform_verify(sglang, sglang_torch_kernels) -> None:
    """F1: the torch fallback needs host mirrors, so ``mirror=device`` is not a uniform variant of the torch route."""
    torch_variants = sglang_torch_kernels.variants_supported(UNIFORM)
    assert all(v.mirror != "device" for v in torch_variants)
    assert torch_variants == [v for v in sglang.variants_supported(UNIFORM) if v.mirror != "device"]
    assert sglang_torch_kernels.variants_supported(RAGGED) == sglang.variants_supported(RAGGED)


def test_the_adapter_imports_of_the_audit_only_the_plan_kernels_launch() -> None:
    """Interpreted launches are the audit's business: no module of the adapter imports ``metadata_builders.audit*``,
    but the CPU model of the compress-plan kernel, which stands in for a device kernel: it asks where memory lives,
    runs inside ``kernel_launch``, as an interpreted Triton launch does (``audit_triton``), and reports the fault
    it commits (``kernel_fault``, F9); and it is one launch to whoever watches launches (``audit_triton.watched``:
    the graph recorder).  The builder asks for the launch memo (``audit.launch_memo.want``), which lives in the
    audit room since 0.3; the double asks whether an audit runs (``auditing``), to run upstream's pinned staging."""
    import ast

    import metadata_builders.families.dsv4.sglang as package

    for path in Path(package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if not any(n.startswith("metadata_builders.audit") for n in names):
                continue
            if path.name == "builder.py" and names == ["metadata_builders.audit"]:
                assert [a.name for a in node.names] == ["launch_memo"]
                continue
            if path.name in ("double.py", "compression.py") and names == ["metadata_builders.audit"]:
                # upstream's own pinned staging (_move_to_device, the planner's scratch) runs only where the audit can
                # pin (audit/streams.py)
                assert [a.name for a in node.names] == ["auditing"]
                continue
            if path.name == "plan_decode.py":  # the decode planner's model asks where memory lives, as plan_kernel
                assert names == ["metadata_builders.audit"] and [a.name for a in node.names] == ["is_device_resident"]
                continue
            assert path.name == "plan_kernel.py", path.name
            assert names in (["metadata_builders.audit"], ["metadata_builders.audit.triton"]), names
            allowed = (["is_device_resident", "kernel_fault", "kernel_launch"] if names == ["metadata_builders.audit"]
                       else ["watched"])
            assert sorted(a.name for a in node.names) == allowed


def test_upstream_is_handed_the_harness_device_handle_unchanged(sglang, upstream, monkeypatch) -> None:
    """The double's ``device`` is the very object the builder was given (never ``torch.device(...)`` of it)."""
    from metadata_builders.families.dsv4.sglang import double

    handle = sglang.inner.device
    seen = []
    make = double.make_backend

    def spying(up, inputs, device, is_dspark, stages):
        backend = make(up, inputs, device, is_dspark, stages)
        seen.append((backend.device, backend.cuda_int32_kwargs["device"]))
        return backend

    monkeypatch.setattr("metadata_builders.families.dsv4.sglang.builder.make_backend", spying)
    sglang.build(EXAMPLES["single_request"], _native(upstream, EXAMPLES["single_request"]))
    assert seen and all(a is handle and b is handle for a, b in seen)


def test_upstreams_own_pinned_staging_runs_under_the_stream_model(sglang, upstream, monkeypatch) -> None:
    """``_move_to_device`` is upstream's own under the audit: a fresh pinned tensor per call, copied up
    asynchronously and never written again -- so ATOM #817's race (one staging buffer reused) cannot happen on
    this path, and the stream model finds no stale copy."""
    from metadata_builders.audit import streams

    made: list = []
    keep = streams.pinned
    monkeypatch.setattr(streams, "pinned", lambda t: made.append(t) or keep(t))
    batch = make_batch([7, 3], [1, 2], 2).replace(geometry=Geometry())
    variant = next(v for v in sglang.variants_supported(batch) if v.mirror == "host" and v.path == "eager")
    md = sglang.build(batch, variant)
    assert made and all(t.dtype == torch.int32 for t in made), made  # upstream's torch.tensor(x, int32, pin_memory)
    assert not [f for f in md.audit.faults if f.kind == "stale_async_copy"]
