"""GPU-only checks, in one prepared script: ``python ci/gpu_checks.py``.

1. P7 under ``torch.cuda.set_sync_debug_mode("error")``: every variant whose sync
   contract is empty builds on the GPU without a single synchronising call
   (AuditedBuilder turns the mode on for exactly those builds).
2. Graph capture: the sync-free graph-path stages (uniform, device-built extend
   lengths, a gate that passes ``output_size``) are captured in a CUDA/HIP graph,
   a second batch of the same tier is copied into the static inputs, the graph is
   replayed, and the outputs must equal a fresh build of the second batch.
3. The compress-plan kernel (SGLang's JIT extension ``c_plan.cuh``, when SGLang is
   installed and the extension builds): on drawn plans of both input paths (device
   lengths: kernel0 + kernel_1; host lengths in a pinned buffer: the host loop +
   kernel_1) the real kernel's plans equal the CPU model's
   (``metadata_builders/families/dsv4/sglang/plan_kernel.py``): the same valid entries by
   ragged id and the same row counts; the host path byte for byte.

Exits 0 with a message when no GPU is present (CPU CI), 1 on any failure.
"""

from __future__ import annotations

import sys
import time


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("gpu_checks: no CUDA/ROCm device (torch.cuda.is_available() is False); nothing to do")
        return 0
    from hypothesis import given, settings

    from metadata_builders import Variant, get_builder
    from metadata_builders.families.dsv4.hip import target_verify
    from metadata_builders.families.dsv4.inputs import make_inputs, refill_inputs
    from metadata_builders.families.dsv4.properties import check_p1_reference, check_p7_capture_safety
    from strategies import verify_batches

    name = torch.cuda.get_device_name(0)
    print(f"gpu_checks: {name}, torch {torch.__version__}, hip {torch.version.hip}, cuda {torch.version.cuda}")
    gpu = get_builder("hip", "cuda")
    counts = {"p7_batches": 0, "p1_batches": 0}

    @settings(max_examples=60, deadline=None, derandomize=True, database=None)
    @given(batch=verify_batches(max_requests=6))
    def p1_p7(batch):
        check_p7_capture_safety(gpu, batch)
        counts["p7_batches"] += 1
        check_p1_reference(gpu, batch)
        counts["p1_batches"] += 1

    start = time.perf_counter()
    p1_p7()
    print(f"  P1+P7 under set_sync_debug_mode('error'): {counts['p7_batches']} batches, all variants, "
          f"{time.perf_counter() - start:.1f}s: ok")

    @settings(max_examples=30, deadline=None, derandomize=True, database=None)
    @given(batch=verify_batches(ragged=False, graph=True, max_requests=6))
    def capture_replay(batch):
        variant = Variant("graph", "device", "host", "ungated")
        second = batch.replace(seq_lens=[max(1, s - 1) for s in batch.seq_lens])
        device = torch.device("cuda")
        static = make_inputs(batch, variant, device)
        target_verify(static)  # warm-up: first-call allocations happen outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = target_verify(static)
        refill_inputs(static, second)  # the graph runner's in-place copy into the static buffers
        graph.replay()
        torch.cuda.synchronize()
        fresh = target_verify(make_inputs(second, variant, device))
        for field, tensor in captured.fields.items():
            want = fresh.fields[field]
            assert tensor.shape == want.shape, (field, tensor.shape, want.shape)
            assert torch.equal(tensor.cpu(), want.cpu()), field

    start = time.perf_counter()
    capture_replay()
    print(f"  graph capture + replay of a second batch == fresh build: {time.perf_counter() - start:.1f}s: ok")
    start = time.perf_counter()
    print(f"  compress-plan kernel == its CPU model: {compress_plan_kernel_check()} "
          f"{time.perf_counter() - start:.1f}s")
    return 0


