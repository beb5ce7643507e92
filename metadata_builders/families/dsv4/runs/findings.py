"""Known upstream findings, recognised in a failure so the gate and ``check`` can name them.

Each finding of docs/FINDINGS.md that a property still reports on SGLang's own
code is listed with what its failures *are*: the property, the check that failed
(:mod:`metadata_builders.properties.checks`), the failing field and stage, the
exception's origin for a raised one, and a predicate on the batch's shape --
never the wording of a message.  The gate marks a failure already present at
base with the id (a failure at head that base did not have is new whatever it
looks like); ``check --builder sglang`` labels a failure with it, from the same
data.  Findings describe upstream code: only a subject whose capabilities say
``upstream`` is matched, never the bundled builders or the mutant catalogue.

Worked example: P7 fails on 0.5.23 with ``check="p7.replay_contract"`` on a ragged
batch whose tier has a cap: that is F13 (upstream's out-graph phase pads without
the cap, so the replay reads no total back where the capped build did).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from metadata_builders.errors import Origin
from metadata_builders.properties.checks import CheckId

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = ["FINDINGS", "JUDGES_DIVERGENCE", "Finding", "Seen", "known_finding"]


@dataclass(frozen=True, slots=True)
class Seen:
    """What a failure is, as data: a ``PropertyFailure`` or a gate outcome reduced to its identity."""

    prop: str
    check: CheckId | Literal[""] = ""
    field: str = ""
    where: str = ""
    """The pipeline stage (a fault's, a sync's), or ``""``."""
    origin: Origin | None = None
    """Where a raised failure came from (exception type, file, line, function); None when nothing raised."""

    @classmethod
    def of(cls, failure: Any) -> Seen:
        """From a :class:`~metadata_builders.errors.PropertyFailure`."""
        return cls(failure.prop, failure.check or "", str(failure.field or ""), failure.where or "",
                   getattr(failure, "origin", None))

    @property
    def function(self) -> str:
        return self.origin.function if self.origin is not None else ""

    @property
    def exc_type(self) -> str:
        return self.origin.exc_type if self.origin is not None else ""


@dataclass(frozen=True)
class Finding:
    """A finding of docs/FINDINGS.md as a property reports it."""

    id: str
    props: tuple[str, ...]
    """Properties that report it."""
    matches: Callable[[Seen, VerifyBatch], bool]
    """(the failure's identity, the batch judged) -> whether this failure is the finding."""
    summary: str
    """One line, as docs/FINDINGS.md states it."""


def _absorbs_past_width(batch: VerifyBatch) -> bool:
    """A real row absorbs tier slack past the table's width under an absorbing convention (F2c's shape)."""
    from metadata_builders.families.dsv4.reference import oob_read_count
    from metadata_builders.families.dsv4.variants import variants_for

    return any(oob_read_count(batch, v, padding=padding) for v in variants_for(batch) if v.path == "graph"
               for padding in ("absorb_then_clamp", "full_coverage"))


def _f2c(seen: Seen, batch: VerifyBatch) -> bool:
    return seen.check in ("p1.oob_read", "p6.oob_read") and batch.divergence is None and _absorbs_past_width(batch)


def _f5(seen: Seen, batch: VerifyBatch) -> bool:
    return batch.mode == "target_verify" and seen.field in ("decision.max_seq_len", "page_table")


def _f21(seen: Seen, batch: VerifyBatch) -> bool:
    return (batch.mode == "draft_extend" and seen.field in ("decision.max_seq_len", "page_table")
            and _installed_release_lacks("draft_extend_one_page"))


def _f6(seen: Seen, batch: VerifyBatch) -> bool:
    return seen.field.startswith("pf_") and batch.graph is not None and batch.is_ragged and batch.graph.cap is not None


def _f7(seen: Seen, batch: VerifyBatch) -> bool:
    # The Triton route reads out of bounds; the torch route's ExpandPrefillCausally fallback trusts the
    # host's token count in its own repeat_interleave (docs/FINDINGS.md, F7 on the torch route).
    return seen.field == "audit.faults" and batch.divergence is not None and (
        seen.check == "p6.oob_read" or seen.where == "expand_prefill_causally")


def _f8(seen: Seen, batch: VerifyBatch) -> bool:
    # A stale extend length reaching build_decode_streams: its indptr and indices no longer describe one another,
    # and reading them as per-token segments finds one that leaves the buffer (where the kernel wrote out of bounds).
    return seen.check in ("p6.stream_out_of_bounds", "p8.stream_out_of_bounds") and batch.divergence is not None


def _f9(seen: Seen, batch: VerifyBatch) -> bool:
    return seen.check == "p6.planner_overflow" and batch.divergence is not None


def _f12(seen: Seen, batch: VerifyBatch) -> bool:
    return seen.check == "raised" and seen.exc_type == "AssertionError" \
        and seen.function == "init_compression_metadata" and batch.divergence is not None and batch.is_ragged \
        and batch.geometry.compression is not None


def _f11(seen: Seen, batch: VerifyBatch) -> bool:
    # Upstream's semantics before 0.5.20 (no per-request c4 ring), so only where the installed release lacks it.
    return seen.field in ("c4_compress_plan", "c4_write_plan", "c4_decode_plan") \
        and batch.geometry.compression is not None and _installed_release_lacks_req_ring()


_DRAFT_DECODE_ROWS = ("seq_lens", "seq_lens_casual", "positions_casual", "swa_topk_lengths", "swa_page_indices",
                      "swa_loc", "swa_indptr", "swa_indices", "hca_indptr", "hca_indices", "csa_indptr", "csa_indices",
                      "page_table")
"""What a draft-decode child's lengths reach: every field built from ``seq_lens_casual`` (P10: the ring rows its
token stores and reads, the pages it reads)."""


def _f22(seen: Seen, batch: VerifyBatch) -> bool:
    # 0.5.18/0.5.19: no seq_lens + speculative_step_id + 1 in the child's build.
    return batch.mode == "draft_decode" and seen.field in _DRAFT_DECODE_ROWS \
        and _installed_release_lacks("draft_decode_step_offset")


def _f23(seen: Seen, batch: VerifyBatch) -> bool:
    # 0.5.18/0.5.19: at replay every child is refreshed from child 0's raw metadata (its slice of the whole buffer).
    return batch.mode == "draft_decode" and seen.check in ("p5.replay_vs_fresh", "p5.runner_replay_vs_fresh") \
        and seen.field in ("raw_out_loc", "swa_out_cache_loc") and _installed_release_lacks("draft_decode_step_rows")


def _f24(seen: Seen, batch: VerifyBatch) -> bool:
    # 0.5.18-0.5.20 build a draft child's compressed groups (need_compress forced on): its streams carry a tail.
    return batch.mode == "draft_decode" and batch.geometry.compression is not None \
        and seen.field in ("hca_indptr", "hca_indices", "csa_indptr", "csa_indices") \
        and _installed_release_has("forced_compression")


def _f13(seen: Seen, batch: VerifyBatch) -> bool:
    # The recorded replay runs upstream's out-graph phase, which pads the live layout without the tier's cap;
    # the direct graph build (and the model) honour it.  P5 compares replays with fresh builds (values): only
    # where the cap changes the padded lengths; P7 holds a replay to the build's sync contract: any cap.
    if batch.graph is None or batch.graph.cap is None:
        return False
    if seen.check == "p5.replay_vs_fresh":
        from metadata_builders.families.dsv4.properties.sequences import replay_sequence

        return any(_cap_changes_padding(b) for b in replay_sequence(batch))
    # Any cap, even one that clamps nothing: a capped layout has no host total (upstream reads it back), the
    # uncapped one out-graph pads has one, so the replay's syncs differ from the capped build's.
    return seen.check == "p7.replay_contract" and batch.is_ragged


def _cap_changes_padding(batch: VerifyBatch) -> bool:
    from metadata_builders.families.dsv4.tier import tier_verify_lens

    tier = batch.graph
    return batch.is_ragged and tier is not None and tier.cap is not None and \
        tier_verify_lens(batch.verify_lens, tier.padded_bs, tier.graph_num_tokens, tier.cap) != \
        tier_verify_lens(batch.verify_lens, tier.padded_bs, tier.graph_num_tokens, None)


def _f14(seen: Seen, batch: VerifyBatch) -> bool:
    # 0.5.18/0.5.19 rebind swa_loc at replay while the graph reads the captured one (eager out-graph path).
    # P5's runner half replays the same way (several tiers on one backend): the same finding.
    return seen.field == "swa_loc" and seen.check in ("p5.replay_vs_fresh", "p5.runner_replay_vs_fresh") and \
        _installed_release_lacks("replay_copies_swa_loc")


def _f16(seen: Seen, batch: VerifyBatch) -> bool:
    # full_coverage: with no pad rows the last real row absorbs the tier's slack; past num_draft tokens a row's
    # extra tokens store into ring rows its own window still reads (P10 judges the stores, docs/FINDINGS.md F16).
    return seen.check == "p10.pad_overwrites_live" and not seen.field.endswith("_write_plan") and _absorbs(batch)


def _f20(seen: Seen, batch: VerifyBatch) -> bool:
    # F16's shape on the compressor states: the absorbed tokens' write-plan entries wrap the per-request state ring
    # (16 rows for c4, far sooner than the SWA ring) onto states the request's next compress reads.
    return seen.check == "p10.pad_overwrites_live" and seen.field.endswith("_write_plan") and _absorbs(batch) \
        and not _installed_release_lacks_req_ring()


def _absorbs(batch: VerifyBatch) -> bool:
    """A ragged graph batch whose last real row absorbs tier slack under ``full_coverage``."""
    from metadata_builders.families.dsv4.tier import absorbed_slack

    tier = batch.graph
    return tier is not None and batch.is_ragged and absorbed_slack(
        batch.verify_lens, tier.padded_bs, tier.graph_num_tokens, tier.cap, "full_coverage") > 0


def _f18(seen: Seen, batch: VerifyBatch) -> bool:
    # L1: token_req_indices repeats each request draft_token_num times for target verify, ragged or not.
    # P10 sees it as a c2 state in another request's ring (or a ring load past the pool).
    return seen.field == "low_ratio_req_indices" and seen.check in (
        "p1.vs_reference", "p5.in_graph_vs_reference", "p10.real_writes_other_slot", "p10.oob_write") \
        and batch.is_ragged


def _f25(seen: Seen, batch: VerifyBatch) -> bool:
    # Upstream's _group_index groups by num_draft whatever the layout: on a ragged one the groups straddle rows.
    return seen.check == "p1.vs_reference" and seen.field.startswith("gasm_") and batch.is_ragged


def _installed_release_lacks_req_ring() -> bool:
    return _installed_release_lacks("plan_req_ring")


def _installed_release_has(capability: str) -> bool:
    return _installed_capability(capability) is True


def _installed_release_lacks(capability: str) -> bool:
    return _installed_capability(capability) is False


def _installed_capability(capability: str) -> bool | None:
    """The installed SGLang's capability, or None without one (no SGLang, or one the adapter cannot read)."""
    try:
        from metadata_builders.families.dsv4.sglang.releases import Capabilities, upstream_version

        return bool(getattr(Capabilities.of(upstream_version()), capability))
    except Exception:  # PackageNotFoundError, or a version string the adapter cannot read
        return None


FINDINGS: tuple[Finding, ...] = (
    Finding("F2c", ("P1", "P5", "P6"), _f2c,
            "tier slack absorbed past req_to_token's width is gathered out of bounds (get_swa_page_indices)"),
    Finding("F5", ("P1", "P5", "P10"), _f5,
            "0.5.18/0.5.19: max_seq_len lacks + num_draft_tokens; the page table misses the verify tokens' page"),
    Finding("F6", ("P1", "P5"), _f6,
            "0.5.18-0.5.20: pf_* stop at num_tokens on a tier with an uncovered tail"),
    Finding("F7", ("P6",), _f7,
            "a stale extend-length copy reaches ExpandPrefillCausally too; get_swa_page_indices then reads "
            "req_to_token out of bounds at the table edge, synced token map or not"),
    Finding("F8", ("P6", "P8"), _f8,
            "a stale extend length reaches build_decode_streams, whose indptr then describes segments outside its "
            "index buffer (on a GPU an out-of-bounds write; on CPU, a zero-token row aborts the process)"),
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
    Finding("F16", ("P10",), _f16,
            "the graph path pads full_coverage: the last real row absorbs the tier's slack, and its extra tokens' "
            "SWA ring stores (swa_loc) overwrite rows the request still reads (a padding token's K in a live row)"),
    Finding("F20", ("P10",), _f20,
            "0.5.20+, full_coverage: the tier's slack absorbed by the last real row writes its compressor states "
            "(c4_write_plan) round the 16-row state ring onto states the request's next compress reads"),
    Finding("F18", ("P1", "P5", "P10"), _f18,
            "0.5.22+: target verify's low-ratio token map (low_ratio_req_indices, set in-graph) is uniform, "
            "repeat_interleave(req, draft_token_num), on a ragged layout: tokens read and write another request's "
            "c1/c2 state"),
    Finding("F21", ("P1",), _f21,
            "0.5.18-0.5.21: draft extend sizes its page-table placeholder (never read: draft extend attends only to "
            "SWA) by the caller's max_seq_len -- max_context columns per token on a graph tier -- where 0.5.22+ "
            "allocate one page"),
    Finding("F11", ("P1", "P5", "P10"), _f11,
            "0.5.18/0.5.19: the c4 compress state lives in the SWA pool (no per-request ring), so their c4 plans "
            "(prefill and decode) differ from the reference (0.5.20+ semantics) on every compressed batch, and P10, "
            "which judges the per-request state ring, finds their c4 write plans in another request's rows"),
    Finding("F22", ("P1", "P5", "P10"), _f22,
            "0.5.18/0.5.19: a multi-step draft-decode child builds the accepted prefix's lengths, not prefix + step "
            "+ 1: each draft token attends without itself and the draft tokens before it (fixed in 0.5.20)"),
    Finding("F23", ("P5",), _f23,
            "0.5.18/0.5.19: before a replay every draft-decode child gets child 0's raw metadata, out_cache_loc "
            "truncated from the whole shared buffer: replays differ from eager builds (inert: no draft layer reads "
            "the c4/c128 locations built from it)"),
    Finding("F24", ("P1", "P5"), _f24,
            "0.5.18-0.5.20: a draft-decode child compresses (need_compress forced on), so its HCA/CSA streams carry "
            "compressed tails the draft layers (compress_ratio 0) never read"),
    Finding("F25", ("P1",), _f25,
            "0.5.21+, SGLANG_DSV4_GROUPED_ASM=1: the grouped verify streams cut the tokens into r * num_draft + "
            "[0..4) whatever the ragged rows, so a group holds two requests' tokens and reads the last one's window"),
)
"""The findings the gate and ``check --builder sglang`` recognise."""


JUDGES_DIVERGENCE = ("P6", "P8")
"""Properties that build a batch with its divergence (P6 judges the faults, P8 that the diverged inputs stay
untouched); every other property judges it without (``_clean``)."""


def known_finding(failure: Seen | Any, batch: VerifyBatch) -> str | None:
    """The id of the known finding ``failure`` (a :class:`Seen`, or a ``PropertyFailure``) is, if any.

    A finding is matched on the batch the property judged: P1 and P5 judge a
    diverging batch without its divergence, so an F2c batch drawn with one is F2c
    for them as for any other F2c batch (P6 judges it diverged: F7 there; P8
    builds it diverged too: F12).  The property is a name (``P1``), whichever kernel route failed it: a route is
    the gate row's data (:attr:`~metadata_builders.families.dsv4.gate.verdicts.PropertyVerdict.route`), never a
    suffix read back.
    """
    seen = failure if isinstance(failure, Seen) else Seen.of(failure)
    prop = seen.prop
    judged = batch if prop in JUDGES_DIVERGENCE or batch.divergence is None else batch.without_divergence()
    for finding in FINDINGS:
        if prop in finding.props and finding.matches(seen, judged):
            return finding.id
    return None
