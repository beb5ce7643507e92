"""The DSA family's batch: one speculative step of ``DeepseekSparseAttnBackend`` as plain data.

A :class:`DSABatch` is ints and lists only, so it round-trips through JSON (schema
``metadata-builders/dsa-batch@1``, key ``"family": "dsa"``) and a failing batch can be written
to a replay file and rebuilt bit for bit.  Every precondition of the builders is checked when a
batch is made (:mod:`.validation`): a broken one raises
:class:`~metadata_builders.errors.InvalidBatch` naming field, index and value.

Worked example (DESIGN.md section 6): ``seq_lens=[5, 3]``, slots ``[2, 1]``, ``N = 3`` drafts,
page ``P = 4``, top-k 8, ``req_to_token[s][c] = 16 s + c`` (4 slots x 16 columns).  Target verify:
request 0 (slot 2) verifies positions 5, 6, 7, so ``out_cache_loc`` starts ``[37, 38, 39]``
(slot 2's row at those positions), then ``[19, 20, 21]``.  With ``graph=DSAGraphTier(3)`` the
graph path adds one pad row (``seq_len`` 1, slot 0).

``seq_lens`` is always the accepted prefix *before* the step.  What upstream's caller hands the
backend differs per mode (:attr:`DSABatch.caller_seq_lens`): target verify the prefix (the backend
adds ``N``), draft extend ``prefix + N`` (the V2 worker wrote the drafts first), decode
``prefix + 1``, draft decode the prefix (every step of the multi-step backend reads the same
lengths: upstream adds no per-step offset, ``docs/research/dsa-findings.md``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

from metadata_builders.values import check_int, int_tuple, reject_unknown
from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsa.validation import validate

__all__ = ["FAMILY", "MODES", "SCHEMA", "DSABatch", "DSADivergence", "DSAGraphTier", "Mode"]

FAMILY = "dsa"
"""The family a replay file names (``"family": "dsa"``)."""

SCHEMA = "metadata-builders/dsa-batch@1"
"""The replay file's schema tag."""

Mode = Literal["target_verify", "draft_extend", "decode", "draft_decode", "idle"]
"""The builds of one MTP step on the DSA backend (DESIGN.md section 6)."""

MODES: tuple[str, ...] = get_args(Mode)
"""Every :data:`Mode`, the one source of allowed values."""


