"""P5 as a graph runner runs it: several tiers captured on one backend, replays interleaving them.

The single-tier half of P5 (:mod:`.graph`) captures the batch's own tier on a
builder and replays a sequence into it.  A real runner captures **every** tier on
one backend, largest first, each with the runner's own capture geometry, and a
server's replays hop between tiers.  Here the batch's runner
(:meth:`~metadata_builders.families.dsv4.graph_runner.RunnerSpec.around`) captures the
batch's tier, a sibling tier that admits it too -- for a compact ragged batch one
that shares its ``bs`` (upstream keys those by token count) -- and the largest
tier, on one builder, largest first; then replays

    batch @ A,  batch @ B,  batch with other values @ A,  batch with fewer requests @ B,  batch @ largest

The runner takes its request slots from the capture geometry the builder declares (``token_slots``, the
released runner's, unless it says ``request_slots``: :mod:`metadata_builders.families.dsv4.tier`); a builder that brings
its runner's own slot rule (``ragged_capture_slots``) is held to that declaration first, on every tier
(``p5.capture_convention``: a runner that follows one rule while the builder declares the other).  It
holds the capture layouts to the tiers (each covers its tier: ``p5.capture_geometry``), and each
replay to a fresh build of its batch on its tier (same fields, the
tier's captured storage and shapes), and to the geometry the tier was captured
with: as many rows as the tier has slots, no row wider than the captured request
width (upstream's ``captured_req_width``: what the runner's dense consumers and
kernels are sized by).

Worked example: ``verify_lens=[3, 1]``, 3 drafts.  The runner (batch sizes 1..2)
captures ``(2, 6)`` and ``(2, 3)``... -- with ``max_bs = 2`` both token tiers of at
least 2 tokens share ``bs = 2``: a builder that keys them by ``bs`` gives tier 3's
capture tier 6's buffers, and the replay of the batch on tier 6 after tier 3 reads them.
"""

from __future__ import annotations

from typing import Any

from metadata_builders.errors import CaptureSync, InvalidBatch
from metadata_builders.families.dsv4.batch import GraphTier, VerifyBatch
from metadata_builders.families.dsv4.properties._common import _capture_error, _clean, _compare, _fail, _variants, tally
from metadata_builders.families.dsv4.properties.sequences import (
    busy_on_tier,
    fewer_requests_batch,
    idle_on_tier,
    same_tier_batch,
)
from metadata_builders.families.dsv4.tier import (
    CAPTURE_GEOMETRIES,
    DEFAULT_CAPTURE_GEOMETRY,
    CaptureGeometry,
    ragged_capture_slots,
)
from metadata_builders.families.dsv4.variants import Variant

__all__ = ["check_runner_replays", "runner_sequence"]


def _on(batch: VerifyBatch, tier: GraphTier | None) -> VerifyBatch | None:
    if tier is None:
        return None
    try:
        return batch.replace(graph=tier)
    except InvalidBatch:
        return None


def runner_sequence(batch: VerifyBatch, geometry: CaptureGeometry = DEFAULT_CAPTURE_GEOMETRY
                    ) -> tuple[Any, list[VerifyBatch]]:
    """The runner around ``batch`` (its slots by ``geometry``) and the replays it gets (the module docstring);
    ``(None, [])`` when none fits.

    In the batch's mode's units and tiers (a decode tier one token a row); a decode (or draft-decode) runner also
    replays an idle rank on its first tier after the batch with other values (upstream's ``DECODE_OR_IDLE``
    bucket; the draft runner's multi-step backend), and an idle batch is replayed on the runner a busy batch of its
    tier captured (:func:`~.sequences.busy_on_tier`)."""
    from metadata_builders.families.dsv4.graph_runner import RunnerSpec

    batch = _clean(batch)
    if batch.mode == "idle":
        busy = busy_on_tier(batch)
        return (None, []) if busy is None else runner_sequence(busy, geometry)
    spec = RunnerSpec.around(batch, geometry)
    if spec is None:
        return None, []
    first = _on(batch, spec.tier_for(batch))
    if first is None:
        return None, []
    a = first.graph
    assert a is not None
    others = [t for t in spec.tiers()
              if t != a and batch.bs <= t.padded_bs and batch.num_real_tokens <= t.graph_num_tokens]
    others.sort(key=lambda t: (t.padded_bs != a.padded_bs, t.graph_num_tokens))
    second = next((b for b in (_on(batch, t) for t in others) if b is not None), None)
    if second is None:
        return None, []
    changed = _on(same_tier_batch(batch), a) or first
    idle = idle_on_tier(changed)
    fewer = fewer_requests_batch(second) or second
    largest = _on(batch, spec.tiers()[0])
    return spec, [first, second, changed, *([idle] if idle is not None else []), fewer] + (
        [largest] if largest is not None and largest.graph not in (a, second.graph) else [])


