"""What a builder can be judged on, computed once when it is registered: its :class:`Capabilities`.

Properties and commands never probe a builder (``getattr``, ``callable``) or
compare its name: they read its capabilities.  They are computed here, once,
from the builder's **class**, and where a class offers two contracts for the same
capability, the one the most derived class defines is judged -- never inherited
code in place of the builder's own.

Worked example: ``class Mine(HipBuilder)`` overrides ``replay()`` (a builder
written against 0.2) and inherits ``graph_state``/``out_graph``/``in_graph``
from ``HipBuilder``.  Walking ``Mine``'s MRO, the first class that defines any
graph method is ``Mine`` itself, and it defines ``replay``: its graph contract
is ``python_replay`` and its own ``replay()`` runs at every replay, so P5 judges
the code its author wrote (and says the recorded replay was not checked).
``Mine`` defines ``replay`` without ``capture`` and inherits none: that is no
contract at all, and :class:`~metadata_builders.errors.BuilderContractError`
names both ways out.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Literal

from metadata_builders.families.dsv4.batch.modes import MODES
from metadata_builders.errors import BuilderContractError, InvalidDeclaration
from metadata_builders.families.dsv4.tier import (CAPTURE_GEOMETRIES, DEFAULT_CAPTURE_GEOMETRY, DEFAULT_PADDING,
                                                  PADDINGS, CaptureGeometry, Padding)

__all__ = ["BuildContract", "Capabilities", "CaptureGeometry", "GraphContract", "Padding", "capabilities_of",
           "declared_capture_geometry", "declared_modes", "declared_padding"]

BuildContract = Literal["inputs", "batch"]
"""``inputs``: ``build(inputs)`` (0.2+); ``batch``: the deprecated ``build(batch, variant)`` (0.1)."""

GraphContract = Literal["phases", "python_replay", "none"]
"""``phases``: ``out_graph``/``in_graph`` (recorded and re-executed as a GPU does); ``python_replay``: 0.2's
``capture()``/``replay()`` (its Python runs at replay: P5 ``partial``); ``none``: no graph replay."""


_PHASES = ("graph_state", "out_graph", "in_graph")
_PYTHON_REPLAY = ("capture", "replay")


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What one builder offers, as data."""

    build: BuildContract = "inputs"
    graph: GraphContract = "none"
    padding: Padding = DEFAULT_PADDING
    """The tier padding convention its graph path follows (``padding_convention`` on the class; a builder that
    declares none is judged as ``absorb_then_clamp``, the model's rule before conventions were named)."""
    mirror_validation: bool = False
    """Offers ``with_mirror_validation()`` (P2's stale-mirror half)."""
    expresses: bool = False
    """Says which variants it can express (``variants_supported``); False: all of them."""
    upstream: bool = False
    """Upstream code (SGLang's own): known findings may name its failures."""
    routes: tuple[str, ...] = ()
    """Kernel routes it runs (``triton``, ``torch``), when it has several."""
    modes: tuple[str, ...] = ("target_verify",)
    """The metadata builds of the MTP step it implements (docs/DESIGN.md section 3)."""
    seq_len_fill_value: int = 1
    """What its graph runner puts in a pad row's ``seq_len`` (``seq_lens`` and the host mirror): upstream asks the
    backend, ``get_cuda_graph_seq_len_fill_value()`` (1 on every release 0.5.18-0.5.23).  Declared as a class
    variable (``seq_len_fill_value = 1``), or set on the instance where upstream's code decides it (the ``sglang``
    adapter asks the installed release's backend).  The reference's pad rows hold 1 (DESIGN.md section 2): a
    builder whose runner fills another value is judged on what it then builds."""
    modes_declared: bool = True
    """Its class declares ``modes`` (False: none does, and :attr:`modes` is the documented default, target verify
    alone: ``check``'s per-mode table says so)."""
    store_kernels: bool = False
    """Runs upstream's own KV store kernel (``swa_store_rows``): P10 judges where the kernel stores each token,
    not only where the metadata says it would."""
    capture_layout: bool = False
    """Brings its graph runner's capture layout (``capture_verify_lens(graph_num_tokens, slots, width)``:
    upstream's own runner code); False: the harness's model of upstream's runner
    (:func:`~metadata_builders.families.dsv4.tier.capture_verify_lens`)."""
    capture_geometry: CaptureGeometry = DEFAULT_CAPTURE_GEOMETRY
    """The request slots its graph runner captures a compact ragged token tier with (``capture_geometry`` on the
    class; a builder that declares none is judged as ``token_slots``, the released runner's rule): P5's runner
    half captures with it (docs/DESIGN.md section 3)."""
    switches: tuple[str, ...] = ()
    """Upstream environment switches its builds turn on that upstream's default leaves off (a route of upstream's
    code: ``gasm`` turns on ``SGLANG_DSV4_GROUPED_ASM``).  The reference adds what they build, and a batch that does
    not reach the switched path is ``not applicable`` (``outside_switches(batch)`` says why)."""
    capture_slots: bool = False
    """Brings its runner's slot rule (``ragged_capture_slots(graph_num_tokens, max_bs, width)``: upstream's
    ``_ragged_capture_slots``), which P5 holds to the declared :attr:`capture_geometry`."""

    @property
    def replays(self) -> bool:
        """It models graph capture and replay at all (P5's replay half, P7's and P8's replays)."""
        return self.build == "inputs" and self.graph != "none"

    @property
    def records_graph(self) -> bool:
        """Its replay re-executes what capture recorded (no Python of the builder at replay)."""
        return self.build == "inputs" and self.graph == "phases"


