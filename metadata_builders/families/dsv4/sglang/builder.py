"""The builder: one call of upstream's target-verify entry point on harness-made inputs.

Variant mapping (worked example: uniform EAGLE, ``seq_lens=[5, 3]``, 2 drafts,
SGLang 0.5.23)::

    mirror=host      seq_lens_cpu=[5, 3]              (the seed fix)
    mirror=device    seq_lens_cpu=None                (0.5.22+: device full_like lengths)
    mirror=tolist    seq_lens_cpu=seq_lens.tolist()   (the pre-fix caller: one D2H sync)
    gate=dspark      is_dspark=batch.is_dspark, public entry point
    gate=ungated     is_dspark=True,  ``..._old`` directly (0.5.21+)
    gate=always_sync is_dspark=False, ``..._old`` directly (0.5.21+)

The gate knob is the ``is_dspark`` flip because upstream's gate
``exact_num_tokens = exact_num_tokens and self.is_dspark`` reads nothing else,
and nothing else of ``..._old`` reads ``is_dspark`` on this path (fp8 grouped
streams are off).  Releases without the gate express only their own rule
(:meth:`~metadata_builders.families.dsv4.sglang.releases.Capabilities.gates`).

Ragged layouts are built from the harness's **device** tensor
``inputs.verify_lens``, so the divergence it carries and its provenance reach
upstream: eager ``layout_total=host`` is the public constructor with
``verify_lens_cpu`` and the host total (``extend_start_loc``/``qo_indptr`` from
upstream's ``BuildQoIndptr``); ``layout_total=device`` is
``from_verify_lens_device``; the graph path is the host-total layout then
``padded_to_bucket(padded_bs=rows, cap=cap)``.
"""

from __future__ import annotations

import inspect
import sys
from typing import TYPE_CHECKING, Any, ClassVar

from metadata_builders.audit import launch_memo
from metadata_builders.errors import InvalidVariant
from metadata_builders.families.dsv4.batch import DECODE_MODES
from metadata_builders.families.dsv4.sglang import decode, graph
from metadata_builders.families.dsv4.sglang.compression import unobservable
from metadata_builders.families.dsv4.sglang.coverage import record
from metadata_builders.families.dsv4.sglang.double import make_backend, upstream_patched
from metadata_builders.families.dsv4.sglang.entry import PATCH_LOCK, entry_and_is_dspark, ragged_layout
from metadata_builders.families.dsv4.sglang.reading import read, read_mode, streams_unobservable
from metadata_builders.families.dsv4.sglang.releases import load_upstream
from metadata_builders.families.dsv4.sglang.routing import KERNEL_ROUTES, KernelRoute, kernel_routes
from metadata_builders.families.dsv4.sglang.switches import (
    GROUPED_ASM,
    grouped_asm,
    report_lines,
    switch_scope,
    switches_on,
)
from metadata_builders.families.dsv4.variants import variants_for

if TYPE_CHECKING:
    import torch

    from metadata_builders.families.dsv4.batch import VerifyBatch
    from metadata_builders.families.dsv4.capabilities import GraphContract
    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.metadata import Decision, VerifyMetadata
    from metadata_builders.families.dsv4.sglang.graph import UpstreamGraph
    from metadata_builders.families.dsv4.sglang.releases import Upstream
    from metadata_builders.families.dsv4.tier import CaptureGeometry, Padding
    from metadata_builders.families.dsv4.variants import Variant

__all__ = ["SGLangBuilder", "gasm_route", "target_verify", "through_dispatcher", "torch_route"]

def _is_cpu(device: Any) -> bool:
    import torch

    return torch.device(device).type == "cpu"


def seq_len_fill_value(up: Any) -> int:
    """``DeepseekV4HipRadixBackend.get_cuda_graph_seq_len_fill_value()``, asked of the installed release the way
    upstream's runner asks it (``decode_cuda_graph_runner``: ``attn_backend.get_cuda_graph_seq_len_fill_value()``),
    on a bare instance: the method reads nothing of the backend (0.5.18-0.5.23)."""
    cls = up.backend_module.DeepseekV4HipRadixBackend
    return int(cls.get_cuda_graph_seq_len_fill_value(object.__new__(cls)))


