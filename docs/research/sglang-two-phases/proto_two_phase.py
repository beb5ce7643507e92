"""Prototype: upstream's CUDA/HIP-graph two phases for target verify, modelled on CPU (SGLang 0.5.23).

Run from the repository root, with SGLang installed (README "SGLang"):
    .venv-sglang/bin/python docs/research/sglang-two-phases/proto_two_phase.py [case name filter]
Output of 2026-12-01 on 0.5.23: proto_output.txt beside this file (2-3 minutes, one process).

Per case: capture batch A (init_cuda_graph_state, out_graph(in_capture=True), in_graph recorded
under GraphRecorder inside a DeviceAudit), then refill the static buffers with batch B of the same
tier (refill_inputs, = the runner's fill_from), run out_graph (replay mode, Python) and
RecordedGraph.replay(), and compare the captured metadata (read via reading.read) with a fresh
direct build of batch B (SGLangBuilder.build on the same graph variant).
Not part of the package and not run by CI: a research sketch for issue 18 (the adapter's two
phases) that also shows finding F13 (docs/FINDINGS.md).
"""

from __future__ import annotations

import os
import sys
import traceback
from types import SimpleNamespace

_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path[:0] = [_ROOT, os.path.join(_ROOT, "tests")]

import torch
from _examples import EXAMPLES, make_batch

import metadata_builders.families.dsv4.sglang  # noqa: F401  (TRITON_INTERPRET=1 before triton)
from metadata_builders import GraphTier
from metadata_builders.audit import DeviceAudit, device_handle
from metadata_builders.families.dsv4.builders import _mark_inputs
from metadata_builders.families.dsv4.inputs import make_inputs, refill_inputs
from metadata_builders.families.dsv4.sglang.builder import SGLangBuilder
from metadata_builders.families.dsv4.sglang.double import make_backend, upstream_patched
from metadata_builders.families.dsv4.sglang.entry import PATCH_LOCK as _PATCH_LOCK
from metadata_builders.families.dsv4.sglang.reading import read
from metadata_builders.families.dsv4.sglang.releases import load_upstream
from metadata_builders.families.dsv4.sglang.routing import kernel_routes
from metadata_builders.families.dsv4.variants import Variant
from metadata_builders.harness.graph_recorder import GraphRecorder

DEVICE = "cpu"  # what make_inputs gets (the harness's device string)
HANDLE = device_handle(DEVICE)  # what the builder/backend gets (names device memory on CPU)


# -- the doubles ---------------------------------------------------------------------------------


def graph_attributes(backend, inputs) -> None:
    """What out_graph/in_graph/init_cuda_graph_state read beyond make_backend's attributes (0.5.23)."""
    backend.needs_cpu_seq_lens = inputs.seq_lens_cpu is not None  # out_graph in_capture (0.5.22+)
    backend.max_context_len = inputs.req_to_token.shape[1]  # init_cuda_graph_state -> maybe_create_verify_mask
    backend.enable_deepseek_v4_fp4_indexer = False  # _fp4_workspaces_enabled short-circuits on it
    backend._fp4_c4_rowgroup_columns = None  # _fp4_c4_rowgroup_rows
    backend.topk = 0  # only read for decode buckets
    backend.speculative_num_steps = 0
    backend.speculative_step_id = 0


def host_layout(up, inputs):
    """The live (unpadded) RaggedVerifyLayout riding spec_info; out_graph pads it itself (cap=None)."""
    if inputs.verify_lens is None:
        return None
    qo = up.ragged_kernels_module.BuildQoIndptr.execute(verify_lens=inputs.verify_lens)
    total = sum(inputs.verify_lens_cpu)
    return up.layout_cls(
        verify_lens=inputs.verify_lens,
        graph_num_tokens=inputs.graph.graph_num_tokens,
        extend_start_loc=qo.extend_start_loc,
        qo_indptr_device=qo.qo_indptr,
        verify_lens_cpu=list(inputs.verify_lens_cpu),
        total_verify_tokens=total,
    )


def forward_batch(up, inputs, positions):
    """ForwardBatch double: the fields of build_replay_fb_view that out_graph/in_graph read."""
    mode = up.backend_module.ForwardMode.TARGET_VERIFY
    seq_lens_cpu = None if inputs.seq_lens_cpu is None else torch.tensor(inputs.seq_lens_cpu, dtype=torch.int64)
    return SimpleNamespace(
        forward_mode=mode,
        actual_forward_mode=mode,
        batch_size=inputs.rows,
        req_pool_indices=inputs.req_pool_indices,  # static buffer [:bs]
        seq_lens=inputs.seq_lens,  # static buffer [:bs]
        seq_lens_cpu=seq_lens_cpu,  # pinned host buffer [:bs] (None when the batch has no mirror)
        positions=positions,  # static buffer [:num_tokens]; out_graph(in_capture) reads numel()
        out_cache_loc=inputs.out_cache_loc,  # live (replay) / static (capture)
        spec_info=SimpleNamespace(ragged_verify_layout=host_layout(up, inputs)),
    )


# -- the two phases ------------------------------------------------------------------------------


def fields_of(md, seen, geometry):
    return read(md, seen, geometry).fields


