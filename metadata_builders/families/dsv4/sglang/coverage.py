"""Coverage: which of the fields upstream's target-verify step filled the harness judges, and why not the rest.

:func:`coverage` walks one build's ``DSV4Metadata`` -- its own fields, its
``core_attn_metadata``, ``core.unified``, the indexer metadata and the compress
plans -- and lists every field upstream filled (a tensor, or for the indexer and
the plans the object), under upstream's names relative to ``DSV4Metadata``.  Each
is **judged** when every harness field it maps to (:data:`HARNESS_FIELDS`) is in
the build's fields, else **not observable** with why (:data:`WHY`; an attribute
the adapter does not know is named as such: a new upstream field).

Worked example (SGLang 0.5.23, an eager compressed uniform batch, ratios 4 and 128):
the entry point fills 33 fields -- 6 core, 14 in ``core.unified`` (the prefill meta, the
SWA store, the six decode streams, the unified c4/c128 store locations), 10
compressed/sparse in ``core``, ``indexer_metadata``, and the two compress plans --
and the in-graph block, run after it as the dispatcher does, one more:
``core_attn_metadata.swa_out_cache_loc`` (the paged SWA store's target).  The harness
judges all 34: :meth:`Coverage.line` reads ``coverage: 34 judged / 34 produced by
upstream``.  With a SWA window other than the unified pool's, the six streams are not
observable, with why.  With the V4.1 low ratios (0.5.22+, ``low_ratios=(1, 2)``) the entry
point fills six more per ratio -- five in ``core`` (``c{R}_out_loc``, ``_topk_lengths_clamp1``,
``_sparse_topk_lengths``, ``_sparse_page_indices``, ``_sparse_raw_indices``) and
``c{R}_indexer_metadata`` -- and the in-graph block two more, ``low_ratio_req_indices`` and
``low_ratio_pos_i64`` (the forward batch's positions): 48 judged / 48 produced.
A piece the adapter stubs because upstream asserts against the geometry (the
indexer on a page other than 256) is counted as produced and not observable.

The CLI gets it with :func:`coverage_of`, which runs one ordinary build of the
builder it is handed (audited as usual) and returns that build's coverage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from metadata_builders.families.dsv4.batch import DECODE_MODES, MODES

__all__ = ["DECODE_HARNESS_FIELDS", "HARNESS_FIELDS", "WHY", "Coverage", "by_mode", "coverage", "coverage_of",
           "recording", "report_lines", "upstream_fields"]

_CORE = ("seq_lens_casual", "positions_casual", "swa_topk_lengths", "page_table", "swa_page_indices", "raw_out_loc",
         "c4_out_loc", "c4_topk_lengths_raw", "c4_topk_lengths_clamp1", "c128_out_loc", "c128_topk_lengths_raw",
         "c128_topk_lengths_clamp1", "c128_page_indices", "c4_sparse_topk_lengths", "c4_sparse_topk_lengths_raw",
         "c4_sparse_page_indices")
_UNIFIED = ("pf_state_slot", "pf_chunk_start", "pf_cu_q", "pf_final_pos", "verify_store_state_slot", "swa_loc")
_STREAMS = ("swa_indices", "swa_indptr", "hca_indices", "hca_indptr", "csa_indices", "csa_indptr")
_COMPOSITES = ("indexer_metadata", "c1_indexer_metadata", "c2_indexer_metadata", "c4_compress_metadata",
               "c128_compress_metadata")
"""``DSV4Metadata`` fields counted as one field each when set (their parts are aliases or schedules)."""

HARNESS_FIELDS: Mapping[str, tuple[str, ...]] = {
    **{f"core_attn_metadata.{n}": (n,) for n in _CORE},
    **{f"core_attn_metadata.unified.{n}": (n,) for n in _UNIFIED + _STREAMS},
    "core_attn_metadata.unified.c4_out_loc": ("unified_c4_out_loc",),
    "core_attn_metadata.unified.c128_out_loc": ("unified_c128_out_loc",),
    "indexer_metadata": ("indexer_compressed_seq_lens",),
    "c4_compress_metadata": ("c4_compress_plan", "c4_write_plan"),
    "c128_compress_metadata": ("c128_compress_plan", "c128_write_plan"),
    **{f"core_attn_metadata.c{r}_{n}": (f"c{r}_{n}",) for r in (1, 2)
       for n in ("out_loc", "topk_lengths_clamp1", "sparse_topk_lengths", "sparse_page_indices", "sparse_raw_indices")},
    **{f"c{r}_indexer_metadata": (f"c{r}_indexer_compressed_seq_lens", f"c{r}_indexer_page_table") for r in (1, 2)},
    "low_ratio_req_indices": ("low_ratio_req_indices",),
    "low_ratio_pos_i64": ("low_ratio_pos_i64",),
    "core_attn_metadata.swa_out_cache_loc": ("swa_out_cache_loc",),
}
"""Upstream field (relative to ``DSV4Metadata``) -> the harness fields that judge it."""

DECODE_HARNESS_FIELDS: Mapping[str, tuple[str, ...]] = {
    "c4_compress_metadata": ("c4_decode_plan",),
    "c128_compress_metadata": ("c128_decode_plan",),
}
"""The decode modes' differences from :data:`HARNESS_FIELDS`: the decode plans."""

