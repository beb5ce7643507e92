"""Running any builder under the harness: :class:`AuditedBuilder`, the memo properties share, plain fields.

:class:`AuditedBuilder`'s ``build(batch, variant)`` is what properties, the CLI
and users call.  It owns the whole call (DESIGN.md section 4): it makes the
inputs, marks them device-resident, applies the batch's divergence, snapshots
them, runs the builder under :class:`~metadata_builders.audit.DeviceAudit`, and
converts the fields to lists outside the audit.  The decision's
``used_output_size`` is what the audit *saw* the token map do, not what the
builder says it did.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping

from metadata_builders.builders.loading import construct
from metadata_builders.errors import BuilderContractError, InvalidVariant
from metadata_builders.families.dsv4.builders.capabilities import Capabilities, capabilities_of
from metadata_builders.families.dsv4.builders.contract import HISTORY, JUDGED
from metadata_builders.families.dsv4.metadata import (
    PER_ENTRY,
    STREAM_FIELD_NAMES,
    Audit,
    VerifyMetadata,
    canonical_plan,
)
from metadata_builders.families.dsv4.reference import diverged_extend_lens, expected_host_syncs, verify_extension
from metadata_builders.families.dsv4.reference.grouped import canonical_grouped
from metadata_builders.families.dsv4.reference.streams import canonical_streams

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch
    from metadata_builders.families.dsv4.inputs import VerifyInputs
    from metadata_builders.families.dsv4.variants import Variant
    from metadata_builders.harness.graph_recorder import RecordedGraph

__all__ = ["AuditedBuilder", "Captured", "MemoBuilder", "plain_fields"]


def _to_plain(value: Any) -> Any:
    if hasattr(value, "tolist") and not isinstance(value, list):
        if _is_meta(value):
            return list(value.size())
        return value.tolist()
    return value


def _canonical(fields: dict[str, Any], tensors: dict[str, Any]) -> dict[str, Any]:
    """Plans as their valid entries sorted (``canonical_plan``); streams returned as upstream's flat buffers
    as one row of written entries per token (``canonical_streams``).  Values on ``meta`` stay shapes."""
    for name in PER_ENTRY:
        if name in fields and not _is_meta(tensors[name]):
            fields[name] = canonical_plan(fields[name])
    flat = [n for n in STREAM_FIELD_NAMES if n.endswith("_indices") and n in fields
            and not _is_meta(tensors[n]) and (not fields[n] or not isinstance(fields[n][0], list))]
    if flat:
        fields.update(canonical_streams({n: fields[n] for n in STREAM_FIELD_NAMES}))
    grouped = fields.get("gasm_indices")
    flat_grouped = grouped is not None and (not grouped or not isinstance(grouped[0], list))
    if flat_grouped and not _is_meta(tensors["gasm_indices"]):
        fields["gasm_indices"] = canonical_grouped(grouped, fields["gasm_kv_indptr"])
    return fields


def _is_meta(value: Any) -> bool:
    # ``is_meta``, not ``device.type``: the audit's session gives ``device`` a direct entry, which a
    # harness read between builds would pay for (``shortcuts.GETTERS``).
    return getattr(value, "is_meta", False) is True


def _data_ptrs(fields: dict[str, Any]) -> dict[str, int]:
    return {name: v.data_ptr() for name, v in fields.items() if hasattr(v, "data_ptr")}


@dataclass
class Captured:
    """A captured graph: the builder's state plus the static input buffers the harness refills."""

    variant: Variant
    inputs: VerifyInputs
    """The tier's static input buffers (the harness's, refilled in place by ``replay``)."""
    state: Any
    """The graph state (``graph_state``), or what a 0.2 builder's ``capture`` returned."""
    graph: RecordedGraph | None = None
    """The recorded in-graph work, re-executed at every replay; None: the builder's Python ``replay()``."""