def capture(up, inputs, is_dspark):
    """init_cuda_graph_state + out_graph(in_capture=True) + recorded in_graph, like capture_graph."""
    seen: dict = {}
    with DeviceAudit() as audit:
        positions = torch.zeros(inputs.padded_num_tokens, dtype=torch.int64, device=HANDLE)  # runner static buffer
        backend = make_backend(up, inputs, HANDLE, is_dspark, seen)
        graph_attributes(backend, inputs)
        backend.init_cuda_graph_state(max_bs=inputs.rows, max_num_tokens=inputs.padded_num_tokens)
        fb = forward_batch(up, inputs, positions)
        known = [backend.cuda_graph_metadata_of_bucket_and_bs, inputs.tensors(), positions]
        backend.init_forward_metadata_out_graph(fb, in_capture=True)
        stored = backend.forward_metadata
        known.append(stored)
        recorder = GraphRecorder(audit, known)
        with recorder:
            backend.init_forward_metadata_in_graph(fb)
            md = backend.forward_metadata  # the DSV4Metadata the captured kernels read by address
            fields = fields_of(md, seen, inputs.geometry)
        graph = recorder.graph(fields)
    return SimpleNamespace(backend=backend, seen=seen, graph=graph, md=md, stored=stored, positions=positions,
                           capture_syncs=list(audit.host_syncs))


def replay(up, cap, inputs):
    """out_graph (replay mode) then RecordedGraph.replay(); returns the captured metadata's fields."""
    with DeviceAudit() as audit:
        fb = forward_batch(up, inputs, cap.positions)
        cap.backend.init_forward_metadata_out_graph(fb)
        cap.graph.replay()
    # EAGLE: backend.forward_metadata is the captured DSV4Metadata after copy_; DSpark uniform: it is the
    # captured raw metadata (the replayed in-graph work refreshed cap.md's tensors in place).
    return fields_of(cap.md, cap.seen, inputs.geometry), list(audit.host_syncs)


def compare(got, want):
    diffs = []
    for name in sorted(set(got) | set(want)):
        g, w = got.get(name), want.get(name)
        if g is None or w is None:
            diffs.append(f"{name}: only in {'replay' if w is None else 'direct'}")
            continue
        g, w = g.detach().cpu(), w.detach().cpu()
        if g.shape != w.shape:
            diffs.append(f"{name}: shape {tuple(g.shape)} vs direct {tuple(w.shape)}")
        elif not torch.equal(g.to(torch.int64), w.to(torch.int64)):
            diffs.append(f"{name}: replay {g.flatten().tolist()[:24]} vs direct {w.flatten().tolist()[:24]}")
    return diffs


def run_case(name, batch_a, batch_b, variant):
    up = load_upstream(DEVICE)
    builder = SGLangBuilder(HANDLE)
    print(f"\n=== {name}: {variant.label}  A={batch_a.seq_lens}/{batch_a.verify_lens} "
          f"B={batch_b.seq_lens}/{batch_b.verify_lens} tier={batch_a.graph} dspark={batch_a.is_dspark}")
    inputs = make_inputs(batch_a, variant, DEVICE)
    _mark_inputs(inputs)
    is_dspark = inputs.is_dspark  # gate=dspark: the public entry point, as out_graph calls it
    try:
        with _PATCH_LOCK, upstream_patched(up, inputs), kernel_routes(up, inputs, "triton"):
            cap = capture(up, inputs, is_dspark)
            kinds = type(cap.stored).__name__
            print(f"  captured: stored {kinds}; {len(cap.graph.calls)} recorded calls "
                  f"({sum(c.rerun for c in cap.graph.calls)} rerun); host reads {len(cap.graph.host_reads)}; "
                  f"capture-phase syncs {len(cap.capture_syncs)}")
            for c in cap.graph.calls[:6]:
                print(f"    rec: {c.name} in {c.stage}")
            for h in cap.graph.host_reads[:5]:
                print(f"    P7: {h}")
            # capture-vs-direct(A) first: the capture itself
            want_a = builder.build(make_inputs(batch_a, variant, DEVICE)).fields
            d = compare({k: v.clone() for k, v in cap.graph.fields.items()}, want_a)
            print(f"  capture(A) vs direct(A): {'equal' if not d else d}")
            refill_inputs(inputs, batch_b)
            _mark_inputs(inputs)
            got, syncs = replay(up, cap, inputs)
            print(f"  replay-phase syncs: {len(syncs)} ({', '.join(sorted({s.kind for s in syncs}))})")
        want = builder.build(make_inputs(batch_b, variant, DEVICE)).fields
        d = compare(got, want)
        print(f"  replay(B) vs direct(B): {'EQUAL (' + str(len(want)) + ' fields)' if not d else ''}")
        for line in d:
            print(f"    DIFF {line}")
        return not d
    except Exception:
        print("  BLOCKED:")
        traceback.print_exc(file=sys.stdout)
        return False


def main() -> None:
    g = Variant(path="graph", mirror="host")
    cases = [
        ("uniform EAGLE", EXAMPLES["uniform_eagle_batch_of_three"],
         make_batch([4, 6], [3, 2], 2, graph=GraphTier(4, 8)), g),
        ("uniform DSpark (raw verify metadata)", make_batch([5, 3, 7], [2, 1, 3], 2, graph=GraphTier(4, 8),
                                                           is_dspark=True),
         make_batch([4, 6], [3, 2], 2, graph=GraphTier(4, 8), is_dspark=True), g),
        ("ragged EAGLE, uncapped tier", EXAMPLES["ragged_tier_slack_spread_over_pad_rows"],
         make_batch([4, 6, 2], [3, 1, 2], 3, verify_lens=[1, 3, 2], graph=GraphTier(5, 11)), g),
        ("ragged DSpark, capped tier", EXAMPLES["capped_tier_uncovered_tail"],
         make_batch([6, 2], [1, 2], 3, verify_lens=[1, 2], num_slots=3, graph=GraphTier(2, 6, cap=2),
                    is_dspark=True), g),
    ]
    only = sys.argv[1:]
    results = {}
    for name, a, b, v in cases:
        if only and not any(o in name for o in only):
            continue
        results[name] = run_case(name, a, b, v)
    print("\nSUMMARY:", results)


if __name__ == "__main__":
    main()
