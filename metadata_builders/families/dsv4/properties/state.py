"""P8 (inputs untouched) and P9 (no hidden state between builds).

P9's history is derived from the batch itself, so a P9 failure replays from the
batch alone.  Worked example: ``seq_lens=[5, 3]``, ``verify_lens=[2, 1]`` on a tier
of 3 rows / 8 tokens capped at 2 (pad row 2 takes 2 tokens, tokens 5..7 are an
uncovered tail in slot 0), table width 12, slot 3 spare.  A fresh builder first
builds (the first variant of each path, and a capture and replay of the graph path) the batch
with other values (:func:`~metadata_builders.families.dsv4.properties.sequences.same_tier_batch`),
then its largest form (:func:`largest_batch`): prefixes as long as the table
allows, the pad row filled by a request in slot 3, the cap dropped, so the last
real row covers tokens 3..7.  Before both, the same two rows on the same tier with
one draft token fewer (:func:`~metadata_builders.families.dsv4.properties.sequences.other_draft_count_batch`:
``verify_lens=[1, 1]``).  Then the batch itself: each variant must equal its
build on a second freshly constructed builder.  A buffer reused across calls and
refreshed only up to the covered tokens keeps slot 3 in tokens 5..7; a page table
cached by batch size keeps the wider one; lengths memoised by the row count keep the
other draft count's.
"""

from __future__ import annotations

from typing import Any

from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsv4.batch import GraphTier, VerifyBatch
from metadata_builders.families.dsv4.builders.audited import MemoBuilder
from metadata_builders.families.dsv4.metadata import first_difference
from metadata_builders.families.dsv4.properties._common import (
    _DECISION_NAMES,
    Partial,
    _clean,
    _compare,
    _decided,
    _fail,
    _name,
    _reference,
    _variants,
    judging,
)
from metadata_builders.families.dsv4.properties.sequences import (
    filled_tier_batch,
    other_draft_count_batch,
    other_modes_batches,
    requests_in_spare_slots,
    same_tier_batch,
)
from metadata_builders.families.dsv4.reference import ReferenceBuilder
from metadata_builders.harness import harness_session


@judging
def check_p8_inputs_untouched(builder, batch: VerifyBatch) -> list[str]:
    """P8: a build (and a graph replay) leaves every input it was handed bit-identical.

    In-place updates of a caller's ``seq_lens`` are the classic graph-replay bug.
    A builder that models graph replay is also captured and replayed once, on the
    first graph variant; P5's longer replay sequence checks the same rule on every step.
    """
    if isinstance(builder, ReferenceBuilder):
        return ["the reference has no device inputs; nothing to check"]
    if builder.capabilities.build == "batch":
        return [Partial(f"builder {_name(builder)!r} builds its own inputs from the batch (deprecated "
                        "build(batch, variant)); nothing of the harness's to check", "own_inputs")]
    notes: list[str] = []
    replayed = False
    for variant in _variants(builder, batch, notes):
        _check_untouched(variant, builder.build(batch, variant), "the build")
        if variant.path == "graph" and not replayed and builder.capabilities.replays:
            clean, replayed = _clean(batch), True
            captured = builder.capture(clean, variant)
            _check_untouched(variant, builder.replay(captured, clean), "a graph replay")
    return notes


def _check_untouched(variant, md, what: str) -> None:
    if md.audit.inputs_written:
        change = md.audit.inputs_written[0]
        raise _fail("P8", variant, f"{what} modified an input it was handed", field=change.name,
                    index=change.index, expected=change.before, actual=change.after, check="p8.input_written")


# -- P9 -------------------------------------------------------------------------------------------


def longer_prefixes_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """The batch with every prefix as long as its row of the table allows (a wider page table).

    None when nothing grows or the result would be invalid.
    """
    width = batch.max_context
    seq_lens = [max(s, width - e) for s, e in zip(batch.seq_lens, batch.extend_lens)]
    if seq_lens == list(batch.seq_lens):
        return None
    try:
        return batch.replace(seq_lens=seq_lens)
    except InvalidBatch:
        return None


