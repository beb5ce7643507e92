"""Upstream files the CPU gate cannot judge: what stands in for them on CPU, and which job judges them.

Some upstream code on the target-verify path cannot run on a CPU: a JIT CUDA/HIP
extension.  The harness runs a model of it there (the compress-plan kernel,
``c_plan.cuh``, modelled by ``builders/sglang/plan_kernel.py``) or leaves it out
where its output is no field of the model (docs/SGLANG.md, "Stubs, and why").
A pull request that changes such a file changes code the CPU gate never reads:
reverting a real upstream fix inside ``c_plan.cuh`` would be GREEN there.  So
the gate compares the files a change touches with :data:`MODELLED_ON_CPU`, and on
CPU a change to one of them is never GREEN: the verdict names the file and the
job that judges it (the ROCm GPU job, where the real kernel runs).

Worked example: a pull request edits
``python/sglang/kernels/jit/csrc/deepseek_v4/c_plan.cuh`` and
``deepseek_v4_backend_hip_radix.py``.  On CPU every property holds, and the gate
ends ``gate: NOT GREEN ON CPU (c_plan.cuh changed: ...; judged by the ROCm GPU
job)``, exit 1; on the ROCm runner (``--device cuda``) the same gate is GREEN.
"""

from __future__ import annotations

import fnmatch
import subprocess
from dataclasses import dataclass

__all__ = ["MODELLED_ON_CPU", "Unjudged", "changed_files", "unjudged_on_cpu"]


@dataclass(frozen=True, slots=True)
class Unjudged:
    """An upstream file whose code the CPU gate does not run, and what stands in for it."""

    pattern: str
    """A glob over paths in the backend's repository (``*/`` matches any folders)."""
    what: str
    stand_in: str


MODELLED_ON_CPU: tuple[Unjudged, ...] = (
    Unjudged("*/deepseek_v4/c_plan.cuh", "the compress-plan JIT kernel (plan_prefill)",
             "modelled on CPU by metadata_builders/families/dsv4/sglang/plan_kernel.py"),
    Unjudged("*/deepseek_v4/topk_v2.cuh", "the top-k v2 plan JIT kernel (plan_topk_v2)",
             "not run on CPU (SGLANG_OPT_USE_TOPK_V2=false; topk_metadata is no field of the model)"),
    Unjudged("*/deepseek_v4/online_c128_mtp.cuh", "the online c128 MTP planner",
             "not run on CPU (SGLANG_OPT_USE_ONLINE_COMPRESS=false)"),
    Unjudged("*/deepseek_v4/c128_online_v2.cuh", "the online c128 compressor",
             "not run on CPU (SGLANG_OPT_USE_ONLINE_COMPRESS=false)"),
    Unjudged("*/kernels/ops/attention/fused_qk_norm_rope_store.py", "the fused bf16 norm-rope-store (swa_loc's consumer)",
             "modelled on CPU by metadata_builders/families/dsv4/kv_state.py (swa_stores: the row is swa_loc itself)"),
)
"""Every upstream file on the path whose code the CPU gate does not run (docs/SGLANG.md names each stub)."""


def changed_files(repo: str, base: str, head: str | None) -> list[str]:
    """Paths a change touches: ``base..head``, or ``base`` against the working tree when ``head`` is None."""
    spec = [base, head] if head is not None else [base]
    done = subprocess.run(["git", "-C", repo, "diff", "--name-only", *spec], capture_output=True, text=True,
                          check=False)
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def unjudged_on_cpu(paths: list[str]) -> list[tuple[str, Unjudged]]:
    """Each changed path the CPU gate cannot judge, with its entry of :data:`MODELLED_ON_CPU`."""
    found = []
    for path in paths:
        for entry in MODELLED_ON_CPU:
            if fnmatch.fnmatch(path, entry.pattern) or fnmatch.fnmatch(path, entry.pattern.removeprefix("*/")):
                found.append((path, entry))
                break
    return found
