"""Graph replay on upstream: the decode graph runner's two phases of target verify, on the backend double.

Every release 0.5.18-0.5.23 splits a CUDA/HIP-graph target verify the same way
(docs/research/sglang-two-phases/REPORT.md has the lines per release):

=================================  ==================================================  =====================
upstream                           what it does for target verify                      here
=================================  ==================================================  =====================
``init_cuda_graph_state``          once per runner; no metadata buffer (the first      :func:`graph_state`
                                   out-graph build *is* the captured storage)
``init_forward_metadata_out_graph``  Python, before the capture and every replay:      :func:`out_graph`
                                   pads the live ragged layout
                                   (``padded_to_bucket(padded_bs=bs)``, no cap:
                                   docs/FINDINGS.md F13), then either the raw verify
                                   metadata (DSpark, uniform, 0.5.20+) or the whole
                                   ``DSV4Metadata`` eagerly, ``copy_`` into the
                                   captured one
``init_forward_metadata_in_graph``   recorded once, re-executed at replay: the raw ->  :func:`in_graph`
                                   full upgrade (DSpark) and the ``swa_out_cache_loc``
                                   gather
=================================  ==================================================  =====================

The adapter plays the graph runner: its ``ForwardBatch`` double holds what
``build_replay_fb_view`` hands the backend -- the static buffers (the harness's
refilled inputs, ``positions`` among them: the live positions, pad 0), the pinned
host mirror (a host buffer of the state, refilled before each replay; ``None`` when
the batch has no mirror, 0.5.22+) and the live, unpadded ragged layout on ``spec_info``.

Worked example (uniform EAGLE, tier 4 rows / 8 tokens, 2 drafts): the capture's
out-graph build stores a ``DSV4Metadata`` built on a zero ``out_cache_loc``
(upstream's ``in_capture``); the recording holds two calls (the gather and its
``.to(int32)``).  A replay of ``seq_lens=[4, 6]`` rebuilds the metadata in
Python, copies it into the captured one, and re-runs the gather.  Uniform
DSpark instead stores ``DSV4RawVerifyMetadata``: the recording holds the whole
upgrade (about 55 calls, a Triton launch among them) and a replay runs no
metadata Python at all.

What the harness judges of a replay is what the captured ``DSV4Metadata``
holds, plus the values upstream passed between its stages.  On the eager path
those stage arguments are made afresh by every out-graph build, outside the
graph; :func:`out_graph` copies them into buffers of the state, where the
recording's fields point.  On the raw path they are made by recorded work and
refreshed in place by the replay.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from metadata_builders.errors import CaptureMismatch
from metadata_builders.families.dsv4.metadata import Decision
from metadata_builders.families.dsv4.sglang.compression import unobservable
from metadata_builders.families.dsv4.sglang.double import make_backend, upstream_patched
from metadata_builders.families.dsv4.sglang.entry import PATCH_LOCK, entry_and_is_dspark, ragged_layout
from metadata_builders.families.dsv4.sglang.reading import decision, read_mode
from metadata_builders.families.dsv4.sglang.routing import kernel_routes
from metadata_builders.families.dsv4.sglang.switches import switched

if TYPE_CHECKING:
    from collections.abc import Iterator

    import torch

    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.metadata import VerifyMetadata

__all__ = ["UpstreamGraph", "dispatched", "eager_in_graph", "graph_state", "in_graph", "live_out_cache_loc",
           "out_graph", "runner_backend", "runner_positions", "warm_up"]

Builder = Any
"""An :class:`~.builder.SGLangBuilder` (its ``upstream``, ``device`` and ``kernels``): it calls these phases."""

_STAGES = ("_attach_unified_kv_prefill_meta", "make_core_attn_metadata", "init_forward_metadata_prefill")
"""The spied stages whose arguments the harness reads as fields (:func:`~.reading.read`)."""


@dataclass
class UpstreamGraph:
    """One captured tier on upstream: the backend (its ``cuda_graph_metadata_of_bucket_and_bs``; the decode modes: the
    target's backend or the multi-step backend), the runner's buffers."""

    backend: Any
    seen: dict[str, dict[str, Any]]
    """The spied stages' arguments of the latest out-graph build (eager path) or of the capture (raw path)."""
    positions: torch.Tensor
    """The runner's static ``positions`` buffer (out-graph reads its ``numel()`` at capture; in-graph work widens it):
    the harness's ``inputs.positions``, refilled at every replay (:func:`runner_positions`)."""
    mirror: torch.Tensor
    """The runner's pinned ``seq_lens_cpu`` buffer (host memory, graph state), refilled before each replay."""
    captured: bool = False
    """Whether the capture's out-graph build has run (``in_capture=True`` only for the first)."""
    eager: bool = True
    """Whether the latest out-graph build made the whole metadata in Python (else the raw verify metadata)."""
    metadata: Any = None
    """The ``DSV4Metadata`` the recorded work writes: held from the capture, read by address."""
    stage_values: dict[tuple[str, str], torch.Tensor] = field(default_factory=dict)
    """Eager path: each stage argument's buffer, refilled by every out-graph build (what the recording's fields
    hold)."""
    decision: Decision | None = None
    """Raw path: the decision of the recorded upgrade (the tier's constants: it is the capture's at every replay)."""
    forward_batch: Any = None
    """The runner's ``ForwardBatch`` view of the latest out-graph call, which in-graph work receives too."""


@contextlib.contextmanager
def _phase(builder: Builder, inputs: VerifyInputs) -> Iterator[None]:
    up = builder.upstream
    with PATCH_LOCK, upstream_patched(up, inputs), kernel_routes(up, inputs, builder.kernels), switched(builder):
        yield


def graph_state(builder: Builder, inputs: VerifyInputs) -> UpstreamGraph:
    """The backend double with the graph runner's attributes, ``init_cuda_graph_state``, the runner's buffers."""
    import torch

    shared = runner_backend(inputs)
    if "backend" in shared:  # a later tier of the runner: upstream's one backend, keyed per tier by itself
        backend, seen = shared["backend"], shared["seen"]
    else:
        up = builder.upstream
        # draft extend has no gate knob: out-graph work calls its own entry (the DRAFT_EXTEND bucket)
        entry, is_dspark = (("init_forward_metadata_target_verify", inputs.is_dspark) if inputs.mode == "draft_extend"
                            else entry_and_is_dspark(up, inputs))
        seen = {}
        with _phase(builder, inputs):
            backend = make_backend(up, inputs, builder.device, is_dspark, seen)
            if entry != "init_forward_metadata_target_verify":
                # The gate knob: out-graph calls the public entry point; the recipes call ``_old`` directly.
                backend.init_forward_metadata_target_verify = getattr(backend, entry)
            _graph_attributes(backend, inputs)
            # The runner's first tier is its largest: the backend's state is sized by it, once.
            backend.init_cuda_graph_state(max_bs=inputs.rows, max_num_tokens=inputs.padded_num_tokens)
        shared.update(backend=backend, seen=seen)
    mirror = torch.zeros(inputs.rows, dtype=torch.int64)
    return UpstreamGraph(backend, seen, runner_positions(inputs, builder.device), mirror)


def runner_positions(inputs: VerifyInputs, device: Any) -> torch.Tensor:
    """The runner's static ``positions`` buffer: the harness's, which it refills before every replay as upstream's
    runner does (``buffers.positions[:padded_tokens]``: the live positions, pad 0) -- what the in-graph block widens
    into ``low_ratio_pos_i64``.  Zeros only for inputs made without one."""
    import torch

    if inputs.positions is not None:
        return inputs.positions
    return torch.zeros(inputs.padded_num_tokens, dtype=torch.int64, device=device)


def runner_backend(inputs: VerifyInputs) -> dict[str, Any]:
    """The room of the runner's one backend (``inputs.runner.shared``): every tier the runner captures is
    captured on it, as upstream's ``DecodeCudaGraphRunner`` does, so its per-tier store
    (``cuda_graph_metadata_of_bucket_and_bs``) and its keys are what replays exercise.  The decode modes'
    runners (the decode runner, the draft runner's multi-step backend) have rooms of their own."""
    if inputs.runner is None:
        return {}
    name = "sglang" if inputs.mode in ("target_verify", "draft_extend") else f"sglang/{inputs.mode}"
    return inputs.runner.shared.setdefault(name, {})


def _graph_attributes(backend: Any, inputs: VerifyInputs) -> None:
    """What out-graph, in-graph and ``init_cuda_graph_state`` read beyond :func:`~.double.make_backend`'s attributes."""
    backend.needs_cpu_seq_lens = inputs.variant.mirror != "device"  # 0.5.22+: the capture copies a mirror
    backend.max_context_len = inputs.req_to_token.shape[1]  # init_cuda_graph_state's verify mask
    backend.enable_deepseek_v4_fp4_indexer = False  # the fp4 workspaces (0.5.20+) stay off, as on HIP
    backend._fp4_c4_rowgroup_columns = None
    backend.topk = backend.speculative_num_steps = backend.speculative_step_id = 0  # decode buckets only
    # V4.1's in-graph low-ratio block (0.5.22+) asks these before its FP4 workspaces (stubbed: double.upstream_patched):
    backend.low_ratio_identity_skip = False  # decode only; target-verify rows keep the scored path
    backend.model_runner = SimpleNamespace(model=SimpleNamespace())  # no monokernel: every metadata is read
    backend.token_to_kv_pool.index_pools = {}  # no page-8 index-K pool


def _host_mirror(state: UpstreamGraph, inputs: VerifyInputs) -> tuple[torch.Tensor | None, int | None]:
    """The runner's ``seq_lens_cpu[:bs]`` and ``seq_lens_sum``: the batch's mirror, read back for ``tolist``,
    none for ``device`` (0.5.22+, which read no sum)."""
    values = inputs.seq_lens_cpu
    if inputs.verify_lens is None and inputs.variant.mirror == "tolist":
        values = inputs.seq_lens.tolist()  # the pre-fix runner kept no mirror: it read one back, out of graph
    if values is None:
        return None, None
    import torch

    state.mirror.copy_(torch.tensor(values, dtype=torch.int64))
    return state.mirror, sum(values)


def _forward_batch(builder: Builder, state: UpstreamGraph, inputs: VerifyInputs) -> SimpleNamespace:
    """The fields of the runner's ``build_replay_fb_view`` that out-graph and in-graph read (at a replay, the live
    ``out_cache_loc`` and layout, as upstream's runner hands them: :func:`live_out_cache_loc`)."""
    mirror, total = _host_mirror(state, inputs)
    return _verify_forward_batch(builder.upstream, inputs, state.positions, replay=state.captured,
                                 seq_lens_cpu=mirror, seq_lens_sum=total)  # the sum: read at replay by 0.5.18-0.5.21


def live_out_cache_loc(inputs: VerifyInputs) -> Any:
    """The ``out_cache_loc`` upstream's runner hands the backend at a replay: the live, unpadded tensor, which the
    backend pads to the tier itself (``F.pad``, 0.5.18-0.5.23; docs/research/sglang-runner-inputs.md D1, D3, D5).

    Uniform target verify: the live ``raw_bs * W`` tensor (``build_replay_fb_view`` hands
    ``forward_batch.out_cache_loc``, not the static slot); draft extend: the static buffer's first ``raw_bs * n``
    entries (its runner's view); decode: the live ``raw_bs`` tensor.  A compact ragged tier's live window is already
    tier-length (the planner pads it), and draft decode's runner re-points the shared buffer to its static slot
    (0.5.19+): the static buffer itself.
    """
    if inputs.verify_lens is not None or inputs.mode in ("draft_decode", "idle"):
        return inputs.out_cache_loc
    raw = inputs.bs * (1 if inputs.mode == "decode" else inputs.num_draft_tokens)
    view = inputs.out_cache_loc[:raw]
    return view if inputs.mode == "draft_extend" else view.clone()


def _live_layout(up: Any, inputs: VerifyInputs) -> Any:
    """The ragged layout on ``spec_info`` at a replay: the scheduled compact path's device-only layout (no host copy,
    no total: ``from_verify_lens_device``, D10), which the backend's out-graph phase pads to the tier."""
    if inputs.verify_lens is None:
        return None
    return up.layout_cls.from_verify_lens_device(verify_lens=inputs.verify_lens,
                                                 graph_num_tokens=inputs.padded_num_tokens)


def _verify_forward_batch(up: Any, inputs: VerifyInputs, positions: Any, *, replay: bool = False,
                          **extra: Any) -> SimpleNamespace:
    """A target-verify ``ForwardBatch`` double: what the two phases read, ``extra`` (the runner's mirror) besides;
    ``replay``: as the runner hands it at a replay (the live ``out_cache_loc`` and layout), else at a capture or an
    eager step (the batch's own)."""
    modes = up.backend_module.ForwardMode
    mode = modes.DRAFT_EXTEND_V2 if inputs.mode == "draft_extend" else modes.TARGET_VERIFY
    layout = _live_layout(up, inputs) if replay else ragged_layout(up, inputs, padded=False)
    return SimpleNamespace(
        forward_mode=mode,
        actual_forward_mode=mode,
        batch_size=inputs.rows,
        req_pool_indices=inputs.req_pool_indices,
        seq_lens=inputs.seq_lens,
        positions=positions,
        out_cache_loc=live_out_cache_loc(inputs) if replay else inputs.out_cache_loc,
        # EagleVerifyInput's fields the two phases read: V4.1's in-graph token->request map reads draft_token_num
        spec_info=SimpleNamespace(ragged_verify_layout=layout, draft_token_num=inputs.num_draft_tokens),
        **extra,
    )


def eager_in_graph(up: Any, backend: Any, md: Any, inputs: VerifyInputs) -> Any:
    """What upstream's dispatcher runs after the entry point of an eager build (``init_forward_metadata`` calls
    ``init_forward_metadata_in_graph`` next): V4.1's token -> request map of the low-ratio states
    (``low_ratio_req_indices``), their positions (``low_ratio_pos_i64``) and the paged SWA store's target
    (``swa_out_cache_loc``) are set there and nowhere else.  The forward batch is the eager one: the real tokens'
    positions (the harness's, made before the build), the request slots, ``spec_info.draft_token_num``."""
    _graph_attributes(backend, inputs)
    backend.forward_metadata = md
    backend.init_forward_metadata_in_graph(_verify_forward_batch(up, inputs, inputs.positions))
    return backend.forward_metadata


def dispatched(up: Any, backend: Any, inputs: VerifyInputs) -> Any:
    """An eager build as upstream's step runs it: ``init_forward_metadata(forward_batch)``, the dispatcher.

    The dispatcher chooses ``max_seq_len`` itself (the mirror's maximum, or
    0.5.22+ without one ``spec_info.candidate_max_seq_len_upper_bound``, which the
    overlap scheduler sets: the harness's ``max_seq_len``), calls the target-verify
    entry point with the ragged layout riding ``spec_info``, then runs the in-graph
    block (``init_forward_metadata_in_graph``: V4.1's token -> request map, the SWA
    store's translated ``out_cache_loc``).
    """
    import torch

    _graph_attributes(backend, inputs)
    backend.mtp_enabled = True  # the target worker of an MTP step; only an idle batch returns early
    backend.enable_decoder_swa_bounded_replay = False  # 0.5.22+: the late-layer tail is for extend batches only
    backend.req_to_token_pool = SimpleNamespace(req_to_token=backend.req_to_token)  # the dispatcher asserts they agree
    mirror = None if inputs.seq_lens_cpu is None else torch.tensor(inputs.seq_lens_cpu, dtype=torch.int64)
    # The positions are the harness's input, made before the audited build (a device op of ours inside it -- a
    # repeat_interleave sized by the host total -- was once blamed for the fault a diverged batch causes, P6).
    batch = _verify_forward_batch(up, inputs, inputs.positions, seq_lens_cpu=mirror, extend_seq_lens=None,
                                  encoder_swa_replay=False)
    batch.spec_info.candidate_max_seq_len_upper_bound = inputs.max_seq_len
    backend.init_forward_metadata(batch)
    return backend.forward_metadata


def out_graph(builder: Builder, state: UpstreamGraph, inputs: VerifyInputs) -> Decision | None:
    """``init_forward_metadata_out_graph`` (``in_capture`` the first time); the eager path's stage arguments kept.

    Returns the build's decision: the out-graph build's on the eager path, the
    recorded upgrade's on the raw path (None at the capture, before it ran).
    """
    for name in _STAGES:
        state.seen.pop(name, None)
    state.forward_batch = _forward_batch(builder, state, inputs)
    capturing = not state.captured
    with _phase(builder, inputs):
        state.backend.init_forward_metadata_out_graph(state.forward_batch, in_capture=capturing)
        if capturing:
            warm_up(state.backend, state.forward_batch, state.seen)
    state.captured = True
    state.eager = "_attach_unified_kv_prefill_meta" in state.seen
    if not state.eager:
        return state.decision
    _keep_stage_values(state, capture=capturing)
    return decision(state.seen)


def warm_up(backend: Any, forward_batch: Any, seen: dict[str, dict[str, Any]]) -> None:
    """What upstream's runner does between the capture's out-graph call and the recording (0.5.18-0.5.23, D14): the
    warmup forwards run the in-graph upgrade on the host, then its post-warmup hook,
    ``on_after_cuda_graph_warmup``, restores the raw metadata so the recording re-runs the upgrade.  A hook that
    does not restore it leaves the recording nothing to upgrade (P5 sees the capture's metadata at every replay)."""
    hook = getattr(backend, "on_after_cuda_graph_warmup", None)
    if hook is None:
        return
    before = {name: dict(args) for name, args in seen.items()}  # the spies' record is the out-graph call's, not ours
    backend.init_forward_metadata_in_graph(forward_batch)
    hook()
    seen.clear()
    seen.update(before)


def _keep_stage_values(state: UpstreamGraph, *, capture: bool) -> None:
    """Clones the eager path's stage arguments at the capture; copies into those clones at a replay.

    The captured read points at the clones, so a replay may not move them: a
    stage argument whose shape changes after the capture is a :class:`CaptureMismatch`.
    """
    import torch

    for name in _STAGES:
        for arg, value in state.seen.get(name, {}).items():
            if not isinstance(value, torch.Tensor):
                continue
            kept = state.stage_values.get((name, arg))
            if capture:
                state.stage_values[(name, arg)] = value.clone()
            elif kept is None:
                continue  # not there at the capture: the captured read never saw it
            elif kept.shape != value.shape:
                raise CaptureMismatch(f"{name}({arg})", tuple(kept.shape), tuple(value.shape))
            else:
                kept.copy_(value)


def in_graph(builder: Builder, state: UpstreamGraph, inputs: VerifyInputs) -> VerifyMetadata:
    """``init_forward_metadata_in_graph`` (recorded), then the captured metadata read as the harness's fields."""
    with _phase(builder, inputs):
        state.backend.init_forward_metadata_in_graph(state.forward_batch)  # the capture's view, as the runner passes
    state.metadata = state.backend.forward_metadata
    result = _read(builder, state, inputs)
    if not state.eager:
        state.decision = result.decision
    return result


def _read(builder: Builder, state: UpstreamGraph, inputs: VerifyInputs) -> VerifyMetadata:
    """:func:`~.reading.read` of the captured metadata; the stage arguments from the state on the eager path."""
    seen = state.seen
    if state.eager:
        seen = {name: {arg: state.stage_values.get((name, arg), value) for arg, value in args.items()}
                for name, args in seen.items()}
    geo = inputs.geometry
    missing = unobservable(geo, builder.upstream.capabilities.low_ratios)
    return read_mode(state.metadata, seen, geo, inputs.mode, missing if geo.compression is not None else None)
