"""P5 for the DSA family: eager = graph replay on each route, pad rows inert, replays as a runner makes them.

Three parts.  (a) On each route, a replay of the batch's tier equals the eager build on the real rows: the
per-request lengths, the per-token lengths and prefix sums, the page tables up to each row's read length.
(b) Pad rows are inert: no negative length (sglang #30378: a negative ``dsa_seqlens_expanded`` is read as uint32
by the top-k kernel, an illegal address), no length past the pad row's own KV length, and pages of slot 0
only.  (c) A runner captures several batch sizes on **one** backend, largest first, then replays a sequence
that grows and shrinks (longer rows, the batch, fewer requests on a smaller tier, the shortest rows, the batch
again): each replay equals the reference of its batch wherever a consumer reads.

Worked example (the family's batch, draft extend, tier 3): the pad row's expanded lengths are ``[0, 0, 1]``
(``1 - 3 + j + 1`` floored at 0); without the floor they would be ``[-1, 0, 1]``: ``dsa.p5.pad_negative``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metadata_builders.families.dsa.audited import DSASubject
from metadata_builders.families.dsa.properties.common import (
    building,
    clean,
    compare_field,
    fail,
    with_seq_lens,
)
from metadata_builders.families.dsa.reference import graph_metadata, token_rows
from metadata_builders.families.dsa.variants import DSAVariant, variants_for

if TYPE_CHECKING:
    from metadata_builders.families.dsa.audited import DSABuild
    from metadata_builders.families.dsa.batch import DSABatch

__all__ = ["check_p5_graph_vs_eager", "replay_sequence"]

_ROW_FIELDS = ("cache_seqlens_int32",)
_TOKEN_FIELDS = ("dsa_seqlens_expanded", "dsa_cache_seqlens_int32")
_PREFIX_FIELDS = {"cu_seqlens_k": "rows", "cu_seqlens_q": "tokens", "dsa_cu_seqlens_k": "tokens",
                  "dsa_cu_seqlens_q": "tokens"}


def check_p5_graph_vs_eager(subject: DSASubject, batch: DSABatch) -> list[str]:
    """(a), (b) and (c) of the module docstring, on every graph variant of the (clean) batch."""
    batch = clean(batch)
    if batch.graph is None:
        return ["P5: no graph tier on this batch (eager only)"]
    eager = None
    if batch.mode != "idle":
        with building("P5", DSAVariant("eager")):
            eager = subject.build(batch, DSAVariant("eager"))
    for variant in variants_for(batch):
        if variant.path != "graph":
            continue
        with building("P5", variant):
            replayed = subject.build(batch, variant)
        if eager is not None:
            _real_rows(batch, variant, eager, replayed)
        _pads_inert(batch, variant, replayed)
    for route in ("torch", "fused"):
        _runner(subject, batch, DSAVariant("graph", "given", route))
    return []


def _cut(batch: DSABatch, name: str, value: Any) -> Any:
    """The real rows' part of a field."""
    per = batch.tokens_per_row
    rows, tokens = batch.bs, batch.bs * per
    if name in _ROW_FIELDS:
        return value[:rows]
    if name in _PREFIX_FIELDS:
        return value[: (rows if _PREFIX_FIELDS[name] == "rows" else tokens) + 1]
    return value[:tokens]


def _real_rows(batch: DSABatch, variant: DSAVariant, eager: DSABuild, replayed: DSABuild) -> None:
    for name in (*_ROW_FIELDS, *_TOKEN_FIELDS, *_PREFIX_FIELDS):
        want, got = _cut(batch, name, eager.fields[name]), _cut(batch, name, replayed.fields[name])
        if want != got:
            index = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), len(want))
            raise fail("P5", "dsa.p5.graph_vs_eager", f"{name}: the replay's real rows differ from the eager build",
                       variant, field=name, index=index, expected=want[index] if index < len(want) else None,
                       actual=got[index] if index < len(got) else None)
    tokens = batch.bs * batch.tokens_per_row
    for name in ("page_table_1", "real_page_table"):
        want, got = eager.fields[name][:tokens], replayed.fields[name][:tokens]
        cols = min(len(want[0]), len(got[0])) if want and got else 0
        diff = compare_field(batch, "eager", name, [r[:cols] for r in want], [r[:cols] for r in got])
        if diff is not None:
            raise fail("P5", "dsa.p5.graph_vs_eager", f"{name}: the replay's real rows differ from the eager build "
                       "where a consumer reads", variant, field=name, index=diff[1], expected=diff[2], actual=diff[3])