@dataclass(frozen=True, slots=True)
class DSAGraphTier:
    """The captured batch size the graph path replays on: rows ``bs..padded_bs-1`` are pad rows
    (``seq_len`` 1, the value of upstream's ``get_cuda_graph_seq_len_fill_value()``, slot 0).

    ``capture_bs`` is the runner's whole capture list (upstream's ``get_batch_sizes_to_capture``): every size
    is captured on one backend, largest first, before the first replay, and ``padded_bs`` is the smallest of
    them that holds the batch.  Example: ``capture_bs (1, 2, 4)`` and 3 requests replay on ``padded_bs 4``.
    """

    padded_bs: int
    """Rows of the captured graph (upstream keys its captured metadata by this ``bs`` alone)."""
    capture_bs: tuple[int, ...] = ()
    """Every batch size the runner captures, ascending, ``padded_bs`` among them; empty: ``padded_bs`` alone."""

    def __post_init__(self) -> None:
        check_int("graph.padded_bs", self.padded_bs, minimum=1)
        capture = tuple(sorted(set(int_tuple("graph.capture_bs", self.capture_bs, minimum=1))))
        if capture and self.padded_bs not in capture:
            raise InvalidBatch("graph.capture_bs", None, f"a list holding padded_bs={self.padded_bs}", list(capture))
        object.__setattr__(self, "capture_bs", capture)

    @property
    def tiers(self) -> tuple[int, ...]:
        """The sizes the runner captures, ascending (``(padded_bs,)`` without a capture list)."""
        return self.capture_bs or (self.padded_bs,)

    def to_dict(self) -> dict[str, Any]:
        return {"padded_bs": self.padded_bs, "capture_bs": list(self.capture_bs)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DSAGraphTier:
        reject_unknown("graph", d, {"padded_bs", "capture_bs"})
        if "padded_bs" not in d:
            raise InvalidBatch("graph.padded_bs", None, "present", None)
        return cls(d["padded_bs"], tuple(d.get("capture_bs", ())))


@dataclass(frozen=True, slots=True)
class DSADivergence:
    """What the harness makes the caller's host values and the device disagree on (fault injection).

    ``extend_seq_lens``: draft extend's device-resident extend lengths, while the host still
    believes ``[N] * bs`` (``extend_seq_lens_cpu``): eager draft extend sizes
    ``seqlens_expand_triton``'s output by the host total and stores at the device offsets, the
    family's fault site (P6).  ``seq_lens_cpu``: a stale host mirror, in the caller's units
    (:attr:`DSABatch.caller_seq_lens`); upstream trusts it for ``max_seq_len_k`` (P2 shows what
    it does).  The harness applies both; a builder never sees this record.
    """

    extend_seq_lens: tuple[int, ...] | None = None
    """(bs,): the device's extend lengths (draft extend only), each in ``0..2 * num_draft_tokens``."""
    seq_lens_cpu: tuple[int, ...] | None = None
    """(bs,): the caller's stale host mirror of ``seq_lens`` (every mode but idle), each >= 1."""

    def __post_init__(self) -> None:
        for name in ("extend_seq_lens", "seq_lens_cpu"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, int_tuple(f"divergence.{name}", value, minimum=0))

    def to_dict(self) -> dict[str, Any]:
        return {name: None if getattr(self, name) is None else list(getattr(self, name))
                for name in ("extend_seq_lens", "seq_lens_cpu")}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DSADivergence:
        reject_unknown("divergence", d, {"extend_seq_lens", "seq_lens_cpu"})
        return cls(d.get("extend_seq_lens"), d.get("seq_lens_cpu"))


def _short(values: tuple[int, ...], shown: int = 12) -> str:
    if len(values) <= shown:
        return str(list(values))
    return "[" + ", ".join(map(str, values[: shown // 2])) + f", ... (+{len(values) - shown // 2} more)]"


@dataclass(frozen=True, slots=True)
class DSABatch:
    """One step of the DSA backend: real requests, their drafts, the request table, the backend's constants."""

    seq_lens: tuple[int, ...]
    """(bs,): accepted prefix per real request, each >= 1 (empty only for ``idle``)."""
    req_pool_indices: tuple[int, ...]
    """(bs,): distinct request slots in ``1..num_slots-1`` (slot 0 is the pad rows' slot)."""
    req_to_token: tuple[tuple[int, ...], ...]
    """(num_slots, width): the KV location of each position of each slot (``req_to_token_pool``)."""
    out_cache_loc: tuple[int, ...]
    """(num_out_cache_loc,): where the caller allocated each token of the step (the table's entry there)."""
    num_draft_tokens: int
    """``N``, the backend's ``speculative_num_draft_tokens``."""
    page_size: int = 64
    """``P``, the backend's ``physical_page_size`` (``page_size // index_kpool``; kpool 1 here)."""
    index_topk: int = 2048
    """The indexer's top-k (``dsa_index_topk``): ``dsa_cache_seqlens_int32`` is clamped to it."""
    mode: Mode = "target_verify"
    """Which build of the MTP step (:data:`MODES`)."""
    graph: DSAGraphTier | None = None
    """The captured tier for the graph path; None for an eager-only batch."""
    divergence: DSADivergence | None = None
    """Fault injection applied by the harness (P2's stale mirror, P6's device lengths); None = none."""
    draft_step: int | None = None
    """``draft_decode``: the child of the multi-step backend judged, ``0..N-3``; None otherwise."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "seq_lens", int_tuple("seq_lens", self.seq_lens, minimum=1))
        set_(self, "req_pool_indices", int_tuple("req_pool_indices", self.req_pool_indices))
        set_(self, "out_cache_loc", int_tuple("out_cache_loc", self.out_cache_loc))
        if isinstance(self.req_to_token, (str, bytes)) or not isinstance(self.req_to_token, Iterable):
            raise InvalidBatch("req_to_token", None, "a list of rows", self.req_to_token)
        set_(self, "req_to_token", tuple(int_tuple(f"req_to_token[{i}]", row, minimum=0)
                                         for i, row in enumerate(self.req_to_token)))
        for name, kind in (("graph", DSAGraphTier), ("divergence", DSADivergence)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise InvalidBatch(name, None, f"a {kind.__name__} or None", value)
        if not isinstance(self.mode, str) or self.mode not in MODES:
            raise InvalidBatch("mode", None, "one of " + ", ".join(MODES), self.mode)
        validate(self)

    # -- sizes ---------------------------------------------------------------------------------

    @property
    def bs(self) -> int:
        """Real requests."""
        return len(self.seq_lens)

    @property
    def num_slots(self) -> int:
        """Rows of ``req_to_token``."""
        return len(self.req_to_token)

    @property
    def width(self) -> int:
        """``W``: columns of ``req_to_token`` (the graph path's ``max_seq_len_k``)."""
        return len(self.req_to_token[0]) if self.req_to_token else 0

    @property
    def tokens_per_row(self) -> int:
        """Query rows per request in the metadata: ``N`` for target verify and draft extend, else 1."""
        return self.num_draft_tokens if self.mode in ("target_verify", "draft_extend") else 1

    @property
    def num_draft_steps(self) -> int:
        """Steps of EAGLE's draft decode (top-k 1): ``N - 1``; the multi-step backend has ``N - 2`` children."""
        return self.num_draft_tokens - 1

    @property
    def step_tokens(self) -> int:
        """Tokens each request writes this step: ``N`` (verify, draft extend), 1 (decode), ``N - 1`` (draft
        decode: the shared buffer of every step), 0 (idle)."""
        return {"target_verify": self.num_draft_tokens, "draft_extend": self.num_draft_tokens, "decode": 1,
                "draft_decode": self.num_draft_steps, "idle": 0}[self.mode]

    @property
    def num_out_cache_loc(self) -> int:
        """Entries of ``out_cache_loc``."""
        return self.bs * self.step_tokens

    @property
    def caller_seq_lens(self) -> tuple[int, ...]:
        """(bs,): ``forward_batch.seq_lens`` as upstream's caller hands it (module docstring)."""
        extra = {"draft_extend": self.num_draft_tokens, "decode": 1}.get(self.mode, 0)
        return tuple(s + extra for s in self.seq_lens)

    @property
    def host_mirror(self) -> tuple[int, ...]:
        """(bs,): what the caller's host mirror ``seq_lens_cpu`` holds: the stale one when injected."""
        div = self.divergence
        if div is not None and div.seq_lens_cpu is not None:
            return div.seq_lens_cpu
        return self.caller_seq_lens

    @property
    def device_extend_seq_lens(self) -> tuple[int, ...]:
        """(bs,): draft extend's device extend lengths (the injected ones when diverged), else ``[N] * bs``."""
        div = self.divergence
        if div is not None and div.extend_seq_lens is not None:
            return div.extend_seq_lens
        return (self.num_draft_tokens,) * self.bs

    @property
    def stale_mirror(self) -> bool:
        """The injected host mirror differs from the caller's device lengths."""
        return self.host_mirror != self.caller_seq_lens

    @property
    def diverged(self) -> bool:
        """Draft extend's device extend lengths differ from the host's ``[N] * bs``."""
        return self.device_extend_seq_lens != (self.num_draft_tokens,) * self.bs

    def rows(self, path: str) -> int:
        """Rows of the built batch: ``bs`` eager, ``padded_bs`` on the graph path."""
        if path == "graph":
            assert self.graph is not None
            return self.graph.padded_bs
        return self.bs

    def size_key(self) -> tuple[int, ...]:
        """Order batches by size, smallest first (what a person reads first)."""
        padded = self.graph.padded_bs if self.graph is not None else self.bs
        return (self.bs * self.tokens_per_row, self.bs, padded, self.width, self.num_slots)

    # -- copies and text ----------------------------------------------------------------------

    def replace(self, **changes: Any) -> DSABatch:
        """A copy with some fields changed, validated again."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(changes)
        return DSABatch(**d)

    def without_divergence(self) -> DSABatch:
        """The same batch with nothing injected."""
        return self if self.divergence is None else self.replace(divergence=None)

    def __repr__(self) -> str:
        """A few lines, not thousands: the table by its shape (``to_json()`` is the exact form)."""
        parts = [f"seq_lens={_short(self.seq_lens)}", f"req_pool_indices={_short(self.req_pool_indices)}",
                 f"req_to_token=<{self.num_slots} x {self.width} table>", f"out_cache_loc={_short(self.out_cache_loc)}",
                 f"num_draft_tokens={self.num_draft_tokens}", f"page_size={self.page_size}",
                 f"index_topk={self.index_topk}", f"mode={self.mode!r}", f"graph={self.graph!r}",
                 f"divergence={self.divergence!r}"]
        if self.draft_step is not None:
            parts.append(f"draft_step={self.draft_step}")
        return "DSABatch(" + ", ".join(parts) + ")"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    # -- JSON -------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data with the family and the schema tag."""
        return {
            "family": FAMILY, "schema": SCHEMA, "mode": self.mode,
            "seq_lens": list(self.seq_lens), "req_pool_indices": list(self.req_pool_indices),
            "req_to_token": [list(r) for r in self.req_to_token], "out_cache_loc": list(self.out_cache_loc),
            "num_draft_tokens": self.num_draft_tokens, "page_size": self.page_size, "index_topk": self.index_topk,
            "graph": None if self.graph is None else self.graph.to_dict(),
            "divergence": None if self.divergence is None else self.divergence.to_dict(),
            "draft_step": self.draft_step,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DSABatch:
        """Rebuild a batch; ``family`` and ``schema`` must match; ``why`` and ``meta`` are accepted and ignored."""
        reject_unknown("batch", d, {f.name for f in fields(cls)} | {"family", "schema", "why", "meta"})
        if d.get("family", FAMILY) != FAMILY:
            raise InvalidBatch("family", None, repr(FAMILY), d["family"])
        if d.get("schema", SCHEMA) != SCHEMA:
            raise InvalidBatch("schema", None, repr(SCHEMA), d["schema"])
        for key in ("seq_lens", "req_pool_indices", "req_to_token", "out_cache_loc", "num_draft_tokens"):
            if key not in d:
                raise InvalidBatch(key, None, "present", None)
        graph, divergence = d.get("graph"), d.get("divergence")
        kwargs = {k: d[k] for k in ("page_size", "index_topk", "mode", "draft_step") if k in d}
        return cls(seq_lens=d["seq_lens"], req_pool_indices=d["req_pool_indices"], req_to_token=d["req_to_token"],
                   out_cache_loc=d["out_cache_loc"], num_draft_tokens=d["num_draft_tokens"],
                   graph=None if graph is None else DSAGraphTier.from_dict(graph),
                   divergence=None if divergence is None else DSADivergence.from_dict(divergence), **kwargs)

    def to_json(self, **extra: Any) -> str:
        """JSON text; ``extra`` keys (``why``, ``meta``) are written after the tags."""
        d = self.to_dict()
        d.update(extra)
        return json.dumps(d, indent=1)

    @classmethod
    def from_json(cls, text: str | bytes) -> DSABatch:
        """Rebuild a batch from JSON text; text that is not JSON raises ``InvalidBatch`` field ``json``."""
        try:
            d = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidBatch("json", None, "valid UTF-8 JSON", str(exc)) from exc
        return cls.from_dict(d)
