"""What a DSA build may do besides its fields: the syncs, the host-to-device copies, the caller's fields it
writes, the faults of its kernels, and the rows a consumer reads (no torch).

**The sync contract** (P2, P7), per variant and phase, as (kind, reads) -- judged by provenance, never by
function name (DESIGN.md section 2, decision 7).  Worked example, the family's batch (bs 2, ``N = 3``)::

    eager target verify, mirror given      none
    eager target verify, mirror absent     1: scalar of seq_lens   (int(seq_lens.max().item()), B:1115)
    eager draft extend, mirrors absent     3: scalar of seq_lens (B:1115), copy of extend_prefix_lens
                                              (.cpu(), B:1193), copy of seq_lens (.cpu(), B:1196)
    eager draft decode, mirror absent      one scalar of seq_lens per child (N - 2 children)
    capture (out-graph), verify/extend     copy of seq_lens (.cpu(), B:1082), copy of seq_lens (.tolist(),
                                              B:1711); decode modes: the first only, once per child
    replay, either route                   none

**The fault model** (P6) of ``seqlens_expand_triton``: the host total sizes the output, the device lengths
place the stores; a device sum above the total writes ``k`` elements out of bounds, below it leaves ``k``
elements uninitialised (:func:`~.stages.seqlens_expand`).  Only eager draft extend passes device lengths with
a host total; every other call builds both from one number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from metadata_builders.families.dsa.reference.modes import expand_of, padded_inputs
from metadata_builders.records import FaultRecord

if TYPE_CHECKING:
    from metadata_builders.families.dsa.batch import DSABatch
    from metadata_builders.families.dsa.variants import DSAVariant

__all__ = ["EXPAND_OP", "Phase", "SyncSpec", "TokenRow", "caller_writes", "expected_faults", "expected_h2d_copies",
           "expected_syncs", "read_lengths", "token_rows"]

Phase = Literal["eager", "capture", "replay"]
EXPAND_OP = "seqlens_expand_kernel"
"""The kernel a fault record names (upstream's Triton kernel, P:327)."""


@dataclass(frozen=True, slots=True)
class SyncSpec:
    """One device-to-host read the contract expects."""

    kind: Literal["scalar", "copy"]
    """``scalar`` (one number: ``.item()``), ``copy`` (a tensor: ``.cpu()``, ``.tolist()``)."""
    reads: tuple[str, ...]
    """The harness inputs the value depends on."""
    where: str
    """Upstream's line, for people."""


_MAX_ITEM = SyncSpec("scalar", ("seq_lens",), "int(seq_lens.max().item()) without a mirror (B:1115)")
_PREFIX_CPU = SyncSpec("copy", ("extend_prefix_lens",), "extend_prefix_lens.cpu().tolist() (B:1193)")
_SEQ_CPU = SyncSpec("copy", ("seq_lens",), "seq_lens.cpu() without a mirror (B:1196)")
_CAPTURE_CPU = SyncSpec("copy", ("seq_lens",), "seq_lens.cpu() in capture (B:1082)")
_CAPTURE_TOLIST = SyncSpec("copy", ("seq_lens",), "seq_lens.tolist() building the capture's expanded lengths "
                           "(B:1711)")


def children(batch: DSABatch) -> int:
    """Backends the build runs: the multi-step backend's ``N - 2`` children in draft decode, else one."""
    return batch.num_draft_tokens - 2 if batch.mode == "draft_decode" else 1


def expected_syncs(batch: DSABatch, variant: DSAVariant, phase: Phase) -> list[SyncSpec]:
    """The device-to-host reads a build of ``batch`` along ``variant`` performs in ``phase``, in order."""
    if phase == "replay":
        return []
    if phase == "capture":
        per_child = [_CAPTURE_CPU] + ([_CAPTURE_TOLIST] if batch.mode in ("target_verify", "draft_extend") else [])
        return per_child * children(batch)
    if variant.mirror == "given":
        return []
    if batch.mode == "draft_extend":
        return [_MAX_ITEM, _PREFIX_CPU, _SEQ_CPU]
    return [_MAX_ITEM] * children(batch)


def expected_h2d_copies(batch: DSABatch, variant: DSAVariant, phase: Phase) -> int:
    """Pageable host-to-device copies: eager target verify's ``torch.tensor(extend_seq_lens_cpu, device=...)``
    (B:1181), none elsewhere (replays fill on the device: ``torch.full``, B:1945)."""
    return int(phase == "eager" and batch.mode == "target_verify")


def caller_writes(batch: DSABatch, variant: DSAVariant) -> dict[str, Any]:
    """The caller's (``forward_batch``'s) host fields a build stores, and what: eager target verify
    ``extend_seq_lens_cpu = [N] * bs`` (B:1178); eager draft extend without mirrors the copies it read back
    (B:1190-1197).  The graph path stores none."""
    if variant.path != "eager":
        return {}
    if batch.mode == "target_verify":
        return {"extend_seq_lens_cpu": [batch.num_draft_tokens] * batch.bs}
    if batch.mode == "draft_extend" and variant.mirror == "absent":
        seq = list(batch.caller_seq_lens)
        return {"seq_lens_cpu": seq, "seq_lens_sum": sum(seq), "extend_prefix_lens_cpu": list(batch.seq_lens)}
    return {}


def expected_faults(batch: DSABatch, variant: DSAVariant) -> list[FaultRecord]:
    """The faults the device model must report for this build (P6): only eager draft extend on diverged
    device lengths.  Example: ``[3, 4]`` against a host total of 6 is ``oob_write`` of 1."""
    expand = expand_of(batch, variant.path)
    if expand is None:
        return []
    total = len(expand.values)
    out = []
    if expand.oob_writes:
        out.append(FaultRecord("oob_write", expand.oob_writes, EXPAND_OP, "seqlens_expand_triton", total,
                               expand.device_sum))
    if expand.uninitialized:
        out.append(FaultRecord("uninitialized_tail", expand.uninitialized, EXPAND_OP, "seqlens_expand_triton",
                               total, expand.device_sum))
    return out


@dataclass(frozen=True, slots=True)
class TokenRow:
    """One query row of the metadata (a row of ``page_table_1``, an entry of ``dsa_seqlens_expanded``)."""

    request: int
    """Its row in the built batch (a pad row's index too)."""
    slot: int
    """The request's slot (0 for a pad row)."""
    real: bool
    """A real request's token (else a graph pad row's)."""
    window: int
    """Positions the token may attend to: ``position + 1`` for a real token; a pad row's own ``cache_seqlens``."""
    kv_len: int
    """The request's ``cache_seqlens_int32``: how far a consumer reads its page-table row."""


def token_rows(batch: DSABatch, path: str) -> list[TokenRow]:
    """Every query row of a build of ``batch`` along ``path``, in order.

    Example (target verify, ``[5, 3]``, ``N = 3``): six real rows with windows ``6, 7, 8, 4, 5, 6`` and
    ``kv_len`` 8, 8, 8, 6, 6, 6; the graph tier adds three pad rows on slot 0 (window and ``kv_len`` 4).
    Draft decode's step ``s`` token sits at ``seq_len + s``: its window ``seq_len + s + 1``.
    """
    n = batch.num_draft_tokens
    if path == "graph":
        seq, slots = padded_inputs(batch)
    else:
        seq, slots = list(batch.caller_seq_lens), list(batch.req_pool_indices)
    rows: list[TokenRow] = []
    for r, (s, slot) in enumerate(zip(seq, slots)):
        real = r < batch.bs
        if batch.mode == "target_verify":
            rows += [TokenRow(r, slot, real, s + j + 1 if real else s + n, s + n) for j in range(n)]
        elif batch.mode == "draft_extend":
            rows += [TokenRow(r, slot, real, s - n + j + 1 if real else s, s) for j in range(n)]
        else:
            step = (batch.draft_step or 0) if batch.mode == "draft_decode" else 0
            rows.append(TokenRow(r, slot, real, s + step + 1 if real and batch.mode == "draft_decode" else s, s))
    return rows


def read_lengths(batch: DSABatch, path: str) -> list[int]:
    """Per query row, how far a consumer reads its ``page_table_1`` row: the request's ``cache_seqlens``.

    P1 compares the page tables up to it (``real_page_table`` up to ``ceil(kv_len / P)`` pages)."""
    return [row.kv_len for row in token_rows(batch, path)]
