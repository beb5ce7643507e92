"""P2 for the DSA family: the host mirror given or absent builds the same metadata; only "absent" reads the
device back; a stale mirror is shown for what it does.

Worked example (the family's batch, stale mirror ``seq_lens_cpu = [4, 3]`` while the device holds ``[5, 3]``):
eager target verify takes ``max_seq_len_k = 4 + 3 = 7``, so ``page_table_1`` is 7 columns wide while request 0
reads up to ``cache_seqlens`` 8: one column short (upstream trusts the mirror; a consumer reading to its length
reads past the row).  The graph path never reads the mirror.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metadata_builders.families.dsa.fields import FIELDS
from metadata_builders.families.dsa.properties.common import (
    building,
    clean,
    compare_field,
    fail,
    truthful,
)
from metadata_builders.families.dsa.reference import read_lengths
from metadata_builders.families.dsa.variants import DSAVariant, variants_for

if TYPE_CHECKING:
    from metadata_builders.families.dsa.audited import DSABuild, DSASubject
    from metadata_builders.families.dsa.batch import DSABatch

__all__ = ["MIRROR_ECHOES", "check_p2_mirror"]

MIRROR_ECHOES = ("seq_lens_sum", "indexer_seq_lens_cpu")
"""Fields that echo the caller's mirror (None without one, by design): P1 judges them per variant."""


def check_p2_mirror(subject: DSASubject, batch: DSABatch) -> list[str]:
    """Given and absent agree on every field but the mirror's echoes; given never reads ``seq_lens`` back, absent
    does on the eager path; a stale mirror's effect is returned as a note (and the graph path ignores it)."""
    notes: list[str] = []
    truth = truthful(batch)
    for path in ("eager", "graph"):
        pair = [v for v in variants_for(truth) if v.path == path and v.route == "torch"]
        if len(pair) != 2:
            continue
        given, absent = pair
        with building("P2", given):
            built_given = subject.build(truth, given)
        with building("P2", absent):
            built_absent = subject.build(truth, absent)
        _agree(truth, given, built_given, built_absent)
        _syncs(given, built_given, absent, built_absent)
    if batch.stale_mirror:
        notes += _stale(subject, clean(batch))
    return notes


def _agree(batch: DSABatch, given: DSAVariant, built_given: DSABuild, built_absent: DSABuild) -> None:
    for name in FIELDS:
        if name in MIRROR_ECHOES:
            continue
        diff = compare_field(batch, given.path, name, built_given.fields.get(name), built_absent.fields.get(name))
        if diff is not None:
            _, index, want, got = diff
            raise fail("P2", "dsa.p2.mirror_vs_absent", f"{name}: the build with the mirror (expected) and without "
                       "it (actual) differ", given, field=name, index=index, expected=want, actual=got)


def _syncs(given: DSAVariant, built_given: DSABuild, absent: DSAVariant, built_absent: DSABuild) -> None:
    reads = [s for s in built_given.syncs if "seq_lens" in s.reads]
    if reads:
        raise fail("P2", "dsa.p2.given_synced", f"with the host mirror the build read seq_lens back: {reads[0].op} "
                   f"in {reads[0].stage}", given, field="seq_lens", expected="no read", actual=reads[0].op)
    if given.path == "eager" and not built_absent.syncs:
        raise fail("P2", "dsa.p2.absent_no_sync", "without a mirror the eager build never read the device: where "
                   "did its page-table width come from?", absent, field="max_seq_len_k", expected=">= 1 read",
                   actual=0)


def _stale(subject: DSASubject, batch: DSABatch) -> list[str]:
    """What a stale mirror does: the eager widths it sets against what a consumer reads; the graph untouched."""
    notes = []
    for variant in variants_for(batch):
        if variant.mirror != "given" or variant.route != "torch":
            continue
        with building("P2", variant):
            built = subject.build(batch, variant)
        if variant.path == "graph":
            with building("P2", variant):
                honest = subject.build(truthful(batch), variant)
            diff = compare_field(batch, "graph", "page_table_1", honest.fields["page_table_1"],
                                 built.fields["page_table_1"])
            if diff is not None or built.fields["cache_seqlens_int32"] != honest.fields["cache_seqlens_int32"]:
                raise fail("P2", "dsa.p2.graph_reads_mirror", "a graph replay changed with the host mirror (replay "
                           "must not read it)", variant, field="page_table_1", expected="the honest mirror's build",
                           actual="another")
            continue
        width = built.fields["max_seq_len_k"]
        short = max(read_lengths(batch, "eager")) - min(width, batch.width)
        notes.append(f"P2: stale mirror seq_lens_cpu={list(batch.host_mirror)} (device {list(batch.caller_seq_lens)}): "
                     f"max_seq_len_k={width}, page_table_1 {len(built.fields['page_table_1'][0])} columns; "
                     + (f"a consumer reading to cache_seqlens reads {short} column(s) past the row" if short > 0
                        else "the table is wider than any read (no read past it)"))
    return notes
