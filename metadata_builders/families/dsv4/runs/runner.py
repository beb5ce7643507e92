"""Drive the properties with Hypothesis: one run per property, counted and timed.

Used by the CLI (``check``, ``mutants``, ``bench``) and by the pytest plugin.  A
run records how many examples it took, the first failure (after shrinking:
Hypothesis replays the minimal example last, so the last failing batch seen is
the shrunk one), and how often each coverage boundary was hit.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import given, seed, settings

from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.properties import PropertySpec, collecting_tallies, verdict
from metadata_builders.families.dsv4.reference import ReferenceBuilder
from metadata_builders.runs.profiles import seed_alone

__all__ = ["DRAFT_WORKER", "ModeFailure", "PropertyRun", "build_of", "run_property"]

DRAFT_WORKER = "target_verify (DSpark draft worker)"
"""The build a DSpark draft worker's block verify is judged as: target verify on the draft worker's own backend
(its configured count apart from its verify width), counted and ended apart from the target worker's."""


def build_of(batch: VerifyBatch) -> str:
    """The build ``batch`` is judged as: its mode of the MTP step, or :data:`DRAFT_WORKER`."""
    return DRAFT_WORKER if batch.is_dspark_draft else batch.mode


def _focus_build(focus: dict) -> str:
    return DRAFT_WORKER if focus.get("dspark_draft") else focus.get("mode", "target_verify")


@dataclass
class PropertyRun:
    """The outcome of one property's Hypothesis run."""

    spec: PropertySpec
    examples: int = 0
    """Examples executed, shrinking included."""
    examples_to_failure: int | None = None
    """Examples executed when the first failure was seen (before shrinking)."""
    seconds: float = 0.0
    failure: PropertyFailure | None = None
    """The failure on the shrunk batch; None when the property held."""
    batch: VerifyBatch | None = None
    """The shrunk failing batch."""
    history: tuple[VerifyBatch, ...] = ()
    """What the builder had built before it failed on :attr:`batch` (its latest distinct batches)."""
    notes: list[str] = field(default_factory=list)
    """Notes the check returned (first few)."""
    partial: str | None = None
    """Why the property could not fully run for this builder (first reason seen); None: it could."""
    not_applicable: int = 0
    """Examples the property had nothing to check on (e.g. P5 without a graph tier)."""
    events: Counter = field(default_factory=Counter)
    """Coverage boundary -> examples that hit it (generation phase only)."""
    tallies: Counter = field(default_factory=Counter)
    """``(what, name) -> sum`` of what the checks exercised over every example
    (:func:`~metadata_builders.families.dsv4.properties._common.tally`): e.g. P5's runners, tiers and keys captured."""
    generated: int = 0
    """Examples of the generation phase (the denominator of ``events``)."""
    judged_by_mode: Counter = field(default_factory=Counter)
    """Mode of the MTP step (:func:`build_of`: a DSpark draft worker's verify apart) -> examples the property judged
    (held, partial or failed; not ``not applicable``)."""
    later: list[ModeFailure] = field(default_factory=list)
    """Failures in the focuses of other modes, after the first failure (:func:`run_property`)."""
    failed_focus: int | None = None
    """The index in ``spec.focuses`` of the focus that failed first (None: none failed)."""

    @property
    def passed(self) -> bool:
        return self.failure is None

    @property
    def failures(self) -> list[ModeFailure]:
        """Every failure of the run, the first one first (one per mode at most)."""
        if self.failure is None:
            return []
        return [ModeFailure(self.failure, self.batch, self.history), *self.later]

    @property
    def status(self) -> str:
        """``held``, ``partial`` (held where it could run; :attr:`partial` says why not everywhere) or ``FAILED``."""
        if self.failure is not None:
            return "FAILED"
        return "partial" if self.partial is not None else "held"


@dataclass(frozen=True)
class ModeFailure:
    """One failure of a run: the failure on the shrunk batch, the batch, what the builder built before it."""

    failure: PropertyFailure
    batch: VerifyBatch | None
    """None when the run failed without a batch (its worker process died)."""
    history: tuple[VerifyBatch, ...] = ()


def _as_failure(spec: PropertySpec, exc: BaseException) -> PropertyFailure:
    if isinstance(exc, PropertyFailure):
        return exc
    from metadata_builders.families.dsv4.properties.spec import raised_failure

    return raised_failure(spec.name, exc)