def _defines(cls: type, names: tuple[str, ...]) -> set[str]:
    """The names of ``names`` that ``cls`` itself defines as something callable (``x = None`` unsets one)."""
    return {n for n in names if n in vars(cls) and callable(vars(cls)[n])}


def _unsets(cls: type, names: tuple[str, ...]) -> set[str]:
    return {n for n in names if n in vars(cls) and vars(cls)[n] is None}


def _graph_contract(cls: type, name: str) -> GraphContract:
    """The graph contract the most derived class that says anything about graph replay defines."""
    for klass in cls.__mro__:
        phases, python = _defines(klass, _PHASES), _defines(klass, _PYTHON_REPLAY)
        unset = _unsets(klass, _PHASES + _PYTHON_REPLAY)
        if not (phases or python or unset):
            continue
        if python and {"out_graph", "in_graph"} & phases:
            raise BuilderContractError(
                name, "graph replay", "one contract", f"{klass.__name__} defines both out_graph()/in_graph() and "
                f"capture()/replay()", "the harness judges one: keep the two phases (recorded and re-executed as a "
                "GPU does), or set out_graph = in_graph = None to be judged on replay()")
        if python:
            has_capture = any(_defines(k, ("capture",)) for k in cls.__mro__ if k is not object)
            if not has_capture or "capture" in _unsets(klass, _PYTHON_REPLAY):
                raise BuilderContractError(
                    name, "graph replay", "a whole contract", f"{klass.__name__} defines replay() but no capture()",
                    "define capture() too (0.2's capture()/replay()), or drop replay() to be judged on the two "
                    "phases out_graph()/in_graph()" + (" it inherits" if _inherits_phases(cls) else ""))
            return "python_replay"
        if phases and {"out_graph", "in_graph"} <= _all_defined(cls, _PHASES):
            return "phases"
        return "none"
    return "none"


def _inherits_phases(cls: type) -> bool:
    return {"out_graph", "in_graph"} <= _all_defined(cls, _PHASES)


def _all_defined(cls: type, names: tuple[str, ...]) -> set[str]:
    """The names of ``names`` the class has, from anywhere in its MRO, not unset by a more derived class."""
    found: set[str] = set()
    unset: set[str] = set()
    for klass in cls.__mro__:
        for n in names:
            if n in found or n in unset or n not in vars(klass):
                continue
            (found if callable(vars(klass)[n]) else unset).add(n)
    return found