def grown_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """More requests than the batch: the tier filled (graph), or every spare slot added (eager).

    Each new request has a prefix of 1 and verifies as many tokens as it may.
    """
    if batch.graph is not None:
        return filled_tier_batch(batch)
    return requests_in_spare_slots(batch, None, batch.num_draft_tokens)


def uncapped_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """The batch on its tier without the cap: every token of the tier covered by a row (another graph)."""
    g = batch.graph
    if g is None or g.cap is None:
        return None
    try:
        return batch.replace(graph=GraphTier(g.padded_bs, g.graph_num_tokens, None))
    except InvalidBatch:
        return None


def widest_rows_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """Every ragged row verifying as many tokens as it may (the draft, the cap, the table, the tier's budget).

    Under ``pad_rows_only`` a real row never takes tier slack, so only wider rows cover
    a tier's tail with real slots; first rows first.  None for a uniform batch, or when
    nothing widens or the result would be invalid.
    """
    if batch.verify_lens is None:
        return None
    g = batch.graph
    budget = (g.graph_num_tokens if g is not None else None)
    lens = list(batch.verify_lens)
    for b, (s, e) in enumerate(zip(batch.seq_lens, lens)):
        top = min(batch.num_draft_tokens, batch.max_context - s, g.cap if g is not None and g.cap else 1 << 30)
        if budget is not None:
            top = min(top, e + budget - sum(lens))
        lens[b] = max(e, top)
    if lens == list(batch.verify_lens):
        return None
    out = [batch.req_to_token[slot][s + j] for s, slot, e in zip(batch.seq_lens, batch.req_pool_indices, lens)
           for j in range(e)]
    try:
        return batch.replace(verify_lens=lens, out_cache_loc=out)
    except InvalidBatch:
        return None


def largest_batch(batch: VerifyBatch) -> VerifyBatch | None:
    """The most the batch's shape can hold (each step if valid): more requests, no cap, the widest rows, then the
    longest prefixes those rows leave room for."""
    largest = batch
    for grow in (grown_batch, uncapped_batch, widest_rows_batch, longer_prefixes_batch):
        largest = grow(largest) or largest
    return None if largest == batch else largest


def history_for(batch: VerifyBatch) -> list[VerifyBatch]:
    """What P9 builds on a builder before ``batch``: the same requests in the other modes of the MTP step, the same
    rows and tier with another draft count, the batch with other values, its largest form, and the other draft
    count again.

    The other modes come first, as one worker builds verify, draft decode and draft extend on one backend every
    step (what a draft-decode build leaves on the builder must not reach a decode build).  The other draft count
    (DSpark: its active count changes step to step) keeps the shape a cache would key on (the rows, the tier) with
    other values: before any batch of the same shape and count, so a memo that keeps its first entry for a shape
    hands ``batch`` the other count's values; and last, right before ``batch``, so a staging buffer kept step to
    step is rewritten with other bytes while the previous step's copy from it may be unread (ATOM #817's
    ``stale_async_copy``).  The largest form comes before it: what it leaves in a reused buffer meets ``batch``."""
    batch = _clean(batch)
    out: list[VerifyBatch] = []
    other = other_draft_count_batch(batch)
    for earlier in (*other_modes_batches(batch), other, same_tier_batch(batch), largest_batch(batch)):
        if earlier is not None and earlier != batch and earlier not in out:
            out.append(earlier)
    if other is not None and out[-1] != other:
        out.append(other)
    return out