def _graph_variant(builder: Any, batch: VerifyBatch, notes: list[str]) -> Variant | None:
    graph = [v for v in _variants(builder, batch, notes) if v.path == "graph"]
    return next((v for v in graph if v.gate == "dspark"), graph[0] if graph else None)


def check_runner_replays(builder: Any, batch: VerifyBatch) -> list[str]:
    """P5's runner half: tiers captured on one builder, replays interleaved, each equal to a fresh build."""
    from metadata_builders.families.dsv4.graph_runner import GraphRunner

    if not builder.capabilities.replays:
        return []
    spec, sequence = runner_sequence(batch, builder.capabilities.capture_geometry)
    sequence = [b for b in sequence if b.mode in builder.capabilities.modes]
    if not sequence:
        return []
    notes: list[str] = []
    variant = _graph_variant(builder, sequence[0], notes)
    if variant is None:
        return notes
    _check_capture_convention(builder, variant, spec)
    tiers = sorted({b.graph for b in sequence} | {spec.tiers()[0]}, key=lambda t: -t.graph_num_tokens)
    try:
        runner = GraphRunner(builder, variant, spec, sequence[0]).capture(tiers)
    except CaptureSync as error:
        raise _capture_error("P5", variant, error) from error
    _check_capture_layouts(variant, spec, runner)
    storage: dict[GraphTier, dict[str, int]] = {}
    for step, other in enumerate(sequence):
        tier = other.graph
        assert tier is not None
        what = (f"runner replay {step + 1}/{len(sequence)} on tier {tier.padded_bs} rows / {tier.graph_num_tokens} "
                f"tokens (key {spec.key(tier)}; {len(tiers)} tiers captured on one backend, largest first)")
        replayed = runner.replay(other)
        kept = storage.setdefault(tier, replayed.audit.storage)
        moved = [n for n in kept if replayed.audit.storage.get(n) != kept[n]]
        if moved:
            raise _fail("P5", variant, f"{what} returned new storage instead of writing into its tier's captured "
                        "buffer", field=moved[0], expected="the tier's captured address", actual="a new tensor",
                        check="p5.runner_replay_storage")
        _compare("P5", variant, builder.build(other, variant), replayed, f"{what} vs a fresh build",
                 check="p5.runner_replay_vs_fresh")
        _check_geometry(variant, spec, tier, replayed, what, builder.capabilities.padding, notes)
    shared_bs = len(tiers) - len({t.padded_bs for t in tiers})
    tally("P5 runner", runners=1, tiers=len(tiers), keys=len({spec.key(t) for t in tiers}),
          shared_bs=int(shared_bs > 0), replays=len(sequence))
    return notes


