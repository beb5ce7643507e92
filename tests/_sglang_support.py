"""Helpers the SGLang adapter's tests share (a test module imports no other test module): the findings a batch
runs into on the installed release, a bug planted in upstream's backend source, upstream's compressed geometry.
"""

from __future__ import annotations

import __future__
import inspect
import textwrap

import pytest

from metadata_builders import Geometry, Variant, VerifyBatch, variants_for
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.batch import Compression
from metadata_builders.families.dsv4.reference import oob_read_count, verify_extension

__all__ = ["compressed", "known_findings", "plant", "known_or_release_difference"]


def _graph_variants(batch: VerifyBatch) -> list[Variant]:
    return [v for v in variants_for(batch) if v.path == "graph"]


def known_findings(batch: VerifyBatch, upstream) -> dict[str, set[str]]:
    """The findings ``batch`` runs into on the installed release: finding -> fields P1 may fail on.

    F2c: a real row's absorbed slack reads past the table (a fault); F5
    (0.5.18/0.5.19): the page table and ``max_seq_len`` lack the verify extension;
    F6 (0.5.18-0.5.20): ``pf_*`` stop at ``num_tokens`` on a tier with an uncovered tail (none under the
    adapter's ``full_coverage`` since issue 28: F6 is unreachable through it); F11
    (0.5.18/0.5.19): the c4 plans keep their state in the SWA pool.
    """
    caps = upstream.capabilities
    if batch.mode in ("decode", "draft_decode", "idle"):
        return _decode_findings(batch, caps)
    found: dict[str, set[str]] = {}
    if any(oob_read_count(batch, v) for v in _graph_variants(batch)):
        found["F2c"] = {"audit.faults"}
    if not caps.exact_token_map:
        found["F5"] = {"page_table", "decision.max_seq_len"}
    # The adapter's graph builds follow full_coverage (SGLangBuilder.padding_convention): no tier leaves a tail.
    tail = any(verify_extension(batch, v, "full_coverage").num_tokens
               < len(verify_extension(batch, v, "full_coverage").out_cache_loc) for v in _graph_variants(batch))
    if tail and not caps.pf_padding:
        found["F6"] = {"pf_state_slot", "pf_chunk_start", "pf_cu_q", "pf_final_pos"}
    if batch.geometry.compression is not None and not caps.plan_req_ring:
        found["F11"] = {"c4_compress_plan", "c4_write_plan"}
    if batch.is_ragged and caps.low_ratios and batch.geometry.compression is not None \
            and batch.geometry.compression.low_ratios:
        found["F18"] = {"low_ratio_req_indices"}  # the in-graph token map is uniform (P1 eager, P5 replays)
    return found


def _decode_findings(batch: VerifyBatch, caps) -> dict[str, set[str]]:
    """The decode modes' findings: F11 (0.5.18/0.5.19) the c4 decode plan follows the SWA state page, no request
    ring; F22 (0.5.18/0.5.19) a draft child's lengths miss its step; F23 (0.5.18/0.5.19) a draft child's replay
    takes child 0's slice of the whole buffer; F24 (0.5.18-0.5.20) a draft child compresses, its HCA/CSA streams
    carry a compressed tail."""
    from metadata_builders.families.dsv4.metadata import STREAM_FIELD_NAMES

    found: dict[str, set[str]] = {}
    compressed = batch.geometry.compression is not None
    if batch.mode != "draft_decode" and compressed and not caps.plan_req_ring:
        found["F11"] = {"c4_decode_plan"}
    if batch.mode == "draft_decode" and not caps.draft_decode_step_offset:
        found["F22"] = {"seq_lens", "seq_lens_casual", "positions_casual", "swa_topk_lengths", "swa_page_indices",
                        "swa_loc", *STREAM_FIELD_NAMES}
    if batch.mode == "draft_decode" and batch.graph is not None and not caps.draft_decode_step_rows:
        found["F23"] = {"raw_out_loc", "swa_out_cache_loc"}
    if batch.mode == "draft_decode" and compressed and caps.forced_compression:
        found["F24"] = {"hca_indptr", "hca_indices", "csa_indptr", "csa_indices"}
    return found


def plant(monkeypatch, upstream, method: str, old: str, new: str) -> None:
    """Replace ``DeepseekV4HipRadixBackend.method`` by its source with ``old`` edited to ``new``."""
    func = getattr(upstream.backend_cls, method)
    source = textwrap.dedent(inspect.getsource(func))
    if old not in source:
        pytest.skip(f"SGLang {upstream.release}: {method} has no {old!r} to plant a bug in")
    code = compile(source.replace(old, new, 1), inspect.getsourcefile(func), "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace: dict = {}
    exec(code, upstream.backend_module.__dict__, namespace)  # noqa: S102 - upstream's own source, edited
    monkeypatch.setattr(upstream.backend_cls, method, namespace[method])


def compressed(seq_lens, slots, draft, *, verify_lens=None, graph=None, is_dspark=False, width=400, page=256,
               compression=None) -> VerifyBatch:
    """Upstream's geometry with compression; slot ``s`` keeps position ``c`` at ``s * width + c`` (SWA ``+ 100``)."""
    table = [[s * width + c for c in range(width)] for s in range(4)]
    extend = verify_lens if verify_lens is not None else [draft] * len(seq_lens)
    return VerifyBatch(
        seq_lens=seq_lens, req_pool_indices=slots, verify_lens=verify_lens, num_draft_tokens=draft,
        out_cache_loc=[slot * width + s + j for s, slot, e in zip(seq_lens, slots, extend) for j in range(e)],
        req_to_token=table, full_to_swa=[100 + loc for loc in range(4 * width)] + [-1], is_dspark=is_dspark,
        geometry=Geometry(page_size=page, ring_size=128 + draft - 1, compression=compression or Compression()),
        graph=graph,
    )


def known_or_release_difference(upstream, batch: VerifyBatch, failure: PropertyFailure) -> bool:
    """A known finding of the release (F5 on 0.5.18/0.5.19, ...), or 0.5.18/0.5.19's c4 compress state in the
    SWA pool rather than a per-request ring (docs/SGLANG.md "Per-release differences")."""
    allowed = set().union(*known_findings(batch, upstream).values())
    if not upstream.capabilities.plan_req_ring:
        allowed |= {"c4_compress_plan", "c4_write_plan"}
    return failure.field in allowed
