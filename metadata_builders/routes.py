"""Moved: routes of a builder name live in the builder registry (:mod:`metadata_builders.builders.registry`).

This shim keeps 0.2's ``from metadata_builders.routes import routes_of`` working for one release.
"""

from __future__ import annotations

from metadata_builders.builders.registry import REGISTRY, Route, routes_of

ROUTES = {name: reg.routes for name, reg in REGISTRY.items() if reg.routes}
"""0.2's table: builder names with more than one route."""

__all__ = ["ROUTES", "Route", "routes_of"]
