"""The builders known by name, and :func:`get_builder`: a name (or ``module:attr``) to an audited builder.

Names are checked without building anything (:func:`check_builder_name`), so a
gate refuses a misspelt head builder in a second; a ``module:attr`` that cannot
be imported says how to make it importable, and a command printed for it (a
replay command) carries what it needs to run in a fresh shell (:func:`replay_env`).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

from metadata_builders.builders.loading import construct, construct_named, findable, importable_hint, load_factory
from metadata_builders.devices import usable_device
from metadata_builders.errors import BuilderNotFound
from metadata_builders.families.dsv4.builders.audited import AuditedBuilder
from metadata_builders.families.dsv4.reference import ReferenceBuilder

__all__ = ["REGISTERED", "REGISTRY", "Registration", "Route", "check_builder_name", "check_declarations",
           "get_builder", "registration", "routes_of"]


@dataclass(frozen=True, slots=True)
class Route:
    """One route of a builder name: a builder judged on its own, reported under its own property names.

    ``--builder sglang`` runs upstream's code along two kernel routes (DESIGN.md
    section 5), because both are upstream code and a regression in either blocks:
    ``triton`` (the ``sglang`` builder: rows ``P1`` ...) and ``torch``
    (``metadata_builders.families.dsv4.sglang:torch_route``: rows ``P1-torch`` ...).
    """

    label: str
    """Short name (``triton``, ``torch``); empty for a name that is its own only route."""
    builder: str
    """The ``get_builder`` name that runs this route."""
    what: str = ""
    """One line for people: what the route runs."""
    primary: bool = True
    """The first route: its properties keep their own names."""
    properties: tuple[str, ...] = ()
    """The properties the route is judged on (empty: all): a route that turns an upstream switch on is judged by P1
    on the batches that reach the switched path (``gasm``: rows ``P1-gasm``)."""
    focuses: tuple[dict, ...] = ()
    """Batch kinds of its own (``verify_batches`` keyword arguments): the gate judges the route on a corpus drawn
    from them instead of the run's (empty: the run's)."""
    gate_only: bool = False
    """Run by the gate, not by ``check --builder NAME`` (whose report names it): its batches are rare in a drawn run."""


@dataclass(frozen=True, slots=True)
class Registration:
    """What is known about a builder *name* before anything is built (commands ask this, never the name)."""

    name: str
    what: str = "a builder of your own (module:attr)"
    upstream: bool = False
    """It runs upstream's own code: known findings may name its failures."""
    coverage: bool = False
    """Its builds report upstream coverage (fields filled, judged, why not)."""
    routes: tuple[Route, ...] = ()
    """Several routes, each judged on its own; empty: the name is its own only route."""
    needs_sglang_tree: bool = False
    """A gate on a repository imports it from the side's ``python/sglang``."""
    pure_python: bool = False
    """It builds plain lists, no tensors: ``--device meta`` (shapes only) has nothing to show of it."""


_TORCH_ROUTE = "metadata_builders.families.dsv4.sglang:torch_route"
_GASM_ROUTE = "metadata_builders.families.dsv4.sglang:gasm_route"

_GROUPED_FOCUSES = ({"ragged": False, "min_requests": 16},
                    {"ragged": True, "graph": True, "is_dspark": True, "min_requests": 16})
"""What reaches the grouped verify streams (``N % num_draft == 0``, ``N // num_draft >= 16``): 16 requests verifying
uniformly (any ``num_draft > 1``), and DSpark's compact ragged tiers of 16 (when the tier is a multiple of
``num_draft``).  Measured: 7 of the ``ci`` profile's 20 batches reach them (5 uniform, 2 ragged; 3 of 10 at ``dev``);
the run's own corpus reaches them with 3 of 160."""

REGISTRY: dict[str, Registration] = {
    "reference": Registration("reference", "the pure-Python specification", pure_python=True),
    "hip": Registration("hip", "the bundled torch builder"),
    "sglang": Registration(
        "sglang", "the installed SGLang's own target-verify code", upstream=True, coverage=True,
        routes=(Route("triton", "sglang", "upstream's Triton kernels, as a GPU runs them (interpreted on CPU)"),
                Route("torch", _TORCH_ROUTE, "upstream's own CPU dispatch: its torch fallbacks (PaddedToBucket, "
                      "BuildQoIndptr, ExpandPrefillCausally)", primary=False),
                Route("gasm", _GASM_ROUTE, "the triton route with SGLANG_DSV4_GROUPED_ASM=1 (0.5.21+): the grouped "
                      "verify streams, P1 on batches of 16 requests that reach them", primary=False,
                      properties=("P1",), focuses=_GROUPED_FOCUSES, gate_only=True)),
        needs_sglang_tree=True),
    _TORCH_ROUTE: Registration(_TORCH_ROUTE, "SGLang's code on its torch fallbacks", upstream=True, coverage=True,
                               needs_sglang_tree=True),
    _GASM_ROUTE: Registration(_GASM_ROUTE, "SGLang's code with SGLANG_DSV4_GROUPED_ASM=1", upstream=True,
                              coverage=True, needs_sglang_tree=True),
}
"""Every builder known by name (a ``module:attr`` of the user's is registered on the fly, as its own)."""


