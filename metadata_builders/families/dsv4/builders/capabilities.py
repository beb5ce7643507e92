"""What a builder can be judged on, computed once when it is registered: its :class:`Capabilities`.

Properties and commands never probe a builder (``getattr``, ``callable``) or
compare its name: they read its capabilities.  They are computed here, once,
from the builder's **class**.  A builder declares each capability as a class
variable with a default (:data:`DECLARED`: ``graph_contract = "phases"``,
``mirror_validation = True``, ..., besides ``modes``, ``padding_convention``,
``capture_geometry``), as every bundled builder does; a declaration that its
methods do not back (``mirror_validation = True`` and no
``with_mirror_validation()``) is one :class:`InvalidDeclaration` line.  Only
what no class declares is inferred from the methods (a builder of the user's
that declares nothing), and ``check``'s header says so (``Capabilities.inferred``).

For each capability the most derived class that says anything about it decides:
one that declares it, or defines (or unsets, ``x = None``) one of its methods.
A subclass that overrides a method without declaring is judged on its methods,
never on a declaration of its base that may no longer hold; where a class
offers two contracts for the same capability, the one the most derived class
defines is judged -- never inherited code in place of the builder's own.

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
from typing import Any, get_args

from metadata_builders.builders.declarations import declared_modes as _declared_modes
from metadata_builders.builders.declarations import declaring as _declaring
from metadata_builders.errors import BuilderContractError, InvalidDeclaration
from metadata_builders.families.dsv4.batch.modes import MODES
from metadata_builders.families.dsv4.capabilities import BuildContract, Capabilities, GraphContract
from metadata_builders.families.dsv4.tier import (
    CAPTURE_GEOMETRIES,
    DEFAULT_CAPTURE_GEOMETRY,
    PADDINGS,
    CaptureGeometry,
    Padding,
)

__all__ = ["DECLARED", "BuildContract", "Capabilities", "CaptureGeometry", "GraphContract", "Padding",
           "capabilities_of", "check_declared", "declared_capture_geometry", "declared_modes", "declared_padding"]

_PHASES = ("graph_state", "out_graph", "in_graph")
_PYTHON_REPLAY = ("capture", "replay")

DECLARED: dict[str, tuple[str, ...]] = {
    "graph_contract": _PHASES + _PYTHON_REPLAY,
    "mirror_validation": ("with_mirror_validation",),
    "expresses_variants": ("variants_supported",),
    "capture_layout": ("capture_verify_lens",),
    "capture_slots": ("ragged_capture_slots",),
    "store_kernels": ("swa_store_rows",),
}
"""Each capability a builder declares as a class variable (beside ``modes``, ``padding_convention``,
``capture_geometry`` and ``seq_len_fill_value``), and the methods that offer it: what a declaration needs, and what
inference reads of a builder that declares nothing."""


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


def declared_modes(cls: type, name: str, *, known: tuple[str, ...] = MODES,
                   default: tuple[str, ...] = ("target_verify",)) -> tuple[str, ...]:
    """:func:`metadata_builders.builders.declarations.declared_modes` against DSV4's batch model by default."""
    return _declared_modes(cls, name, known=known, default=default)


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


def _decider(cls: type, capability: str) -> type | None:
    """The most derived class of ``cls``'s MRO that says anything about ``capability``: declares it, or defines or
    unsets one of its methods (None: no class does)."""
    methods = DECLARED[capability]
    return next((k for k in cls.__mro__ if capability in vars(k) or _defines(k, methods) or _unsets(k, methods)),
                None)


def _inferred(cls: type, capability: str, name: str) -> Any:
    """What ``cls``'s methods offer of ``capability`` (the rule before declarations, for classes that declare none)."""
    if capability == "graph_contract":
        return _graph_contract(cls, name)
    return set(DECLARED[capability]) <= _all_defined(cls, DECLARED[capability])


def _needs(capability: str, value: Any) -> tuple[str, ...]:
    """The methods a declared ``value`` of ``capability`` needs the class to have."""
    if capability == "graph_contract":
        return {"phases": ("out_graph", "in_graph"), "python_replay": _PYTHON_REPLAY}.get(value, ())
    return DECLARED[capability] if value else ()


def _declared(cls: type, capability: str, name: str) -> tuple[Any, bool]:
    """``(value, declared)``: the declaration of the class that decides ``capability``, checked against the class's
    methods (:func:`check_declared`); else what its methods offer, inferred."""
    value = check_declared(cls, capability, name)
    return (_inferred(cls, capability, name), False) if value is None else (value, True)


def check_declared(cls: type, capability: str, name: str) -> Any:
    """The value of ``capability`` the class that decides it declares, validated; None when that class declares
    none (or no class says anything about it).

    A declaration that disclaims a capability (``store_kernels = False``) is taken at its word: the harness does
    not call the method.  One that claims it needs the methods: ``mirror_validation = True`` on a class without
    ``with_mirror_validation()`` is refused, naming the class, the variable and its value.
    """
    owner = _decider(cls, capability)
    if owner is None or capability not in vars(owner):
        return None
    value = vars(owner)[capability]
    allowed = get_args(GraphContract) if capability == "graph_contract" else (True, False)
    if value not in allowed or (capability != "graph_contract" and not isinstance(value, bool)):
        raise InvalidDeclaration(name, owner.__name__, capability, f"one of {list(allowed)}", repr(value),
                                 "docs/BUILDERS.md, 'Declaring capabilities'")
    missing = [m for m in _needs(capability, value) if m not in _all_defined(cls, _needs(capability, value))]
    if missing:
        raise InvalidDeclaration(
            name, owner.__name__, capability, "backed by the class's methods", repr(value),
            f"{cls.__name__} has no {', '.join(m + '()' for m in missing)}: define it, or declare what its methods "
            "offer (docs/BUILDERS.md, 'Declaring capabilities')")
    return value


def capabilities_of(inner: Any, name: str, *, upstream: bool = False, routes: tuple[str, ...] = ()) -> Capabilities:
    """The capabilities of builder object ``inner`` (registered as ``name``), read from its class once: declared,
    or inferred from its methods where no class declares them (``Capabilities.inferred`` names those)."""
    cls = type(inner)
    build: BuildContract = "batch" if _takes_batch(inner) else "inputs"
    read = {c: _declared(cls, c, name) for c in DECLARED if build == "inputs" or c != "graph_contract"}
    read.setdefault("graph_contract", ("none", True))  # the 0.1 contract has no graph replay to declare
    return Capabilities(
        build=build,
        graph=read["graph_contract"][0],
        padding=declared_padding(cls, name),
        mirror_validation=read["mirror_validation"][0],
        expresses=read["expresses_variants"][0],
        upstream=upstream,
        routes=routes,
        modes=declared_modes(cls, name),
        modes_declared=_declaring(cls, "modes") is not None,
        seq_len_fill_value=_fill_value(inner, name),
        capture_layout=read["capture_layout"][0],
        capture_geometry=declared_capture_geometry(cls, name),
        capture_slots=read["capture_slots"][0],
        store_kernels=read["store_kernels"][0],
        switches=tuple(vars(inner).get("switches", ()) if hasattr(inner, "__dict__") else ()),
        inferred=tuple(c for c, (_, declared) in read.items() if not declared),
    )
