"""The rules a batch must keep, checked across its fields: every precondition of the builders.

Validation is part of the product: a broken precondition raises
:class:`~metadata_builders.errors.InvalidBatch` naming field, index and value
(``verify_lens[2]=0 must be in 1..num_draft_tokens=3``), so no builder ever sees
a batch that would make it raise ``IndexError``.  :func:`validate` runs when a
:class:`~metadata_builders.families.dsv4.batch.VerifyBatch` is made, after its fields are
converted to tuples of ints: the table's shape and locations, the slots, the
verify lengths, the graph tier (:func:`_validate_graph`) and the divergence
(:func:`_validate_divergence`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metadata_builders.values import check_int
from metadata_builders.families.dsv4.batch.modes import DECODE_MODES
from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsv4.tier import tier_verify_lens

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import Divergence, GraphTier, VerifyBatch

__all__ = ["INT32_MAX", "validate"]

INT32_MAX = 2**31 - 1
"""Upstream stores ``swa_loc`` as int32 (F4): every ring slot must fit it."""


def validate(batch: VerifyBatch) -> None:
    """Every cross-field rule of ``batch``; the first one broken raises ``InvalidBatch``."""
    bs = batch.bs
    _validate_mode(batch)
    _validate_dspark_draft(batch)
    _validate_dp_padding(batch)
    if bs == 0 and batch.mode != "idle":
        raise InvalidBatch("seq_lens", None, "non-empty (only an idle batch has no request)", [])
    check_int("num_draft_tokens", batch.num_draft_tokens, minimum=1)
    if len(batch.req_pool_indices) != bs:
        raise InvalidBatch("req_pool_indices", None, f"of length len(seq_lens)={bs}", len(batch.req_pool_indices))
    if not batch.req_to_token or not batch.req_to_token[0]:
        raise InvalidBatch("req_to_token", None, "a non-empty table", [list(r) for r in batch.req_to_token])
    width = len(batch.req_to_token[0])
    for i, row in enumerate(batch.req_to_token):
        if len(row) != width:
            raise InvalidBatch("req_to_token", i, f"a row of width max_context={width} (the width of row 0)", len(row))
    if not batch.full_to_swa or batch.full_to_swa[-1] != -1:
        if not batch.full_to_swa:
            raise InvalidBatch("full_to_swa", None, "non-empty, ending in the -1 sentinel", [])
        raise InvalidBatch(
            "full_to_swa", len(batch.full_to_swa) - 1, "the -1 sentinel (index -1 must map to -1)",
            batch.full_to_swa[-1]
        )
    for i, v in enumerate(batch.full_to_swa):
        if v < -1:
            raise InvalidBatch("full_to_swa", i, ">= -1", v)
    pool = len(batch.full_to_swa)
    for s, row in enumerate(batch.req_to_token):
        for c, loc in enumerate(row):
            if not -1 <= loc < pool:
                raise InvalidBatch(f"req_to_token[{s}]", c,
                                   f"a full-pool location in -1..{pool - 1} (len(full_to_swa)-1)", loc)
    seen: dict[int, int] = {}
    for i, slot in enumerate(batch.req_pool_indices):
        if not 1 <= slot < batch.num_slots:
            raise InvalidBatch(
                "req_pool_indices", i,
                f"in 1..{batch.num_slots - 1} (slot 0 is the padding slot; num_slots={batch.num_slots})", slot
            )
        if slot in seen:
            raise InvalidBatch("req_pool_indices", i, f"distinct (also at index {seen[slot]})", slot)
        seen[slot] = i
    if batch.verify_lens is not None:
        if len(batch.verify_lens) != bs:
            raise InvalidBatch("verify_lens", None, f"of length len(seq_lens)={bs}", len(batch.verify_lens))
        for i, v in enumerate(batch.verify_lens):
            if not 1 <= v <= batch.num_draft_tokens:
                raise InvalidBatch("verify_lens", i, f"in 1..num_draft_tokens={batch.num_draft_tokens}", v)
    if len(batch.out_cache_loc) != batch.num_out_cache_loc:
        what = (f"bs * (num_draft_tokens - 1)={batch.num_out_cache_loc} (draft decode's buffer of every step)"
                if batch.mode == "draft_decode" else f"num_real_tokens={batch.num_real_tokens}")
        raise InvalidBatch("out_cache_loc", None, f"of length {what}", len(batch.out_cache_loc))
    for b, (s, e) in enumerate(zip(batch.first_positions, batch.extend_lens)):
        if s + e > width:
            raise InvalidBatch(
                "seq_lens", b,
                f"such that its last position this step ({s + e - 1}) fits req_to_token's width max_context={width}",
                batch.seq_lens[b],
            )
    if batch.graph is not None:
        _validate_graph(batch, batch.graph)
    if batch.num_slots * batch.geometry.ring_size > INT32_MAX + 1:
        raise InvalidBatch(
            "geometry.ring_size", None,
            f"such that every swa_loc = slot * ring_size + pos % ring_size fits int32 (upstream stores it as "
            f"int32): num_slots * ring_size <= 2**31 with num_slots={batch.num_slots}",
            batch.geometry.ring_size,
        )
    if batch.geometry.compression is not None:
        ring = batch.geometry.compression.c128_ring_size
        if batch.num_slots * ring > INT32_MAX + 1:
            raise InvalidBatch(
                "geometry.compression.c128_ring_size", None,
                f"such that every compress-plan location slot * ring + pos % ring fits int32 (upstream's planner "
                f"writes int32): num_slots * ring <= 2**31 with num_slots={batch.num_slots}", ring,
            )
    if batch.divergence is not None:
        _validate_divergence(batch, batch.divergence)


def _validate_mode(batch: VerifyBatch) -> None:
    """What each mode of the MTP step takes (:data:`~metadata_builders.families.dsv4.batch.MODES`): only target verify
    is ragged or diverges; draft decode names its step; an idle batch has no request and a graph tier of pad rows."""
    mode = batch.mode
    if batch.verify_lens is not None and mode != "target_verify":
        raise InvalidBatch("verify_lens", None, f"None for a {mode} batch (only target verify is ragged)",
                           list(batch.verify_lens))
    if batch.divergence is not None and mode != "target_verify":
        raise InvalidBatch("divergence", None, f"None for a {mode} batch (the fault model is target verify's, P6)",
                           batch.divergence)
    if mode == "draft_decode" or (mode == "idle" and batch.draft_step is not None):
        # Steps 0 .. steps - 2 run a forward (draft extend made the first draft token; the last step's token is
        # never fed back): the multi-step backend builds only those eagerly and refreshes only those at replay.
        # An idle batch with a step is the draft runner's idle replay, judged on that child.
        if batch.num_draft_tokens < 3:
            raise InvalidBatch("num_draft_tokens", None, ">= 3 for draft decode (num_draft_tokens - 1 steps, of "
                               "which steps - 1 run a forward)", batch.num_draft_tokens)
        if isinstance(batch.draft_step, bool) or not isinstance(batch.draft_step, int) or \
                not 0 <= batch.draft_step < batch.num_draft_tokens - 2:
            raise InvalidBatch("draft_step", None, f"an int in 0..num_draft_tokens-3={batch.num_draft_tokens - 3} "
                               f"for {mode.replace('_', ' ')} (the steps that run a forward)", batch.draft_step)
    elif batch.draft_step is not None:
        raise InvalidBatch("draft_step", None, f"None for a {mode} batch (draft decode's step only, or the draft "
                           "runner's idle replay)", batch.draft_step)
    if batch.graph is not None and batch.graph.cap is not None and mode != "target_verify":
        raise InvalidBatch("graph.cap", None, f"None for a {mode} tier (the cap is ragged verify's)", batch.graph.cap)
    if mode == "idle":
        if batch.seq_lens:
            raise InvalidBatch("seq_lens", None, "empty for an idle batch (a DP rank with no request)",
                               list(batch.seq_lens))
        if batch.graph is None:
            raise InvalidBatch("graph", None, "a GraphTier for an idle batch (its rows are the tier's pad rows)", None)


def _validate_dspark_draft(batch: VerifyBatch) -> None:
    """A configured draft count apart from the active width is a DSpark draft worker's block verify (upstream
    ``is_dspark_draft``): target verify, DSpark, configured ``gamma + 1`` for ``gamma = num_draft_tokens`` (the
    backend derives its active width as the configured count less one), and a pool without compressed KV (the draft
    worker's ``need_compress = not is_draft_worker``: its layers compress nothing)."""
    configured = batch.speculative_num_draft_tokens
    if configured is None:
        return
    name = "speculative_num_draft_tokens"
    check_int(name, configured)
    if batch.mode != "target_verify" or not batch.is_dspark:
        raise InvalidBatch(name, None, f"None for a {'DSpark' if batch.is_dspark else 'EAGLE'} {batch.mode} batch "
                           "(only a DSpark draft worker's block verify keeps two counts)", configured)
    if configured != batch.num_draft_tokens + 1:
        raise InvalidBatch(name, None, f"num_draft_tokens + 1 = {batch.num_draft_tokens + 1} (a DSpark draft worker "
                           "verifies its configured count less one), or None", configured)
    if batch.geometry.compression is not None:
        raise InvalidBatch("geometry.compression", None, "None for a DSpark draft worker's verify (its pool has no "
                           "compressed KV: need_compress = not is_draft_worker)", batch.geometry.compression)


def _validate_dp_padding(batch: VerifyBatch) -> None:
    """The worker's eager DP padding (issue 45): pad rows on an eager-only uniform target-verify batch without
    divergence (upstream pads the eager step; ragged + DP is unverified there), each row's ``num_draft_tokens``
    positions ``1..num_draft_tokens`` inside slot 0's table row."""
    name, rows = "dp_pad_rows", batch.dp_pad_rows
    check_int(name, rows, minimum=0)
    if not rows:
        return
    why = ("0 for a batch that is not an eager uniform target verify without divergence or a second draft count "
           "(the worker DP-pads the eager target-verify step; ragged + DP is unverified upstream)")
    if (batch.mode != "target_verify" or batch.verify_lens is not None or batch.graph is not None
            or batch.divergence is not None or batch.speculative_num_draft_tokens is not None):
        raise InvalidBatch(name, None, why, rows)
    if batch.req_to_token and 1 + batch.num_draft_tokens > len(batch.req_to_token[0]):
        raise InvalidBatch(name, None, f"0: a pad row (seq_len 1, slot 0) verifies positions up to "
                           f"{batch.num_draft_tokens}, past max_context={len(batch.req_to_token[0])}", rows)


def _validate_graph(batch: VerifyBatch, graph: GraphTier) -> None:
    """The tier holds the real requests: enough rows and tokens, a cap no real row exceeds, pad rows that fit."""
    bs = batch.bs
    if graph.padded_bs < bs:
        raise InvalidBatch("graph.padded_bs", None, f">= bs={bs}", graph.padded_bs)
    if batch.geometry.compression is not None and graph.graph_num_tokens < graph.padded_bs:
        # F10 (docs/FINDINGS.md): the compress planner checks batch_size <= num_q_tokens on the tier.
        raise InvalidBatch(
            "graph.graph_num_tokens", None,
            f">= padded_bs={graph.padded_bs} with compression (the compress planner's RuntimeCheck "
            "batch_size <= num_q_tokens, F10)", graph.graph_num_tokens,
        )
    if graph.graph_num_tokens < batch.num_real_tokens:
        raise InvalidBatch(
            "graph.graph_num_tokens", None, f">= the real token count {batch.num_real_tokens}", graph.graph_num_tokens
        )
    if batch.verify_lens is None:
        per_row = 1 if batch.mode in DECODE_MODES else batch.num_draft_tokens
        tier = graph.padded_bs * per_row
        if batch.mode != "target_verify" and graph.graph_num_tokens != tier:
            raise InvalidBatch("graph.graph_num_tokens", None, f"padded_bs*{per_row}={tier} for a {batch.mode} tier "
                               "(every row of it takes the same tokens)", graph.graph_num_tokens)
        if graph.graph_num_tokens < tier:
            # Every row of a uniform tier verifies num_draft_tokens; tokens past
            # padded_bs*num_draft_tokens (upstream never captures such a tier) would be
            # an uncovered tail of pads, which both builders handle generically.
            raise InvalidBatch(
                "graph.graph_num_tokens", None,
                f">= padded_bs*num_draft_tokens={tier} for a uniform batch", graph.graph_num_tokens,
            )
        return
    if graph.cap is not None and graph.cap < max(batch.verify_lens):
        # F2b: upstream clamps every row to the cap, real ones included; callers
        # pass cap = num_draft_tokens, so a smaller cap would drop real tokens.
        raise InvalidBatch(
            "graph.cap", None,
            f">= max(verify_lens)={max(batch.verify_lens)} (a cap below a real row would drop its verify tokens)",
            graph.cap,
        )
    _check_pad_rows_fit(batch, "graph.graph_num_tokens", graph, batch.verify_lens, graph.graph_num_tokens)


def _check_pad_rows_fit(
    batch: VerifyBatch, name: str, graph: GraphTier, verify_lens: tuple[int, ...], actual: Any
) -> None:
    """Pad rows (seq_len 1, slot 0) must end inside ``req_to_token``'s width.

    The last real row may absorb tier slack past the width: that is upstream's
    latent out-of-bounds read (F2c), which the reference reports as ``oob_read``.
    """
    lens = tier_verify_lens(verify_lens, graph.padded_bs, graph.graph_num_tokens, graph.cap)
    width = batch.max_context
    for b in range(batch.bs, graph.padded_bs):
        if 1 + lens[b] > width:
            raise InvalidBatch(
                name, None,
                f"such that pad row {b} (seq_len 1, slot 0, {lens[b]} verify tokens) ends within req_to_token's "
                f"width max_context={width}; its last position would be {lens[b]}",
                actual,
            )


def _validate_divergence(batch: VerifyBatch, div: Divergence) -> None:
    """A divergence the device could really hold: lengths per row that fit the table (and, ragged, the tier)."""
    bs, width = batch.bs, batch.max_context
    if div.seq_lens_cpu is not None and len(div.seq_lens_cpu) != bs:
        raise InvalidBatch("divergence.seq_lens_cpu", None, f"of length bs={bs}", len(div.seq_lens_cpu))
    device = div.extend_seq_lens
    if device is None:
        return
    name = "divergence.extend_seq_lens"
    if batch.verify_lens is not None:
        if len(device) != bs:
            raise InvalidBatch(name, None, f"of length bs={bs} (the device layout of a ragged batch)", len(device))
        for b, (s, v) in enumerate(zip(batch.seq_lens, device)):
            if not 1 <= v <= batch.num_draft_tokens:
                raise InvalidBatch(name, b, f"in 1..num_draft_tokens={batch.num_draft_tokens} (a stale layout is "
                                   "still a layout)", v)
            if s + v > width:
                raise InvalidBatch(name, b, f"such that seq_lens[{b}]+{v} fits req_to_token's width {width}", v)
        graph = batch.graph
        if graph is not None:
            if sum(device) > graph.graph_num_tokens:
                raise InvalidBatch(name, None, f"summing to at most graph_num_tokens={graph.graph_num_tokens}",
                                   sum(device))
            if graph.cap is not None and max(device) > graph.cap:
                raise InvalidBatch(name, None, f"at most graph.cap={graph.cap} per row", max(device))
            _check_pad_rows_fit(batch, name, graph, device, list(device))
        return
    allowed = {bs} | ({batch.graph.padded_bs} if batch.graph is not None else set())
    if len(device) not in allowed:
        raise InvalidBatch(name, None, f"of length in {sorted(allowed)} (bs or graph.padded_bs)", len(device))
    prefixes = list(batch.seq_lens) + [1] * (len(device) - bs)
    for b, (s, v) in enumerate(zip(prefixes, device)):
        if v < 0:
            raise InvalidBatch(name, b, ">= 0", v)
        if s + v > width:
            raise InvalidBatch(name, b, f"such that row {b}'s positions ({s}+{v}) fit req_to_token's width {width}",
                               v)
