"""The batch model: what a target-verify builder is given, as plain data.

A :class:`VerifyBatch` is ints and lists only, so it round-trips through JSON
(schema ``metadata-builders/verify-batch@1``) and a failing batch can be written
to a replay file and rebuilt bit for bit.  Validation is part of the product:
every precondition of the builders is checked here and broken ones raise
:class:`~metadata_builders.errors.InvalidBatch` naming field, index and value,
so no builder ever sees a batch that would make it raise ``IndexError``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

from metadata_builders.errors import InvalidBatch
from metadata_builders.tier import tier_verify_lens

__all__ = ["SCHEMA", "Divergence", "Geometry", "GraphTier", "VerifyBatch"]

SCHEMA = "metadata-builders/verify-batch@1"

INT32_MAX = 2**31 - 1
"""Upstream stores ``swa_loc`` as int32 (F4): every ring slot must fit it."""


def _check_int(name: str, value: Any, index: int | None = None, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidBatch(name, index, "an int", value)
    if minimum is not None and value < minimum:
        raise InvalidBatch(name, index, f">= {minimum}", value)
    return value


def _int_tuple(name: str, values: Any, *, minimum: int | None = None) -> tuple[int, ...]:
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise InvalidBatch(name, None, "a list of ints", values)
    out = tuple(values)
    # Fast path (tables hold thousands of entries): plain ints all, none below the minimum.
    if set(map(type, out)) <= {int} and (minimum is None or not out or min(out) >= minimum):
        return out
    return tuple(_check_int(name, v, i, minimum=minimum) for i, v in enumerate(out))


@dataclass(frozen=True, slots=True)
class Geometry:
    """Backend constants the metadata depends on (upstream values as defaults)."""

    page_size: int = 256
    """Tokens per KV page; ``page_table`` holds one entry per page."""
    swa_window: int = 128
    """Sliding-window width: columns of ``swa_page_indices`` before alignment."""
    ring_size: int = 129
    """Slots per request in the unified SWA ring (upstream: window + num_draft - 1)."""
    unified_swa_window: int = 128
    """The unified pool's window; pad tokens get it as ``pf_final_pos``."""
    page_index_align: int = 64
    """``swa_page_indices`` rows are right-padded with -1 to a multiple of this."""

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_int(f"geometry.{f.name}", getattr(self, f.name), minimum=1)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Geometry:
        _reject_unknown("geometry", d, {f.name for f in fields(cls)})
        return cls(**d)

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class GraphTier:
    """The captured CUDA/HIP-graph bucket a graph-path batch is padded to."""

    padded_bs: int
    """Rows of the captured batch; rows ``bs..padded_bs-1`` are padding requests."""
    graph_num_tokens: int
    """Tokens of the captured batch (the tier); ``out_cache_loc`` is zero-padded to it."""
    cap: int | None = None
    """Per-row clamp of the tier slack given to pad rows; ``None`` = uncapped tier."""

    def __post_init__(self) -> None:
        _check_int("graph.padded_bs", self.padded_bs, minimum=1)
        _check_int("graph.graph_num_tokens", self.graph_num_tokens, minimum=1)
        if self.cap is not None:
            _check_int("graph.cap", self.cap, minimum=1)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GraphTier:
        _reject_unknown("graph", d, {"padded_bs", "graph_num_tokens", "cap"})
        for key in ("padded_bs", "graph_num_tokens"):
            if key not in d:
                raise InvalidBatch(f"graph.{key}", None, "present", None)
        return cls(d["padded_bs"], d["graph_num_tokens"], d.get("cap"))

    def to_dict(self) -> dict[str, int | None]:
        return {"padded_bs": self.padded_bs, "graph_num_tokens": self.graph_num_tokens, "cap": self.cap}