def run_property(
    spec: PropertySpec,
    builder: Any,
    settings_: settings,
    *,
    progress: Callable[[PropertyRun], None] | None = None,
    stop_at_first: bool = False,
    first_focus: int | None = None,
) -> PropertyRun:
    """Run ``spec`` against ``builder`` under ``settings_``; never raises for a property failure.

    Each of the spec's focuses is one Hypothesis run of ``max_examples``.  A failing
    focus ends its mode's focuses, not the other modes': a known finding of target
    verify must not leave draft extend, the decode modes or the DSpark draft worker's
    verify (:func:`build_of`) unjudged (their failures go to :attr:`PropertyRun.later`).  ``stop_at_first``: the first
    failure ends the run (the mutant catalogue: one kill is enough).  Under a derandomized profile
    each focus gets its own fixed seed (``hypothesis.seed``), so focuses explore
    different batches and a run is reproducible.  ``first_focus``: that focus runs first (the mutant catalogue's
    recorded killing focus: with ``stop_at_first`` the same kill, sooner); each focus keeps the seed of its index,
    so it draws the same batches in any order.
    """
    from metadata_builders.harness import harness_session

    run = PropertyRun(spec)
    start = time.perf_counter()
    failed_modes: set[str] = set()
    # the audit's direct entries (and any launch memo) installed once for the run; what the checks exercised counted
    with harness_session(), collecting_tallies() as tallies:
        order = list(enumerate(spec.focuses))
        if first_focus is not None and 0 <= first_focus < len(order):
            order.insert(0, order.pop(first_focus))
        for index, focus in order:
            mode = _focus_build(focus)
            if mode in failed_modes:
                continue
            seen = (run.failure is not None) + len(run.later)
            _run_focus(run, focus, builder, settings_, index, progress)
            if (run.failure is not None) + len(run.later) > seen:
                failed_modes.add(mode)
                run.failed_focus = index if run.failed_focus is None else run.failed_focus
                if stop_at_first:
                    break
    run.tallies = tallies
    run.seconds = time.perf_counter() - start
    if progress is not None:
        progress(run)
    return run


def _run_focus(
    run: PropertyRun,
    focus: dict,
    builder: Any,
    settings_: settings,
    index: int,
    progress: Callable[[PropertyRun], None] | None,
) -> None:
    from metadata_builders.families.dsv4.strategies import boundary_hits, verify_batches

    spec = run.spec

    def body(batch: VerifyBatch) -> None:
        run.examples += 1
        if run.failure is None and run.examples_to_failure is None:
            run.generated += 1
            run.events.update(boundary_hits(batch))
        if progress is not None and run.examples % 5 == 0:
            progress(run)
        before = () if isinstance(builder, ReferenceBuilder) else builder.recent()
        result = verdict(spec, builder, batch)
        if result.status != "not applicable":
            run.judged_by_mode[build_of(batch)] += 1
        if result.failure is not None:
            if run.examples_to_failure is None:
                run.examples_to_failure = run.examples
            if run.failure is None or (run.batch is not None and build_of(run.batch) == build_of(batch)):
                run.batch, run.failure, run.history = batch, result.failure, before
            elif run.later and build_of(run.later[-1].batch) == build_of(batch):  # shrinking this mode's failure
                run.later[-1] = ModeFailure(result.failure, batch, before)
            else:
                run.later.append(ModeFailure(result.failure, batch, before))
            raise result.failure
        if result.status == "partial" and run.partial is None:
            run.partial = result.why
        elif result.status == "not applicable":
            run.not_applicable += 1
        notes = [n for n in result.notes if n != result.why]
        if notes and len(run.notes) < 5:
            run.notes += notes[: 5 - len(run.notes)]

    test = given(batch=verify_batches(**focus))(body)
    if settings_.derandomize:
        test = seed(zlib.crc32(f"{spec.name}/{index}".encode()))(test)
        test = settings(settings_, derandomize=False)(test)
    else:
        test = settings_(test)
    try:
        with seed_alone():
            test()
    except Exception as exc:  # noqa: BLE001 - Hypothesis re-raises the shrunk failure; we keep it as data
        if run.failure is None:
            run.failure = _as_failure(spec, exc)