def _takes_batch(inner: Any) -> bool:
    """A pre-0.2 builder: ``build(batch, variant)`` instead of ``build(inputs)`` (its bound method's parameters)."""
    try:
        params = [p for p in inspect.signature(inner.build).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2


def _declaring(cls: type, attribute: str) -> type | None:
    """The most derived class of ``cls``'s MRO that sets ``attribute`` itself (None: none does)."""
    return next((k for k in cls.__mro__ if attribute in vars(k)), None)


def declared_modes(cls: type, name: str) -> tuple[str, ...]:
    """The modes ``cls`` declares (``modes = (...)`` on it or a base), validated; ``("target_verify",)`` when no
    class declares any (the documented default, said so in ``check``'s per-mode table).

    A declaration the harness cannot take is refused here, once, for every entry point (check, replay, the
    plugin, the gate): not a tuple or list of strings (``modes = "decode"`` would read as letters), empty (every
    property would be ``not applicable``: a green that judged nothing), or naming a mode the batch model does not
    know (``"draft_verify"`` would be dropped without a word).
    """
    owner = _declaring(cls, "modes")
    if owner is None:
        return ("target_verify",)
    value = vars(owner)["modes"]
    expected = f"a non-empty tuple of mode names, some of {MODES}"
    hint = "docs/BUILDERS.md, 'Declaring modes'; leave modes out to be judged on target_verify alone"
    if not isinstance(value, (tuple, list)) or not all(isinstance(m, str) for m in value):
        raise InvalidDeclaration(name, owner.__name__, "modes", expected, repr(value), hint)
    if not value:
        raise InvalidDeclaration(name, owner.__name__, "modes", expected, repr(value),
                                 "an empty declaration judges nothing; " + hint)
    unknown = [m for m in value if m not in MODES]
    if unknown:
        raise InvalidDeclaration(name, owner.__name__, "modes", expected, repr(value),
                                 f"{', '.join(map(repr, unknown))} is no mode of the batch model; " + hint)
    if len(set(value)) != len(value):
        raise InvalidDeclaration(name, owner.__name__, "modes", expected + ", each once", repr(value), hint)
    return tuple(value)


def declared_padding(cls: type, name: str) -> Padding:
    """The padding convention ``cls`` declares, validated; ``absorb_then_clamp`` when none (docs/DESIGN.md §2)."""
    owner = _declaring(cls, "padding_convention")
    if owner is None or vars(owner)["padding_convention"] is None:
        return "absorb_then_clamp"
    padding = vars(owner)["padding_convention"]
    if padding not in PADDINGS:
        raise InvalidDeclaration(name, owner.__name__, "padding_convention", f"one of {list(PADDINGS)}", repr(padding))
    return padding


def _fill_value(inner: Any, name: str) -> int:
    """``seq_len_fill_value``: the instance's (upstream's answer, asked once), else the class's, else 1."""
    value = vars(inner).get("seq_len_fill_value") if hasattr(inner, "__dict__") else None
    if value is None:
        owner = _declaring(type(inner), "seq_len_fill_value")
        value = 1 if owner is None else vars(owner)["seq_len_fill_value"]
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidDeclaration(name, type(inner).__name__, "seq_len_fill_value", "an int", repr(value))
    return value


def declared_capture_geometry(cls: type, name: str) -> CaptureGeometry:
    """The capture geometry ``cls`` declares, validated; ``token_slots`` when none (docs/DESIGN.md §3, P5)."""
    owner = _declaring(cls, "capture_geometry")
    if owner is None or vars(owner)["capture_geometry"] is None:
        return DEFAULT_CAPTURE_GEOMETRY
    geometry = vars(owner)["capture_geometry"]
    if geometry not in CAPTURE_GEOMETRIES:
        raise InvalidDeclaration(name, owner.__name__, "capture_geometry", f"one of {list(CAPTURE_GEOMETRIES)}",
                                 repr(geometry), "docs/BUILDERS.md, 'Declaring a capture geometry'")
    return geometry


def capabilities_of(inner: Any, name: str, *, upstream: bool = False, routes: tuple[str, ...] = ()) -> Capabilities:
    """The capabilities of builder object ``inner`` (registered as ``name``), read from its class once."""
    cls = type(inner)
    build: BuildContract = "batch" if _takes_batch(inner) else "inputs"
    return Capabilities(
        build=build,
        graph="none" if build == "batch" else _graph_contract(cls, name),
        padding=declared_padding(cls, name),
        mirror_validation="with_mirror_validation" in _all_defined(cls, ("with_mirror_validation",)),
        expresses="variants_supported" in _all_defined(cls, ("variants_supported",)),
        upstream=upstream,
        routes=routes,
        modes=declared_modes(cls, name),
        modes_declared=_declaring(cls, "modes") is not None,
        seq_len_fill_value=_fill_value(inner, name),
        capture_layout="capture_verify_lens" in _all_defined(cls, ("capture_verify_lens",)),
        capture_geometry=declared_capture_geometry(cls, name),
        capture_slots="ragged_capture_slots" in _all_defined(cls, ("ragged_capture_slots",)),
        store_kernels="swa_store_rows" in _all_defined(cls, ("swa_store_rows",)),
        switches=tuple(vars(inner).get("switches", ()) if hasattr(inner, "__dict__") else ()),
    )
