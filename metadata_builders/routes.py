"""Routes: one builder name that stands for several builders, each judged on its own.

``--builder sglang`` runs upstream's code along two kernel routes (DESIGN.md
section 5), because both are upstream code and a regression in either blocks:

| route | builder (a ``get_builder`` name) | properties reported as |
|---|---|---|
| ``triton`` | ``sglang`` | ``P1`` ... ``P9`` |
| ``torch`` | ``metadata_builders.sglang_adapter:torch_route`` | ``P1-torch`` ... ``P9-torch`` |

The first route is the primary one: its rows keep the property's own name, so a
table, a JUnit file or a replay file of a one-route builder reads as before.
Each route is a separate builder for every property (its own audit, its own
replay command); ``check`` prints one table per route, the gate one table with a
row per (route, property).  Every other name is one route of itself.

This module imports no builder: the CLI and the gate ask it what to run before
anything heavy is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ROUTES", "Route", "routes_of"]


@dataclass(frozen=True, slots=True)
class Route:
    """One route of a builder name."""

    label: str
    """Short name (``triton``, ``torch``); empty for a name that is its own only route."""
    builder: str
    """The ``get_builder`` name that runs this route."""
    what: str = ""
    """One line for people: what the route runs."""
    primary: bool = True
    """The first route: its properties keep their own names."""

    def prop(self, name: str) -> str:
        """How property ``name`` is reported for this route: ``P1``, or ``P1-torch``."""
        return name if self.primary else f"{name}-{self.label}"


ROUTES: dict[str, tuple[Route, ...]] = {
    "sglang": (
        Route("triton", "sglang", "upstream's Triton kernels, as a GPU runs them (interpreted on CPU)"),
        Route("torch", "metadata_builders.sglang_adapter:torch_route",
              "upstream's own CPU dispatch: its torch fallbacks (PaddedToBucket, BuildQoIndptr, "
              "ExpandPrefillCausally)", primary=False),
    ),
}
"""Builder names with more than one route."""


def routes_of(name: str) -> tuple[Route, ...]:
    """The routes ``name`` stands for: ``ROUTES[name]``, else ``name`` alone."""
    return ROUTES.get(name, (Route("", name),))
