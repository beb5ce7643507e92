"""A property as every family's ``check``, plugin and gate run it: its spec, one verdict per (property, batch).

A family declares its properties as :class:`PropertySpec` rows (DSV4's table:
its ``properties.spec.PROPERTIES``); :func:`verdict` runs one on one batch and never
raises: a builder that crashes fails the property, with the exception's origin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal

from metadata_builders.errors import Origin, PropertyFailure, StreamOutOfBounds
from metadata_builders.properties.notes import Partial


def _always(batch: Any) -> str | None:
    return None


@dataclass(frozen=True)
class PropertySpec:
    """A property the CLI and the plugin run: its check and the batches it is drawn on."""

    name: str
    title: str
    check: Callable[..., list[str]]
    focuses: tuple[dict[str, Any], ...]
    """Keyword arguments for ``strategies.verify_batches``, one Hypothesis run each.

    Several focused runs reach rare shapes (a tier whose slack the last real row
    absorbs, a capped tail) far more reliably than one run of the same total size,
    because a run's examples are mutations of each other."""
    applies: Callable[[Any], str | None] = _always
    """Why the property has nothing to check on ``batch`` of a mode it judges (None: it applies)."""
    modes: tuple[str, ...] = ("target_verify",)
    """The modes of the MTP step it judges (docs/DESIGN.md section 3, "Beyond target verify"); on a batch of
    another it is ``not applicable``, saying why (:attr:`mode_reasons`)."""

    mode_reasons: Mapping[str, str] = field(default_factory=dict)
    """Why it does not judge a mode (mode -> reason), said as ``not applicable`` on a batch of that mode."""

    def why_not(self, batch: Any) -> str | None:
        """Why the property does not apply to ``batch`` (its mode, then ``applies``); None: it applies."""
        if batch.mode not in self.modes:
            return self.mode_reasons.get(batch.mode, f"{self.name} does not judge mode {batch.mode}")
        return self.applies(batch)


Status = Literal["held", "failed", "partial", "not applicable"]


@dataclass(frozen=True)
class PropertyResult:
    """One property's verdict on one batch."""

    prop: str
    status: Status
    notes: tuple[str, ...] = ()
    """Notes the check returned; for ``partial`` the first says why."""
    failure: PropertyFailure | None = None

    @property
    def why(self) -> str:
        """Why the property is ``partial`` or ``not applicable`` (empty otherwise)."""
        partial = [n for n in self.notes if isinstance(n, Partial)]
        if self.status == "partial":
            return partial[0]
        return self.notes[0] if self.status == "not applicable" and self.notes else ""


def verdict(spec: PropertySpec, builder: Any, batch: Any) -> PropertyResult:
    """Run one property on one batch; a crashing builder fails the property, with the exception named."""
    reason = spec.why_not(batch)
    if reason is None and batch.mode not in builder.capabilities.modes:
        reason = (f"builder {builder.name!r} does not build mode {batch.mode} (it declares modes = "
                  f"{builder.capabilities.modes!r}: docs/DESIGN.md section 3)")
    if reason is None and builder.capabilities.switches:
        reason = builder.outside_switches(batch)  # a route that turns a switch on judges only what it reaches
    if reason is not None:
        return PropertyResult(spec.name, "not applicable", (reason,))
    try:
        notes = spec.check(builder, batch)
    except PropertyFailure as failure:
        return PropertyResult(spec.name, "failed", (), failure)
    except Exception as exc:  # noqa: BLE001 - a crashing builder fails the property; report, don't crash
        return PropertyResult(spec.name, "failed", (), raised_failure(spec.name, exc))
    status: Status = "partial" if any(isinstance(n, Partial) for n in notes) else "held"
    return PropertyResult(spec.name, status, tuple(notes))


def raised_failure(prop: str, exc: BaseException) -> PropertyFailure:
    """``builder raised IndexError: ... (at deepseek_v4_backend_hip_radix.py:3660 in get_swa_page_indices)``,
    with check ``"raised"`` and the exception's :class:`~metadata_builders.errors.Origin`; a decode index stream whose
    segment leaves its buffer (:class:`~metadata_builders.errors.StreamOutOfBounds`, raised where the harness reads
    the streams back) is check ``p<N>.stream_out_of_bounds`` with the field, token and segment as data."""
    origin = Origin.of(exc)
    if isinstance(exc, StreamOutOfBounds):
        return PropertyFailure(prop, f"a decode index stream reads past its buffer: {exc.field} {exc.actual[0]}.."
                               f"{exc.actual[1]} of token {exc.index} (the attention kernel would read there)",
                               field=exc.field, index=(exc.index,), expected=exc.expected, actual=exc.actual,
                               check=f"{prop.lower()}.stream_out_of_bounds", origin=origin)
    where = f" (at {origin.where()})" if origin.filename else ""
    text = str(exc).splitlines()[0][:300] if str(exc) else ""
    return PropertyFailure(prop, f"builder raised {type(exc).__name__}: {text}{where}", check="raised", origin=origin)


def run_all(builder: Any, batch: Any, props: Iterable[PropertySpec]) -> dict[str, PropertyResult]:
    """Run each property on one batch: name -> :class:`PropertyResult`."""
    return {spec.name: verdict(spec, builder, batch) for spec in props}
