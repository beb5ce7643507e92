"""The decode modes on upstream: ``decode`` (the target's one-token step), ``draft_decode`` (EAGLE's multi-step
draft, ``DeepseekV4MultiStepBackend``) and ``idle`` (a rank with no request), eager and as the graph runner runs them.

Both build through the same three upstream pieces (0.5.18-0.5.23): ``init_forward_metadata_decode`` keeps the
raw inputs (``DSV4RawDecodeMetadata``), ``make_forward_metadata_from_raw_decode`` builds every field from them,
and the in-graph block adds the paged SWA store's target (``swa_out_cache_loc``).  The adapter drives them
as upstream's step does (docs/research/sglang-decode-modes.md has the lines):

=================  ==========================================  ==================================================
phase              ``decode`` (one backend, the target)        ``draft_decode`` step ``s`` (the multi-step backend)
=================  ==========================================  ==================================================
eager              ``init_forward_metadata(fb)``, the          child ``s``'s ``init_forward_metadata(fb)`` (the
                   dispatcher: the raw metadata, then the      multi-step backend's own loop calls each child
                   in-graph block                              with the same batch; no child reads another)
graph state        ``init_cuda_graph_state``                   the multi-step backend's: every child's
out-graph          ``init_forward_metadata_out_graph``         the multi-step backend's: at capture every child
                   (``DECODE_OR_IDLE`` bucket, key ``bs``):    runs its own; at replay child 0 alone, and
                   the raw inputs ``copy_``-ed into the        children ``1 .. steps - 2`` get its slots and
                   captured ones                               lengths with their own ``out_cache_loc`` row
in-graph           ``init_forward_metadata_in_graph``: the     child ``s``'s (the multi-step loop runs every
                   upgrade, recorded                           child's; only ``s``'s is read)
=================  ==========================================  ==================================================

``idle`` is the target's decode graph on an idle rank: captured as ``DECODE``, replayed as ``IDLE`` (out-graph
substitutes ``seq_lens`` 1, slot 0, location 0); its direct build is one such out-graph and in-graph call, since
upstream's dispatcher returns early on an idle batch when MTP is on.

A child is a draft worker (``is_draft_worker``: ``need_compress`` off, no compressed pool) with
``speculative_step_id = s``, ``topk = 1`` and ``speculative_num_steps = num_draft_tokens - 1``; the target's
backend has ``topk = 1`` (an MTP server) and no steps.  The forward batch is what the runner hands the backend:
the slots, ``seq_lens`` (decode: with the token; draft decode: the accepted prefixes), the host mirror, and
``out_cache_loc`` (draft decode: the shared buffer of every step, request-major).

Worked example (``draft_decode`` step 1 of 3 steps, slots ``[1, 2]``, prefixes ``[7, 3]``, shared
``out_cache_loc = [70, 71, 72, 30, 31, 32]``): child 1 slices row 1 of ``per_step_draft_out_cache_loc`` --
``[71, 31]`` -- and adds ``1 + 1`` to ``seq_lens``: ``seq_lens_casual = [9, 5]``, ``positions_casual = [8, 4]``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from metadata_builders.errors import UpstreamNotFound
from metadata_builders.families.dsv4.batch import DECODE_MODES
from metadata_builders.families.dsv4.metadata import Decision, VerifyMetadata, fields_for
from metadata_builders.families.dsv4.sglang.compression import unobservable
from metadata_builders.families.dsv4.sglang.coverage import record
from metadata_builders.families.dsv4.sglang.double import make_backend
from metadata_builders.families.dsv4.sglang.graph import (
    UpstreamGraph,
    _graph_attributes,
    _phase,
    live_out_cache_loc,
    runner_backend,
    runner_positions,
    warm_up,
)
from metadata_builders.families.dsv4.sglang.reading import (
    compression_fields,
    core_fields,
    decode_streams,
    streams_unobservable,
)

if TYPE_CHECKING:
    import torch

    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.sglang.releases import Upstream

__all__ = ["decode", "graph_state", "in_graph", "out_graph", "read_decode"]


_MULTI_STEP = "DeepseekV4MultiStepBackend"


def _steps(inputs: VerifyInputs) -> int:
    """``speculative_num_steps`` of the multi-step backend: draft tokens less the one draft extend makes."""
    return inputs.num_draft_tokens - 1


def _decode_attributes(backend: Any, inputs: VerifyInputs, step: int | None) -> None:
    """What the decode dispatcher, out-graph and in-graph read beyond the target-verify double; ``step``: the
    draft-decode child's ``speculative_step_id`` (None: the target's backend)."""
    _graph_attributes(backend, inputs)
    backend.needs_cpu_seq_lens = False  # SGLANG_OPT_USE_ONLINE_COMPRESS off (its default; the ROCm environment's)
    backend.mtp_enabled = True
    backend.enable_decoder_swa_bounded_replay = False
    backend.req_to_token_pool = SimpleNamespace(req_to_token=backend.req_to_token)
    backend.topk = 1  # get_spec().speculative_eagle_topk of an EAGLE/MTP server
    if step is None:
        return
    backend.is_draft_worker = True  # need_compress = not is_draft_worker: the draft pool has no compressed layer
    backend.need_compress = backend.has_c4 = backend.has_c128 = False
    backend.low_ratios = ()
    backend.speculative_num_steps = _steps(inputs)
    backend.speculative_step_id = step


def _multi_step(up: Upstream, inputs: VerifyInputs, device: Any, seen: dict[str, dict[str, Any]]) -> Any:
    """``object.__new__(DeepseekV4MultiStepBackend)`` with one child double per step (its ``__init__`` makes them
    from a model runner); the children share the harness's spies, child ``draft_step``'s are the ones read."""
    cls = getattr(up.backend_module, _MULTI_STEP, None)
    if cls is None:
        raise UpstreamNotFound(f"{_MULTI_STEP} (multi-step draft decode)", up.release, [up.backend_module.__name__])
    multi = object.__new__(cls)
    multi.topk = 1
    multi.speculative_num_steps = _steps(inputs)
    multi.attn_backends = []
    for step in range(_steps(inputs)):
        child = make_backend(up, inputs, device, inputs.is_dspark, seen if step == inputs.draft_step else {})
        _decode_attributes(child, inputs, step)
        multi.attn_backends.append(child)
    return multi


def _target_backend(up: Upstream, inputs: VerifyInputs, device: Any, seen: dict[str, dict[str, Any]]) -> Any:
    backend = make_backend(up, inputs, device, inputs.is_dspark, seen)
    _decode_attributes(backend, inputs, None)
    return backend


def _built(backend: Any, inputs: VerifyInputs) -> Any:
    """The backend whose metadata this call is judged on: the target's, or the multi-step backend's child (draft
    decode, and the draft runner's idle replay)."""
    return backend.attn_backends[inputs.draft_step] if inputs.draft_runner else backend


def _forward_batch(up: Upstream, inputs: VerifyInputs, mirror: Any, *, capture: bool = False,
                   replay: bool = False) -> Any:
    """What the runner hands the backend: an idle rank's batch is ``IDLE`` (its replay of the decode graph), a
    capture's ``DECODE``; the positions are the harness's (the runner's static buffer on the graph path); a
    graph replay's ``out_cache_loc`` the live unpadded one the runner hands (D5)."""
    import torch

    modes = up.backend_module.ForwardMode
    mode = modes.IDLE if inputs.mode == "idle" and not capture else modes.DECODE
    total = None if inputs.seq_lens_cpu is None else sum(inputs.seq_lens_cpu)
    if mirror is None and inputs.seq_lens_cpu is not None:
        mirror = torch.tensor(inputs.seq_lens_cpu, dtype=torch.int64)
    fields = dict(forward_mode=mode, actual_forward_mode=mode, batch_size=inputs.rows,
                  req_pool_indices=inputs.req_pool_indices, seq_lens=inputs.seq_lens, seq_lens_cpu=mirror,
                  seq_lens_sum=total, out_cache_loc=live_out_cache_loc(inputs) if replay and not capture
                  else inputs.out_cache_loc, spec_info=None, input_ids=None,
                  extend_seq_lens=None, encoder_swa_replay=False, encoder_lens=None,
                  positions=runner_positions(inputs, inputs.seq_lens.device))
    return SimpleNamespace(**fields)


def decode(up: Upstream, inputs: VerifyInputs, device: Any) -> VerifyMetadata:
    """A build of a decode mode: upstream's dispatcher, ``init_forward_metadata(forward_batch)``, on the target's
    backend or on the child; directly (``init_forward_metadata_decode``, then the in-graph block) where the
    dispatcher asserts against the geometry (``page_size % 128 != 0``).  An idle rank's build is its graph replay:
    the dispatcher returns early on it (``mtp_enabled``), the out-graph phase substitutes pad rows."""
    seen: dict[str, dict[str, Any]] = {}
    backend = (_multi_step if inputs.draft_runner else _target_backend)(up, inputs, device, seen)
    built = _built(backend, inputs)
    batch = _forward_batch(up, inputs, None)
    if inputs.mode == "idle":  # the runner's out-graph phase (the multi-step backend's on the draft runner)
        entry = "init_forward_metadata_out_graph"
        backend.init_cuda_graph_state(max_bs=inputs.rows, max_num_tokens=inputs.padded_num_tokens)
        backend.init_forward_metadata_out_graph(batch)
        # an idle rank replays the in-graph block its decode graph captured: recorded for a DECODE batch (the
        # V4.1 low-ratio maps included), whatever mode the replay's out-graph work saw
        built.init_forward_metadata_in_graph(_forward_batch(up, inputs, None, capture=True))
    elif inputs.geometry.page_size % 128 == 0:
        entry = "init_forward_metadata"
        built.init_forward_metadata(batch)
    else:
        entry = "init_forward_metadata_decode"
        built.forward_metadata = built.init_forward_metadata_decode(
            max_seq_len=inputs.max_seq_len, req_pool_indices=inputs.req_pool_indices, seq_lens=inputs.seq_lens,
            out_cache_loc=_step_out_cache_loc(up, built, inputs))
        built.init_forward_metadata_in_graph(batch)
    md = built.forward_metadata
    metadata = read_decode(md, seen, inputs.geometry, inputs.mode, _missing(up, inputs), inputs.draft_runner)
    compression = inputs.geometry.compression
    why = {**dict.fromkeys(metadata.not_observable, "not built by upstream"), **(_missing(up, inputs) or {}),
           **streams_unobservable(inputs.geometry, metadata.not_observable)}  # a stub's reason: what upstream asserts
    if compression is None and up.capabilities.forced_compression:  # 0.5.18-0.5.20: the stubs of forced compression
        why.update(unobservable(inputs.geometry, False))
    if inputs.draft_runner and up.capabilities.forced_compression and compression is not None:
        extra = set(fields_for(inputs.geometry, "decode")) - set(fields_for(inputs.geometry, "draft_decode"))
        why.update(dict.fromkeys(extra, _DRAFT_COMPRESSES))
    record(md, metadata.fields, why, entry=entry, mode=inputs.mode)
    return metadata


_DRAFT_COMPRESSES = ("a draft child's compressed groups: 0.5.18-0.5.20 force need_compress on, and no draft layer "
                     "(compress_ratio 0) reads them (docs/FINDINGS.md F24)")


def _step_out_cache_loc(up: Upstream, child: Any, inputs: VerifyInputs) -> Any:
    """The child's row of the shared buffer, as the dispatcher slices it (``per_step_draft_out_cache_loc``)."""
    if inputs.mode != "draft_decode":
        return inputs.out_cache_loc
    per_step = up.backend_module.per_step_draft_out_cache_loc
    return per_step(inputs.out_cache_loc, inputs.rows, 1, _steps(inputs))[child.speculative_step_id]


def _missing(up: Upstream, inputs: VerifyInputs) -> dict[str, str] | None:
    geo = inputs.geometry
    if inputs.draft_runner or geo.compression is None:
        return None
    return unobservable(geo, up.capabilities.low_ratios)


# -- reading -----------------------------------------------------------------------------------------


def read_decode(md: Any, seen: dict[str, dict[str, Any]], geometry: Any, mode: str,
                unobservable: dict[str, str] | None = None, draft_runner: bool = False) -> VerifyMetadata:
    """Upstream's decode ``DSV4Metadata`` as the mode's fields
    (:func:`~metadata_builders.families.dsv4.metadata.fields_for`).

    ``seq_lens`` and ``req_pool_indices_repeated`` are the arguments ``make_core_attn_metadata`` received (the
    row lengths after the child's step, the slots); ``swa_out_cache_loc`` the in-graph block's
    ``core.swa_out_cache_loc``; each ``c{R}_decode_plan`` the ``DecodePlan`` bytes of ``c{R}_compress_metadata``
    as int32 rows ``[seq_len, write_loc, read_page_0, read_page_1]``; the V4.1 low ratios (0.5.22+, decode and
    idle) as target verify's (:func:`~.reading.compression_fields`: ``_init_low_ratio_indexer_metadata``'s
    ``is_prefill=False`` group, the in-graph block's ``low_ratio_req_indices`` and ``low_ratio_pos_i64``).  A field
    upstream left ``None`` (or one ``unobservable`` names) is not observable.
    """
    core = md.core_attn_metadata
    core_args = seen["make_core_attn_metadata"]
    unified = core.unified
    fields: dict[str, Any] = {
        "seq_lens": core_args["seq_lens_casual"],
        **core_fields(core, core_args),
        "verify_store_state_slot": getattr(unified, "verify_store_state_slot", None),
        "swa_loc": getattr(unified, "swa_loc", None),
        "swa_out_cache_loc": getattr(core, "swa_out_cache_loc", None),
    }
    fields.update(decode_streams(unified, geometry)[0])
    names = fields_for(geometry, mode, draft_runner=draft_runner or mode == "draft_decode")
    if not (draft_runner or mode == "draft_decode") and geometry.compression is not None:  # a draft child: none
        fields.update(compression_fields(md, geometry.compression.low_ratios))  # the low ratios: 0.5.22+ only
        for ratio in (4, 128):
            plan = getattr(md, f"c{ratio}_compress_metadata", None)
            plan_d = getattr(plan, "plan_d", None)
            fields[f"c{ratio}_decode_plan"] = None if plan_d is None else decode_plan_rows(plan_d)
    missing = dict(unobservable or {})
    kept = {n: fields[n] for n in names if fields.get(n) is not None and n not in missing}
    rows = int(core.seq_lens_casual.shape[0])
    decision = Decision(rows, True, True, int(core_args["max_seq_len"]))
    return VerifyMetadata(kept, decision, not_observable=tuple(n for n in names if n not in kept))


def decode_plan_rows(plan_d: torch.Tensor) -> torch.Tensor:
    """``plan_d`` (uint8 ``[rows, 16]``) as int32 rows ``[seq_len, write_loc, read_page_0, read_page_1]``: a view
    where the plan lives, no host read."""
    import torch

    return plan_d.contiguous().view(torch.int32).view(-1, 4)


# -- graph replay (the runner's two phases) ---------------------------------------------------------------


def graph_state(builder: Any, inputs: VerifyInputs) -> UpstreamGraph:
    """The backend after ``init_cuda_graph_state`` (the multi-step backend's: every child's), one per runner."""
    import torch

    shared = runner_backend(inputs)
    if "backend" in shared:  # a later tier of the runner: upstream's one backend, keyed per tier by itself
        backend, seen = shared["backend"], shared["seen"]
    else:
        up, seen = builder.upstream, {}
        with _phase(builder, inputs):
            make = _multi_step if inputs.draft_runner else _target_backend
            backend = make(up, inputs, builder.device, seen)
            backend.init_cuda_graph_state(max_bs=inputs.rows, max_num_tokens=inputs.padded_num_tokens)
        shared.update(backend=backend, seen=seen)
    mirror = torch.zeros(inputs.rows, dtype=torch.int64)
    return UpstreamGraph(backend, seen, runner_positions(inputs, builder.device), mirror, eager=False)


def out_graph(builder: Any, state: UpstreamGraph, inputs: VerifyInputs) -> Decision | None:
    """``init_forward_metadata_out_graph`` (``in_capture`` the first time): the raw decode metadata into the
    tier's captured one.  Returns the recorded build's decision (None at the capture, before it ran)."""
    import torch

    if inputs.seq_lens_cpu is not None:
        state.mirror.copy_(torch.tensor(inputs.seq_lens_cpu, dtype=torch.int64))
    state.forward_batch = _forward_batch(builder.upstream, inputs, state.mirror if inputs.seq_lens_cpu is not None
                                         else None, capture=not state.captured, replay=True)
    with _phase(builder, inputs):
        state.backend.init_forward_metadata_out_graph(state.forward_batch, in_capture=not state.captured)
        if not state.captured:
            warm_up(state.backend, state.forward_batch, state.seen)
    state.captured = True
    return state.decision


def in_graph(builder: Any, state: UpstreamGraph, inputs: VerifyInputs) -> VerifyMetadata:
    """``init_forward_metadata_in_graph`` of the judged backend (recorded), then its captured metadata read."""
    built = _built(state.backend, inputs)
    with _phase(builder, inputs):
        built.init_forward_metadata_in_graph(state.forward_batch)
    result = read_decode(built.forward_metadata, state.seen, inputs.geometry, inputs.mode,
                         _missing(builder.upstream, inputs), inputs.draft_runner)
    state.decision = result.decision
    return result
