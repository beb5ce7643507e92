"""GPU-only checks, in one prepared script: ``python ci/gpu_checks.py``.

1. P7 under ``torch.cuda.set_sync_debug_mode("error")``: every variant whose sync
   contract is empty builds on the GPU without a single synchronising call
   (AuditedBuilder turns the mode on for exactly those builds).
2. Graph capture: the sync-free graph-path stages (uniform, device-built extend
   lengths, a gate that passes ``output_size``) are captured in a CUDA/HIP graph,
   a second batch of the same tier is copied into the static inputs, the graph is
   replayed, and the outputs must equal a fresh build of the second batch.

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
    from metadata_builders.hip import target_verify
    from metadata_builders.inputs import make_inputs, refill_inputs
    from metadata_builders.properties import check_p1_reference, check_p7_capture_safety
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
