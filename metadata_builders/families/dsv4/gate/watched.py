"""Upstream files the CPU gate cannot judge: what stands in for them on CPU, and which job judges them.

Some upstream code on the target-verify path cannot run on a CPU: a JIT CUDA/HIP
extension.  The harness runs a model of it there (the compress-plan kernel,
``c_plan.cuh``, modelled by ``families/dsv4/sglang/plan_kernel.py``) or leaves it out
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

The gate also **measures** what it judges (:mod:`~metadata_builders.gate.trace`):
a change to a Python file on the :data:`WATCHED` paths whose changed functions did
not run at head -- a runner the adapter plays, a spec worker, a kernel behind a
switch that is off, a forward function of the backend -- is **not judged** on any
device, by name: ``gate: NOT JUDGED (decode_cuda_graph_runner.py changed:
DecodeCudaGraphRunner.load_batch never ran at head; ...)``, exit 1 (:func:`not_run`).  :data:`WATCHED` is also what
``ci/premerge.sh`` and the workflow's ``paths:`` filter watch (a test holds the three
equal).
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import re
import subprocess
from dataclasses import dataclass, field

__all__ = ["MODELLED_ON_CPU", "WATCHED", "Change", "SideTrace", "Unjudged", "change_of", "changed_files",
           "changed_lines", "deleted_files", "is_watched", "not_run", "read_traces", "unjudged_on_cpu"]

DSA_WATCHED: tuple[str, ...] = (
    "python/sglang/srt/layers/attention/dsa_backend.py",
    "python/sglang/kernels/ops/attention/pad.py",
    "python/sglang/kernels/ops/attention/dsa",
    "python/sglang/kernels/ops/attention/dsa_metadata.py",
)
"""The DSA family's upstream files (``dsa_metadata.py``: the fused kernels' module on 0.5.18-0.5.22): what
``gate --family dsa`` judges; the DSV4 gate leaves them to it (:func:`is_watched` with ``family="dsv4"``)."""

WATCHED: tuple[str, ...] = (
    # the backend, the ragged layout, the metadata kernels and glue, the compressor and its plan kernel
    "python/sglang/srt/layers/attention/deepseek_v4_backend_hip_radix.py",
    "python/sglang/srt/layers/attention/deepseek_v4_backend.py",
    "python/sglang/srt/speculative/ragged_verify.py",
    "python/sglang/kernels/ops/speculative/ragged_verify_kernels.py",
    "python/sglang/kernels/ops/attention/dsv4",
    "python/sglang/kernels/ops/kvcache",
    "python/sglang/kernels/jit/csrc/deepseek_v4",
    "python/sglang/srt/layers/attention/dsv4",
    # the runners and the speculative workers that hand the backend its inputs (the adapter plays them: a change
    # here is gated, then named as not judged -- docs/research/sglang-runner-inputs.md section 5)
    "python/sglang/srt/model_executor/runner/decode_cuda_graph_runner.py",
    "python/sglang/srt/model_executor/runner/eager_runner.py",
    "python/sglang/srt/model_executor/cuda_graph_buffer_registry.py",
    "python/sglang/srt/speculative/eagle_draft_cuda_graph_runner.py",
    "python/sglang/srt/speculative/eagle_draft_extend_cuda_graph_runner.py",
    "python/sglang/srt/speculative/eagle_worker_v2.py",
    "python/sglang/srt/speculative/eagle_worker_common.py",
    "python/sglang/srt/speculative/eagle_info.py",
    "python/sglang/srt/speculative/eagle_utils.py",
    "python/sglang/srt/speculative/dflash_info.py",
    "python/sglang/srt/speculative/dspark_components",
    "python/sglang/kernels/ops/speculative/dspark",
    # the DSA family's upstream files (docs/DSA.md, "The gate"): judged by ``gate --family dsa``, not by this gate
    *DSA_WATCHED,
)
"""Paths of SGLang's repository (files, or folders with everything under them) whose change triggers the gate: the
one list ``ci/premerge.sh`` and ``ci/workflows/metadata-builders-gate.yml`` repeat (tests/dsv4/test_gate_watched.py)."""


def is_watched(path: str, family: str | None = None) -> bool:
    """Whether ``path`` (relative to the repository) is one of :data:`WATCHED` or lies under one; with ``family``,
    one that family's gate judges (``dsa``: :data:`DSA_WATCHED`; ``dsv4``: the others)."""
    paths = {None: WATCHED, "dsa": DSA_WATCHED}.get(family) or tuple(w for w in WATCHED if w not in DSA_WATCHED)
    return any(path == w or path.startswith(w + "/") for w in paths)


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
    Unjudged("*/kernels/ops/attention/fused_qk_norm_rope_store.py",
             "the fused bf16 norm-rope-store (swa_loc's consumer)",
             "modelled on CPU by metadata_builders/families/dsv4/kv_state.py (swa_stores: the row is swa_loc itself)"),
)
"""Every upstream file on the path whose code the CPU gate does not run (docs/SGLANG.md names each stub)."""


def deleted_files(repo: str, base: str, head: str | None) -> set[str]:
    """Paths the change deletes (``git diff --diff-filter=D``)."""
    spec = [base, head] if head is not None else [base]
    done = subprocess.run(["git", "-C", repo, "diff", "--name-only", "--diff-filter=D", *spec], capture_output=True,
                          text=True, check=False)
    return {line.strip() for line in done.stdout.splitlines() if line.strip()} if done.returncode == 0 else set()


