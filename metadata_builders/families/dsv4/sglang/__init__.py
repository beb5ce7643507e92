"""Builder ``"sglang"``: the installed SGLang's own target-verify code on a backend double.

It receives what upstream's caller hands the backend
(:class:`~metadata_builders.families.dsv4.inputs.VerifyInputs`, made by the harness) and runs
``DeepseekV4HipRadixBackend`` methods unchanged -- the public
``init_forward_metadata_target_verify`` (and through it ``..._old``,
``init_forward_metadata_prefill``, ``make_core_attn_metadata``,
``get_swa_page_indices``, ``_attach_unified_kv_prefill_meta``,
``_attach_unified_kv_decode_streams``), ``make_forward_metadata_from_raw_verify``
for DSpark's graph path, and ``RaggedVerifyLayout`` / ``padded_to_bucket`` --
on a double made with ``object.__new__(DeepseekV4HipRadixBackend)`` that
carries only the attributes those methods read.  Supported: SGLang 0.5.18 ..
0.5.23 (:data:`SUPPORTED_RELEASES`).  docs/SGLANG.md lists every stub and why.

| module | what it holds |
|---|---|
| :mod:`.shims` | importing SGLang on a CPU-only torch (torchvision, aiter, ``AutoConfig``) |
| :mod:`.finding` | finding a piece by what it does; ``UpstreamNotFound`` naming where it looked |
| :mod:`.releases` | pieces by release: :class:`Capabilities`, :class:`Upstream`, :func:`load_upstream` |
| :mod:`.double` | the backend double, its stubs and spies |
| :mod:`.compression` | compression on the double (``geometry.compression``): attributes, routes, what is not |
|               | observable |
| :mod:`.plan_kernel` | the CPU model of the compress-plan kernel (``c_plan.cuh``), and reading its plans |
| :mod:`.plan_decode` | the CPU model of its decode planner (``plan_decode``), and the module both models make |
| :mod:`.routing` | the kernel routes: ``triton`` (as a GPU runs them) and ``torch`` (upstream's CPU fallbacks) |
| :mod:`.switches` | upstream's environment switches: the one run both ways (route ``gasm``), the rest named, with why |
| :mod:`.reading` | upstream's metadata and stage arguments as the harness's fields |
| :mod:`.coverage` | fields upstream filled, fields judged, why not the rest (:func:`coverage_of`) |
| :mod:`.consumers` | upstream's store kernels run on id-valued pools, for P10 (``store_swa_into_unified``) |
| :mod:`.decode` | the decode modes: the dispatcher, ``DeepseekV4MultiStepBackend``'s children, their graph phases |
| :mod:`.builder` | :class:`SGLangBuilder`: one call of the entry point per build |

The adapter does not drive the audit: the harness runs it under the audit like
any builder, and the audit itself recognises interpreted Triton launches
(:mod:`metadata_builders.audit.triton`).  The one exception is the CPU model of
the compress-plan kernel, which stands in for a device kernel: it asks where
memory lives and runs inside the audit's ``kernel_launch``, as an interpreted
launch does.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("sglang") is None:
    raise ImportError("SGLang is not installed; run ci/install-sglang.sh (see docs/SGLANG.md)")

from metadata_builders.errors import UpstreamNotFound
from metadata_builders.families.dsv4.sglang.builder import SGLangBuilder, gasm_route, torch_route
from metadata_builders.families.dsv4.sglang.coverage import Coverage, coverage_of
from metadata_builders.families.dsv4.sglang.releases import (
    SUPPORTED_RELEASES,
    UPSTREAM_MODULE,
    Capabilities,
    Upstream,
    load_upstream,
    upstream_version,
)
from metadata_builders.families.dsv4.sglang.routing import KERNEL_ROUTES, KernelRoute

__all__ = [
    "KERNEL_ROUTES",
    "SUPPORTED_RELEASES",
    "UPSTREAM_MODULE",
    "Capabilities",
    "Coverage",
    "KernelRoute",
    "SGLangBuilder",
    "Upstream",
    "UpstreamNotFound",
    "coverage_of",
    "gasm_route",
    "load_upstream",
    "torch_route",
    "upstream_version",
]
