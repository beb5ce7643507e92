"""DSV4's property table (P1-P10) as ``check``, the plugin and the gate run it, and the batches each is drawn on."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from metadata_builders.families.dsv4.batch import DECODE_MODES, VerifyBatch
from metadata_builders.families.dsv4.properties.equality import check_p1_reference, check_p3_sync_free, check_p4_gate
from metadata_builders.families.dsv4.properties.faults import check_p6_fault_model
from metadata_builders.families.dsv4.properties.graph import check_p5_graph_vs_eager
from metadata_builders.families.dsv4.properties.kv import check_p10_kv_state, p10_applies
from metadata_builders.families.dsv4.properties.mirror import check_p2_mirror
from metadata_builders.families.dsv4.properties.state import check_p8_inputs_untouched, check_p9_no_hidden_state
from metadata_builders.families.dsv4.properties.syncs import check_p7_capture_safety
from metadata_builders.families.dsv4.variants import BUILT_MODES
from metadata_builders.properties import spec as _core
from metadata_builders.properties.spec import PropertyResult, PropertySpec, Status, raised_failure, verdict  # noqa: F401


MODE_REASONS: dict[tuple[str, str], str] = {
    ("P2", "draft_extend"): "draft extend has no mirror knob (the caller always passes seq_lens_cpu; lengths are "
                            "full_like(seq_lens, n) on the device)",
    ("P3", "draft_extend"): "draft extend's token map always passes output_size = n * rows, exact by construction "
                            "(P1 judges any fault the HIP model sees)",
    ("P4", "draft_extend"): "draft extend has no dspark gate (exact_num_tokens is True on every path)",
    ("P6", "draft_extend"): "draft extend's lengths cannot diverge from its count (both are n on every row)",
    **{(prop, mode): why.format(mode=mode.replace("_", " ")) for mode in DECODE_MODES for prop, why in (
        ("P2", "{mode} has no mirror knob (the build reads no host length at all)"),
        ("P3", "{mode} has no token map (one token per row)"),
        ("P4", "{mode} has no dspark gate (no token count to trust)"),
        ("P6", "{mode} has no lengths that can diverge from a host count (one token per row, no count)"),
    )},
}
"""Why a property does not judge a mode, by (property, mode): what the run prints for it."""


def _needs_graph(batch: VerifyBatch) -> str | None:
    return None if batch.graph is not None else "no graph tier"


def _needs_uniform(batch: VerifyBatch) -> str | None:
    stale = batch.divergence is not None and batch.divergence.seq_lens_cpu is not None
    return "ragged batch" if batch.is_ragged and not stale else None


_DSPARK_UNIFORM_GRAPH = {"graph": True, "ragged": False, "is_dspark": True}
"""The one batch kind whose graph path differs in kind upstream: DSpark's uniform draft block defers the
whole metadata into the graph (``DSV4RawVerifyMetadata``, 0.5.20+), so its recorded work is the largest.
Drawn by chance it is one graph batch in eight; its own focus gives P5's and P7's replays (and the gate's
corpus) a share of it."""

_DSPARK_DRAFT = {"dspark_draft": True}
"""A DSpark draft worker's block verify (issue 45): configured gamma + 1, every request verifying gamma, no compressed
KV; uniform two times in three (upstream's draft block is uniform), eager and graph.  Never drawn otherwise: the
other focuses keep one count for both, as the target worker does."""

_DSPARK_DRAFT_GRAPH = {**_DSPARK_DRAFT, "graph": True, "ragged": False}
"""The draft runner's uniform graph (P5): DSpark's raw verify route on the draft worker's active width."""

_EAGER_DP_PAD = {"graph": False, "ragged": False, "dp_pad": None}
"""P1's eager uniform focus of the worker's verify step (issue 45): three batches in four carry 1..3 DP pad rows
(``prepare_mlp_sync_batch`` pads the step before the metadata is planned).  No other focus draws them."""

_DRAFT_EXTEND = {"mode": "draft_extend"}
"""Draft extend's own focus (its batches are uniform: ``verify_batches(mode="draft_extend")``)."""

_DRAFT_EXTEND_WINDOWS = {**_DRAFT_EXTEND, "graph": True, "equal_windows": True}
"""P10's draft-extend focus: graph tiers on geometries whose two windows are one (upstream's), the only ones where P10
judges draft extend (its prefill store keeps the unified window, its reads take ``swa_window``:
:func:`~metadata_builders.families.dsv4.kv_state.ring_unfit`); drawn freely, about half the batches were
``not applicable``."""

_DECODE = {"mode": "decode"}
_DRAFT_DECODE = {"mode": "draft_decode"}
_IDLE = {"mode": "idle"}
"""A DP rank with no request: the target's decode graph on pad rows alone (graph only, a small batch: cheap)."""
"""The decode modes' focuses (every property that judges a mode draws each: a draft child compresses nothing, so
decode's compressed in-graph build -- its decode plans -- is not draft decode's)."""


def _with_reasons(*specs: PropertySpec) -> tuple[PropertySpec, ...]:
    """Each spec with the reasons of :data:`MODE_REASONS` for the modes it does not judge."""
    return tuple(dataclasses.replace(spec, mode_reasons={mode: why for (name, mode), why in MODE_REASONS.items()
                                                         if name == spec.name}) for spec in specs)


PROPERTIES: tuple[PropertySpec, ...] = _with_reasons(
    PropertySpec("P1", "every variant = reference", check_p1_reference,
                 ({}, {"graph": True, "ragged": True}, {"ragged": False}, _DRAFT_EXTEND, _DECODE, _DRAFT_DECODE, _IDLE,
                  _DSPARK_DRAFT, _EAGER_DP_PAD), modes=BUILT_MODES),
    PropertySpec("P2", "mirrors agree, only tolist syncs, stale mirrors caught", check_p2_mirror,
                 ({"ragged": False}, {"stale_mirror": True}, {"ragged": False, "compression": True}), _needs_uniform),
    PropertySpec("P3", "output_size map = synced map", check_p3_sync_free, ({},)),
    PropertySpec("P4", "gate decision table", check_p4_gate, ({},)),
    PropertySpec("P5", "graph = eager, pads inert, replay", check_p5_graph_vs_eager,
                 ({"graph": True}, {"graph": True, "ragged": True}, _DSPARK_UNIFORM_GRAPH,
                  {**_DRAFT_EXTEND, "graph": True}, {**_DECODE, "graph": True}, {**_DRAFT_DECODE, "graph": True},
                  _IDLE, _DSPARK_DRAFT_GRAPH),
                 _needs_graph, modes=BUILT_MODES),
    PropertySpec("P6", "HIP fault model", check_p6_fault_model, ({"divergence": True},)),
    PropertySpec("P7", "sync contract, capture safety", check_p7_capture_safety,
                 ({}, _DSPARK_UNIFORM_GRAPH, _DRAFT_EXTEND, _DECODE, _DRAFT_DECODE, _IDLE), modes=BUILT_MODES),
    PropertySpec("P8", "inputs untouched", check_p8_inputs_untouched,
                 ({}, _DRAFT_EXTEND, _DECODE, _DRAFT_DECODE, _IDLE),
                 modes=BUILT_MODES),
    PropertySpec("P9", "no hidden state between builds", check_p9_no_hidden_state,
                 ({}, _DRAFT_EXTEND, _DECODE, _DRAFT_DECODE, _IDLE),
                 modes=BUILT_MODES),
    PropertySpec("P10", "KV state: stores and reads", check_p10_kv_state,
                 ({}, {"graph": True, "ragged": True}, _DRAFT_EXTEND_WINDOWS, _DECODE,
                  {**_DRAFT_DECODE, "graph": True}, _IDLE), p10_applies, modes=BUILT_MODES),
)

_UNDER_TEST: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar(
    "metadata_builders_modes_under_test", default=None)
"""The modes the builder under test declares, while a test of it runs (the pytest plugin's ``builder``)."""


@contextlib.contextmanager
def builder_under_test(builder: Any) -> Iterator[None]:
    """While the block runs, ``batches_for(prop)`` draws the modes ``builder`` declares (the plugin wraps every test
    that takes its ``builder`` fixture in it)."""
    token = _UNDER_TEST.set(tuple(builder.capabilities.modes))
    try:
        yield
    finally:
        _UNDER_TEST.reset(token)


def batches_for(prop: str, modes: tuple[str, ...] | None = None) -> Any:
    """The batches property ``prop`` is judged on under ``check`` and the gate, as one Hypothesis strategy.

    ``verify_batches()`` alone draws no divergence, so a hand-written P6 test on it
    cannot see the dspark gate dropped; ``batches_for("P6")`` draws what P6's own
    run draws (each of the property's focuses, one at a time)::

        @given(batch=batches_for("P6"))
        def test_my_builder_keeps_the_dspark_gate(builder, batch):
            check_p6_fault_model(builder, batch)

    ``modes``: the modes of the MTP step to draw.  By default, what ``check`` draws for the builder under test:
    the modes it declares (``modes = (...)`` on its class), in a test that takes the pytest plugin's ``builder``
    fixture; target verify alone outside such a test (no builder is under test there: pass ``modes=`` for more).
    A property that judges none of the declared modes draws its own focuses, on which its check says ``not
    applicable``, as ``check`` does.  Shrinks as :func:`strategies.verify_batches` does: towards one request,
    one token.
    """
    spec = _spec(prop)
    if modes is not None:
        if not _focuses(spec, tuple(modes)):
            from metadata_builders.errors import UsageError

            raise UsageError("modes", f"modes {spec.name} judges, some of {list(spec.modes)}", repr(tuple(modes)))
        return _drawn(spec, tuple(modes))
    return _under_test(spec)


@dataclass(frozen=True)
class Focus:
    """One focused run of a property, as ``check`` runs it: its mode and the batches it draws.

    ``check`` gives each focus its own Hypothesis run (``max_examples`` each); a test of your own gets the same
    strength by parametrizing over :func:`focuses_for` and drawing from ``focus.batches``::

        @pytest.mark.parametrize("focus", focuses_for("P1"), ids=str)
        @given(data=st.data())
        def test_every_variant_equals_the_reference(builder, focus, data):
            check_p1_reference(builder, data.draw(focus.batches))

    Under the pytest plugin a focus of a mode the builder under test does not declare is skipped, saying so.
    """

    prop: str
    index: int
    mode: str
    kwargs: tuple[tuple[str, Any], ...]
    """``strategies.verify_batches`` keyword arguments, as sorted pairs (hashable)."""

    @property
    def batches(self) -> Any:
        """The focus's batches: ``verify_batches(**kwargs)``."""
        from metadata_builders.families.dsv4.strategies import verify_batches

        return verify_batches(**dict(self.kwargs))

    def __str__(self) -> str:
        knobs = ",".join(f"{k}={v}" for k, v in self.kwargs if k != "mode")
        return f"{self.prop}-{self.index}-{self.mode}" + (f"-{knobs}" if knobs else "")


def focuses_for(prop: str) -> list[Focus]:
    """Every focused run of property ``prop``, as ``check`` runs them, in order (:class:`Focus`)."""
    spec = _spec(prop)
    return [Focus(spec.name, i, f.get("mode", "target_verify"), tuple(sorted(f.items())))
            for i, f in enumerate(spec.focuses)]


def _spec(prop: str) -> PropertySpec:
    spec = {p.name: p for p in PROPERTIES}.get(prop.upper())
    if spec is None:
        from metadata_builders.errors import UsageError

        raise UsageError("prop", f"one of {[p.name for p in PROPERTIES]}", repr(prop))
    return spec


def _focuses(spec: PropertySpec, modes: tuple[str, ...]) -> list[dict[str, Any]]:
    return [f for f in spec.focuses if f.get("mode", "target_verify") in modes]


def _drawn(spec: PropertySpec, modes: tuple[str, ...]) -> Any:
    """One strategy per (property, modes): each focus of the property in those modes (all of them if none)."""
    return _drawn_by_name(spec.name, modes)


@functools.lru_cache(maxsize=None)
def _drawn_by_name(name: str, modes: tuple[str, ...]) -> Any:
    from hypothesis import strategies as st

    from metadata_builders.families.dsv4.strategies import verify_batches

    spec = _spec(name)
    by_mode: dict[str, list[Any]] = {}
    for focus in _focuses(spec, modes) or spec.focuses:
        by_mode.setdefault(focus.get("mode", "target_verify"), []).append(verify_batches(**focus))
    # A mode first, then one of its focuses: each mode's share does not shrink as another mode gains focuses.
    return st.sampled_from(tuple(by_mode.values())).flatmap(lambda drawn: st.one_of(*drawn))


def _under_test(spec: PropertySpec) -> Any:
    """The batches of ``spec`` in the modes of the builder under test, read when a batch is drawn."""
    from hypothesis import strategies as st

    @st.composite
    def under_test(draw: Any) -> VerifyBatch:
        return draw(_drawn(spec, _UNDER_TEST.get() or ("target_verify",)))

    return under_test()


def run_all(builder: Any, batch: VerifyBatch, props: Iterable[PropertySpec] = PROPERTIES) -> dict[str, PropertyResult]:
    """Run each property (every DSV4 property by default) on one batch: name -> :class:`PropertyResult`."""
    return _core.run_all(builder, batch, props)
