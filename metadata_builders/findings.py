"""Known upstream findings, recognised in a failure so the gate and ``check`` can name them.

Each finding of docs/FINDINGS.md that a property still reports on SGLang's own
code is listed with what its failures look like: the property, the failing
field, and a predicate on the failure message and the batch.  The gate marks a
failure already present at base with the id (a failure at head that base did not
have is new whatever it looks like); ``check --builder sglang`` labels a failure
with it.  Findings describe upstream code: they are never applied to the bundled
builders or the mutant catalogue.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata_builders.batch import VerifyBatch

__all__ = ["FINDINGS", "JUDGES_DIVERGENCE", "Finding", "known_finding"]


@dataclass(frozen=True)
class Finding:
    """A finding of docs/FINDINGS.md as a property reports it."""

    id: str
    props: tuple[str, ...]
    """Properties that report it."""
    matches: Callable[[str, str, VerifyBatch], bool]
    """(failing field, failure message, batch) -> whether this failure is the finding."""
    summary: str
    """One line, as docs/FINDINGS.md states it."""


def _absorbs_past_width(batch: VerifyBatch) -> bool:
    from metadata_builders.reference import oob_read_count, verify_extension
    from metadata_builders.variants import variants_for

    return any(oob_read_count(batch, v, verify_extension(batch, v)) for v in variants_for(batch) if v.path == "graph")


def _f2c(field: str, message: str, batch: VerifyBatch) -> bool:
    return field == "audit.faults" and ("read past the end" in message or "out-of-bounds read" in message) \
        and batch.divergence is None and _absorbs_past_width(batch)


def _f5(field: str, message: str, batch: VerifyBatch) -> bool:
    return field in ("decision.max_seq_len", "page_table")


def _f6(field: str, message: str, batch: VerifyBatch) -> bool:
    return field.startswith("pf_") and batch.graph is not None and batch.is_ragged and batch.graph.cap is not None


def _f7(field: str, message: str, batch: VerifyBatch) -> bool:
    # The Triton route reads out of bounds; the torch route's ExpandPrefillCausally fallback trusts the
    # host's token count in its own repeat_interleave (docs/FINDINGS.md, F7 on the torch route).
    return field == "audit.faults" and batch.divergence is not None and (
        "out-of-bounds read" in message or "in expand_prefill_causally" in message)


def _f9(field: str, message: str, batch: VerifyBatch) -> bool:
    return field == "audit.faults" and "the compress planner wrote" in message and batch.divergence is not None


def _f12(field: str, message: str, batch: VerifyBatch) -> bool:
    return "AssertionError: self.raw_out_loc.shape" in message and batch.divergence is not None and batch.is_ragged \
        and batch.geometry.compression is not None


def _f11(field: str, message: str, batch: VerifyBatch) -> bool:
    # Upstream's semantics before 0.5.20 (no per-request c4 ring), so only where the installed release lacks it.
    return field in ("c4_compress_plan", "c4_write_plan") and batch.geometry.compression is not None \
        and _installed_release_lacks_req_ring()


def _f13(field: str, message: str, batch: VerifyBatch) -> bool:
    # The recorded replay runs upstream's out-graph phase, which pads the live layout without the tier's cap;
    # the direct graph build (and the model) honour it.  P5 compares replays with fresh builds (values): only
    # where the cap changes the padded lengths; P7 holds a replay to the build's sync contract: any cap.
    if batch.graph is None or batch.graph.cap is None:
        return False
    if "vs a fresh build" in message:
        from metadata_builders.properties.graph import replay_sequence

        return any(_cap_changes_padding(b) for b in replay_sequence(batch))
    # Any cap, even one that clamps nothing: a capped layout has no host total (upstream reads it back), the
    # uncapped one out-graph pads has one, so the replay's syncs differ from the capped build's.
    return "graph replay: host syncs" in message and batch.is_ragged


def _cap_changes_padding(batch: VerifyBatch) -> bool:
    from metadata_builders.tier import tier_verify_lens

    tier = batch.graph
    return batch.is_ragged and tier is not None and tier.cap is not None and \
        tier_verify_lens(batch.verify_lens, tier.padded_bs, tier.graph_num_tokens, tier.cap) != \
        tier_verify_lens(batch.verify_lens, tier.padded_bs, tier.graph_num_tokens, None)


def _f14(field: str, message: str, batch: VerifyBatch) -> bool:
    # 0.5.18/0.5.19 rebind swa_loc at replay while the graph reads the captured one (eager out-graph path).
    return field == "swa_loc" and "vs a fresh build" in message and _installed_release_lacks("replay_copies_swa_loc")


def _installed_release_lacks_req_ring() -> bool:
    return _installed_release_lacks("plan_req_ring")


def _installed_release_lacks(capability: str) -> bool:
    try:
        from metadata_builders.sglang_adapter.releases import Capabilities, upstream_version

        return not getattr(Capabilities.of(upstream_version()), capability)
    except Exception:  # no SGLang installed (PackageNotFoundError), or one the adapter cannot read
        return False


FINDINGS: tuple[Finding, ...] = (
    Finding("F2c", ("P1", "P5", "P6"), _f2c,
            "tier slack absorbed past req_to_token's width is gathered out of bounds (get_swa_page_indices)"),
    Finding("F5", ("P1", "P5"), _f5,
            "0.5.18/0.5.19: max_seq_len lacks + num_draft_tokens; the page table misses the verify tokens' page"),
    Finding("F6", ("P1", "P5"), _f6,
            "0.5.18-0.5.20: pf_* stop at num_tokens on a tier with an uncovered tail"),
    Finding("F7", ("P6",), _f7,
            "a stale extend-length copy reaches ExpandPrefillCausally too; get_swa_page_indices then reads "
            "req_to_token out of bounds at the table edge, synced token map or not"),
    Finding("F9", ("P6",), _f9,
            "0.5.21+: the graph path plans compression from device extend lengths; a stale copy summing past the "
            "tier makes kernel0 write plan entries past its num_q_tokens buffers (the dspark gate covers the token "
            "map only)"),
    Finding("F12", ("P6", "P8"), _f12,
            "with compression, a stale device ragged layout whose total is read from the device makes "
            "init_compression_metadata assert raw_out_loc's rows against num_tokens (the process stops)"),
    Finding("F13", ("P5", "P7"), _f13,
            "upstream's graph replay (init_forward_metadata_out_graph) pads the live ragged layout without the "
            "tier's cap: the last row absorbs all the slack where the model and the direct build clamp it"),
    Finding("F14", ("P5",), _f14,
            "0.5.18/0.5.19: a graph replay rebinds swa_loc (UnifiedKvMetadata.copy_ assigns it) while the captured "
            "SWA store reads the captured tensor: every replay writes the KV ring slots of the captured batch"),
    Finding("F11", ("P1",), _f11,
            "0.5.18/0.5.19: the c4 compress state lives in the SWA pool (no per-request ring), so their c4 plans "
            "differ from the reference (0.5.20+ semantics) on every compressed batch"),
)
"""The findings the gate and ``check --builder sglang`` recognise."""


JUDGES_DIVERGENCE = ("P6", "P8")
"""Properties that build a batch with its divergence (P6 judges the faults, P8 that the diverged inputs stay
untouched); every other property judges it without (``_clean``)."""


def known_finding(prop: str, field: str, message: str, batch: VerifyBatch) -> str | None:
    """The id of the known finding a failure of ``prop`` on ``field`` is, if any.

    A finding is matched on the batch the property judged: P1 and P5 judge a
    diverging batch without its divergence, so an F2c batch drawn with one is F2c
    for them as for any other F2c batch (P6 judges it diverged: F7 there; P8
    builds it diverged too: F12).
    """
    judged = batch if prop in JUDGES_DIVERGENCE or batch.divergence is None else batch.without_divergence()
    for finding in FINDINGS:
        if prop in finding.props and finding.matches(field, message, judged):
            return finding.id
    return None