def _plan_case(rng, torch, device):
    """One drawn call of ``plan_prefill``: a batch, a ratio, its ring, tables on ``device``."""
    ratio = rng.choice((4, 128))
    ring = rng.choice((8, 16, 32)) if ratio == 4 else rng.choice((128, 256))
    bs = rng.randint(1, 8)
    uniform = rng.random() < 0.5
    width = rng.choice((8, 12)) if uniform else rng.randint(1, 40)
    extend = [width] * bs if uniform else [rng.randint(1, 40) for _ in range(bs)]
    seq = [e + rng.randint(0, 600) for e in extend]
    slots = rng.sample(range(1, 16), bs)
    table_width = max(seq) + 1
    r2t = torch.randperm(16 * table_width, dtype=torch.int64).to(torch.int32).view(16, table_width)
    f2s = torch.randperm(16 * table_width, dtype=torch.int64)
    num_q = sum(extend) + (rng.randint(0, 8) if uniform else 0)
    sps = ring * rng.choice((1, 2, 16))
    use_req_ring = ratio == 4 and rng.random() < 0.5
    return {"rid": torch.tensor(slots, dtype=torch.int64, device=device), "r2t": r2t.to(device),
            "f2s": f2s.to(device), "seq": seq, "extend": extend, "num_q": num_q, "ratio": ratio, "sps": sps,
            "ring": ring, "use_req_ring": use_req_ring}


def _plan_rows(plan_c, plan_w):
    from metadata_builders.families.dsv4.metadata import canonical_plan
    from metadata_builders.families.dsv4.sglang.reading import (
        decode_compress_plan,
        decode_write_plan,
    )

    c, w = decode_compress_plan(plan_c.cpu()), decode_write_plan(plan_w.cpu())
    return canonical_plan(c), canonical_plan(w), len(c), len(w)


def compress_plan_kernel_check(real=None, device="cuda", cases: int = 200) -> str:
    """The real ``plan_prefill`` against the model on ``cases`` drawn calls; ``real`` defaults to SGLang's."""
    import random

    import torch

    try:
        from metadata_builders.families.dsv4.sglang import load_upstream
        from metadata_builders.families.dsv4.sglang.plan_kernel import PlanModule
    except ImportError as exc:
        return f"skipped (SGLang not importable: {exc})"
    caps = load_upstream(device).capabilities
    model = PlanModule(req_ring=caps.plan_req_ring, max_tokens=caps.plan_max_tokens)
    if real is None:
        try:
            real = load_upstream(device).compress_module._jit_compress_plan_module()
        except Exception as exc:  # noqa: BLE001 - the JIT build needs the CUDA/HIP toolchain and tvm-ffi
            return f"skipped (the extension did not build: {type(exc).__name__}: {exc})"
    rng = random.Random(20261130)
    for i in range(cases):
        case = _plan_case(rng, torch, device)
        for host_input in (False, True):
            for graph in (False, True):
                out = []
                for impl in (real, model):
                    seq = torch.tensor(case["seq"], dtype=torch.int64)
                    ext = torch.tensor(case["extend"], dtype=torch.int64)
                    num_q = sum(case["extend"]) if host_input else case["num_q"]
                    if host_input:
                        pin = torch.empty(num_q * 24, dtype=torch.uint8, pin_memory=torch.cuda.is_available())
                    else:
                        seq, ext, pin = seq.to(device), ext.to(device), torch.empty(0, dtype=torch.uint8)
                    args = [case["rid"], case["r2t"], case["f2s"], seq, ext, pin, num_q, case["ratio"], case["sps"],
                            case["ring"]] + ([case["use_req_ring"]] if caps.plan_req_ring else []) + [graph]
                    plan_c, plan_w = impl.plan_prefill(*args)
                    plan_c, plan_w = torch.from_dlpack(plan_c), torch.from_dlpack(plan_w)
                    out.append((_plan_rows(plan_c, plan_w), plan_c.cpu(), plan_w.cpu()))
                (rows_real, c_real, w_real), (rows_model, c_model, w_model) = out
                where = f"case {i} ({'host' if host_input else 'device'} lengths, graph={graph}): {case}"
                assert rows_real == rows_model, f"plans differ on {where}: {rows_real} != {rows_model}"
                if host_input:
                    assert torch.equal(c_real, c_model) and torch.equal(w_real, w_model), f"bytes differ on {where}"
    return f"{cases} drawn calls x 2 input paths x use_cuda_graph on/off: ok"


if __name__ == "__main__":
    sys.exit(main())