class SGLangBuilder:
    """Builder ``"sglang"``: upstream's target-verify code on a backend double; keeps no state.

    ``kernels`` is the route (:mod:`~metadata_builders.families.dsv4.sglang.routing`):
    ``"triton"`` (default) runs the Triton kernels a GPU runs (on CPU under the
    interpreter); ``"torch"`` keeps upstream's own dispatch, which on CPU tensors
    runs its torch fallbacks.  ``device`` is the harness's device handle, handed
    to upstream unchanged.
    """

    # Its capabilities, declared (docs/BUILDERS.md, "Declaring capabilities").
    name = "sglang"
    upstream_code: ClassVar[bool] = True
    """Upstream's own code (a capability: known findings may name its failures)."""
    graph_contract: ClassVar[GraphContract] = "phases"
    """Graph replay as upstream's runner does it: ``graph_state``, ``out_graph``, ``in_graph`` (:mod:`.graph`)."""
    mirror_validation: ClassVar[bool] = False
    """Upstream has no opt-in mirror validation (P2's stale-mirror half is not judged)."""
    expresses_variants: ClassVar[bool] = True
    """Says which variants the installed release can express (:meth:`variants_supported`)."""
    capture_layout: ClassVar[bool] = True
    """Brings upstream's runner's capture layout (:meth:`capture_verify_lens`)."""
    capture_slots: ClassVar[bool] = True
    """Brings upstream's runner's slot rule (:meth:`ragged_capture_slots`)."""
    store_kernels: ClassVar[bool] = True
    """Runs upstream's own SWA store kernel (:meth:`swa_store_rows`): P10 judges where it stores."""
    seq_len_fill_value: int = 1
    """A graph pad row's ``seq_len``; each instance asks the installed release's backend (``__init__``)."""
    modes: ClassVar[tuple[str, ...]] = ("target_verify", "draft_extend", "decode", "draft_decode", "idle")
    """The builds of the MTP step it drives upstream's entry points for (every mode, on 0.5.18+: :mod:`.decode` drives
    decode, draft decode and idle)."""
    padding_convention: ClassVar[Padding] = "full_coverage"
    """How upstream's runner hands the DSV4 attention backend a ragged tier (``padded_to_bucket(cap=None)``), and how
    the backend's out-graph phase pads it at replay: the cap ignored, the last real row absorbing what pad rows
    do not take."""
    capture_geometry: ClassVar[CaptureGeometry] = "token_slots"
    """The request slots upstream's released runner (0.5.18-0.5.23) captures a compact ragged tier with:
    ``min(T, max_bs)``.  The adapter brings the runner's own rule (:meth:`ragged_capture_slots`), so an installed
    SGLang with #39257's fix (``T // W``) fails P5 (``p5.capture_convention``) instead of passing in silence."""

    def __init__(self, device: str | torch.device = "cpu", kernels: KernelRoute = "triton",
                 switches: tuple[str, ...] = ()) -> None:
        if kernels not in KERNEL_ROUTES:
            raise InvalidVariant("kernels", " or ".join(repr(r) for r in KERNEL_ROUTES), kernels)
        self.device = device
        self.kernels: KernelRoute = kernels
        if kernels != "triton":
            self.name = f"sglang[{kernels}]"
        self.switches = switches_on(switches)
        """Upstream's environment switches this route turns on (:mod:`.switches`; a capability)."""
        if self.switches:
            self.name = "sglang[gasm]"
        self.upstream = load_upstream(device)
        if _is_cpu(device) and not self.upstream.interpreter:
            raise RuntimeError(
                "SGLang's metadata kernels are triton-only on CPU and need TRITON_INTERPRET=1 before triton is "
                "first imported; import metadata_builders.families.dsv4.sglang (or set the variable) first"
            )
        if self.upstream.interpreter:
            launch_memo.want()  # inside harness sessions, interpreted launches seen before are not run again
        self.seq_len_fill_value = seq_len_fill_value(self.upstream)
        """The pad rows' ``seq_len`` upstream's runner fills: the installed backend's own answer (a capability)."""

    def variants_supported(self, batch: VerifyBatch) -> list[Variant]:
        """The variants of ``batch`` the installed release (and the route) can express.

        The torch route has no mirror-less uniform verify: upstream's CPU fallback
        of ``ExpandPrefillCausally`` asserts host mirrors (docs/FINDINGS.md F1).
        """
        if batch.mode != "target_verify":
            return variants_for(batch)  # the path only: no gate, no mirror knob (every release 0.5.18+)
        caps = self.upstream.capabilities
        gates = caps.gates(batch.is_dspark)
        mirrorless = caps.mirrorless and (self.kernels == "triton" or batch.is_ragged)
        return [v for v in variants_for(batch) if v.gate in gates and (v.mirror != "device" or mirrorless)]

    def outside_switches(self, batch: VerifyBatch) -> str | None:
        """Why ``batch`` does not reach the path this route's switch changes (None: it does)."""
        return switch_scope(self.upstream.release, batch)

    def unjudged_switches(self, *, why: bool = True) -> list[str]:
        """What every report names: upstream's switches no route runs the other way (``why``: with why; else one
        header line), :mod:`.switches`."""
        return report_lines(self.upstream.release, why=why)

    def build(self, inputs: VerifyInputs) -> VerifyMetadata:
        with PATCH_LOCK, upstream_patched(self.upstream, inputs), kernel_routes(self.upstream, inputs, self.kernels), \
                grouped_asm(GROUPED_ASM in self.switches):
            if inputs.mode == "draft_extend":
                return draft_extend(self.upstream, inputs, self.device)
            if inputs.mode in DECODE_MODES:
                return decode.decode(self.upstream, inputs, self.device)
            return target_verify(self.upstream, inputs, self.device)

    # Graph replay as upstream's decode graph runner does it (:mod:`.graph`): the harness records
    # ``in_graph`` at capture and re-executes the recording at every replay.

    def graph_state(self, inputs: VerifyInputs) -> UpstreamGraph:
        """The backend after ``init_cuda_graph_state``, and the runner's static buffers."""
        return _phases(inputs).graph_state(self, inputs)

    def out_graph(self, state: Any, inputs: VerifyInputs) -> Decision | None:
        """``init_forward_metadata_out_graph``: before the capture and before every replay, in Python."""
        return _phases(inputs).out_graph(self, state, inputs)

    def in_graph(self, state: Any, inputs: VerifyInputs) -> VerifyMetadata:
        """``init_forward_metadata_in_graph``: recorded at capture, then the captured metadata read."""
        return _phases(inputs).in_graph(self, state, inputs)

    def swa_store_rows(self, state_slot: list[int], positions: list[int], *, ring_stride: int,
                       win: int) -> list[int | None] | None:
        """Where upstream's own SWA ring store kernel (``store_swa_into_unified``) puts each token: P10 judges the
        kernel, not only its model (:mod:`.consumers`); None on a release without it."""
        from metadata_builders.families.dsv4.sglang.consumers import swa_store_rows

        return swa_store_rows(state_slot, positions, ring_stride=ring_stride, win=win,
                              device=self.device)

    def capture_verify_lens(self, graph_num_tokens: int, slots: int, width: int) -> list[int]:
        """The layout upstream's runner captures a ragged tier with: its own ``build_capture_verify_lens``
        (``ragged_verify``, 0.5.18+), so a change there is what the captures run on; the harness's model of it on a
        release without one."""
        build = getattr(sys.modules[self.upstream.layout_cls.__module__], "build_capture_verify_lens", None)
        if build is None or not {"num_tokens", "num_slots", "num_draft_tokens"} <= set(
                inspect.signature(build).parameters):
            from metadata_builders.families.dsv4.tier import capture_verify_lens

            return capture_verify_lens(graph_num_tokens, slots, width)
        return list(build(num_tokens=graph_num_tokens, num_slots=slots, num_draft_tokens=width))


    def ragged_capture_slots(self, graph_num_tokens: int, max_bs: int, width: int) -> int:
        """The request slots upstream's runner captures a compact ragged tier with: its own
        ``DecodeCudaGraphRunner._ragged_capture_slots``, bound on a stand-in runner holding only ``max_bs`` and
        ``captured_req_width`` (as upstream's own tests call it); the reference of the declared geometry where the
        release has none."""
        import importlib

        try:
            runner = importlib.import_module("sglang.srt.model_executor.runner.decode_cuda_graph_runner")
            method = runner.DecodeCudaGraphRunner._ragged_capture_slots
        except (ImportError, AttributeError):
            from metadata_builders.families.dsv4.tier import ragged_capture_slots

            return ragged_capture_slots(graph_num_tokens, max_bs, width, "token_slots")
        from types import SimpleNamespace

        return int(method(SimpleNamespace(max_bs=max_bs, captured_req_width=width), graph_num_tokens))