class AuditedBuilder:
    """Runs a builder on harness-made inputs under the audit; returns plain-list fields.

    On a GPU, a build whose contract is sync-free additionally runs under
    ``torch.cuda.set_sync_debug_mode("error")`` so a hidden sync raises there.
    On ``meta`` fields hold shapes (``[rows, cols]``) instead of values.

    A builder whose ``build`` still takes ``(batch, variant)`` (the 0.1 contract)
    is run with the divergence removed from the batch, a ``DeprecationWarning``,
    and the audit around it; it builds its own tensors, so P8 has nothing to check.
    """

    def __init__(self, inner: Any, device: str = "cpu", name: str | None = None, *,
                 factory: Callable[..., Any] | None = None, upstream: bool | None = None,
                 routes: tuple[str, ...] = ()) -> None:
        self.inner = inner
        self.device = device
        self.name = name or vars(type(inner)).get("name") or type(inner).__name__
        self.factory = factory
        """What constructs a fresh ``inner`` (P9, replay files); None: this builder cannot be made afresh."""
        self.history: deque[VerifyBatch] = deque(maxlen=HISTORY)
        """The last distinct batches built (or captured, replayed) on this builder, oldest first."""
        self.last_by_mode: dict[str, VerifyBatch] = {}
        """The last batch of each mode built on this builder, the mode built longest ago first: a worker builds
        verify, draft decode and draft extend on one backend every step, so what one mode left behind can show in
        another (the candidates of :func:`~metadata_builders.families.dsv4.runs.reproduce.reproduce`)."""
        if upstream is None:
            upstream = any(vars(k).get("upstream_code") is True for k in type(inner).__mro__)
        self.capabilities: Capabilities = capabilities_of(inner, self.name, upstream=upstream, routes=routes)
        """What the builder can be judged on, read from its class once (:mod:`.capabilities`)."""
        if self.takes_batch:
            warnings.warn(
                f"builder {self.name!r}: build(batch, variant) is deprecated; take the harness's inputs instead, "
                "build(inputs: VerifyInputs) (docs/BUILDERS.md, 'The builder contract')",
                DeprecationWarning, stacklevel=2,
            )

    def outside_switches(self, batch: VerifyBatch) -> str | None:
        """Why ``batch`` does not reach what the upstream switches this builder turns on change (None: it does, or it
        turns none on: ``capabilities.switches``)."""
        return self.inner.outside_switches(batch) if self.capabilities.switches else None

    def unjudged_switches(self, *, why: bool = True) -> list[str]:
        """What every report names of upstream's switches this builder does not run the other way (the builder's
        ``unjudged_switches(why=...)``: a header line, then one line a switch with why; ``[]`` for a builder that
        declares none)."""
        lines = getattr(self.inner, "unjudged_switches", None)
        return list(lines(why=why)) if callable(lines) else []

    @property
    def can_be_made_afresh(self) -> bool:
        """A factory is known (P9 and replay files need a freshly constructed twin)."""
        return self.factory is not None

    def fresh(self) -> AuditedBuilder:
        """A freshly constructed twin of this builder: same factory, same device, no history."""
        if self.factory is None:
            raise AttributeError(f"builder {self.name!r} was not made by a factory; it cannot be made afresh")
        return AuditedBuilder(construct(self.factory, self.device), self.device, self.name, factory=self.factory,
                              upstream=self.capabilities.upstream, routes=self.capabilities.routes)

    def _remember(self, batch: VerifyBatch) -> None:
        if not self.history or (self.history[-1] is not batch and self.history[-1] != batch):
            self.history.append(batch)
        self.last_by_mode.pop(batch.mode, None)
        self.last_by_mode[batch.mode] = batch

    def recent(self) -> tuple[VerifyBatch, ...]:
        """What this builder built before now, for reproducing a failure: the last batch of each mode the history
        no longer holds (oldest first), then the history."""
        return (*(b for b in self.last_by_mode.values() if b not in self.history), *self.history)

    @property
    def takes_batch(self) -> bool:
        """The deprecated 0.1 contract, ``build(batch, variant)``."""
        return self.capabilities.build == "batch"

    @property
    def can_replay(self) -> bool:
        """Whether the builder models graph capture/replay (P5's replay sequence): two phases, or 0.2's pair."""
        return self.capabilities.replays

    @property
    def records_graph(self) -> bool:
        """Whether replay re-executes what capture recorded (its graph contract is the two phases)."""
        return self.capabilities.records_graph

    @property
    def can_validate_mirror(self) -> bool:
        """Whether the builder offers opt-in mirror validation (P2's stale-mirror check)."""
        return self.capabilities.mirror_validation

    def with_mirror_validation(self) -> AuditedBuilder:
        """The same builder with opt-in mirror validation on."""
        if not self.capabilities.mirror_validation:
            raise AttributeError(f"builder {self.name!r} has no with_mirror_validation()")
        factory = self.factory
        validating = None if factory is None else _ValidatingFactory(factory)
        return AuditedBuilder(self.inner.with_mirror_validation(), self.device, self.name, factory=validating,
                              upstream=self.capabilities.upstream, routes=self.capabilities.routes)

    def variants_supported(self, batch: VerifyBatch) -> list[Variant] | None:
        """The variants the builder can express, when it says (None: all of them)."""
        return list(self.inner.variants_supported(batch)) if self.capabilities.expresses else None

    def swa_store_rows(self, state_slot: list[int], positions: list[int], *, ring_stride: int,
                       win: int) -> list[int | None] | None:
        """Where the builder's own SWA ring store kernel stores each token (None: it brings none, P10 models it)."""
        if not self.capabilities.store_kernels:
            return None
        return self.inner.swa_store_rows(state_slot, positions, ring_stride=ring_stride, win=win)

    def capture_verify_lens(self, graph_num_tokens: int, slots: int, width: int) -> list[int]:
        """The verify lengths its graph runner captures a ragged tier with: the builder's own (upstream's runner
        code) when it brings one, else the harness's model of upstream's runner."""
        if self.capabilities.capture_layout:
            return [int(n) for n in self.inner.capture_verify_lens(graph_num_tokens, slots, width)]
        from metadata_builders.families.dsv4.tier import capture_verify_lens

        return capture_verify_lens(graph_num_tokens, slots, width)

    def ragged_capture_slots(self, graph_num_tokens: int, max_bs: int, width: int) -> int:
        """The request slots its graph runner captures a compact ragged token tier with: the builder's own rule
        (upstream's ``_ragged_capture_slots``) when it brings one, else the reference of the geometry it declares."""
        if self.capabilities.capture_slots:
            return int(self.inner.ragged_capture_slots(graph_num_tokens, max_bs, width))
        from metadata_builders.families.dsv4.tier import ragged_capture_slots

        return ragged_capture_slots(graph_num_tokens, max_bs, width, self.capabilities.capture_geometry)

    # -- building --------------------------------------------------------------------------

    def build(self, batch: VerifyBatch, variant: Variant) -> VerifyMetadata:
        """Make the inputs for ``batch`` along ``variant``, run the builder on them, audited (in a harness session)."""
        from metadata_builders.harness import harness_session

        with harness_session():
            return self._build(batch, variant)

    def _build(self, batch: VerifyBatch, variant: Variant) -> VerifyMetadata:
        from metadata_builders.families.dsv4.inputs import make_inputs

        self._remember(batch)
        if self.takes_batch:
            from metadata_builders.families.dsv4.variants import check_variant

            check_variant(batch, variant)
            clean = batch.without_divergence()
            return self._audited(batch, variant, None, lambda: self.inner.build(clean, variant))
        inputs = make_inputs(batch, variant, self.device, self.capabilities.padding,
                             self.capabilities.seq_len_fill_value)
        return self._audited(batch, variant, inputs, lambda: self.inner.build(inputs))

    def capture(self, batch: VerifyBatch, variant: Variant) -> Captured:
        """Capture ``batch``'s graph-path build: the builder keeps its buffers, the harness its inputs."""
        from metadata_builders.harness import harness_session

        with harness_session():
            return self._capture(batch, variant)

    def _capture(self, batch: VerifyBatch, variant: Variant) -> Captured:
        from metadata_builders.families.dsv4.inputs import Runner, make_inputs

        if variant.path != "graph":
            raise InvalidVariant("path", "'graph' to capture", variant.path)
        self._remember(batch)
        inputs = make_inputs(batch, variant, self.device, self.capabilities.padding,
                             self.capabilities.seq_len_fill_value)
        assert batch.graph is not None
        inputs.runner = Runner((batch.graph,), batch.is_ragged)  # a runner of one tier
        return self._capture_on(inputs)

    def capture_on(self, inputs: VerifyInputs) -> Captured:
        """Capture on inputs a graph runner made (its views and capture geometry, ``inputs.runner``), audited."""
        from metadata_builders.harness import harness_session

        with harness_session():
            return self._capture_on(inputs)

    def _capture_on(self, inputs: VerifyInputs) -> Captured:
        from metadata_builders.audit import DeviceAudit

        if not self.capabilities.replays:
            raise AttributeError(f"builder {self.name!r} has no capture()/replay()")
        variant = inputs.variant
        _mark_inputs(inputs)
        if self.capabilities.records_graph:
            from metadata_builders.families.dsv4.builders.phases import capture_graph

            state, graph, _ = capture_graph(self.inner, inputs)
            return Captured(variant, inputs, state, graph)
        with DeviceAudit():
            state = self.inner.capture(inputs)
        return Captured(variant, inputs, state)

    def replay(self, captured: Captured, batch: VerifyBatch) -> VerifyMetadata:
        """Refill the captured input buffers with ``batch`` in place, then replay, audited.

        A recorded graph: the builder's out-graph work, then the recording re-executed
        (no in-graph Python).  A 0.2 builder: its Python ``replay()``.
        """
        from metadata_builders.harness import harness_session

        with harness_session():
            return self._replay(captured, batch)

    def _replay(self, captured: Captured, batch: VerifyBatch) -> VerifyMetadata:
        from metadata_builders.families.dsv4.builders.phases import replay_graph
        from metadata_builders.families.dsv4.inputs import refill_inputs

        self._remember(batch)
        refill_inputs(captured.inputs, batch)
        graph = captured.graph
        if graph is not None:
            call = functools.partial(replay_graph, self.inner, captured.state, captured.inputs, graph)
        else:
            call = functools.partial(self.inner.replay, captured.state, captured.inputs)
        return self._audited(batch, captured.variant, captured.inputs, call, captured=captured)

    def _audited(self, batch: VerifyBatch, variant: Variant, inputs: VerifyInputs | None,
                 call: Callable[[], VerifyMetadata], captured: Captured | None = None) -> VerifyMetadata:
        from metadata_builders.audit import DeviceAudit, sync_debug_mode

        audit = DeviceAudit(divergence=_delivered_divergence(batch, variant))
        snapshot = None
        if inputs is not None:
            _mark_inputs(inputs)
            snapshot = inputs.snapshot()
        strict = self.device.startswith("cuda") and not expected_host_syncs(batch, variant,
                                                                             padding=self.capabilities.padding)
        with sync_debug_mode("error") if strict else contextlib.nullcontext(), audit:
            result = call()
        if not isinstance(result, VerifyMetadata):
            raise _not_metadata(self.name, result, captured is not None and captured.graph is None)
        storage = _data_ptrs(result.fields)
        fields, dtypes = plain_fields(result.fields)
        decision = result.decision
        if audit.token_maps:
            observed = all(tm.output_size is not None for tm in audit.token_maps)
            decision = replace(decision, used_output_size=observed)
        written = [] if snapshot is None else inputs.changes_since(snapshot)
        return VerifyMetadata(fields, decision, Audit(
            list(audit.host_syncs), list(audit.faults), list(audit.token_maps), written, audit.divergence_delivered,
            storage), tuple(result.not_observable), dtypes)


