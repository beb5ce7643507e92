"""What the harness hands a builder: the arguments upstream's caller passes the backend.

A builder never sees a :class:`~metadata_builders.families.dsv4.batch.VerifyBatch`.  The
harness -- like SGLang's model runner calling
``init_forward_metadata_target_verify`` -- turns the batch into device tensors,
a host mirror (or none, per ``mirror``), a ragged layout with or without a host
total (per ``layout_total``), and the backend's constants.  It owns them: it
marks the tensors device-resident for the audit, applies ``batch.divergence``
to them (and, through the audit, to the builder's own asynchronous copies),
and snapshots them so P8 can prove the build left them untouched.

Worked example (uniform EAGLE, graph tier of 4 rows / 12 tokens, 3 drafts,
``seq_lens=[5, 3, 7]``, ``mirror=host``)::

    seq_lens          tensor([5, 3, 7, 1])      pad row: the graph fill value 1
    req_pool_indices  tensor([2, 1, 3, 0])      pad row: the dummy slot 0
    out_cache_loc     (12,) zero-padded past the 9 real tokens
    positions         [5, 6, 7, 3, 4, 5, 7, 8, 9, 0, 0, 0]    the real tokens', then the runner's 0
    seq_lens_cpu      [5, 3, 7, 1]              the host mirror (None for device/tolist)
    verify_lens       None                      uniform: no layout
    max_seq_len       max_context               graph: the capture width

The same batch eager has 3 rows, 9 tokens and ``max_seq_len = 7``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metadata_builders.families.dsv4.batch.modes import DECODE_MODES
from metadata_builders.families.dsv4.tier import DEFAULT_PADDING, Padding, host_total
from metadata_builders.families.dsv4.variants import check_variant
from metadata_builders.records import InputChange

if TYPE_CHECKING:
    import torch

    from metadata_builders.families.dsv4.batch import Geometry, GraphTier, VerifyBatch
    from metadata_builders.families.dsv4.variants import Variant

__all__ = ["DEVICE_INPUTS", "Runner", "VerifyInputs", "bucket_of", "fill_positions", "forward_num_tokens",
           "make_inputs", "refill_inputs"]

DEVICE_INPUTS = ("seq_lens", "req_pool_indices", "out_cache_loc", "req_to_token", "full_to_swa", "verify_lens",
                 "positions")
"""The device tensors of :class:`VerifyInputs`; each read of one is audited by name."""

_HOST_INPUTS = ("seq_lens_cpu", "verify_lens_cpu")


def bucket_of(mode: str, draft_step: int | None = None) -> str:
    """The captured-graph bucket a call of ``mode`` replays in (upstream's ``_GraphBucket``): an idle rank replays
    the target's ``DECODE_OR_IDLE`` graph, or on the draft runner (a step) the multi-step backend's draft decode."""
    if mode == "idle":
        return "draft_decode" if draft_step is not None else "decode_or_idle"
    return "decode_or_idle" if mode == "decode" else mode


@dataclass(eq=False)
class Runner:
    """The graph runner a capture belongs to: every tier it captures on this backend, and the backend's own room.

    A builder that keeps state for its whole backend (upstream: the captured metadata per tier,
    ``cuda_graph_metadata_of_bucket_and_bs``) keeps it in ``shared``, which lives exactly as long as
    the runner (:mod:`~metadata_builders.families.dsv4.graph_runner`).  A single capture gets a runner of one tier.
    """

    tiers: tuple[GraphTier, ...]
    """Every tier of the runner, largest first (the order it captures them in)."""
    ragged: bool = False
    """Compact ragged verify: tiers keyed by ``graph_num_tokens``; uniform: by ``bs``."""
    shared: dict[str, Any] = field(default_factory=dict)
    """The backend's state across tiers, the builder's to keep (by a name of its own)."""


@dataclass(slots=True)
class VerifyInputs:
    """One target-verify call's arguments, made by the harness (DESIGN.md section 4).

    Device tensors first (device-resident; on the graph path the tier's static
    buffers, refilled in place on replay), then host values, then constants.
    """

    seq_lens: torch.Tensor
    """(rows,) int32: accepted prefixes; graph pad rows hold 1."""
    req_pool_indices: torch.Tensor
    """(rows,) int64: request slots; graph pad rows hold slot 0."""
    out_cache_loc: torch.Tensor
    """(padded_num_tokens,) int64: KV write locations, zero past the real tokens."""
    req_to_token: torch.Tensor
    """(num_slots, max_context) int32: full-pool location of each position of each slot."""
    full_to_swa: torch.Tensor
    """(pool_size + 1,) int64: full location -> SWA location, last entry the -1 sentinel."""
    verify_lens: torch.Tensor | None
    """(bs,) int32: the ragged device layout's lengths (real requests only); None = uniform."""
    seq_lens_cpu: list[int] | None
    """(rows,): the host mirror of ``seq_lens``; None when the caller passes none
    (``mirror="device"``: build on the device; ``"tolist"``: read it back)."""
    verify_lens_cpu: list[int] | None
    """(bs,): host copy of the ragged lengths; None for a device-assembled layout."""
    num_tokens_cpu: int | None
    """The ragged layout's host total: ``sum(verify_lens)`` eager with ``layout_total="host"``,
    the tier on an uncapped graph tier; None when only the device knows it."""
    max_seq_len: int
    """The caller's ``max_seq_len`` before verify extension: ``max(seq_lens)`` eager, ``max_context`` graph."""
    bs: int
    """Real requests; rows ``bs..rows-1`` are graph padding, or eager the worker's DP pad rows (upstream's forward
    batch counts them in its ``batch_size``: a build sizes by ``rows``)."""
    num_draft_tokens: int
    """``target_verify_num_draft_tokens``."""
    is_dspark: bool
    """The speculative algorithm is DSpark (else EAGLE)."""
    geometry: Geometry
    """Backend constants."""
    graph: GraphTier | None
    """The captured tier on the graph path; None eager."""
    variant: Variant
    """The recipe: path, mirror fallback, layout total, gate."""
    padding: Padding = DEFAULT_PADDING
    """The tier padding convention the builder declared (``padding_convention``): ``num_tokens_cpu`` on the graph
    path is what it leaves on the host (docs/DESIGN.md section 2)."""
    runner: Runner | None = None
    """At a capture: the graph runner (its tiers, the backend's ``shared`` room); None for an eager build."""
    mode: str = "target_verify"
    """The step of the MTP step this call builds
    (:data:`~metadata_builders.families.dsv4.batch.MODES`).  ``draft_extend``: upstream's
    ``init_forward_metadata_draft_extend(seq_lens=..., num_tokens_per_req=num_draft_tokens)``, whose ``seq_lens`` (and
    mirror) *include* the step's tokens; graph pad rows hold 1 all the same.  ``decode``: one token per row,
    ``seq_lens`` with it.  ``draft_decode``: the forward batch's ``seq_lens`` (the child adds ``draft_step + 1``) and
    ``out_cache_loc`` the shared buffer of every step, ``rows * num_draft_steps`` entries, request-major."""
    draft_step: int | None = None
    """``draft_decode`` (and the draft runner's ``idle`` replay): which child of the multi-step backend this call is
    (``speculative_step_id``)."""
    seq_len_fill: int = 1
    """What the graph runner put in the pad rows' ``seq_lens`` (and host mirror): the builder's
    ``seq_len_fill_value`` capability, upstream's ``get_cuda_graph_seq_len_fill_value()``."""
    positions: torch.Tensor | None = None
    """(padded_num_tokens,) int64, one per row in the decode modes: the forward batch's ``positions`` -- each real
    token's position, then 0 (the graph runner's ZERO padding: pad rows, absorbed slack, the tail).  Only in-graph
    work reads it (V4.1's ``low_ratio_pos_i64``); on the graph path it is the runner's static buffer, refilled at
    every replay.  None only where a caller made the inputs without it."""
    speculative_num_draft_tokens: int | None = None
    """The backend's configured draft count where it is not the active width ``num_draft_tokens``: a DSpark draft
    worker's block verify (upstream ``is_dspark_draft``: configured gamma + 1, every request verifies gamma).  A
    builder verifies ``num_draft_tokens``; this is what upstream's backend also holds.  None: one count."""

    @property
    def draft_runner(self) -> bool:
        """Built on the draft runner's multi-step backend: draft decode, or its idle replay (``idle`` with a step)."""
        return self.mode == "draft_decode" or (self.mode == "idle" and self.draft_step is not None)

    @property
    def rows(self) -> int:
        """Rows of the built batch: ``bs`` eager, ``padded_bs`` graph."""
        return int(self.seq_lens.shape[0])

    @property
    def padded_num_tokens(self) -> int:
        """Tokens of the built batch: real tokens eager, the tier on the graph path."""
        return int(self.out_cache_loc.shape[0])

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every device input by name (``verify_lens`` only when ragged)."""
        out = {name: getattr(self, name) for name in DEVICE_INPUTS}
        return {name: t for name, t in out.items() if t is not None}

    def snapshot(self) -> dict[str, Any]:
        """Copies of every input a build must leave untouched (P8): bytes on the host, clones elsewhere."""
        snap: dict[str, Any] = {name: _snapshot(t) for name, t in self.tensors().items()}
        for name in _HOST_INPUTS:
            value = getattr(self, name)
            snap[name] = None if value is None else list(value)
        return snap

    def changes_since(self, snapshot: dict[str, Any]) -> list[InputChange]:
        """Inputs that differ from ``snapshot``: name, first index, before, after."""
        import torch

        changes: list[InputChange] = []
        for name, before in snapshot.items():
            after = getattr(self, name)
            if isinstance(before, _HostBytes):
                if before.holds(after):
                    continue
                before = before.tensor()
            if isinstance(before, torch.Tensor):
                if before.is_meta:
                    continue  # shapes only: no values to compare
                if before.dtype == after.dtype and torch.equal(after, before):
                    continue  # the common case first (torch.equal is False on another shape)
                if after.shape != before.shape or after.dtype != before.dtype:
                    changes.append(InputChange(name, None, f"{tuple(before.shape)} {before.dtype}",
                                               f"{tuple(after.shape)} {after.dtype}"))
                    continue
                differs = (after != before).reshape(-1).nonzero()
                if differs.numel():
                    flat = int(differs[0])
                    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), before.shape))
                    changes.append(InputChange(name, index, before.reshape(-1)[flat].item(),
                                               after.reshape(-1)[flat].item()))
            elif before != after:
                first = next((i for i, (a, b) in enumerate(zip(before or [], after or [])) if a != b), None)
                changes.append(InputChange(name, None if first is None else (first,),
                                           before if first is None else before[first],
                                           after if first is None else after[first]))
        return changes


_BYTES_FROM = 4096
"""Inputs of this many elements or more are snapshot as bytes; smaller ones as clones."""


def _snapshot(t: torch.Tensor) -> Any:
    """P8's copy of one input: bytes for a large host tensor, else a clone.

    A clone and ``torch.equal`` cost 5 µs for a 64-element input, bytes 7 µs
    (``numpy()`` alone is 2 µs); for ``full_to_swa`` (65,537 int64s) a clone and
    ``torch.equal`` cost 150 µs, bytes 60 µs.
    """
    if t.numel() >= _BYTES_FROM:
        copy = _HostBytes.of(t)
        if copy is not None:
            return copy
    return t.detach().clone() if t.requires_grad else t.clone()


@dataclass(frozen=True, slots=True)
class _HostBytes:
    """A host tensor's values as bytes: copied and compared at memcpy speed."""

    data: bytes
    shape: tuple[int, ...]
    dtype: torch.dtype

    @classmethod
    def of(cls, t: torch.Tensor) -> _HostBytes | None:
        """``t``'s bytes; None when numpy cannot hold it (not on the host, bfloat16): clone it instead."""
        data = _host_bytes(t)
        return None if data is None else cls(data, tuple(t.shape), t.dtype)

    def holds(self, t: Any) -> bool:
        """Whether ``t`` is a host tensor holding exactly these values (same shape and dtype)."""
        return tuple(t.shape) == self.shape and t.dtype == self.dtype and _host_bytes(t) == self.data

    def tensor(self) -> torch.Tensor:
        import torch

        if not self.data:
            return torch.empty(self.shape, dtype=self.dtype)
        return torch.frombuffer(bytearray(self.data), dtype=self.dtype).reshape(self.shape)


def _host_bytes(t: torch.Tensor) -> bytes | None:
    if not t.is_cpu:
        return None
    try:
        return t.detach().numpy().tobytes()
    except (TypeError, RuntimeError):  # a dtype numpy lacks, a conjugate or negative view
        return None


def _rows_and_tokens(batch: VerifyBatch, variant: Variant) -> tuple[int, int]:
    """Rows and ``out_cache_loc`` entries of the call (draft decode: the shared buffer of every step per row)."""
    per_row = batch.num_draft_steps if batch.draft_runner else 1  # the draft runner's shared buffer of every step
    if variant.path == "graph":
        assert batch.graph is not None
        return batch.graph.padded_bs, batch.graph.graph_num_tokens * per_row
    # Eager: the real requests, then the worker's DP pad rows (``_pad_inputs_to_size``, issue 45).
    return batch.bs + batch.dp_pad_rows, (batch.num_real_tokens + batch.dp_pad_tokens) * per_row


def forward_num_tokens(batch: VerifyBatch, variant: Variant) -> int:
    """The tokens the forward consumes: the length of the ``out_cache_loc`` the call hands the build -- the real
    tokens eager (plus the worker's DP pad rows' tokens), the tier on the graph path.  Upstream's metadata has one
    row per such token (``padded_num_tokens = out_cache_loc.shape[0]``); a plan made before the worker's DP padding
    has fewer (upstream #26244).  Uniform, 3 requests of 2 tokens, 2 DP pad rows: ``10``."""
    return _rows_and_tokens(batch, variant)[1]


def _host_values(batch: VerifyBatch, variant: Variant, padding: Padding, fill: int = 1) -> dict[str, Any]:
    """The host side of the call: mirror, ragged host copy and total, ``max_seq_len``.

    On the graph path the ragged total is what the tier padding convention the builder
    follows leaves on the host (:func:`~metadata_builders.families.dsv4.tier.host_total`): the tier
    uncapped, ``min(tier, total + npad x cap)`` under ``pad_rows_only``; None where the
    build must read it back.
    """
    rows, _ = _rows_and_tokens(batch, variant)
    pads = [fill] * (rows - batch.bs)
    div = batch.divergence
    mirror = list(div.seq_lens_cpu) if div is not None and div.seq_lens_cpu is not None else _caller_seq_lens(batch)
    seq_lens_cpu = mirror + pads if batch.is_ragged or variant.mirror == "host" else None
    verify_lens_cpu = num_tokens_cpu = None
    if batch.verify_lens is not None:
        real = list(batch.verify_lens)
        if variant.path == "graph":
            assert batch.graph is not None
            verify_lens_cpu = real
            g = batch.graph
            num_tokens_cpu = host_total(real, g.padded_bs, g.graph_num_tokens, g.cap, padding)
        elif variant.layout_total == "host":
            verify_lens_cpu, num_tokens_cpu = real, sum(real)
    # The caller computes it from its own host copy of seq_lens, stale or not, mirror passed or not.
    max_seq_len = batch.max_context if variant.path == "graph" else max(mirror + pads)  # eager: DP pads included
    return {"seq_lens_cpu": seq_lens_cpu, "verify_lens_cpu": verify_lens_cpu, "num_tokens_cpu": num_tokens_cpu,
            "max_seq_len": max_seq_len}


def _caller_seq_lens(batch: VerifyBatch) -> list[int]:
    """The real rows' ``seq_lens`` as upstream's caller passes them: the prefixes, plus the step's tokens in draft
    extend and decode (their forward batch already holds them); draft decode's child adds its own ``step + 1``."""
    extra = {"draft_extend": batch.num_draft_tokens, "decode": 1}.get(batch.mode, 0)
    return [s + extra for s in batch.seq_lens]


def _device_verify_lens(batch: VerifyBatch) -> list[int] | None:
    """What the device layout holds: the divergence when the batch injects one, else the truth."""
    if batch.verify_lens is None:
        return None
    div = batch.divergence
    if div is not None and div.extend_seq_lens is not None:
        return list(div.extend_seq_lens)
    return list(batch.verify_lens)


_TABLES: list[tuple[Any, Any, Any, Any]] = []
"""The last few batches' tables as host tensors: every variant of a batch uploads the same ones."""


def _host_tables(batch: VerifyBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """``req_to_token`` (int32) and ``full_to_swa`` (int64) as host tensors, converted once per batch.

    Keyed by the identity of the batch's table tuples, which the cache keeps alive.
    """
    import torch

    for req_to_token, full_to_swa, table, mapping in _TABLES:
        if req_to_token is batch.req_to_token and full_to_swa is batch.full_to_swa:
            return table, mapping
    table = torch.tensor(batch.req_to_token, dtype=torch.int32)
    mapping = torch.tensor(batch.full_to_swa, dtype=torch.int64)
    _TABLES.insert(0, (batch.req_to_token, batch.full_to_swa, table, mapping))
    del _TABLES[4:]
    return table, mapping


def make_inputs(batch: VerifyBatch, variant: Variant, device: str | torch.device,
                padding: Padding = DEFAULT_PADDING, fill: int = 1) -> VerifyInputs:
    """The call's arguments for ``batch`` along ``variant`` on ``device``, as upstream's caller makes them.

    ``padding``: the tier padding convention the builder declares (its graph path's host total follows it);
    ``fill``: its runner's pad-row ``seq_len`` (the ``seq_len_fill_value`` capability).

    On the graph path the rows and tokens past the real ones are filled like graph
    replay fills its static buffers: ``seq_lens`` ``fill`` (1 upstream), slot 0, ``out_cache_loc`` 0.  Eager, a
    batch's ``dp_pad_rows`` are filled the same way, as the worker's ``_pad_inputs_to_size`` pads the forward batch
    before the re-plan (mirror ``fill``, ``positions`` 0).
    """
    import torch

    check_variant(batch, variant)
    rows, tokens = _rows_and_tokens(batch, variant)
    seq_lens = torch.ones(rows, dtype=torch.int32, device=device)
    req_pool_indices = torch.zeros(rows, dtype=torch.int64, device=device)
    out_cache_loc = torch.zeros(tokens, dtype=torch.int64, device=device)
    positions = torch.zeros(_positions_len(batch, rows, tokens), dtype=torch.int64, device=device)
    _fill_rows(seq_lens, req_pool_indices, out_cache_loc, batch, fill)
    fill_positions(positions, batch)
    device_verify = _device_verify_lens(batch)
    table, mapping = _host_tables(batch)
    return VerifyInputs(
        seq_lens=seq_lens,
        req_pool_indices=req_pool_indices,
        out_cache_loc=out_cache_loc,
        req_to_token=table.to(device, copy=True),  # every build gets its own copy of the caller's buffers
        full_to_swa=mapping.to(device, copy=True),
        verify_lens=None if device_verify is None else torch.tensor(device_verify, dtype=torch.int32, device=device),
        bs=batch.bs,
        num_draft_tokens=batch.num_draft_tokens,
        is_dspark=batch.is_dspark,
        geometry=batch.geometry,
        graph=batch.graph if variant.path == "graph" else None,
        variant=variant,
        padding=padding,
        mode=batch.mode,
        draft_step=batch.draft_step,
        seq_len_fill=fill,
        positions=positions,
        speculative_num_draft_tokens=batch.speculative_num_draft_tokens,
        **_host_values(batch, variant, padding, fill),
    )


def _positions_len(batch: VerifyBatch, rows: int, tokens: int) -> int:
    """One position per token of the call (the decode modes: per row; draft decode's buffer holds every step's
    locations, its positions the step's own)."""
    return rows if batch.mode in DECODE_MODES else tokens


def fill_positions(positions: torch.Tensor, batch: VerifyBatch) -> None:
    """The forward batch's positions in place: the real tokens'
    (:attr:`~metadata_builders.families.dsv4.batch.VerifyBatch.positions`), then 0, as upstream's runner refills its
    static ``positions[:padded_tokens]`` (slot policy ZERO)."""
    import torch

    positions.fill_(0)
    real = batch.positions
    positions[: len(real)] = torch.tensor(real, dtype=positions.dtype)


def _fill_rows(seq_lens: torch.Tensor, req_pool_indices: torch.Tensor, out_cache_loc: torch.Tensor,
               batch: VerifyBatch, fill: int = 1) -> None:
    import torch

    seq_lens.fill_(fill)
    req_pool_indices.fill_(0)
    out_cache_loc.fill_(0)
    seq_lens[: batch.bs] = torch.tensor(_caller_seq_lens(batch), dtype=seq_lens.dtype)
    req_pool_indices[: batch.bs] = torch.tensor(batch.req_pool_indices, dtype=req_pool_indices.dtype)
    out_cache_loc[: batch.num_out_cache_loc] = torch.tensor(batch.out_cache_loc, dtype=out_cache_loc.dtype)


def refill_inputs(inputs: VerifyInputs, batch: VerifyBatch) -> None:
    """Graph replay: copy ``batch`` into the captured static buffers in place, like the graph runner.

    The tier's buffers keep their addresses and shapes; per-step values (the
    ragged layout, the host mirror, the batch size) are replaced.  Raises
    :class:`~metadata_builders.errors.InvalidBatch` when ``batch`` does not fit the
    captured tier or tables.
    """
    import torch

    from metadata_builders.errors import InvalidBatch

    variant = inputs.variant
    check_variant(batch, variant)
    if batch.mode != inputs.mode \
            and bucket_of(batch.mode, batch.draft_step) != bucket_of(inputs.mode, inputs.draft_step):
        raise InvalidBatch("mode", None, f"the captured graph's mode {inputs.mode!r} (or one sharing its bucket)",
                           batch.mode)
    if batch.draft_step != inputs.draft_step:  # each step is its own child backend, its own captured metadata
        raise InvalidBatch("draft_step", None, f"the captured child's step {inputs.draft_step!r}", batch.draft_step)
    if batch.speculative_num_draft_tokens != inputs.speculative_num_draft_tokens:  # the draft worker's own runner
        raise InvalidBatch("speculative_num_draft_tokens", None,
                           f"the captured backend's {inputs.speculative_num_draft_tokens!r}",
                           batch.speculative_num_draft_tokens)
    if batch.graph != inputs.graph:
        raise InvalidBatch("graph", None, f"the captured tier {inputs.graph}", batch.graph)
    for name, values in (("req_to_token", batch.req_to_token), ("full_to_swa", batch.full_to_swa)):
        fresh = torch.tensor(values, dtype=getattr(inputs, name).dtype)
        if fresh.shape != getattr(inputs, name).shape:
            raise InvalidBatch(name, None, f"of the captured shape {tuple(getattr(inputs, name).shape)}",
                               tuple(fresh.shape))
        getattr(inputs, name).copy_(fresh)
    _fill_rows(inputs.seq_lens, inputs.req_pool_indices, inputs.out_cache_loc, batch, inputs.seq_len_fill)
    if inputs.positions is not None:
        fill_positions(inputs.positions, batch)
    device_verify = _device_verify_lens(batch)
    inputs.verify_lens = None if device_verify is None else torch.tensor(
        device_verify, dtype=torch.int32, device=inputs.seq_lens.device
    )
    for name, value in _host_values(batch, variant, inputs.padding, inputs.seq_len_fill).items():
        setattr(inputs, name, value)
    inputs.bs = batch.bs
    inputs.mode = batch.mode  # an idle rank replays the graph decode captured (its bucket), as upstream's runner