def _phases(inputs: VerifyInputs) -> Any:
    """The module of the call's graph phases: the decode modes' (:mod:`.decode`), or target verify's and draft
    extend's (:mod:`.graph`)."""
    return decode if inputs.mode in DECODE_MODES else graph


def torch_route(device: str | torch.device = "cpu") -> SGLangBuilder:
    """The ``torch`` route of the ``sglang`` builder (``--builder
    metadata_builders.families.dsv4.sglang:torch_route``)."""
    return SGLangBuilder(device, kernels="torch")


def gasm_route(device: str | torch.device = "cpu") -> SGLangBuilder:
    """The ``gasm`` route (``--builder metadata_builders.families.dsv4.sglang:gasm_route``): upstream's
    ``SGLANG_DSV4_GROUPED_ASM`` switch on, its grouped verify streams judged (:mod:`.switches`)."""
    return SGLangBuilder(device, switches=(GROUPED_ASM,))


# Function names below show up as stages in audit records, like upstream's own functions.


def target_verify(up: Upstream, inputs: VerifyInputs, device: Any) -> VerifyMetadata:
    """One call of upstream's target-verify entry point on harness-made inputs."""
    variant = inputs.variant
    if variant.mirror == "device" and inputs.verify_lens is None and not up.capabilities.mirrorless:
        raise InvalidVariant("mirror", f"'host' or 'tolist' on SGLang {up.release} (mirror-less verify is 0.5.22+)",
                             variant.mirror)
    entry, is_dspark = entry_and_is_dspark(up, inputs)
    seen: dict[str, dict[str, Any]] = {}
    backend = make_backend(up, inputs, device, is_dspark, seen)
    seq_lens_cpu = inputs.seq_lens_cpu
    if inputs.verify_lens is None and variant.mirror == "tolist":
        # The pre-fix caller: no host mirror kept, so read it back (one D2H sync).
        seq_lens_cpu = inputs.seq_lens.tolist()
    if through_dispatcher(up, inputs, entry):
        entry = "init_forward_metadata"
        md = graph.dispatched(up, backend, inputs)
    else:
        md = getattr(backend, entry)(
            max_seq_len=inputs.max_seq_len,
            req_pool_indices=inputs.req_pool_indices,
            seq_lens=inputs.seq_lens,
            seq_lens_cpu=seq_lens_cpu,
            out_cache_loc=inputs.out_cache_loc,
            use_prefill_cuda_graph=variant.path == "graph",
            ragged_layout=ragged_layout(up, inputs),
        )
        if not hasattr(md, "core_attn_metadata"):
            # DSpark's uniform graph build defers to the replay (DSV4RawVerifyMetadata).
            md = backend.make_forward_metadata_from_raw_verify(md)
        if variant.path == "eager":  # what the dispatcher runs after the entry point: the in-graph block
            md = graph.eager_in_graph(up, backend, md, inputs)
    missing = unobservable(inputs.geometry, up.capabilities.low_ratios)
    metadata = read(md, seen, inputs.geometry, missing if inputs.geometry.compression is not None else None)
    record(md, metadata.fields, {**missing, **streams_unobservable(inputs.geometry, metadata.not_observable)},
           entry=entry)
    return metadata


