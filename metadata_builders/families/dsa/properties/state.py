"""P9 (a used builder equals a fresh one wherever a consumer reads) and P10 (the family's state model: every
index a consumer derives stays inside its buffer and the request's causal window) for the DSA family.

**P9.**  A subject builds a history first (the batch's requests with their longest rows, fewer requests, the
same requests in the other modes), then the batch; a fresh subject builds the batch alone.  Every field must
agree, the page tables up to each row's read length.  Past it, the fused kernels keep the history's entries
(upstream's contract: "the tail keeps stale values across CUDA-graph replays"): counted in a note, left to P10.

**P10.**  Per query row ``t`` of request ``r`` (slot ``s``): the indexer scores positions ``< dsa_seqlens_expanded[t]``
through ``real_page_table`` and the attention reads the top ``dsa_cache_seqlens_int32[t]`` of them through
``page_table_1``.  So: no length is negative (sglang #30378: read as uint32); the expanded length stays inside the
token's causal window (``position + 1``; a pad row: its own ``cache_seqlens``); the top-k count stays inside the
expanded length and the top-k budget; every position read lies inside the table and holds ``req_to_token[s][c]``
(the location the request owns there: a stale column, another request's page or slot 0 fails); both prefix sums
are the lengths' prefix sums; and the HIP consumers' prelude (``get_valid_kv_indices``, run as upstream runs it on
every query row) stores inside ``kv_indices`` and gives each row exactly its selected locations.  The verdict on
the fused kernels' stale columns follows: they lie past every read, so no consumer reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsa.builder import consumers
from metadata_builders.families.dsa.properties.common import (
    building,
    compare_field,
    fail,
    read_columns,
    truthful,
    with_seq_lens,
)
from metadata_builders.families.dsa.reference import token_rows
from metadata_builders.families.dsa.variants import variants_for

if TYPE_CHECKING:
    from metadata_builders.families.dsa.audited import DSABuild, DSASubject
    from metadata_builders.families.dsa.batch import DSABatch
    from metadata_builders.families.dsa.variants import DSAVariant

__all__ = ["check_p9_no_hidden_state", "check_p10_reads", "history_for"]


def history_for(batch: DSABatch) -> list[DSABatch]:
    """What a used builder built before: the longest rows, fewer requests, the other modes (when valid)."""
    out: list[DSABatch] = []
    if batch.bs:
        out.append(with_seq_lens(batch, [batch.width - batch.step_tokens] * batch.bs))
        if batch.bs > 1:
            out.append(with_seq_lens(batch, batch.seq_lens, 1))
    for mode in ("target_verify", "draft_extend", "decode", "draft_decode"):
        if mode != batch.mode and batch.bs:
            try:
                out.append(with_seq_lens(batch, batch.seq_lens, mode=mode))
            except InvalidBatch:
                continue  # the rows do not fit that mode (or draft decode with N < 3)
    return out


def check_p9_no_hidden_state(subject: DSASubject, batch: DSABatch) -> list[str]:
    """After :func:`history_for`, every variant equals a fresh subject's build where a consumer reads."""
    batch = truthful(batch)
    used, fresh = subject.fresh(), subject.fresh()
    for before in history_for(batch):
        for variant in variants_for(before):
            with building("P9", variant):
                used.build(before, variant)
    stale = 0
    for variant in variants_for(batch):
        with building("P9", variant):
            after, alone = used.build(batch, variant), fresh.build(batch, variant)
        for name in alone.fields:
            diff = compare_field(batch, variant.path, name, alone.fields[name], after.fields.get(name))
            if diff is not None:
                raise fail("P9", "dsa.p9.vs_fresh_builder", f"{name}: after a history the build differs from a fresh "
                           "builder's where a consumer reads", variant, field=name, index=diff[1], expected=diff[2],
                           actual=diff[3])
        stale += _past_reads(batch, variant, alone, after)
    if stale:
        return [f"P9: {stale} page-table entries past the rows' read lengths differ after the history (the fused "
                "kernels' stale tail); P10 proves no consumer reads them"]
    return []


def _past_reads(batch: DSABatch, variant: DSAVariant, alone: DSABuild, after: DSABuild) -> int:
    count = 0
    for name in ("page_table_1", "real_page_table"):
        for row_a, row_b, n in zip(alone.fields[name], after.fields[name], read_columns(batch, variant.path, name)):
            count += sum(a != b for a, b in zip(row_a[n:], row_b[n:]))
    return count


def check_p10_reads(subject: DSASubject, batch: DSABatch) -> list[str]:
    """Every read a consumer derives from each variant's metadata (module docstring)."""
    batch = truthful(batch)
    for variant in variants_for(batch):
        with building("P10", variant):
            build = subject.build(batch, variant)
        _lengths(batch, variant, build)
        _reads(batch, variant, build)
        _prefix_sums(variant, build)
        _prelude(subject, batch, variant, build)
    return []


