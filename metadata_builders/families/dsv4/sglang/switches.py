"""Upstream's environment switches on the DSV4 HIP metadata path: which the gate runs both ways, which it does not.

SGLang reads environment variables on the target-verify, decode and draft-extend
metadata path (docs/research/sglang-runner-inputs.md section 4, checked against
every release 0.5.18-0.5.23).  The harness runs each one of two ways:

* a **variant**: the gate runs it both ways, each way with its own rows.  One switch
  is: ``SGLANG_DSV4_GROUPED_ASM`` (0.5.21+) makes ``_attach_unified_kv_decode_streams``
  build the ``gasm_*`` grouped verify streams with a Triton kernel
  (``grouped_verify_streams.py``), which runs on CPU under the interpreter.  The
  ``triton`` route runs it off (upstream's default), the ``gasm`` route on (rows
  ``P1-gasm``; the builder's ``gasm_route``);
* **not judged**: every other switch, named with why in every report (``check``'s
  header and footer, ``replay``, the gate's summary and Markdown): a kernel that needs
  a GPU or aiter, a path the unified configuration or server start-up refuses, code of
  the runner the adapter plays.

Worked example (SGLang 0.5.23): :func:`not_judged` names ``SGLANG_HACK_FLASHMLA_BACKEND``
(run as ``unified_kv_triton``), ``SGLANG_DSV4_UNIFIED_KV_FP8`` (off), ... and
:func:`variants` names ``SGLANG_DSV4_GROUPED_ASM``; on 0.5.20 :func:`variants` is empty
(the release has no grouped streams) and ``SGLANG_DSV4_GROUPED_ASM`` is in neither list.
Switches read only by the forward (attention kernels, the indexer's top-k, prefill) are
listed in docs/SGLANG.md, "Environment switches", not here: no metadata field depends on them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = ["GROUPED_ASM", "SWITCHES", "Switch", "grouped_asm", "not_judged", "report_lines",
           "switch_scope", "switched", "switches_on", "variants"]

Status = Literal["variant", "not judged"]

GROUPED_ASM = "SGLANG_DSV4_GROUPED_ASM"


@dataclass(frozen=True, slots=True)
class Switch:
    """One environment switch upstream reads on the metadata path, and how the harness runs it."""

    name: str
    since: tuple[int, int, int]
    """The first supported release that reads it."""
    where: str
    """Where 0.5.23 (or the last release with it) reads it, ``file:line``."""
    runs: str
    """The value the harness's default route runs (``off``: upstream's default)."""
    status: Status
    why: str
    """Why it is not judged the other way (a variant: what each way runs)."""

    def line(self) -> str:
        """``SGLANG_X (runs off): why`` -- one line of a report."""
        return f"{self.name} (runs {self.runs}): {self.why}"


_RUNNER = "read by the runner, which the adapter plays (its file is never run: the gate names it when it changes)"

SWITCHES: tuple[Switch, ...] = (
    Switch(GROUPED_ASM, (0, 5, 21), "deepseek_v4_backend_hip_radix.py:841 (_grouped_asm_enabled)", "off", "variant",
           "the gasm_* grouped verify streams (grouped_verify_streams.py, a Triton kernel): the triton route runs it "
           "off, the gasm route on (rows P1-gasm)"),
    Switch("SGLANG_HACK_FLASHMLA_BACKEND", (0, 5, 18), "dsv4/unified_kv_gate.py:15", "unified_kv_triton", "not judged",
           "'auto' returns early from the unified prefill meta, ring store and decode streams; the model is of the "
           "unified configuration ROCm runs DSV4 with"),
    Switch("SGLANG_DSV4_UNIFIED_KV_FP8", (0, 5, 20), "dsv4/unified_kv_gate.py:24", "off", "not judged",
           "the fp8 two-pool needs a gfx95 GPU (upstream turns it off anywhere else); its streams (0.5.23 DSpark "
           "grp_*) and decode plan are aiter FlyDSL/asm kernels, not installed on CPU"),
    Switch("SGLANG_OPT_USE_ONLINE_COMPRESS", (0, 5, 18), "dsv4/compressor_v2.py:34", "off", "not judged",
           "the online c128 planner is a JIT CUDA/HIP kernel (c128_online_v2.cuh) with no CPU build or model; "
           "pool_configurator refuses it with DSpark in every release (FINDINGS.md F26)"),
    Switch("SGLANG_EXPERIMENTAL_ONLINE_C128_MTP", (0, 5, 18), "dsv4/online_c128_mtp.py:39", "off", "not judged",
           "online c128 with EAGLE MTP: needs online compress and its JIT kernel (online_c128_mtp.cuh)"),
    Switch("SGLANG_OPT_USE_TOPK_V2", (0, 5, 18), "dsv4/metadata.py (0.5.18:157); dsa_topk_backend", "off",
           "not judged",
           "top-k v2's plan is a JIT extension (topk_v2.cuh); its topk_metadata is no field of the model"),
    Switch("SGLANG_FP8_PAGED_MQA_LOGITS_TORCH", (0, 5, 18), "dsv4/metadata.py:206", "on", "not judged",
           "forced to what the DeepSeek-V4 ROCm hook sets; off selects deep_gemm's CUDA metadata"),
    Switch("SGLANG_OPT_USE_AITER_INDEXER", (0, 5, 18), "dsv4/indexer.py:626", "on", "not judged",
           "forced to what the DeepSeek-V4 ROCm hook sets; off selects the CUDA indexer"),
    Switch("SGLANG_HIP_DSPARK_DRAFT_RAW_METADATA", (0, 5, 22), "deepseek_v4_backend_hip_radix.py:132", "on",
           "not judged", "the DSpark draft window needs non-unified KV on a draft worker; the double is a unified "
           "target backend"),
    Switch("SGLANG_HIP_DSV4_C4_INDEXER_ROWGROUP", (0, 5, 23), "deepseek_v4_backend_hip_radix.py:1046", "off",
           "not judged", "read in __init__ (not run) for the fp4 indexer without speculation; aiter's row-group "
           "kernel; the columns stay None"),
    Switch("SGLANG_DSV4_KV_LAYOUT", (0, 5, 21), "deepseek_v4_memory_pool.py:202", "default", "not judged",
           "read when the KV pool is built; the double's pool takes the batch's geometry"),
    Switch("SGLANG_DSV4_COMPRESSED_KV_LAYOUT", (0, 5, 21), "deepseek_v4_memory_pool.py:203", "default", "not judged",
           "read when the KV pool is built; the double's pool takes the batch's geometry"),
    Switch("SGLANG_RAGGED_VERIFY_MODE", (0, 5, 18), "ragged_verify.py:20; decode_cuda_graph_runner.py:1718",
           "compact (ragged batches)", "not judged", f"{_RUNNER}; ragged batches stand for compact mode"),
    Switch("SGLANG_TEST_RAGGED_VERIFY_FORCE_UNIFORM_CAPTURE", (0, 5, 18), "decode_cuda_graph_runner.py:792", "off",
           "not judged", _RUNNER),
    Switch("SGLANG_ENABLE_METADATA_GLUE_GRAPH", (0, 5, 19), "decode_cuda_graph_runner.py:548", "off", "not judged",
           _RUNNER),
    Switch("SGLANG_OPT_DSV41_TARGET_VERIFY_METADATA_GLUE", (0, 5, 23), "decode_cuda_graph_runner.py:1942", "off",
           "not judged", _RUNNER),
    Switch("SGLANG_OPT_DSV41_TARGET_METADATA_EARLY", (0, 5, 23), "decode_cuda_graph_runner.py:1818", "off",
           "not judged", _RUNNER),
    Switch("SGLANG_OPT_SKIP_GLUED_REPLAY_VIEW", (0, 5, 23), "decode_cuda_graph_runner.py:575", "off", "not judged",
           _RUNNER),
    Switch("SGLANG_OPT_DSV41_DSPARK_DRAFT_PREP_FORK", (0, 5, 23), "decode_cuda_graph_runner.py:619", "off",
           "not judged", _RUNNER),
    Switch("SGLANG_OPT_DSV41_DSPARK_SKIP_PREFILLED_INPUTS", (0, 5, 23), "decode_cuda_graph_runner.py:1932", "off",
           "not judged", _RUNNER),
    Switch("SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH", (0, 5, 23), "cuda_graph_buffer_registry.py:456", "off",
           "not judged", _RUNNER),
)
"""Every switch on the metadata path, in the order reports name them (0.5.23's lines; docs/SGLANG.md has each
release's)."""


def _key(release: str) -> tuple[int, ...]:
    from packaging.version import InvalidVersion, Version

    try:
        return tuple(Version(release).release[:3])
    except InvalidVersion:
        return (10**6,)


def _read_by(release: str) -> tuple[Switch, ...]:
    return tuple(s for s in SWITCHES if _key(release) >= s.since)


def variants(release: str) -> tuple[Switch, ...]:
    """The switches ``release`` reads that the gate runs both ways."""
    return tuple(s for s in _read_by(release) if s.status == "variant")


def not_judged(release: str) -> tuple[Switch, ...]:
    """The switches ``release`` reads that no route runs the other way: every report names them."""
    return tuple(s for s in _read_by(release) if s.status == "not judged")


def report_lines(release: str, *, why: bool = True) -> list[str]:
    """What a report prints: the switches run both ways, the ones not judged the other way, and (``why``) one line
    each saying why.  ``why=False`` is a header's one line, naming them."""
    both = ", ".join(f"{s.name} (gate route gasm: rows P1-gasm)" for s in variants(release)) or "none"
    names = ", ".join(s.name for s in not_judged(release))
    head = (f"upstream switches (SGLang {release}): run both ways: {both}; not judged the other way: {names} "
            + ("(why: docs/SGLANG.md, \"Environment switches\")" if why else "(why: at the end of this report)"))
    return [head] + ([f"  not judged: {s.line()}" for s in not_judged(release)] if why else [])


def switches_on(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` checked: only a switch the gate runs both ways can be turned on by a route."""
    from metadata_builders.errors import InvalidVariant

    known = [s.name for s in SWITCHES if s.status == "variant"]
    for name in names:
        if name not in known:
            raise InvalidVariant("switches", " or ".join(known), name)
    return tuple(names)


def switch_scope(release: str, batch: VerifyBatch) -> str | None:
    """Why no build of ``batch`` reaches the grouped verify streams on ``release`` (None: one does)."""
    from metadata_builders.families.dsv4.reference import verify_extension
    from metadata_builders.families.dsv4.reference.grouped import MIN_GROUPS, reaches_grouped
    from metadata_builders.families.dsv4.variants import variants_for

    if _key(release) < (0, 5, 21):
        return f"SGLang {release} has no grouped verify streams ({GROUPED_ASM} is read from 0.5.21)"
    if batch.mode != "target_verify":
        return f"{GROUPED_ASM} changes target verify only (mode {batch.mode})"
    width = batch.num_draft_tokens
    counts = sorted({len(verify_extension(batch, v, "full_coverage").out_cache_loc) for v in variants_for(batch)})
    if any(reaches_grouped(n, width) for n in counts):
        return None
    return (f"no build reaches the grouped verify streams ({GROUPED_ASM}: N % num_draft == 0 and N // num_draft >= "
            f"{MIN_GROUPS}; N in {counts}, num_draft {width})")


@contextlib.contextmanager
def switched(builder: Any) -> Iterator[None]:
    """The environment switches ``builder`` (an ``SGLangBuilder``) turns on, for one build or graph phase."""
    with grouped_asm(GROUPED_ASM in builder.switches):
        yield


@contextlib.contextmanager
def grouped_asm(on: bool) -> Iterator[None]:
    """``SGLANG_DSV4_GROUPED_ASM=1`` for the block when ``on`` (upstream reads ``os.environ`` at each build)."""
    from metadata_builders.families.dsv4.sglang.compression import _env

    with _env(GROUPED_ASM, "1") if on else contextlib.nullcontext():
        yield