def draft_extend(up: Upstream, inputs: VerifyInputs, device: Any) -> VerifyMetadata:
    """One call of upstream's ``init_forward_metadata_draft_extend`` (mode ``draft_extend``) on harness-made inputs:
    ``seq_lens`` with the step's tokens, the host mirror, ``num_tokens_per_req = n``; the graph path's pad rows as
    upstream's runner fills them (``use_prefill_cuda_graph=True``)."""
    seen: dict[str, dict[str, Any]] = {}
    backend = make_backend(up, inputs, device, inputs.is_dspark, seen)
    md = backend.init_forward_metadata_draft_extend(
        max_seq_len=inputs.max_seq_len, req_pool_indices=inputs.req_pool_indices, seq_lens=inputs.seq_lens,
        seq_lens_cpu=inputs.seq_lens_cpu, num_tokens_per_req=inputs.num_draft_tokens,
        out_cache_loc=inputs.out_cache_loc, use_prefill_cuda_graph=inputs.variant.path == "graph")
    metadata = read_mode(md, seen, inputs.geometry, inputs.mode)
    record(md, metadata.fields, dict.fromkeys(metadata.not_observable, "not passed between stages"),
           entry="init_forward_metadata_draft_extend", mode="draft_extend")
    return metadata


def through_dispatcher(up: Upstream, inputs: VerifyInputs, entry: str) -> bool:
    """Whether an eager build goes through upstream's own dispatcher, ``init_forward_metadata(forward_batch)``.

    It does where upstream's eager step would: the public entry point (the gate
    recipes call ``..._old``, which the dispatcher never calls), a host mirror or,
    0.5.22+, none (the dispatcher then reads ``spec_info.candidate_max_seq_len_upper_bound``;
    before, it asserts a mirror), and ``page_size % 128 == 0`` (the dispatcher asserts
    it).  ``mirror="tolist"`` is the pre-fix caller that read a mirror back itself:
    not the dispatcher's code, so it keeps the direct call.
    """
    mirror = inputs.variant.mirror
    return (inputs.graph is None and entry == "init_forward_metadata_target_verify"
            and inputs.geometry.page_size % 128 == 0
            and (mirror == "host" or (mirror == "device" and up.capabilities.mirrorless)))