def _pads_inert(batch: DSABatch, variant: DSAVariant, replayed: DSABuild) -> None:
    rows = token_rows(batch, "graph")
    expanded = replayed.fields["dsa_seqlens_expanded"]
    dsa = replayed.fields["dsa_cache_seqlens_int32"]
    table = replayed.fields["page_table_1"]
    for t, row in enumerate(rows):
        if row.real:
            continue
        if expanded[t] < 0 or dsa[t] < 0:
            raise fail("P5", "dsa.p5.pad_negative", "a pad row's length is negative (read as uint32: ~4e9 "
                       "positions, sglang #30378)", variant, field="dsa_seqlens_expanded", index=t, expected=">= 0",
                       actual=min(expanded[t], dsa[t]))
        if expanded[t] > row.kv_len:
            raise fail("P5", "dsa.p5.pad_window", "a pad row's length exceeds its own KV length", variant,
                       field="dsa_seqlens_expanded", index=t, expected=f"<= {row.kv_len}", actual=expanded[t])
        want = list(batch.req_to_token[0][: row.kv_len])
        if table[t][: row.kv_len] != want[: len(table[t])]:
            raise fail("P5", "dsa.p5.pad_slot", "a pad row reads pages that are not slot 0's", variant,
                       field="page_table_1", index=t, expected=want, actual=table[t][: row.kv_len])


def replay_sequence(batch: DSABatch) -> list[DSABatch]:
    """The replays (c) makes on the batch's runner: longer rows, the batch, one request on the runner's smallest
    captured size (when the batch has more), the shortest rows, the batch again.  Idle: the batch alone."""
    if batch.mode == "idle" or batch.graph is None:
        return [batch]
    out = [with_seq_lens(batch, [batch.width - batch.step_tokens] * batch.bs), batch]
    if batch.graph.capture_bs and batch.bs > 1:
        out.append(with_seq_lens(batch, batch.seq_lens, 1))
    elif not batch.graph.capture_bs and batch.graph.padded_bs > 1:
        # without a capture list the runner captures tier 1 besides the batch's: still several sizes on one backend
        out.append(with_seq_lens(batch, batch.seq_lens, 1).replace(graph=type(batch.graph)(1)))
    out += [with_seq_lens(batch, [1] * batch.bs), batch]
    return out


def _runner(subject: DSASubject, batch: DSABatch, variant: DSAVariant) -> None:
    """(c): a fresh backend captures every tier largest first, then replays the sequence."""
    fresh = subject.fresh()
    sequence = replay_sequence(batch)
    tiers = tuple(b.graph.padded_bs for b in sequence if b.graph is not None)
    with building("P5", variant):
        runner = fresh.runner_for(batch, variant, tiers)
        fresh.capture_all(runner, batch.mode, batch.draft_step)
    for step, replayed_batch in enumerate(sequence):
        with building("P5", variant):
            replayed = fresh.replay(runner, replayed_batch)
        expected = graph_metadata(replayed_batch)
        for name in expected:
            diff = compare_field(replayed_batch, "graph", name, expected[name], replayed.fields.get(name))
            if diff is not None:
                raise fail("P5", "dsa.p5.runner_replay", f"replay {step} of {len(sequence)} on a runner of tiers "
                           f"{list(runner.tiers)} (mode {batch.mode}): {name} differs from a fresh build of its batch",
                           variant, field=name, index=diff[1], expected=diff[2], actual=diff[3])