def registration(name: str) -> Registration:
    """What is known of ``name`` without building it."""
    return REGISTRY.get(name) or Registration(name)


def routes_of(name: str) -> tuple[Route, ...]:
    """The routes ``name`` stands for, else ``name`` alone."""
    return registration(name).routes or (Route("", name),)


REGISTERED = ("reference", "hip", "sglang")
"""The builders known by a short name; anything else is ``module:attr``."""


def check_builder_name(name: str, option: str = "--builder") -> None:
    """Refuse, without building anything, a name that cannot name a builder here (an unknown name, a
    ``module:attr`` whose module is not importable): a gate says so before its base runs."""
    if name in REGISTERED:
        return
    if ":" not in name:
        raise BuilderNotFound(name, f'{option}: expected "reference", "hip", "sglang" or "module:attr"')
    module = name.partition(":")[0]
    if not findable(module):
        raise BuilderNotFound(name, f"{option}: cannot import module {module!r}; " + importable_hint(module))


def check_declarations(name: str, option: str = "--builder") -> None:
    """Refuse a ``module:attr`` class whose declarations the harness cannot take (``modes = ()``, an unknown mode,
    a padding convention that is none, a capability its methods do not back), without constructing it: the plugin
    and the gate say so before any test or side runs.  A factory is checked when it is called (:func:`get_builder`)."""
    if ":" not in name:
        return
    from metadata_builders.families.dsv4.builders.capabilities import (
        DECLARED,
        check_declared,
        declared_modes,
        declared_padding,
    )

    module_name, _, attr = name.partition(":")
    try:
        findable(module_name)
        target = getattr(importlib.import_module(module_name), attr, None)
    except ImportError as exc:
        raise BuilderNotFound(name, f"{option}: cannot import module {module_name!r}: {exc}; "
                              + importable_hint(module_name)) from exc
    if isinstance(target, type):
        declared_modes(target, name)
        declared_padding(target, name)
        for capability in DECLARED:
            check_declared(target, capability, name)


def get_builder(name: str, device: str = "cpu") -> AuditedBuilder | ReferenceBuilder:
    """``"reference"``, ``"hip"``, ``"sglang"`` or ``"module:attr"`` (a zero-argument factory or a class).

    The reference is pure Python and needs no audit: its audit *is* the contract.
    Everything else -- a subclass of the reference included -- is audited.  A
    factory or class that accepts a ``device`` keyword gets it; it runs under the
    audit, so device buffers it allocates (graph state) are known as device memory.
    """
    device = usable_device(device)
    if name == "reference":
        return ReferenceBuilder("pad_rows_only")  # the specification never widens a real row (DESIGN.md section 2)
    if name == "hip":
        from metadata_builders.families.dsv4.hip import HipBuilder

        return AuditedBuilder(construct(HipBuilder, device), device, "hip", factory=HipBuilder)
    if name == "sglang":
        try:
            from metadata_builders.audit import device_handle
            from metadata_builders.families.dsv4.sglang import SGLangBuilder

            return AuditedBuilder(SGLangBuilder(device_handle(device)), device, "sglang", factory=SGLangBuilder,
                                  upstream=True, routes=("triton",))
        except ImportError as exc:  # no SGLang, or an upstream piece not found (UpstreamNotFound names it)
            raise BuilderNotFound(name, f"{exc}; see docs/SGLANG.md") from exc
    if ":" not in name:
        raise BuilderNotFound(name, 'expected "reference", "hip", "sglang" or "module:attr"')
    factory = load_factory(name)
    attr = name.partition(":")[2]
    builder = construct_named(name, factory, device)
    if isinstance(builder, AuditedBuilder) or type(builder) is ReferenceBuilder:
        # Already audited, or the oracle itself; a *subclass* of the reference is audited like any builder.
        return builder
    if not callable(getattr(builder, "build", None)):
        raise BuilderNotFound(name, f"{attr}() returned {type(builder).__name__}, which has no build(inputs)")
    return AuditedBuilder(builder, device, name, factory=factory, upstream=registration(name).upstream or None)
