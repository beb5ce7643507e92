"""P7 and the sync contract: which reads a build may make, per (stage, kind of read)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.metadata import SyncRecord, VerifyMetadata
from metadata_builders.families.dsv4.properties._common import (
    _capture,
    _clean,
    _describe,
    _fail,
    _padding,
    _variants,
    judging,
)
from metadata_builders.families.dsv4.reference import CONTRACT_STAGES, expected_host_syncs
from metadata_builders.families.dsv4.tier import Padding
from metadata_builders.families.dsv4.variants import Variant


def contract_role(record: SyncRecord) -> str | None:
    """Which contracted read a host sync is, judged by what it reads, not how it is spelled.

    ``token_map``: a ``repeat_interleave`` without ``output_size``; ``mirror``: a
    copy of ``seq_lens`` to the host; ``ragged_total``: a number read from the
    device layout's lengths.  Anything else (None) is outside the contract.
    """
    if record.op.startswith("repeat_interleave"):
        return "token_map"
    reads = set(record.reads)
    if record.kind == "copy" and reads == {"seq_lens"}:
        return "mirror"
    if record.kind in ("scalar", "shape") and reads and reads <= {"verify_lens"}:
        return "ragged_total"
    return None


def contract_key(record: SyncRecord) -> tuple[str, str]:
    role = contract_role(record)
    if role is None:
        return (f"{record.stage} (reads {', '.join(record.reads) or 'no input'})", record.kind)
    return (CONTRACT_STAGES[role], record.kind)


def check_sync_contract(builder, batch: VerifyBatch) -> list[str]:
    """The contract per (stage, kind of read): one read each for a tolist mirror, a device total, a synced map.

    ``int(t.sum())`` and ``t.sum().item()`` are the same read; the same number
    read in another stage, or another number read instead, is a different one.
    A graph replay is held to the same contract as a fresh build.  Capture safety:
    a read back inside the recording is a failure, and so is recorded work that
    reads host memory that is not graph state (:func:`check_recorded_reads`).
    """
    batch = _clean(batch)
    notes: list[str] = []
    variants = _variants(builder, batch, notes)
    padding = _padding(builder)
    for variant in variants:
        _check_contract(batch, variant, builder.build(batch, variant), "", padding)
    if builder.capabilities.replays:
        for variant in (v for v in variants if v.path == "graph"):
            captured = _capture("P7", builder, batch, variant)
            check_recorded_reads(variant, captured)
            _check_contract(batch, variant, builder.replay(captured, batch), "graph replay: ", padding)
    return notes


def check_recorded_reads(variant: Variant, captured: Any) -> None:
    """Recorded (in-graph) work reads no host memory that is not graph state (DESIGN.md section 3, P7).

    A host buffer made or filled during capture is frozen into the graph: every
    replay copies whatever it holds then (stale plan offsets, stale lengths).  The
    static inputs and what ``graph_state`` allocated are graph state: the graph
    runner and out-graph work refresh them before every replay.
    """
    graph = captured.graph
    if graph is not None and graph.host_reads:
        read = graph.host_reads[0]
        raise _fail("P7", variant, f"recorded (in-graph) work reads host memory that is not graph state: {read}; "
                    "a replay reads whatever that memory holds then", field=f"in_graph ({read.stage})",
                    expected="graph state or device memory", actual=f"{read.op} reads host tensor {read.tensor}",
                    check="p7.capture_host_read", where=read.stage)


def _check_contract(batch: VerifyBatch, variant: Variant, md: VerifyMetadata, what: str, padding: Padding) -> None:
    """Missing reads and reads outside the contract, each said as such (fewer syncs is not "extra syncs")."""
    want = expected_host_syncs(batch, variant, padding=padding)
    got = md.audit.host_syncs
    wanted, seen = Counter((s.stage, s.kind) for s in want), Counter(contract_key(s) for s in got)
    if wanted == seen:
        return
    missing = [f"{stage}:{kind}" for (stage, kind), n in (wanted - seen).items() for _ in range(n)]
    outside = [d for s, d in zip(got, _describe(got)) if (seen - wanted)[contract_key(s)] > 0]
    parts = []
    if missing:
        parts.append(f"{len(missing)} read the contract requires did not happen ({', '.join(missing)}): the build "
                     "trusted a count it never read from the device")
    if outside:
        parts.append(f"{len(outside)} host sync(s) outside the contract ({'; '.join(outside)})")
    check = "p7.contract_missing" if not outside else "p7.contract_extra"
    raise _fail("P7", variant, f"{what}host syncs break the sync contract: " + "; ".join(parts),
                field="audit.host_syncs", expected=[f"{s.stage}:{s.kind}" for s in want], actual=_describe(got),
                check="p7.replay_contract" if what else check)


@judging
def check_p7_capture_safety(builder, batch: VerifyBatch) -> list[str]:
    """P7: every variant that claims to be sync-free performs zero host syncs (and the contract holds)."""
    batch = _clean(batch)
    notes: list[str] = []
    for variant in _variants(builder, batch, notes):
        if expected_host_syncs(batch, variant, padding=_padding(builder)):
            continue
        actual = builder.build(batch, variant)
        if actual.audit.host_syncs:
            raise _fail("P7", variant, "a path that claims to be sync-free synced", field="audit.host_syncs",
                        expected=[], actual=_describe(actual.audit.host_syncs), check="p7.sync_free_synced",
                        where=actual.audit.host_syncs[0].stage)
    return notes + check_sync_contract(builder, batch)