def _check_capture_convention(builder: Any, variant: Variant, spec: Any) -> None:
    """The runner the builder brings (``ragged_capture_slots``: upstream's ``_ragged_capture_slots``) captures
    every compact ragged tier with the request slots of the geometry the builder declares: a runner that follows
    one rule while the builder declares the other fails here, before anything is captured (docs/DESIGN.md §3)."""
    if not (spec.ragged and builder.capabilities.capture_slots):
        return
    declared, max_bs = spec.geometry, max(spec.capture_bs)
    for tier in spec.tiers():
        tokens = tier.graph_num_tokens
        got = builder.ragged_capture_slots(tokens, max_bs, spec.width)
        if got == tier.padded_bs:
            continue
        follows = [g for g in CAPTURE_GEOMETRIES if _slots(tokens, max_bs, spec.width, g) == got]
        rule = f"the {follows[0]} rule" if follows else "neither rule"
        raise _fail("P5", variant, f"the runner the builder brings captures the {tokens}-token tier with {got} "
                    f"request slots ({rule}; max_bs={max_bs}, width={spec.width}), but the builder declares "
                    f"capture_geometry = {declared!r}: {tier.padded_bs} slots", field="ragged_capture_slots",
                    index=(tokens,), expected=tier.padded_bs, actual=got, check="p5.capture_convention")


def _slots(tokens: int, max_bs: int, width: int, geometry: CaptureGeometry) -> int | None:
    try:
        return ragged_capture_slots(tokens, max_bs, width, geometry)
    except ValueError:
        return None


def _check_capture_layouts(variant: Variant, spec: Any, runner: Any) -> None:
    """Each ragged tier was captured with a layout that covers it: as many rows as its slots, each of
    ``1 .. captured_req_width`` tokens, summing to its tokens (what upstream's ``build_capture_verify_lens``
    promises the runner, and what every consumer the capture sizes relies on)."""
    for tier in runner.order:
        lens = runner.captured[tier].inputs.verify_lens_cpu
        if lens is None:
            continue
        rows, tokens = tier.padded_bs, tier.graph_num_tokens
        if len(lens) != rows or sum(lens) != tokens or any(not 1 <= w <= spec.width for w in lens):
            raise _fail("P5", variant, f"the runner captured tier {rows} rows / {tokens} tokens with a layout "
                        "that does not cover it", field="verify_lens (capture)",
                        expected=f"{rows} rows of 1..{spec.width} tokens summing to {tokens}", actual=list(lens),
                        check="p5.capture_geometry")


def _check_geometry(variant: Variant, spec: Any, tier: GraphTier, replayed: Any, what: str, padding: str,
                    notes: list[str]) -> None:
    """The replayed layout fits the tier's capture: its slots, and no row wider than the captured request width.

    The width rule holds under the conventions that honour the cap (``absorb_then_clamp``: every row clamped;
    ``pad_rows_only``: real rows are at most the draft tokens, pad rows clamped).  ``full_coverage`` ignores the
    cap by definition -- upstream's backend re-pads the runner's capped layout uncapped -- so a row wider than
    the captured width is its convention, not a replay fault: noted, and judged by P5 against the reference of
    that convention and by P8 (docs/FINDINGS.md F15)."""
    rows = replayed.fields.get("extend_seq_lens")
    if rows is None or not spec.ragged:
        return
    if len(rows) != tier.padded_bs:
        raise _fail("P5", variant, f"{what}: the replayed layout has another number of rows than the tier's slots",
                    field="extend_seq_lens", expected=f"{tier.padded_bs} rows", actual=f"{len(rows)} rows",
                    check="p5.runner_geometry")
    wide = next((r for r, w in enumerate(rows) if w > spec.width), None)
    if wide is not None and padding == "full_coverage":
        note = (f"P5 runner: under full_coverage a replayed row may be wider than captured_req_width={spec.width} "
                "(upstream re-pads uncapped; docs/FINDINGS.md F15)")
        if note not in notes:
            notes.append(note)
    elif wide is not None:
        raise _fail("P5", variant, f"{what}: a replayed row is wider than the captured request width "
                    f"(captured_req_width={spec.width}), which the tier was captured with",
                    field="extend_seq_lens", index=(wide,), expected=f"<= {spec.width}", actual=rows[wide],
                    check="p5.runner_geometry")