def _lengths(batch: DSABatch, variant: DSAVariant, build: DSABuild) -> None:
    expanded, dsa = build.fields["dsa_seqlens_expanded"], build.fields["dsa_cache_seqlens_int32"]
    for t, row in enumerate(token_rows(batch, variant.path)):
        if expanded[t] < 0 or dsa[t] < 0:
            raise fail("P10", "dsa.p10.negative_length", "a negative length (the top-k kernel reads it as uint32: "
                       "~4e9 positions, sglang #30378)", variant, field="dsa_seqlens_expanded", index=t,
                       expected=">= 0", actual=min(expanded[t], dsa[t]))
        if expanded[t] > row.window:
            raise fail("P10", "dsa.p10.window_read", f"row {t} ({'real' if row.real else 'pad'}) scores positions "
                       "past its causal window", variant, field="dsa_seqlens_expanded", index=t,
                       expected=f"<= {row.window}", actual=expanded[t])
        if dsa[t] > min(expanded[t], batch.index_topk):
            raise fail("P10", "dsa.p10.topk_over_budget", f"row {t} selects more positions than it scores or than "
                       "the top-k budget", variant, field="dsa_cache_seqlens_int32", index=t,
                       expected=f"<= min({expanded[t]}, {batch.index_topk})", actual=dsa[t])


def _reads(batch: DSABatch, variant: DSAVariant, build: DSABuild) -> None:
    expanded, p = build.fields["dsa_seqlens_expanded"], batch.page_size
    for name, step in (("page_table_1", 1), ("real_page_table", p)):
        table = build.fields[name]
        for t, row in enumerate(token_rows(batch, variant.path)):
            owned = batch.req_to_token[row.slot]
            reads = -(-expanded[t] // step)
            if reads > len(table[t]):
                raise fail("P10", "dsa.p10.read_past_table", f"row {t} reads {reads} entries of a {len(table[t])}-"
                           f"entry {name} row", variant, field=name, index=(t, len(table[t])),
                           expected=f"<= {len(table[t])}", actual=reads)
            for k in range(reads):
                want = owned[k * step] // p if step > 1 else owned[k]
                if table[t][k] != want:
                    raise fail("P10", "dsa.p10.read_not_owned", f"row {t} ({'real' if row.real else 'pad'}, slot "
                               f"{row.slot}) reads an entry its request does not own there (stale, or another "
                               "slot's)", variant, field=name, index=(t, k), expected=want, actual=table[t][k])


def _prefix_sums(variant: DSAVariant, build: DSABuild) -> None:
    for cu, lengths in (("cu_seqlens_k", "cache_seqlens_int32"), ("dsa_cu_seqlens_k", "dsa_cache_seqlens_int32")):
        sums, values = build.fields[cu], build.fields[lengths]
        for i, n in enumerate(values):
            if i + 1 >= len(sums) or sums[i + 1] - sums[i] != n:
                raise fail("P10", "dsa.p10.indptr", f"{cu} is not the prefix sum of {lengths}: a consumer's segment "
                           f"{i} would be read elsewhere", variant, field=cu, index=i + 1,
                           expected=(sums[i] if i < len(sums) else None, n),
                           actual=sums[i + 1] if i + 1 < len(sums) else "missing")


def _selection_width(index_topk: int) -> int:
    """The indexer's output width: the top-k rounded up to a power of two (upstream's ``get_valid_kv_indices``
    loads a row with ``tl.arange(0, topk)``; served top-k values are powers of two, 2048 for DeepSeek-V3.2); the
    extra columns hold -1, which every consumer skips."""
    return 1 << max(index_topk - 1, 0).bit_length()


def _prelude(subject: DSASubject, batch: DSABatch, variant: DSAVariant, build: DSABuild) -> None:
    import torch

    f = build.fields
    table = torch.tensor(f["page_table_1"], dtype=torch.int32)
    selected = consumers.topk_page_table(table, torch.tensor(f["dsa_cache_seqlens_int32"], dtype=torch.int32),
                                         torch.tensor(f["dsa_seqlens_expanded"], dtype=torch.int32),
                                         _selection_width(batch.index_topk))
    with building("P10", variant):
        prelude = subject.prelude(selected, batch.rows(variant.path))
    if prelude.oob_stores:
        raise fail("P10", "dsa.p10.prelude_oob", "get_valid_kv_indices would store past kv_indices", variant,
                   field="kv_indices", expected=0, actual=prelude.oob_stores)
    for t, row in enumerate(selected.tolist()):
        want = [v for v in row if v != -1]
        got = prelude.kv_indices[prelude.kv_indptr[t]: prelude.kv_indptr[t + 1]]
        if got != want:
            raise fail("P10", "dsa.p10.prelude_segment", f"row {t}'s kv_indices segment is not its selected "
                       "locations (the attention reads it)", variant, field="kv_indices", index=t, expected=want,
                       actual=got)