def _not_metadata(name: str, result: Any, replay: bool) -> BuilderContractError:
    """What a builder returned instead of a ``VerifyMetadata``, and the usual fix."""
    call = "replay(state, inputs)" if replay else "build(inputs)"
    hint = ""
    if isinstance(result, Mapping):
        hint = ("wrap the fields: VerifyMetadata(fields, Decision(num_tokens, exact_num_tokens, used_output_size, "
                "max_seq_len)) (from metadata_builders import Decision, VerifyMetadata; docs/BUILDERS.md, "
                "'The builder contract')")
    elif result is None:
        hint = "did it forget to return?"
    return BuilderContractError(name, call, "a VerifyMetadata", type(result).__name__, hint)


def plain_fields(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A build's fields as the properties compare them (lists, canonical form) and their dtypes' names."""
    dtypes = {name: str(value.dtype).removeprefix("torch.") for name, value in raw.items() if hasattr(value, "dtype")}
    return _canonical({name: _to_plain(value) for name, value in raw.items()}, raw), dtypes


class _Forwarded:
    """An attribute of the judged builder's contract
    (:data:`~metadata_builders.families.dsv4.builders.contract.JUDGED`) that a
    memo reads from the builder it wraps: a memo keeps no state of its own beyond its builds."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, memo: Any, owner: type | None = None) -> Any:
        return self if memo is None else getattr(memo.inner, self.name)


class MemoBuilder:
    """Remembers ``build(batch, variant)`` so several properties on one batch share each build.

    Valid because a builder keeps no state between builds.  Graph capture and
    replay pass straight through, as does the rest of what the harness reads of a
    judged builder (:data:`~metadata_builders.families.dsv4.builders.contract.JUDGED`), each a
    forwarding attribute of the class; anything else is an ``AttributeError`` naming it.
    P1, P3, P4, P6, P7 and P8 rebuild the same (batch, variant) pairs.
    """


    def __init__(self, inner: Any, played_history: tuple[VerifyBatch, ...] | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.played_history = played_history
        """The batches ``inner`` built (P9's history) before this memo was handed out, when it was made
        for that: P9 then judges its builds instead of seasoning another twin."""
        self._cache: dict[tuple[VerifyBatch, Variant], VerifyMetadata] = {}
        self._twin: MemoBuilder | None = None

    def build(self, batch: VerifyBatch, variant: Variant) -> VerifyMetadata:
        key = (batch, variant)
        if key not in self._cache:
            self._cache[key] = self.inner.build(batch, variant)
        return self._cache[key]

    def fresh(self) -> Any:
        """A freshly constructed twin of ``inner``; for a seasoned memo, one twin (memoised) for every asker.

        The gate judges a batch's P9 first, so the shared twin's first builds are
        P9's fresh builds of the batch; P1-P8 confirm their failures on it and
        reuse them.
        """
        if self.played_history is None:
            return self.inner.fresh()
        if self._twin is None:
            self._twin = MemoBuilder(self.inner.fresh())
        return self._twin

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities


for _attribute in JUDGED:  # the rest of the contract, read from the wrapped builder: one list, contract.JUDGED
    if not hasattr(MemoBuilder, _attribute) and _attribute != "name":  # name: set per memo in __init__
        setattr(MemoBuilder, _attribute, _Forwarded(_attribute))


@dataclass(frozen=True)
class _ValidatingFactory:
    """A factory's builder with opt-in mirror validation on (a picklable closure)."""

    factory: Callable[..., Any]

    def __call__(self, **kwargs: Any) -> Any:
        return construct(self.factory, kwargs.get("device", "cpu")).with_mirror_validation()


def _mark_inputs(inputs: VerifyInputs) -> None:
    from metadata_builders.audit import DeviceAudit

    for name, t in inputs.tensors().items():
        DeviceAudit.mark_input(t, name)


def _delivered_divergence(batch: VerifyBatch, variant: Variant) -> tuple[list[int], list[int]] | None:
    """(clean, device) extend lengths for the builder's asynchronous copies (uniform batches).

    Delivered to every asynchronous copy of the host-staged lengths *whatever the
    variant* (DESIGN.md section 2, confirmed decision 1): a builder that stages
    them on ``mirror="device"``, where the model predicts no exposure, receives the
    divergence too, and P6 judges what it then does against the model's
    prediction.  A ragged divergence lives in the device layout the harness hands
    in (:func:`~metadata_builders.families.dsv4.inputs.make_inputs`); nothing to deliver on copies.
    """
    div = batch.divergence
    if batch.is_ragged or div is None or div.extend_seq_lens is None:
        return None
    rows = verify_extension(batch, variant)
    return list(rows.extend_seq_lens), diverged_extend_lens(batch, rows)
