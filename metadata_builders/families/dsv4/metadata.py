"""The canonical output of a build: metadata fields, the decision, the audit.

Everything is plain Python (lists of ints, 2-D for ``page_table`` and ``swa_page_indices``) so any builder, torch or
not, can be compared with the reference, and a mismatch is reported as field, first differing index, expected and
actual -- never a tensor dump.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Mapping

from metadata_builders.records import (PLANNER_OP, Audit, FaultKind, FaultRecord, InputChange, ReadKind, SyncRecord,
                                       TokenMap)

__all__ = [
    "BASE_FIELD_NAMES", "COMMON_FIELD_NAMES", "COMPRESSION_GROUPS", "DRAFT_EXTEND_FIELD_NAMES", "FIELDS", "FIELD_NAMES",
    "GROUPS", "MODE_FIELD_NAMES", "PER_ENTRY", "PER_ROW", "PLANNER_OP", "SHAPE_VARIES", "STREAM_FIELD_NAMES", "Audit",
    "Decision", "FaultKind", "FieldSpec", "FaultRecord", "InputChange", "Mismatch", "ReadKind", "TokenMap",
    "SyncRecord", "VerifyMetadata", "canonical_plan", "fields_for", "first_difference",
]


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """What one metadata field is: per row or per token, its shape, its meaning."""

    name: str
    per: Literal["row", "token", "boundary", "entry"]
    """``row``: one entry per row of the built batch; ``token``: one per token (pads included);
    ``boundary``: one per token plus one (an ``indptr``); ``entry``: one per plan entry (a compress
    plan's valid entries, sorted by ``ragged_id``)."""
    shape: str
    """Its shape in terms of the batch: ``rows`` is ``bs`` eager, ``padded_bs`` graph;
    ``padded_num_tokens`` the real tokens eager, ``graph_num_tokens`` graph."""
    doc: str
    """One line, as DESIGN.md section 2 defines it."""
    dtype: Literal["int32", "int64"] = "int32"
    """The dtype upstream's consumers take (SGLang 0.5.23's kernels); a tensor field of another dtype fails P1."""
    dims: int = 1
    """2 when each entry is itself a list (``page_table``, ``swa_page_indices``)."""
    group: str = "core"
    """The group of DESIGN.md section 2 it belongs to (:data:`GROUPS`)."""
    ratio: int | None = None
    """The compression ratio it belongs to: group ``low_ratios`` (1 or 2: produced only where the geometry has
    it) and the compress plans (4, 128: the ratio of the state ring a pad entry must stay in)."""
    graph_columns: Literal["all", "eager"] = "all"
    """How P5 compares a real token of the graph build with the eager build: ``eager`` for a field sized by
    the tier on the graph path (the page table and what it pages): only the eager build's columns."""
    absorbing_row: Literal["compare", "own"] = "compare"
    """``own``: the real row that absorbed tier slack keeps its longer value (its ``seq_lens``,
    ``extend_seq_lens``, and its tokens' ``pf_final_pos``): P5's documented exception, not compared."""
    token_column: int | None = None
    """Per-entry fields (the plans): the column holding the entry's token (``ragged_id``)."""
    tail: int | str | None = None
    """What a token of a capped tier's uncovered tail must hold to be inert (P5): a number, or the name of a
    geometry constant (``unified_swa_window``: the SWA store's guard skips it); None: no rule."""
    pad_slot: bool = False
    """A pad row's token must hold the dummy slot 0 here (P5: it stores into slot 0's ring, never a request's)."""
    p1_class: Literal["exact", "pad_length", "pad_position", "read_columns"] = "exact"
    """P1's equivalences (decision 2026-12-04): ``pad_length`` (``pad_position``), a length (its position) no real token
    has below 1 (0): where the reference holds ``<= 0`` (``< 0``), a pad token that reads nothing, any such value is one
    class; ``read_columns``: an eager decode build's columns past ``position // page_size`` are not compared (P5's)."""

    @property
    def needs_compression(self) -> bool:
        """Whether only a geometry with compression produces it."""
        return self.group in COMPRESSION_GROUPS


GROUPS: tuple[str, ...] = ("core", "unified", "paged_swa", "streams", "compressed", "sparse", "indexer", "plans",
                           "low_ratios", "decode")
"""The groups of the metadata, in pipeline order (DESIGN.md section 2)."""

COMPRESSION_GROUPS: frozenset[str] = frozenset({"compressed", "sparse", "indexer", "plans", "low_ratios"})
"""Groups only a geometry with compression produces."""

_PLAN_C = ("[seq_len, ragged_id, buffer_len, read_page_0, read_page_1] per compression, sorted by ragged_id; "
           "read pages -1 and the row (batch id) when buffer_len is 0")
_PLAN_W = "[ragged_id, write_loc] per state write, sorted by ragged_id; write_loc = slot * ring + pos % ring"
_PLAN_D = ("[seq_len, write_loc, read_page_0, read_page_1] per row (plan_decode): p = seq_len - 1, loc(q) = slot * "
           "ring + q % ring, write_loc = loc(p), read pages loc(max(p - {ratio}, 0)) // {ratio}, loc(p) // {ratio}")


_STREAMS = {
    "swa": "the token's SWA window in the unified ring, oldest first: slot * ring + p % ring",
    "hca": "the window, then the token's c128 pages + unified_swa_pages (-1 for an invisible page)",
    "csa": "the window (its c4 top-k tail is filled per layer at attention time: not judged)",
}


def _compressed(ratio: int) -> tuple[FieldSpec, ...]:
    c = f"c{ratio}"
    return (
        FieldSpec(f"{c}_out_loc", "token", "(padded_num_tokens,)",
                  f"raw_out_loc // {ratio} where seq_lens_casual % {ratio} == 0, else 0", dtype="int64",
                  group="compressed"),
        FieldSpec(f"{c}_topk_lengths_raw", "token", "(padded_num_tokens,)", f"seq_lens_casual // {ratio}",
                  group="compressed"),
        FieldSpec(f"{c}_topk_lengths_clamp1", "token", "(padded_num_tokens,)", f"max(seq_lens_casual // {ratio}, 1)",
                  group="compressed"),
    )


def _plans(ratio: int) -> tuple[FieldSpec, ...]:
    c = f"c{ratio}"
    return (
        FieldSpec(f"{c}_compress_plan", "entry", "(compressions, 5)", _PLAN_C, dims=2, group="plans", ratio=ratio,
                  token_column=1),
        FieldSpec(f"{c}_write_plan", "entry", "(writes, 2)", _PLAN_W, dims=2, group="plans", ratio=ratio,
                  token_column=0),
    )


def _low_ratio(ratio: int) -> tuple[FieldSpec, ...]:
    """Group ``low_ratios`` for ``ratio`` (SGLang 0.5.22+: ``low_ratio_compression_metadata``, ``sparse_buffers``,
    the target-verify (decode-row) ``c{ratio}_indexer_metadata``);
    :mod:`metadata_builders.families.dsv4.reference.low_ratios`."""
    c, topk = f"c{ratio}", "(padded_num_tokens, ceil(index_topk / page_index_align) * page_index_align)"

    def spec(name: str, shape: str, doc: str, **kw: Any) -> FieldSpec:
        return FieldSpec(f"{c}_{name}", "token", shape, doc, group="low_ratios", ratio=ratio, **kw)

    return (
        spec("out_loc", "(padded_num_tokens,)", f"raw_out_loc // {ratio} where seq_lens_casual % {ratio} == 0, "
             "else -1", dtype="int64"),
        spec("topk_lengths_clamp1", "(padded_num_tokens,)", f"max(seq_lens_casual // {ratio}, 1)"),
        spec("sparse_topk_lengths", "(padded_num_tokens,)", f"min({c}_topk_lengths_clamp1, index_topk)"),
        spec("sparse_page_indices", topk, "-1 everywhere (the top-k kernel fills it at forward time)", dims=2),
        spec("sparse_raw_indices", topk, "-1 everywhere (filled at forward time)", dims=2),
        spec("indexer_compressed_seq_lens", "(padded_num_tokens,)",
             f"the c{ratio} indexer's lengths on the verify (decode-row) path: {c}_topk_lengths_clamp1"),
        spec("indexer_page_table", f"(padded_num_tokens, len(page_table[t]) * page_size // {ratio} // 64)",
             f"page_table expanded to the indexer pool's 64-slot pages: page p -> p * b + k, k < b = "
             f"page_size // {ratio} // 64", dims=2, graph_columns="eager"),
    )


FIELDS: Mapping[str, FieldSpec] = MappingProxyType({spec.name: spec for spec in (
    FieldSpec("seq_lens", "row", "(rows,)", "prefix plus verify tokens", absorbing_row="own"),
    FieldSpec("extend_seq_lens", "row", "(rows,)", "verify tokens per row (tier-padded on the graph path)",
              absorbing_row="own"),
    FieldSpec("extend_start_loc", "row", "(rows,)", "exclusive cumsum of extend_seq_lens"),
    FieldSpec("seq_lens_casual", "token", "(padded_num_tokens,)", "tokens visible to this token; 1 for tail pads",
              tail=1, p1_class="pad_length"),
    FieldSpec("positions_casual", "token", "(padded_num_tokens,)", "seq_lens_casual - 1", tail=0,
              p1_class="pad_position"),
    FieldSpec("req_pool_indices_repeated", "token", "(padded_num_tokens,)", "the token's request slot",
              dtype="int64"),
    FieldSpec("swa_topk_lengths", "token", "(padded_num_tokens,)", "min(seq_lens_casual, swa_window)",
              p1_class="pad_length"),
    FieldSpec("page_table", "token", "(padded_num_tokens, ceil(min(max_seq_len, max_context) / page_size))",
              "page of positions 0, page_size, 2*page_size, ... of the token's slot", dims=2, graph_columns="eager",
              p1_class="read_columns"),
    FieldSpec("swa_page_indices", "token",
              "(padded_num_tokens, ceil(swa_window / page_index_align) * page_index_align)",
              "SWA location of positions pos, pos-1, ..., -1 before 0 and as right padding", dims=2),
    FieldSpec("raw_out_loc", "token", "(padded_num_tokens,)", "out_cache_loc, zero-padded to the tier", dtype="int64"),
    FieldSpec("pf_state_slot", "token", "(padded_num_tokens,)", "slot of the token's row (token map)", dtype="int64",
              group="unified", pad_slot=True),
    FieldSpec("pf_chunk_start", "token", "(padded_num_tokens,)", "the row's prefix length; 0 for tail pads",
              dtype="int64", group="unified", tail=0),
    FieldSpec("pf_cu_q", "token", "(padded_num_tokens,)", "the row's first token; 0 for tail pads", dtype="int64",
              group="unified", tail=0),
    FieldSpec("pf_final_pos", "token", "(padded_num_tokens,)",
              "the row's last position; unified_swa_window for tail pads", dtype="int64", group="unified",
              absorbing_row="own", tail="unified_swa_window"),
    FieldSpec("verify_store_state_slot", "token", "(padded_num_tokens,)", "slot the SWA ring store writes to",
              dtype="int64", group="unified", pad_slot=True),
    FieldSpec("swa_loc", "token", "(padded_num_tokens,)", "slot * ring_size + pos % ring_size", group="unified"),
    *(spec for kind in ("swa", "hca", "csa") for spec in (
        FieldSpec(f"{kind}_indices", "token", "(padded_num_tokens, segment)", _STREAMS[kind], dims=2, group="streams"),
        FieldSpec(f"{kind}_indptr", "boundary", "(padded_num_tokens + 1,)", f"exclusive cumsum of the {kind} "
                  "segment lengths", group="streams"),
    )),
    *_compressed(4),
    *_compressed(128),
    FieldSpec("c128_page_indices", "token",
              "(padded_num_tokens, ceil(page_size // 128 * len(page_table[t]) / page_index_align) * page_index_align)",
              "compressed slot k of the token's slot (page_table[t][k // (page_size // 128)] * (page_size // 128) "
              "+ k % (page_size // 128)) below c128_topk_lengths_raw, else -1", dims=2, group="compressed",
              graph_columns="eager"),
    FieldSpec("unified_c4_out_loc", "token", "(padded_num_tokens,)", "c4_out_loc + unified_swa_pages",
              dtype="int64", group="compressed"),
    FieldSpec("unified_c128_out_loc", "token", "(padded_num_tokens,)", "c128_out_loc + unified_swa_pages",
              dtype="int64", group="compressed"),
    FieldSpec("c4_sparse_topk_lengths", "token", "(padded_num_tokens,)", "min(c4_topk_lengths_clamp1, index_topk)",
              group="sparse"),
    FieldSpec("c4_sparse_topk_lengths_raw", "token", "(padded_num_tokens,)", "min(c4_topk_lengths_raw, index_topk)",
              group="sparse"),
    FieldSpec("c4_sparse_page_indices", "token",
              "(padded_num_tokens, ceil(index_topk / page_index_align) * page_index_align)",
              "-1 everywhere (the top-k kernel fills it at forward time)", dims=2, group="sparse"),
    FieldSpec("indexer_compressed_seq_lens", "token", "(padded_num_tokens,)",
              "the c4 indexer's per-token compressed lengths: c4_topk_lengths_raw", group="indexer"),
    *_plans(4),
    *_plans(128),
    FieldSpec("low_ratio_req_indices", "token", "(padded_num_tokens,)",
              "the request slot each token's V4.1 low-ratio compressor state is read from and written to: the slot "
              "its stores go to (verify_store_state_slot); 0 for pad rows", dtype="int64", group="low_ratios",
              pad_slot=True),
    FieldSpec("low_ratio_pos_i64", "token", "(padded_num_tokens,)", "the forward batch's positions widened: each "
              "real token's (its c2 state row, its RoPE), 0 past them", dtype="int64", group="low_ratios", tail=0),
    *_low_ratio(1),
    *_low_ratio(2),
    FieldSpec("swa_out_cache_loc", "token", "(padded_num_tokens,)", "full_to_swa[out_cache_loc]: where the token's "
              "SWA K is stored in the paged SWA pool (the in-graph block); pads: full_to_swa[0], the dummy slot",
              group="paged_swa"),
    *(FieldSpec(f"c{ratio}_decode_plan", "token", "(rows, 4)", _PLAN_D.format(ratio=ratio), dims=2, group="decode",
                ratio=ratio) for ratio in (4, 128)),
)})
"""Every metadata field, in pipeline order, with its shape: the one place these facts live."""

FIELD_NAMES: tuple[str, ...] = tuple(FIELDS)
"""Every metadata field name, in pipeline order."""

PER_ROW: tuple[str, ...] = tuple(name for name, spec in FIELDS.items() if spec.per == "row")
"""Fields with one entry per row."""

PER_ENTRY: tuple[str, ...] = tuple(name for name, spec in FIELDS.items() if spec.per == "entry")
"""Fields with one entry per plan entry (the compress plans); every other field has one entry per token."""

BASE_FIELD_NAMES: tuple[str, ...] = tuple(name for name, spec in FIELDS.items() if spec.group in ("core", "unified"))
"""The fields every build produces, whatever the geometry."""

STREAM_FIELD_NAMES: tuple[str, ...] = tuple(name for name, spec in FIELDS.items() if spec.group == "streams")
"""The decode index streams: judged where the SWA window equals the unified pool's window (upstream: both 128);
elsewhere its kernel writes ``min(pos + 1, unified_swa_window)`` entries into ``min(pos + 1, swa_window)``-sized
segments."""


DRAFT_EXTEND_FIELD_NAMES: tuple[str, ...] = tuple(n for n in BASE_FIELD_NAMES if n not in (
    "extend_start_loc", "verify_store_state_slot", "swa_loc"))
"""Mode ``draft_extend``'s fields (0.5.23 ``init_forward_metadata_draft_extend``, ``need_compress=False``): rows, core
(a one-column page table), the unified prefill mapping; no ``extend_start_loc``, ring store, streams or compression."""

MODE_FIELD_NAMES: Mapping[str, tuple[str, ...] | None] = MappingProxyType(
    {"target_verify": None, "draft_extend": DRAFT_EXTEND_FIELD_NAMES, "decode": None, "draft_decode": None,
     "idle": None})
"""The fields each built mode of the MTP step produces (None: by geometry, :func:`fields_for`)."""

COMMON_FIELD_NAMES: tuple[str, ...] = ("seq_lens",
                                       *(n for n, s in FIELDS.items() if s.group == "core" and s.per == "token"))
"""What a build of every mode produces: the rows' ``seq_lens`` and the core group's per-token fields."""


def _low_ratio_field(spec: FieldSpec, low_ratios: tuple[int, ...]) -> bool:
    """A field of group ``low_ratios`` the geometry's ``low_ratios`` produce (the per-token maps with any of them)."""
    return spec.group == "low_ratios" and (spec.ratio in low_ratios or (spec.ratio is None and bool(low_ratios)))


def _decode_fields(geometry: Any, mode: str) -> tuple[str, ...]:
    """The decode modes (0.5.23 ``make_forward_metadata_from_raw_decode``): one token per row; core, the SWA targets,
    the streams; compressed decode (not a draft worker) also the compressed groups, decode plans and low ratios."""
    compressed = mode in ("decode", "idle") and geometry.compression is not None
    low = geometry.compression.low_ratios if compressed else ()
    return tuple(name for name, spec in FIELDS.items()
                 if name in COMMON_FIELD_NAMES or name in ("verify_store_state_slot", "swa_loc")
                 or spec.group == "paged_swa" or _low_ratio_field(spec, low)
                 or (spec.group == "streams" and geometry.swa_window == geometry.unified_swa_window)
                 or (compressed and (spec.group in ("compressed", "sparse", "indexer")
                                     or name.endswith("_decode_plan"))))


def fields_for(geometry: Any, mode: str = "target_verify", *, draft_runner: bool = False) -> tuple[str, ...]:
    """The fields of a ``mode`` build with ``geometry``, in pipeline order; ``draft_runner``: on that runner."""
    mode = "draft_decode" if mode == "idle" and draft_runner else mode  # an idle draft child: draft decode's
    fixed = MODE_FIELD_NAMES.get(mode)
    if fixed is not None:
        return fixed
    if mode in ("decode", "draft_decode", "idle"):  # idle: the target's decode graph on an idle rank
        return _decode_fields(geometry, mode)
    streams = geometry.swa_window == geometry.unified_swa_window
    compression = geometry.compression
    low_ratios = () if compression is None else getattr(compression, "low_ratios", ())
    return tuple(name for name, spec in FIELDS.items()
                 if spec.group in ("core", "unified", "paged_swa") or (spec.group == "streams" and streams)
                 or _low_ratio_field(spec, low_ratios)
                 or (spec.needs_compression and spec.group != "low_ratios" and compression is not None))


SHAPE_VARIES: frozenset[str] = frozenset(
    name for name, spec in FIELDS.items() if spec.per == "entry" or (spec.group == "streams" and spec.dims == 2))
"""Fields compared in a canonical form whose shape follows the values (plan entries, stream segments);
their buffers keep one shape, which the harness holds by storage address instead."""


def canonical_plan(entries: list[list[int]]) -> list[list[int]]:
    """A compress or write plan as the harness compares it: its valid entries, sorted by ``ragged_id``.

    Upstream's planner pads its buffers with invalid entries (first word ``0xFFFFFFFF``, read as ``-1``) and a
    GPU fills them in atomic order, so neither the padding nor the order is part of the contract.  Example:
    ``[[-1, 0], [5, 9], [2, 7]] -> [[2, 7], [5, 9]]`` for a write plan (``ragged_id`` first; a compress plan's
    is second).
    """
    valid = [list(e) for e in entries if e and e[0] != -1]
    key = 1 if valid and len(valid[0]) == 5 else 0
    return sorted(valid, key=lambda e: e[key])

@dataclass(frozen=True, slots=True)
class Decision:
    """What the builder decided about the token count and the token map."""

    num_tokens: int
    """Tokens covered by requests (the host's belief); the rest up to the tier are pads."""
    exact_num_tokens: bool
    """``num_tokens`` equals the device-side sum, after the gate."""
    used_output_size: bool
    """The token map passed ``output_size=num_tokens`` (sync-free, trusted on HIP)."""
    max_seq_len: int
    """Max sequence length after the ``+= num_draft_tokens`` of verify extension."""

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ("num_tokens", "exact_num_tokens", "used_output_size",
                                                       "max_seq_len")}


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The first place two builds disagree."""

    field: str
    index: tuple[int, ...] | None
    """Index of the first differing element; None when the lengths differ."""
    expected: Any
    actual: Any

    def __str__(self) -> str:
        where = self.field if self.index is None else f"{self.field}{list(self.index)}"
        return f"{where}: expected {self.expected!r}, got {self.actual!r}"


@dataclass(frozen=True, slots=True)
class VerifyMetadata:
    """One build's result: ``fields`` (name -> list), ``decision``, ``audit``."""

    fields: dict[str, list[Any]]
    """Every name of ``FIELDS`` mapped to a plain list of ints, shaped as its ``FieldSpec.shape`` says
    (2-D for ``page_table`` and ``swa_page_indices``)."""
    decision: Decision
    """The token-count decision."""
    audit: Audit = field(default_factory=Audit)
    """Syncs and faults observed during the build."""
    not_observable: tuple[str, ...] = ()
    """Fields the builder cannot report because the code under test does not compute them
    (absent from ``fields``; properties say so rather than compare a derived value)."""
    dtypes: Mapping[str, str] = field(default_factory=dict)
    """The dtype (``"int32"``, ``"int64"``, ...) of each field the builder returned as a tensor;
    lists have none.  P1 holds them to ``FIELDS[name].dtype``."""

    def __post_init__(self) -> None:
        # What every built mode produces; a field of one mode only is held by P1 (a dropped field fails it).
        missing = [n for n in COMMON_FIELD_NAMES if n not in self.fields and n not in self.not_observable]
        if missing:
            from metadata_builders.errors import InvalidMetadata

            raise InvalidMetadata("fields", "every field every mode has (COMMON_FIELD_NAMES), "
                                  "or its name in not_observable", f"missing {missing}")

    def to_dict(self) -> dict[str, Any]:
        return {"fields": self.fields, "decision": self.decision.to_dict(), "audit": self.audit.to_dict(),
                "not_observable": list(self.not_observable)}


def _first_diff(expected: Any, actual: Any, prefix: tuple[int, ...]) -> tuple[tuple[int, ...] | None, Any, Any] | None:
    if expected == actual:  # the common case, compared in C; only a difference is walked
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return (None if not prefix else prefix), f"length {len(expected)}", f"length {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            found = _first_diff(e, a, prefix + (i,))
            if found is not None:
                return found
        return None
    return prefix, expected, actual


def first_difference(
    expected: Mapping[str, Any], actual: Mapping[str, Any], names: tuple[str, ...] = FIELD_NAMES
) -> Mismatch | None:
    """The first field (in pipeline order) and index where two field maps differ.

    Fields one side does not report (``VerifyMetadata.not_observable``) are skipped.
    """
    for name in names:
        if name not in expected or name not in actual:
            continue
        found = _first_diff(expected[name], actual[name], ())
        if found is not None:
            index, e, a = found
            return Mismatch(name, index, e, a)
    return None