@dataclass(frozen=True, slots=True)
class Divergence:
    """Fault injection: device memory or the host mirror disagreeing with the truth.

    ``extend_seq_lens`` is what the device-resident extend lengths really hold when
    the device reads them (a stale or still-in-flight copy; P6).  The harness
    applies it, never a builder (DESIGN.md section 4):

    * **uniform** batches: to the builder's own asynchronous host-to-device copy of
      the extend lengths it staged on the host (``mirror=host``, and ``tolist``,
      which stages the same way after reading the mirror back).  One entry per real
      request (``bs``), or per row of the graph tier (``padded_bs``); on the graph
      path a ``bs``-long list leaves the pad rows at their true lengths, on the
      eager path a ``padded_bs``-long list contributes its first ``bs`` entries.
      Each entry is >= 0 and keeps its row's verify positions inside ``req_to_token``.
    * **ragged** batches: to the device-resident ``verify_lens`` the harness hands
      the builder (the device layout).  A stale layout is still a layout: ``bs``
      entries, each in ``1..num_draft_tokens``, fitting the table and the tier.

    ``seq_lens_cpu`` is a stale host mirror of ``seq_lens`` (``bs`` entries) that
    the caller passes where a mirror is passed (P2: mirror validation must catch it).
    At least one of the two is set.
    """

    extend_seq_lens: tuple[int, ...] | None = None
    """(bs,) or, uniform on a tier, (padded_bs,): device-side extend lengths; None = no divergence."""
    seq_lens_cpu: tuple[int, ...] | None = None
    """(bs,): the stale host mirror, each >= 1; None = the mirror is right."""

    def __post_init__(self) -> None:
        if self.extend_seq_lens is None and self.seq_lens_cpu is None:
            raise InvalidBatch("divergence", None, "to set extend_seq_lens or seq_lens_cpu", {})
        if self.extend_seq_lens is not None:
            object.__setattr__(
                self, "extend_seq_lens", _int_tuple("divergence.extend_seq_lens", self.extend_seq_lens, minimum=0)
            )
        if self.seq_lens_cpu is not None:
            object.__setattr__(
                self, "seq_lens_cpu", _int_tuple("divergence.seq_lens_cpu", self.seq_lens_cpu, minimum=1)
            )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Divergence:
        _reject_unknown("divergence", d, {"extend_seq_lens", "seq_lens_cpu"})
        return cls(d.get("extend_seq_lens"), d.get("seq_lens_cpu"))

    def to_dict(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        if self.extend_seq_lens is not None:
            out["extend_seq_lens"] = list(self.extend_seq_lens)
        if self.seq_lens_cpu is not None:
            out["seq_lens_cpu"] = list(self.seq_lens_cpu)
        return out


def _reject_unknown(where: str, d: Any, known: set[str]) -> None:
    if not isinstance(d, Mapping):
        raise InvalidBatch(where, None, "an object", d)
    for key in d:
        if key not in known:
            field_name = key if where == "batch" else f"{where}.{key}"
            raise InvalidBatch(field_name, None, f"one of {sorted(known)}", "unknown key")


@dataclass(frozen=True, slots=True)
class VerifyBatch:
    """One target-verify step: real requests, their draft tokens and the KV tables.

    Worked example (uniform EAGLE, ``num_draft_tokens=2``): ``seq_lens=[5, 3]``,
    ``req_pool_indices=[2, 1]`` means request 0 (slot 2) has accepted 5 tokens and
    verifies positions 5 and 6; request 1 (slot 1) verifies positions 3 and 4.
    ``out_cache_loc`` then has 4 entries, one per verify token, and every
    ``req_to_token`` row must be at least 7 wide.
    """

    seq_lens: tuple[int, ...]
    """(bs,): accepted-prefix length per real request, each >= 1."""
    req_pool_indices: tuple[int, ...]
    """(bs,): distinct request slots, each in 1..num_slots-1 (slot 0 is the padding slot)."""
    verify_lens: tuple[int, ...] | None
    """(bs,) ragged verify lengths in 1..num_draft_tokens, or None for uniform."""
    num_draft_tokens: int
    """The backend's ``target_verify_num_draft_tokens``."""
    out_cache_loc: tuple[int, ...]
    """(num_real_tokens,): KV write location of each real verify token."""
    req_to_token: tuple[tuple[int, ...], ...]
    """(num_slots, max_context): full-pool KV location of each position of each slot."""
    full_to_swa: tuple[int, ...]
    """(pool_size + 1,): full location -> SWA location; last entry is the -1 sentinel."""
    is_dspark: bool = False
    """The speculative algorithm is DSpark (else EAGLE)."""
    geometry: Geometry = field(default_factory=Geometry)
    """Backend constants."""
    graph: GraphTier | None = None
    """The captured tier for the graph path; None for an eager-only batch."""
    divergence: Divergence | None = None
    """Fault injection: the device-resident extend lengths (P6); None = none."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "seq_lens", _int_tuple("seq_lens", self.seq_lens, minimum=1))
        set_(self, "req_pool_indices", _int_tuple("req_pool_indices", self.req_pool_indices))
        if self.verify_lens is not None:
            set_(self, "verify_lens", _int_tuple("verify_lens", self.verify_lens))
        set_(self, "out_cache_loc", _int_tuple("out_cache_loc", self.out_cache_loc))
        if isinstance(self.req_to_token, (str, bytes)) or not isinstance(self.req_to_token, Iterable):
            raise InvalidBatch("req_to_token", None, "a list of rows", self.req_to_token)
        set_(self, "req_to_token", tuple(_int_tuple(f"req_to_token[{i}]", row) for i, row in enumerate(self.req_to_token)))
        set_(self, "full_to_swa", _int_tuple("full_to_swa", self.full_to_swa))
        if not isinstance(self.is_dspark, bool):
            raise InvalidBatch("is_dspark", None, "a bool", self.is_dspark)
        if not isinstance(self.geometry, Geometry):
            raise InvalidBatch("geometry", None, "a Geometry", self.geometry)
        if self.graph is not None and not isinstance(self.graph, GraphTier):
            raise InvalidBatch("graph", None, "a GraphTier or None", self.graph)
        if self.divergence is not None and not isinstance(self.divergence, Divergence):
            raise InvalidBatch("divergence", None, "a Divergence or None", self.divergence)
        self._validate()

    # -- derived sizes -------------------------------------------------------------

    @property
    def bs(self) -> int:
        """Number of real requests."""
        return len(self.seq_lens)

    @property
    def is_ragged(self) -> bool:
        """Whether requests verify different numbers of tokens."""
        return self.verify_lens is not None

    @property
    def max_context(self) -> int:
        """Width of ``req_to_token``: the most positions a slot can hold."""
        return len(self.req_to_token[0])

    @property
    def num_slots(self) -> int:
        """Rows of ``req_to_token``."""
        return len(self.req_to_token)

    @property
    def extend_lens(self) -> tuple[int, ...]:
        """(bs,): verify tokens per real request, uniform or ragged."""
        if self.verify_lens is None:
            return (self.num_draft_tokens,) * self.bs
        return self.verify_lens

    @property
    def num_real_tokens(self) -> int:
        """Verify tokens of the real requests: the length of ``out_cache_loc``."""
        return sum(self.extend_lens)

    def size_key(self) -> tuple[int, ...]:
        """Order batches by size, smallest first: what a person reads first in a counterexample."""
        padded = self.graph.padded_bs if self.graph is not None else self.bs
        return (self.num_real_tokens, self.bs, padded, self.max_context, self.num_slots)

    def divergence_bounds(self, rows: int) -> tuple[list[int], list[int], list[int], int | None]:
        """Per row: what the host believes, the least and the most the device may hold; the sum's ceiling.

        Ragged: a stale layout is still a layout (``1..num_draft_tokens``, within the
        cap, the table and the tier).  Uniform: any count >= 0 whose positions stay
        inside the table; pad rows (prefix 1) included when ``rows == padded_bs``.
        """
        width, draft = self.max_context, self.num_draft_tokens
        graph = self.graph
        if self.verify_lens is not None:
            top = draft if graph is None or graph.cap is None else min(draft, graph.cap)
            hi = [min(top, width - s) for s in self.seq_lens]
            ceiling = None if graph is None else graph.graph_num_tokens
            return list(self.verify_lens), [1] * self.bs, hi, ceiling
        prefixes = list(self.seq_lens) + [1] * (rows - self.bs)
        return [draft] * rows, [0] * rows, [width - s for s in prefixes], None

    def describe(self) -> str:
        """One line for people: uniform/ragged, EAGLE/DSpark, sizes, tier, divergence."""
        kind = "ragged" if self.is_ragged else "uniform"
        algo = "DSpark" if self.is_dspark else "EAGLE"
        if self.graph is None:
            tier = "eager only (no graph tier)"
        else:
            g = self.graph
            cap = "uncapped" if g.cap is None else f"cap {g.cap}"
            tier = f"tier padded_bs={g.padded_bs} graph_num_tokens={g.graph_num_tokens} ({cap})"
        div = ""
        if self.divergence is not None and self.divergence.extend_seq_lens is not None:
            div += f", device extend diverges: {list(self.divergence.extend_seq_lens)}"
        if self.divergence is not None and self.divergence.seq_lens_cpu is not None:
            div += f", stale host mirror seq_lens_cpu={list(self.divergence.seq_lens_cpu)}"
        return (f"{kind} {algo}, bs={self.bs}, num_draft={self.num_draft_tokens}, "
                f"{self.num_real_tokens} real tokens, {tier}{div}")

    # -- validation ------------------------------------------------------------------

    def _validate(self) -> None:
        bs = self.bs
        if bs == 0:
            raise InvalidBatch("seq_lens", None, "non-empty", [])
        _check_int("num_draft_tokens", self.num_draft_tokens, minimum=1)
        if len(self.req_pool_indices) != bs:
            raise InvalidBatch("req_pool_indices", None, f"of length len(seq_lens)={bs}", len(self.req_pool_indices))
        if not self.req_to_token or not self.req_to_token[0]:
            raise InvalidBatch("req_to_token", None, "a non-empty table", [list(r) for r in self.req_to_token])
        width = len(self.req_to_token[0])
        for i, row in enumerate(self.req_to_token):
            if len(row) != width:
                raise InvalidBatch("req_to_token", i, f"a row of width max_context={width} (the width of row 0)", len(row))
        if not self.full_to_swa or self.full_to_swa[-1] != -1:
            if not self.full_to_swa:
                raise InvalidBatch("full_to_swa", None, "non-empty, ending in the -1 sentinel", [])
            raise InvalidBatch(
                "full_to_swa", len(self.full_to_swa) - 1, "the -1 sentinel (index -1 must map to -1)", self.full_to_swa[-1]
            )
        for i, v in enumerate(self.full_to_swa):
            if v < -1:
                raise InvalidBatch("full_to_swa", i, ">= -1", v)
        pool = len(self.full_to_swa)
        for s, row in enumerate(self.req_to_token):
            for c, loc in enumerate(row):
                if not -1 <= loc < pool:
                    raise InvalidBatch(f"req_to_token[{s}]", c, f"a full-pool location in -1..{pool - 1} (len(full_to_swa)-1)", loc)
        seen: dict[int, int] = {}
        for i, slot in enumerate(self.req_pool_indices):
            if not 1 <= slot < self.num_slots:
                raise InvalidBatch(
                    "req_pool_indices", i, f"in 1..{self.num_slots - 1} (slot 0 is the padding slot; num_slots={self.num_slots})", slot
                )
            if slot in seen:
                raise InvalidBatch("req_pool_indices", i, f"distinct (also at index {seen[slot]})", slot)
            seen[slot] = i
        if self.verify_lens is not None:
            if len(self.verify_lens) != bs:
                raise InvalidBatch("verify_lens", None, f"of length len(seq_lens)={bs}", len(self.verify_lens))
            for i, v in enumerate(self.verify_lens):
                if not 1 <= v <= self.num_draft_tokens:
                    raise InvalidBatch("verify_lens", i, f"in 1..num_draft_tokens={self.num_draft_tokens}", v)
        if len(self.out_cache_loc) != self.num_real_tokens:
            raise InvalidBatch(
                "out_cache_loc", None, f"of length num_real_tokens={self.num_real_tokens}", len(self.out_cache_loc)
            )
        for b, (s, e) in enumerate(zip(self.seq_lens, self.extend_lens)):
            if s + e > width:
                raise InvalidBatch(
                    "seq_lens", b,
                    f"such that its last verify position seq_lens+verify_len-1={s + e - 1} fits req_to_token's "
                    f"width max_context={width}",
                    s,
                )
        if self.graph is not None:
            self._validate_graph(self.graph)
        if self.num_slots * self.geometry.ring_size > INT32_MAX + 1:
            raise InvalidBatch(
                "geometry.ring_size", None,
                f"such that every swa_loc = slot * ring_size + pos % ring_size fits int32 (upstream stores it as "
                f"int32): num_slots * ring_size <= 2**31 with num_slots={self.num_slots}",
                self.geometry.ring_size,
            )
        if self.divergence is not None:
            self._validate_divergence(self.divergence)

    def _validate_graph(self, graph: GraphTier) -> None:
        bs = self.bs
        if graph.padded_bs < bs:
            raise InvalidBatch("graph.padded_bs", None, f">= bs={bs}", graph.padded_bs)
        if graph.graph_num_tokens < self.num_real_tokens:
            raise InvalidBatch(
                "graph.graph_num_tokens", None, f">= the real token count {self.num_real_tokens}", graph.graph_num_tokens
            )
        if self.verify_lens is None:
            tier = graph.padded_bs * self.num_draft_tokens
            if graph.graph_num_tokens < tier:
                # Every row of a uniform tier verifies num_draft_tokens; tokens past
                # padded_bs*num_draft_tokens (upstream never captures such a tier) would be
                # an uncovered tail of pads, which both builders handle generically.
                raise InvalidBatch(
                    "graph.graph_num_tokens", None,
                    f">= padded_bs*num_draft_tokens={tier} for a uniform batch", graph.graph_num_tokens,
                )
            return
        if graph.cap is not None and graph.cap < max(self.verify_lens):
            # F2b: upstream clamps every row to the cap, real ones included; callers
            # pass cap = num_draft_tokens, so a smaller cap would drop real tokens.
            raise InvalidBatch(
                "graph.cap", None,
                f">= max(verify_lens)={max(self.verify_lens)} (a cap below a real row would drop its verify tokens)",
                graph.cap,
            )
        self._check_pad_rows_fit("graph.graph_num_tokens", graph, self.verify_lens, graph.graph_num_tokens)

    def _check_pad_rows_fit(self, name: str, graph: GraphTier, verify_lens: tuple[int, ...], actual: Any) -> None:
        """Pad rows (seq_len 1, slot 0) must end inside ``req_to_token``'s width.

        The last real row may absorb tier slack past the width: that is upstream's
        latent out-of-bounds read (F2c), which the reference reports as ``oob_read``.
        """
        lens = tier_verify_lens(verify_lens, graph.padded_bs, graph.graph_num_tokens, graph.cap)
        width = self.max_context
        for b in range(self.bs, graph.padded_bs):
            if 1 + lens[b] > width:
                raise InvalidBatch(
                    name, None,
                    f"such that pad row {b} (seq_len 1, slot 0, {lens[b]} verify tokens) ends within req_to_token's "
                    f"width max_context={width}; its last position would be {lens[b]}",
                    actual,
                )

    def _validate_divergence(self, div: Divergence) -> None:
        bs, width = self.bs, self.max_context
        if div.seq_lens_cpu is not None and len(div.seq_lens_cpu) != bs:
            raise InvalidBatch("divergence.seq_lens_cpu", None, f"of length bs={bs}", len(div.seq_lens_cpu))
        device = div.extend_seq_lens
        if device is None:
            return
        name = "divergence.extend_seq_lens"
        if self.verify_lens is not None:
            if len(device) != bs:
                raise InvalidBatch(name, None, f"of length bs={bs} (the device layout of a ragged batch)", len(device))
            for b, (s, v) in enumerate(zip(self.seq_lens, device)):
                if not 1 <= v <= self.num_draft_tokens:
                    raise InvalidBatch(name, b, f"in 1..num_draft_tokens={self.num_draft_tokens} (a stale layout is "
                                       "still a layout)", v)
                if s + v > width:
                    raise InvalidBatch(name, b, f"such that seq_lens[{b}]+{v} fits req_to_token's width {width}", v)
            graph = self.graph
            if graph is not None:
                if sum(device) > graph.graph_num_tokens:
                    raise InvalidBatch(name, None, f"summing to at most graph_num_tokens={graph.graph_num_tokens}",
                                       sum(device))
                if graph.cap is not None and max(device) > graph.cap:
                    raise InvalidBatch(name, None, f"at most graph.cap={graph.cap} per row", max(device))
                self._check_pad_rows_fit(name, graph, device, list(device))
            return
        allowed = {bs} | ({self.graph.padded_bs} if self.graph is not None else set())
        if len(device) not in allowed:
            raise InvalidBatch(name, None, f"of length in {sorted(allowed)} (bs or graph.padded_bs)", len(device))
        prefixes = list(self.seq_lens) + [1] * (len(device) - bs)
        for b, (s, v) in enumerate(zip(prefixes, device)):
            if v < 0:
                raise InvalidBatch(name, b, ">= 0", v)
            if s + v > width:
                raise InvalidBatch(name, b, f"such that row {b}'s positions ({s}+{v}) fit req_to_token's width {width}",
                                   v)

    # -- serialisation -----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data with the schema tag."""
        return {
            "schema": SCHEMA,
            "seq_lens": list(self.seq_lens),
            "req_pool_indices": list(self.req_pool_indices),
            "verify_lens": None if self.verify_lens is None else list(self.verify_lens),
            "num_draft_tokens": self.num_draft_tokens,
            "out_cache_loc": list(self.out_cache_loc),
            "req_to_token": [list(r) for r in self.req_to_token],
            "full_to_swa": list(self.full_to_swa),
            "is_dspark": self.is_dspark,
            "geometry": self.geometry.to_dict(),
            "graph": None if self.graph is None else self.graph.to_dict(),
            "divergence": None if self.divergence is None else self.divergence.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> VerifyBatch:
        """Rebuild a batch; ``schema`` is optional but must match when present.

        Keys ``why`` (a one-line note) and ``meta`` (free-form, e.g. the failing
        property) are accepted and ignored, so replay files can explain themselves.
        """
        _reject_unknown("batch", d, {f.name for f in fields(cls)} | {"schema", "why", "meta"})
        if "schema" in d and d["schema"] != SCHEMA:
            raise InvalidBatch("schema", None, repr(SCHEMA), d["schema"])
        required = ("seq_lens", "req_pool_indices", "num_draft_tokens", "out_cache_loc", "req_to_token", "full_to_swa")
        for key in required:
            if key not in d:
                raise InvalidBatch(key, None, "present", None)
        geometry = d.get("geometry")
        graph = d.get("graph")
        divergence = d.get("divergence")
        return cls(
            seq_lens=d["seq_lens"],
            req_pool_indices=d["req_pool_indices"],
            verify_lens=d.get("verify_lens"),
            num_draft_tokens=d["num_draft_tokens"],
            out_cache_loc=d["out_cache_loc"],
            req_to_token=d["req_to_token"],
            full_to_swa=d["full_to_swa"],
            is_dspark=d.get("is_dspark", False),
            geometry=Geometry() if geometry is None else Geometry.from_dict(geometry),
            graph=None if graph is None else GraphTier.from_dict(graph),
            divergence=None if divergence is None else Divergence.from_dict(divergence),
        )

    def to_json(self, **extra: Any) -> str:
        """JSON text; ``extra`` keys (``why``, ``meta``) are written after the schema."""
        d = self.to_dict()
        d.update(extra)
        return json.dumps(d, indent=1)

    @classmethod
    def from_json(cls, text: str | bytes) -> VerifyBatch:
        try:
            d = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidBatch("json", None, "valid UTF-8 JSON", str(exc)) from exc
        return cls.from_dict(d)

    def without_divergence(self) -> VerifyBatch:
        """The same batch without fault injection (no re-validation: dropping it keeps a batch valid)."""
        if self.divergence is None:
            return self
        clean = object.__new__(VerifyBatch)
        for f in fields(self):
            object.__setattr__(clean, f.name, None if f.name == "divergence" else getattr(self, f.name))
        return clean

    def replace(self, **changes: Any) -> VerifyBatch:
        """A copy with some fields changed, validated again."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d.update(changes)
        return VerifyBatch(**d)

