"""The batch itself: one target-verify step as plain data, and the sizes derived from it.

:class:`VerifyBatch` converts its fields to tuples of ints when made, then
checks every cross-field rule (:mod:`~metadata_builders.families.dsv4.batch.validation`); its
JSON lives in :mod:`~metadata_builders.families.dsv4.batch.schema`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from metadata_builders.values import int_tuple
from metadata_builders.families.dsv4.batch.parts import Divergence, Geometry, GraphTier
from metadata_builders.families.dsv4.batch.schema import (
    batch_from_dict,
    batch_from_json,
    batch_to_dict,
    batch_to_json,
)
from metadata_builders.families.dsv4.batch.modes import DECODE_MODES, MODES, Mode
from metadata_builders.families.dsv4.batch.validation import validate
from metadata_builders.errors import InvalidBatch

__all__ = ["VerifyBatch"]



def _short(values: tuple[int, ...], shown: int = 16) -> str:
    """``[1, 2, 3]``, or the first entries and how many more: ``[1, 2, ..., (+40 more)]``."""
    if len(values) <= shown:
        return str(list(values))
    return "[" + ", ".join(map(str, values[:shown // 2])) + f", ... (+{len(values) - shown // 2} more)]"


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
    mode: Mode = "target_verify"
    """Which build of the MTP step this is (:data:`MODES`); a replay file without one is ``target_verify``."""
    draft_step: int | None = None
    """``draft_decode``: the step, ``0 .. num_draft_tokens - 3`` (the steps that run a forward).  ``idle``: None for
    the target's decode graph on an idle rank (the ``DECODE_OR_IDLE`` bucket), or the draft runner's child whose
    idle replay is judged (the multi-step backend: every child copies child 0's idle metadata).  None otherwise."""
    speculative_num_draft_tokens: int | None = None
    """The backend's configured draft count where it is not the active verify width ``num_draft_tokens``: a DSpark
    draft worker's block verify (upstream ``is_dspark_draft``), configured ``num_draft_tokens + 1`` (gamma + 1, the
    server argument) while every request verifies ``num_draft_tokens`` (gamma, ``target_verify_num_draft_tokens``).
    None: one count for both (the target worker, every other mode); a replay file without it is such a batch."""
    dp_pad_rows: int = 0
    """The worker's eager DP padding (upstream ``prepare_mlp_sync_batch -> _pad_inputs_to_size``, issue 45): rows
    the eager verify step appends after the real requests before it plans the metadata -- ``seq_lens`` (and the host
    mirror) the fill value, slot 0, ``out_cache_loc`` and ``positions`` 0 for their ``num_draft_tokens`` tokens each.
    Only on an eager-only uniform target-verify batch without divergence (ragged + DP is unverified upstream).  0:
    none; a replay file without it is such a batch."""

    @property
    def is_dspark_draft(self) -> bool:
        """A DSpark draft worker's block verify: the configured draft count is not the active verify width."""
        return self.speculative_num_draft_tokens is not None

    @property
    def draft_runner(self) -> bool:
        """Built on the draft runner's multi-step backend: draft decode, or its idle replay (``idle`` with a step)."""
        return self.mode == "draft_decode" or (self.mode == "idle" and self.draft_step is not None)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "seq_lens", int_tuple("seq_lens", self.seq_lens, minimum=1))
        set_(self, "req_pool_indices", int_tuple("req_pool_indices", self.req_pool_indices))
        if self.verify_lens is not None:
            set_(self, "verify_lens", int_tuple("verify_lens", self.verify_lens))
        set_(self, "out_cache_loc", int_tuple("out_cache_loc", self.out_cache_loc))
        if isinstance(self.req_to_token, (str, bytes)) or not isinstance(self.req_to_token, Iterable):
            raise InvalidBatch("req_to_token", None, "a list of rows", self.req_to_token)
        set_(self, "req_to_token",
             tuple(int_tuple(f"req_to_token[{i}]", row) for i, row in enumerate(self.req_to_token)))
        set_(self, "full_to_swa", int_tuple("full_to_swa", self.full_to_swa))
        if not isinstance(self.is_dspark, bool):
            raise InvalidBatch("is_dspark", None, "a bool", self.is_dspark)
        if not isinstance(self.geometry, Geometry):
            raise InvalidBatch("geometry", None, "a Geometry", self.geometry)
        if self.graph is not None and not isinstance(self.graph, GraphTier):
            raise InvalidBatch("graph", None, "a GraphTier or None", self.graph)
        if self.divergence is not None and not isinstance(self.divergence, Divergence):
            raise InvalidBatch("divergence", None, "a Divergence or None", self.divergence)
        if not isinstance(self.mode, str) or self.mode not in MODES:
            raise InvalidBatch("mode", None, "one of " + ", ".join(MODES), self.mode)
        validate(self)

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
        """(bs,): the step's tokens per real request: verify tokens (uniform or ragged), draft-extend tokens
        (``num_draft_tokens``), or one for a decode step."""
        if self.mode in DECODE_MODES:
            return (1,) * self.bs
        if self.verify_lens is None:
            return (self.num_draft_tokens,) * self.bs
        return self.verify_lens

    @property
    def first_positions(self) -> tuple[int, ...]:
        """(bs,): each request's first position this step: ``seq_lens[i]``, plus ``draft_step`` in draft decode."""
        step = self.draft_step or 0
        return tuple(s + step for s in self.seq_lens)

    @property
    def positions(self) -> tuple[int, ...]:
        """(num_real_tokens,): each real token's position, request after request: ``first_positions[i] + j``.  What
        upstream's caller hands the backend as ``forward_batch.positions`` (``seq_lens=[5, 3]`` verifying 2 each:
        ``(5, 6, 3, 4)``)."""
        return tuple(p + j for p, n in zip(self.first_positions, self.extend_lens) for j in range(n))

    @property
    def dp_pad_tokens(self) -> int:
        """Tokens of the DP pad rows: ``num_draft_tokens`` each (0 without DP padding)."""
        return self.dp_pad_rows * self.num_draft_tokens

    @property
    def num_draft_steps(self) -> int:
        """Steps of EAGLE's multi-step draft decode (topk 1): ``num_draft_tokens - 1``."""
        return self.num_draft_tokens - 1

    @property
    def step_out_cache_loc(self) -> tuple[int, ...]:
        """(num_real_tokens,): the location the caller allocated each real token of this step -- ``out_cache_loc``
        itself, or a draft-decode step's row of the shared buffer (entry ``i * steps + draft_step``,
        request-major, as upstream's ``per_step_draft_out_cache_loc`` lays it out)."""
        if self.mode != "draft_decode":
            return tuple(self.out_cache_loc)
        steps, step = self.num_draft_steps, self.draft_step or 0
        return tuple(self.out_cache_loc[i * steps + step] for i in range(self.bs))

    @property
    def location_widths(self) -> tuple[int, ...]:
        """(bs,): the entries of ``out_cache_loc`` each request owns, in order: its step's tokens, or draft decode's
        row of every step (``num_draft_steps``).  A request's locations are its table row's positions from
        ``seq_lens[i]`` on."""
        if self.mode == "draft_decode":
            return (self.num_draft_steps,) * self.bs
        return self.extend_lens

    @property
    def num_out_cache_loc(self) -> int:
        """Entries of ``out_cache_loc``: the step's real tokens, or draft decode's shared buffer of every step."""
        if self.mode == "draft_decode":
            return self.bs * self.num_draft_steps
        return self.num_real_tokens

    @property
    def num_real_tokens(self) -> int:
        """Verify tokens of the real requests: the length of ``out_cache_loc``."""
        return sum(self.extend_lens)

    def size_key(self) -> tuple[int, ...]:
        """Order batches by size, smallest first: what a person reads first in a counterexample.  A geometry with a
        number too large to read (the strategies' ``int32``-edge ring sizes) comes after every readable one."""
        padded = self.graph.padded_bs if self.graph is not None else self.bs
        huge = max(self.geometry.ring_size, self.geometry.unified_swa_window) >= 1 << 16
        return (int(huge), self.num_real_tokens, self.bs, padded, self.max_context, self.num_slots)

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

    def __repr__(self) -> str:
        """A few lines, not thousands: the tables by their shape (``to_json()`` is the exact form).

        ``VerifyBatch(seq_lens=[5, 3], req_pool_indices=[2, 1], verify_lens=None,
        num_draft_tokens=2, out_cache_loc=[29, 30, 15, 16], req_to_token=<4 x 12 table>,
        full_to_swa=<49 entries, last -1>, is_dspark=False, geometry=..., graph=None,
        divergence=None)``
        """
        width = len(self.req_to_token[0]) if self.req_to_token else 0
        parts = [f"seq_lens={_short(self.seq_lens)}", f"req_pool_indices={_short(self.req_pool_indices)}",
                 f"verify_lens={None if self.verify_lens is None else _short(self.verify_lens)}",
                 f"num_draft_tokens={self.num_draft_tokens}", f"out_cache_loc={_short(self.out_cache_loc)}",
                 f"req_to_token=<{len(self.req_to_token)} x {width} table>",
                 f"full_to_swa=<{len(self.full_to_swa)} entries, "
                 f"last {self.full_to_swa[-1] if self.full_to_swa else None}>",
                 f"is_dspark={self.is_dspark}", f"geometry={self.geometry!r}", f"graph={self.graph!r}",
                 f"divergence={self.divergence!r}"]
        if self.mode != "target_verify":
            parts.append(f"mode={self.mode!r}" + ("" if self.draft_step is None else f", draft_step={self.draft_step}"))
        if self.speculative_num_draft_tokens is not None:
            parts.append(f"speculative_num_draft_tokens={self.speculative_num_draft_tokens}")
        if self.dp_pad_rows:
            parts.append(f"dp_pad_rows={self.dp_pad_rows}")
        return "VerifyBatch(" + ", ".join(parts) + ")"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """Hypothesis' (and IPython's) pretty printer: the same short form as ``repr``."""
        printer.text(repr(self))

    def describe(self) -> str:
        """One line for people: uniform/ragged, EAGLE/DSpark, sizes, tier, divergence."""
        kind = "ragged" if self.is_ragged else "uniform"
        algo = "DSpark" if self.is_dspark else "EAGLE"
        if self.speculative_num_draft_tokens is not None:
            algo = f"DSpark draft worker (configured {self.speculative_num_draft_tokens})"
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
        mode = "" if self.mode == "target_verify" else (
            self.mode.replace("_", " ") + ("" if self.draft_step is None else f" step {self.draft_step}") + ", ")
        dp = f", {self.dp_pad_rows} DP pad rows" if self.dp_pad_rows else ""
        return (f"{mode}{kind} {algo}, bs={self.bs}, num_draft={self.num_draft_tokens}, "
                f"{self.num_real_tokens} real tokens, {tier}{dp}{div}")

    # -- serialisation (metadata_builders.families.dsv4.batch.schema) --------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data with the schema tag."""
        return batch_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> VerifyBatch:
        """Rebuild a batch; ``schema`` is optional but must match when present.

        Keys ``why`` (a one-line note) and ``meta`` (free-form, e.g. the failing
        property) are accepted and ignored, so replay files can explain themselves.
        """
        return batch_from_dict(cls, d)

    def to_json(self, **extra: Any) -> str:
        """JSON text; ``extra`` keys (``why``, ``meta``) are written after the schema."""
        return batch_to_json(self, **extra)

    @classmethod
    def from_json(cls, text: str | bytes) -> VerifyBatch:
        """Rebuild a batch from JSON text (a replay file's contents)."""
        return batch_from_json(cls, text)

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