def play_history(builder: Any, history: list[VerifyBatch]) -> None:
    """Build each batch of ``history`` on ``builder``: the first variant of each path, and one graph replay.

    Enough to leave behind whatever a builder keeps between calls; every variant of
    the batch under test is then compared (:func:`check_p9_no_hidden_state`).
    """
    for earlier in history:
        if earlier.mode not in builder.capabilities.modes:
            continue  # a mode the builder does not build (its other modes' batches are P9's history, not its own)
        firsts: dict[str, Any] = {}
        for variant in _variants(builder, earlier, []):
            firsts.setdefault(variant.path, variant)
        for variant in firsts.values():
            builder.build(earlier, variant)
        if "graph" in firsts and builder.capabilities.replays:
            builder.replay(builder.capture(earlier, firsts["graph"]), earlier)


def can_be_made_afresh(builder: Any) -> bool:
    """Whether ``builder.fresh()`` constructs a twin (an audited builder made from a factory)."""
    return not isinstance(builder, ReferenceBuilder) and builder.can_be_made_afresh


@judging
def check_p9_no_hidden_state(builder, batch: VerifyBatch) -> list[str]:
    """P9: a batch built after other builds and replays equals its build on a freshly constructed builder.

    Each variant built after the history is compared with the reference first; only
    where it differs is a fresh builder asked (a difference the fresh builder shares
    is P1's, not hidden state).
    """
    if isinstance(builder, ReferenceBuilder):
        return ["the reference keeps no state; nothing to check"]
    if not can_be_made_afresh(builder):
        return [Partial(f"P9 not checked: builder {_name(builder)!r} cannot be constructed afresh (no factory)",
                        "fresh_builder")]
    batch = _clean(batch)
    history = history_for(batch)
    if not history:
        return ["no other batch of this shape to build first; nothing to check"]
    # One session over the history and the batch: the stream (what an asynchronous copy may still read) is not
    # drained between steps, as an overlap scheduler does not sync between them.
    with harness_session():
        return _after_history(builder, batch, history)


def _after_history(builder: Any, batch: VerifyBatch, history: list[VerifyBatch]) -> list[str]:
    if isinstance(builder, MemoBuilder) and builder.played_history == tuple(history):
        seasoned = builder  # the gate's memo, already seasoned with this batch's history (P1's builds are these)
    else:
        seasoned = builder.fresh()
        play_history(seasoned, history)
    notes: list[str] = []
    clean = None
    what = f"after {len(history)} other batch(es) on the same builder vs a freshly constructed one"
    for variant in _variants(builder, batch, notes):
        got = seasoned.build(batch, variant)
        if got.audit.faults:
            _check_faults(builder, batch, variant, got, what)
        if _same(_reference(builder).build(batch, variant), got):
            continue
        clean = clean or builder.fresh()
        want = clean.build(batch, variant)
        _compare("P9", variant, want, got, what, check="p9.vs_fresh_builder")
        wanted, seen = _decided(want), _decided(got)
        for name in _DECISION_NAMES:
            if wanted[name] != seen[name]:
                raise _fail("P9", variant, f"{what}: the decision differs", field=f"decision.{name}",
                            expected=wanted[name], actual=seen[name], check="p9.decision")
    return notes


def _check_faults(builder: Any, batch: VerifyBatch, variant: Any, got: Any, what: str) -> None:
    """A fault the build after the history shows and a fresh builder's does not: what the history left behind made
    the device read other bytes (a pinned staging buffer reused step to step and rewritten before the stream read
    it: ATOM #817's ``stale_async_copy``), or write elsewhere."""
    seen = [(f.kind, f.count) for f in got.audit.faults]
    fresh = [(f.kind, f.count) for f in builder.fresh().build(batch, variant).audit.faults]
    if seen != fresh:
        f = got.audit.faults[0]
        raise _fail("P9", variant, f"{what}: the build faults ({f.kind}, {f.op} in {f.stage}) where a fresh builder "
                    "does not", field="audit.faults", expected=fresh, actual=seen, check="p9.fault_after_history",
                    where=f.stage)


def _same(expected: Any, actual: Any) -> bool:
    """Fields and decision as the reference has them (the fast path: no fresh builder needed)."""
    return first_difference(expected.fields, actual.fields) is None and _decided(expected) == _decided(actual)