WHY: Mapping[str, str] = {
    "fp4_low_ratio_decode_workspaces": "FP4 indexer workspaces (stubbed: docs/SGLANG.md)",
    **{f"core_attn_metadata.unified.{n}": "grouped verify stream: not in metadata.FIELDS yet"
       for n in ("gasm_indices", "gasm_kv_indptr", "gasm_qo_indptr", "grp_qo_indptr", "grp_hca_indices",
                 "grp_hca_indptr", "grp_hca_bounds", "grp_swa_indices", "grp_swa_indptr", "grp_swa_bounds")},
}
"""Why an upstream field the harness does not judge is not observable (when it is not in :data:`HARNESS_FIELDS`)."""


@dataclass(frozen=True)
class Coverage:
    """Of the fields upstream filled, which the harness judged and why the rest are not observable."""

    produced: tuple[str, ...]
    """Upstream's fields the build filled, relative to ``DSV4Metadata`` (``core_attn_metadata.page_table``, ...)."""
    judged: tuple[str, ...]
    """Those whose harness fields the build reported."""
    not_observable: Mapping[str, str] = field(default_factory=dict)
    """The rest: upstream field -> why."""
    entries: Mapping[str, int] = field(default_factory=dict)
    """Eager builds by the upstream function the adapter called: ``init_forward_metadata`` (the dispatcher, as
    upstream's step runs it) or an entry point directly (:func:`~.builder.through_dispatcher` says when)."""
    mode: str = "target_verify"
    """The mode of the MTP step the builds were of (a run prints one line per mode: :func:`by_mode`)."""

    def combine(self, other: Coverage) -> Coverage:
        """Over two builds (e.g. a run's batches): produced by either, judged by either; the rest not observable."""
        produced = tuple(dict.fromkeys(self.produced + other.produced))
        judged = set(self.judged) | set(other.judged)
        reasons = {**other.not_observable, **self.not_observable}
        missing = {n: reasons[n] for n in produced if n not in judged}
        entries = dict(self.entries)
        for name, count in other.entries.items():
            entries[name] = entries.get(name, 0) + count
        return Coverage(produced, tuple(n for n in produced if n in judged), missing, entries, self.mode)

    def entries_line(self) -> str:
        """``eager builds: N through the dispatcher (init_forward_metadata), M direct: entry (k), ...``."""
        total = sum(self.entries.values())
        through = self.entries.get(DISPATCHER, 0)
        direct = ", ".join(f"{_short_entry(name)} {count}" for name, count in sorted(self.entries.items())
                           if name != DISPATCHER)
        line = f"eager builds: {total}, {through} through upstream's dispatcher ({DISPATCHER})"
        return line + (f"; called directly: {direct} (the gate recipes, mirror=tolist, a page not a multiple of "
                       f"128, or no mirror before 0.5.22)" if direct else "")

    def line(self) -> str:
        """``coverage: J judged / P produced by upstream; not observable N: name (why), ...`` (``coverage of
        draft_decode: ...`` for a mode other than target verify)."""
        of = "" if self.mode == "target_verify" else f" of {self.mode}"
        head = f"coverage{of}: {len(self.judged)} judged / {len(self.produced)} produced by upstream"
        if not self.not_observable:
            return head
        by_why: dict[str, list[str]] = {}
        for name, why in self.not_observable.items():
            by_why.setdefault(why, []).append(_short(name))
        parts = [f"{', '.join(names)} ({why})" for why, names in by_why.items()]
        return f"{head}; not observable {len(self.not_observable)}: " + "; ".join(parts)


DISPATCHER = "init_forward_metadata"


def _short_entry(name: str) -> str:
    return name.removeprefix("init_forward_metadata_")


def _short(name: str) -> str:
    return name.removeprefix("core_attn_metadata.")


