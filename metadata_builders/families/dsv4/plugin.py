"""What the core's pytest plugin (:mod:`metadata_builders.plugin`) takes from the DSV4 family, the default: its
builder names checked before any test runs, the audited subject, and the modes a test of it draws."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

__all__ = ["check_builder", "skip_reason", "subject", "under_test"]


def check_builder(name: str, device: str) -> None:
    """Refuse ``--mb-builder name`` on ``--mb-device device`` before any test runs: an unknown name, a module that
    does not import, declarations the harness cannot take (:class:`~metadata_builders.errors.BuilderNotFound`,
    :class:`~metadata_builders.errors.BuilderContractError`), or values the meta device cannot give
    (:class:`~metadata_builders.errors.UsageError`)."""
    from metadata_builders.errors import UsageError
    from metadata_builders.families.dsv4.builders.registry import (check_builder_name, check_declarations,
                                                                   registration)

    check_builder_name(name, "--mb-builder")
    check_declarations(name, "--mb-builder")
    if device == "meta" and registration(name).pure_python:
        raise UsageError("--mb-device", f"a device with values to compare: builder {name} is pure Python; drop "
                         "--mb-device or pick --mb-builder hip", "meta")


def subject(name: str, device: str) -> Any:
    """The audited builder ``name`` on ``device`` (:func:`~metadata_builders.families.dsv4.builders.get_builder`)."""
    from metadata_builders.families.dsv4.builders import get_builder

    return get_builder(name, device)


def skip_reason(builder: Any, params: Iterable[Any]) -> str | None:
    """Why a test parametrized over ``params`` does not run on ``builder``: a focus of a mode it does not declare
    (as ``check`` says it: not applicable, never a build the builder cannot make)."""
    from metadata_builders.families.dsv4.properties.spec import Focus

    declared = builder.capabilities.modes
    for focus in (p for p in params if isinstance(p, Focus)):
        if focus.mode not in declared:
            return (f"{focus}: builder {builder.name!r} does not build mode {focus.mode} (it declares modes = "
                    f"{declared!r})")
    return None


def under_test(builder: Any) -> contextlib.AbstractContextManager:
    """While a test of ``builder`` runs, ``batches_for(prop)`` draws the modes it declares."""
    from metadata_builders.families.dsv4.properties.spec import builder_under_test

    return builder_under_test(builder)