def changed_files(repo: str, base: str, head: str | None) -> list[str]:
    """Paths a change touches: ``base..head``, or ``base`` against the working tree when ``head`` is None."""
    spec = [base, head] if head is not None else [base]
    done = subprocess.run(["git", "-C", repo, "diff", "--name-only", *spec], capture_output=True, text=True,
                          check=False)
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


_COMPILED = Unjudged("*", "compiled code (not Python)", "not run on CPU: the CPU gate runs no CUDA/HIP source")


def unjudged_on_cpu(paths: list[str]) -> list[tuple[str, Unjudged]]:
    """Each changed path the CPU gate cannot judge, with its entry of :data:`MODELLED_ON_CPU` -- or, for any other
    watched file that is not Python (a ``.cuh`` kernel), one saying it is compiled code the CPU gate never runs."""
    found = []
    for path in paths:
        entry = next((e for e in MODELLED_ON_CPU if fnmatch.fnmatch(path, e.pattern)
                      or fnmatch.fnmatch(path, e.pattern.removeprefix("*/"))), None)
        if entry is None and is_watched(path, "dsv4") and not path.endswith(".py"):
            entry = _COMPILED
        if entry is not None:
            found.append((path, entry))
    return found


@dataclass
class SideTrace:
    """What one side's processes imported and ran of its tree (paths relative to the checkout)."""

    imported: set[str] = field(default_factory=set)
    ran: set[tuple[str, int]] = field(default_factory=set)
    """(file, first line) of each watched function seen to run."""
    traced: set[tuple[str, int]] = field(default_factory=set)
    """The functions that were watched (``ran`` says nothing of the others)."""
    switches: list[str] = field(default_factory=list)
    """What the side's builder says of upstream switches it does not run the other way (a report's lines)."""

    def to_dict(self) -> dict:
        return {"imported": sorted(self.imported), "ran": sorted(self.ran), "traced": sorted(self.traced),
                "switches": self.switches}

    @classmethod
    def from_dict(cls, d: dict) -> SideTrace:
        return cls(set(d.get("imported", ())), _pairs(d, "ran"), _pairs(d, "traced"), list(d.get("switches", ())))

    def union(self, other: SideTrace) -> SideTrace:
        return SideTrace(self.imported | other.imported, self.ran | other.ran, self.traced | other.traced,
                         self.switches or other.switches)


def _pairs(d: dict, key: str) -> set[tuple[str, int]]:
    return {(f, int(line)) for f, line in d.get(key, ())}


def read_traces(directory: str) -> SideTrace:
    """The union of every process's record under ``directory`` (``trace-<pid>.json``)."""
    total = SideTrace()
    for path in sorted(glob.glob(os.path.join(directory, "trace-*.json"))):
        with open(path) as fh:
            total = total.union(SideTrace.from_dict(json.load(fh)))
    return total


@dataclass(frozen=True)
class Change:
    """What a pull request changed in one Python file, at head: its functions, and whether code outside them."""

    functions: dict[int, str]
    """First line of each changed function's code (a decorated one's first decorator) -> its qualified name."""
    module_level: bool = False
    """A changed line outside every function (module or class body: it runs when the file is imported)."""


def changed_lines(repo: str, base: str, head: str | None, path: str) -> list[int]:
    """The head's line numbers of ``path`` a diff touches (a deletion: the line before it)."""
    spec = [base, head] if head is not None else [base]
    done = subprocess.run(["git", "-C", repo, "diff", "-U0", *spec, "--", path], capture_output=True, text=True,
                          check=False)
    lines: list[int] = []
    for hunk in re.finditer(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", done.stdout, re.MULTILINE):
        start, count = int(hunk.group(1)), int(hunk.group(2) or 1)
        lines += list(range(start, start + count)) if count else [max(start, 1)]
    return lines


def change_of(source: str, lines: list[int]) -> Change:
    """The functions of ``source`` (a Python file at head) that ``lines`` fall in, innermost first.

    Worked example: lines ``[3, 12]`` of a file whose ``class R`` spans 1-20 and ``def load(self)`` (decorated at
    line 10) spans 10-15: line 12 is in ``R.load`` (first line 10), line 3 in the class body (module level).
    """
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return Change({}, True)
    spans: list[tuple[int, int, int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    spans.append((first, child.end_lineno or child.lineno, child.lineno, name))
                name += "."
            walk(child, name)

    walk(tree, "")
    functions, module_level = {}, False
    for line in lines:
        inside = [s for s in spans if s[0] <= line <= s[1]]
        if not inside:
            module_level = True
            continue
        first, _, _, name = max(inside, key=lambda s: s[0])  # the innermost: the latest start
        functions[first] = name
    return Change(functions, module_level)


def not_run(changes: dict[str, Change], deleted: set[str], head: SideTrace, base: SideTrace) -> list[tuple[str, str]]:
    """(path, why) for each changed watched Python file the gate did not run the change of: never GREEN with one.

    A changed function is judged when it ran at head; a changed line outside every function (a module or class
    body) when head imported the file.  A deleted file is judged when the base imported it (what head runs without
    it is then judged).  Anything else the gate cannot vouch for, and says so by name.
    """
    found = []
    for path in sorted(set(changes) | deleted):
        if not (is_watched(path, "dsv4") and path.endswith(".py")):  # the DSA family's files: its own gate
            continue
        if path in deleted:
            if path not in base.imported:
                found.append((path, "deleted; no side imported it"))
            continue
        change, imported = changes[path], path in head.imported
        unrun = [name for first, name in sorted(change.functions.items()) if (path, first) not in head.ran]
        if unrun:
            found.append((path, f"{', '.join(unrun)} never ran at head"
                          + ("" if imported else " (the file was never imported)")))
        elif change.module_level and not imported:
            found.append((path, "never imported at head"))
    return found