def _attributes(obj: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj):
        return {f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}
    if hasattr(obj, "_fields"):  # a NamedTuple
        return {n: getattr(obj, n) for n in obj._fields}
    return dict(vars(obj))


def _tensors(obj: Any, prefix: str) -> list[str]:
    import torch

    return [prefix + n for n, v in _attributes(obj).items() if isinstance(v, torch.Tensor)]


def upstream_fields(md: Any) -> list[str]:
    """Every field upstream filled in ``md`` (a ``DSV4Metadata``), in walk order: core, unified, the rest of md."""
    core = md.core_attn_metadata
    names = _tensors(core, "core_attn_metadata.")
    if getattr(core, "unified", None) is not None:
        names += _tensors(core.unified, "core_attn_metadata.unified.")
    names += _tensors(md, "")
    names += [n for n in _COMPOSITES if getattr(md, n, None) is not None]
    return names


def coverage(md: Any, reported: Iterable[str], why_missing: Mapping[str, str] | None = None,
             mode: str = "target_verify") -> Coverage:
    """The coverage of one build: ``md`` upstream's metadata, ``reported`` the harness fields the build returned.

    ``why_missing`` names, per harness field the adapter could not report, why
    (``compression.unobservable``); otherwise a mapped field left out says so.  ``mode``: a decode mode's plans
    and paged SWA target map to its own fields (:data:`DECODE_HARNESS_FIELDS`).
    """
    harness_fields = {**HARNESS_FIELDS, **DECODE_HARNESS_FIELDS} if mode in DECODE_MODES \
        else HARNESS_FIELDS
    reported = set(reported)
    why_missing = why_missing or {}
    produced = upstream_fields(md)
    # A piece stubbed because upstream asserts against the geometry produced nothing, yet is named.
    produced += [n for n, harness in harness_fields.items()
                 if n not in produced and any(h in why_missing for h in harness)]
    missing: dict[str, str] = {}
    for name in produced:
        harness = harness_fields.get(name)
        if harness is None:
            missing[name] = WHY.get(name, "unknown to the adapter: a field new in this release?")
            continue
        absent = [h for h in harness if h not in reported]
        if absent:
            reasons = {why_missing.get(h, "the adapter did not report it") for h in absent}
            missing[name] = "; ".join(sorted(reasons))
    return Coverage(tuple(produced), tuple(n for n in produced if n not in missing), missing)


_LOCK = threading.Lock()
_SINKS: list[list[Coverage]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[Coverage]]:
    """For the block, every ``sglang`` build appends its :class:`Coverage` to the list yielded."""
    sink: list[Coverage] = []
    lock, sinks = _LOCK, _SINKS  # held here: a generator left open is closed at exit, after module globals
    with lock:
        sinks.append(sink)
    try:
        yield sink
    finally:
        with lock:
            sinks.remove(sink)


def record(md: Any, reported: Iterable[str], why_missing: Mapping[str, str], *, entry: str,
           mode: str = "target_verify") -> None:
    """Called by each build: hands its coverage, and the upstream function ``entry`` it called, to every open
    :func:`recording` (nothing when none is)."""
    if not _SINKS:
        return
    cov = dataclasses.replace(coverage(md, reported, why_missing, mode), entries={entry: 1}, mode=mode)
    with _LOCK:
        for sink in _SINKS:
            sink.append(cov)


def by_mode(builds: Iterable[Coverage]) -> list[Coverage]:
    """The builds combined per mode of the MTP step, in the batch model's order of modes (one coverage line each)."""
    combined: dict[str, Coverage] = {}
    for cov in builds:
        combined[cov.mode] = combined[cov.mode].combine(cov) if cov.mode in combined else cov
    return [combined[mode] for mode in sorted(combined, key=MODES.index)]


def report_lines(builds: list[Coverage]) -> list[str]:
    """What a run prints of its upstream builds: a coverage line per mode (:func:`by_mode`), then which upstream
    function the eager builds called (:meth:`Coverage.entries_line`)."""
    merged = functools.reduce(lambda a, b: a.combine(b), builds)
    return [cov.line() for cov in by_mode(builds)] + [merged.entries_line()]


def coverage_of(builder: Any, batch: Any, variant: Any) -> Coverage:
    """Run ``builder.build(batch, variant)`` once (an ``sglang`` builder, audited or not) and return its coverage.

    Raises ``LookupError`` when no ``sglang`` build ran (a memoizing wrapper that
    had the build cached, or another builder).
    """
    with recording() as sink:
        builder.build(batch, variant)
    if not sink:
        raise LookupError(f"no sglang build ran for {variant} (a cached or non-sglang builder?)")
    return sink[-1]
