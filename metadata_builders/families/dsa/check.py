"""Running the DSA family: every property on drawn batches of every mode, a per-mode table and a verdict.

:func:`run_check` is the family's entry point (``metadata-builders check --family dsa`` is to call it; until then
``python -m metadata_builders.families.dsa check``).  Per mode it searches with Hypothesis (derandomized: the same
verdicts and replay files run after run) for a batch on which a property fails, shrinks it, writes it as a replay
file, and searches again without that property, so a failure never masks another.  Worked example::

    report = run_check("ci")                       # the bundled builder ("dsa-torch") on "cpu"
    print(report.table())                          # a row per mode, a column per property
    report.ok                                      # every applicable property held in every mode

:func:`run_mutants` runs the family's mutant catalogue through the same search (first failure per mutant).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsa.batch import MODES, DSABatch
from metadata_builders.families.dsa.fields import FIELDS, NOT_JUDGED
from metadata_builders.families.dsa.findings import known_finding

__all__ = ["APPLIES", "PROFILES", "DSAFailure", "DSAReport", "ModeResult", "MutantResult", "coverage_line",
           "not_applicable", "release_of", "replay_file", "run_check", "run_mutants", "subject_factory"]

PROFILES: dict[str, int] = {"dev": 6, "ci": 150, "nightly": 1000}
"""Examples drawn per mode and search (``ci``: the whole family in about a minute on 2 cores, measured)."""

APPLIES: dict[str, Callable[[str], str | None]] = {
    "P3": lambda mode: "no seqlens_expand launch in decode modes" if mode in ("decode", "draft_decode", "idle")
    else None,
    "P4": lambda mode: "no gate in the DSA metadata path (P3 and P6 judge the host-sized kernel)",
}
"""property -> mode -> why it does not apply there (None: it applies).  A property absent here applies to every
mode."""


def not_applicable(subject: Any, prop: str, mode: str) -> str | None:
    """Why ``prop`` is not judged on ``mode`` for ``subject`` (a
    :class:`~metadata_builders.families.dsa.audited.DSASubject`): the property does not apply there
    (:data:`APPLIES`), or the builder does not declare the mode; None: it is judged.  What ``check`` skips, for a
    test of one's own (docs/examples/test_my_dsa_builder.py)."""
    from metadata_builders.builders.declarations import declared_modes

    declared = declared_modes(type(subject.inner), subject.name, known=MODES, default=MODES)
    if mode not in declared:
        return f"builder {subject.name!r} does not build mode {mode} (it declares modes = {declared!r})"
    why = APPLIES.get(prop, lambda m: None)(mode)
    return None if why is None else f"{prop} does not apply to {mode}: {why}"


@dataclass(frozen=True)
class DSAFailure:
    """One property failing on one (shrunk) batch."""

    mode: str
    prop: str
    check: str | None
    """The check id (``dsa.p5.pad_negative``)."""
    message: str
    batch: DSABatch
    replay_file: str | None = None
    """Where the batch was written (``--failures-dir``), None when not written."""
    known: str | None = None
    """The id of the known upstream finding it is (:mod:`~metadata_builders.families.dsa.findings`), or None."""


@dataclass
class ModeResult:
    """One mode's verdicts."""

    mode: str
    examples: int = 0
    """Batches run (every search, shrinking included)."""
    failures: list[DSAFailure] = field(default_factory=list)
    notes: dict[str, set[str]] = field(default_factory=dict)
    """property -> distinct notes (what holds but a person should know)."""

    def verdict(self, prop: str) -> str:
        """``holds``, ``FAILS <check>``, ``known <id> <check>`` (a labelled upstream finding) or ``n/a``."""
        why = APPLIES.get(prop, lambda mode: None)(self.mode)
        if why is not None:
            return "n/a"
        failed = [f for f in self.failures if f.prop == prop]
        if not failed:
            return "holds"
        return f"known {failed[0].known} {failed[0].check}" if failed[0].known else f"FAILS {failed[0].check}"


@dataclass
class DSAReport:
    """What :func:`run_check` found."""

    profile: str
    builder: str
    modes: list[ModeResult]
    seconds: float
    properties: tuple[str, ...]
    coverage: str
    not_run: list[str] = field(default_factory=list)
    """Modes the builder does not declare (its ``modes``): named in the table, never silently skipped."""
    release: str | None = None
    """The SGLang release the builder runs (upstream's code), None for any other builder."""

    @property
    def failures(self) -> list[DSAFailure]:
        return [f for m in self.modes for f in m.failures]

    @property
    def unknown(self) -> list[DSAFailure]:
        """The failures that are no known finding."""
        return [f for f in self.failures if f.known is None]

    @property
    def ok(self) -> bool:
        """Every applicable property held in every mode, apart from labelled known findings."""
        return not self.unknown

    def table(self) -> str:
        """A row per mode, a column per property, then the verdict and what does not apply, with why."""
        head = ["mode", "examples", *self.properties]
        rows = [[m.mode, str(m.examples), *(_short(m.verdict(p)) for p in self.properties)] for m in self.modes]
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in [head, *rows]]
        why = {(p, APPLIES[p](m.mode)) for m in self.modes for p in self.properties if p in APPLIES
               and APPLIES[p](m.mode)}
        lines += [f"n/a {p}: {reason}" for p, reason in sorted(why)]
        lines += [("KNOWN " + f"{f.known} " if f.known else "FAIL ") + f"{f.mode} {f.prop} {f.check}: {f.message}"
                  + (f" (replay: {f.replay_file})" if f.replay_file else "") for f in self.failures]
        lines += [f"not run {mode}: the builder does not declare it (its modes: see its docstring)"
                  for mode in self.not_run]
        lines.append(self.coverage)
        known = len(self.failures) - len(self.unknown)
        verdict = (f"FAILS ({len(self.unknown)} failure(s))" if not self.ok else "holds" if not known
                   else f"holds apart from {known} known finding(s)")
        release = f" (SGLang {self.release})" if self.release else ""
        lines.append(f"dsa family, builder {self.builder}{release}, profile {self.profile}: {verdict} in "
                     f"{self.seconds:.1f}s")
        return "\n".join(lines)


    def to_dict(self) -> dict[str, Any]:
        """What the gate compares (``check --json PATH``): per mode, each property's verdict, and the failures."""
        return {"profile": self.profile, "builder": self.builder, "seconds": round(self.seconds, 3),
                "properties": list(self.properties), "not_run": list(self.not_run),
                "modes": {m.mode: {"examples": m.examples, "verdicts": {p: m.verdict(p) for p in self.properties}}
                          for m in self.modes},
                "failures": [{"mode": f.mode, "prop": f.prop, "check": f.check, "message": f.message,
                              "replay_file": f.replay_file} for f in self.failures]}


def _short(verdict: str) -> str:
    return verdict.replace("FAILS dsa.", "FAIL ").replace(" dsa.", " ")


def coverage_line(produced: Sequence[str]) -> str:
    """``fields judged / produced``: the judged fields the builder produced, and upstream's fields not judged."""
    judged = [name for name in FIELDS if name in produced]
    extra = sorted(set(produced) - set(FIELDS))
    return (f"coverage: {len(judged)}/{len(FIELDS)} judged fields produced and judged"
            + (f"; produced, not judged: {', '.join(extra)}" if extra else "")
            + f"; upstream fields not judged (CUDA-only, k-pool, prefill): {len(NOT_JUDGED)}")


def _settings(examples: int, shrink: bool) -> Any:
    from hypothesis import HealthCheck, Phase, settings

    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None, phases=phases,
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False)


def _search(subject_factory: Callable[[], Any], mode: str, props: tuple[str, ...], examples: int,
            shrink: bool, result: ModeResult, strategy: Any) -> tuple[PropertyFailure, DSABatch] | None:
    """One Hypothesis search of ``mode`` over ``props``; the (shrunk) failure and its batch, or None."""
    from hypothesis import given

    from metadata_builders.families.dsa.properties import check_all
    from metadata_builders.runs.profiles import seed_alone

    last: list[DSABatch] = []

    @_settings(examples, shrink)
    @given(strategy)
    def search(batch: DSABatch) -> None:
        last[:] = [batch]
        result.examples += 1
        for prop, notes in check_all(subject_factory(), batch, only=props).items():
            result.notes.setdefault(prop, set()).update(notes)

    try:
        with seed_alone():
            search()
    except PropertyFailure as exc:
        return exc, last[0]
    return None


def _write(failures_dir: str | Path | None, name: str, batch: DSABatch, failure: PropertyFailure) -> str | None:
    if failures_dir is None:
        return None
    path = Path(failures_dir) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(batch.to_json(why=str(failure), meta={"prop": failure.prop, "check": failure.check}) + "\n")
    return str(path)


def subject_factory(builder: Callable[..., Any] | None, device: str) -> Callable[[], Any]:
    """Makes ``builder`` (a factory; None: the bundled ``DSABuilder``) under the harness, a fresh subject a call."""
    from metadata_builders.families.dsa.audited import DSASubject
    from metadata_builders.families.dsa.builder import DSABuilder

    factory = builder or DSABuilder
    return lambda: DSASubject(factory, device)


def run_check(profile: str = "ci", *, builder: Callable[..., Any] | None = None, device: str = "cpu",
              modes: Sequence[str] | None = None, only: Sequence[str] | None = None, max_examples: int | None = None,
              failures_dir: str | Path | None = None, stop_at_first: bool = False, shrink: bool = True,
              progress: Callable[[str], None] | None = None) -> DSAReport:
    """Every property of the family (``only`` those) on every mode (``modes``) of ``builder``.

    ``builder``: a factory ``f(device=...)`` of a DSA builder (default the bundled ``DSABuilder``); ``profile``:
    :data:`PROFILES` (``max_examples`` overrides its examples per search); ``failures_dir``: write each failing
    (shrunk) batch there as a replay file; ``stop_at_first``: stop at the first failure (the mutant run).
    """
    from metadata_builders.builders.declarations import declared_modes
    from metadata_builders.families.dsa.properties import PROPERTIES
    from metadata_builders.families.dsa.strategies import dsa_batches

    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r} must be one of {sorted(PROFILES)}")
    examples = max_examples or PROFILES[profile]
    props = tuple(p for p in PROPERTIES if only is None or p in only)
    factory = subject_factory(builder, device)
    subject = factory()
    release = _release_of(subject)
    start = time.monotonic()
    results: list[ModeResult] = []
    declared = declared_modes(type(subject.inner), subject.name, known=MODES, default=MODES)
    for mode in modes or declared:
        result = ModeResult(mode)
        results.append(result)
        remaining = tuple(p for p in props if APPLIES.get(p, lambda m: None)(mode) is None)
        while remaining:
            found = _search(factory, mode, remaining, examples, shrink, result, dsa_batches(modes=[mode]))
            if found is None:
                break
            failure, batch = found
            path = _write(failures_dir, f"dsa-{mode}-{failure.prop}", batch, failure)
            result.failures.append(DSAFailure(mode, failure.prop, failure.check, str(failure), batch, path,
                                              known_finding(failure.check, release)))
            remaining = tuple(p for p in remaining if p != failure.prop)
            if stop_at_first:
                break
        if progress is not None:
            progress(f"{mode}: {result.examples} batches, " + ", ".join(f"{p} {result.verdict(p)}" for p in props))
        if stop_at_first and result.failures:
            break
    name = getattr(builder or _default(), "name", getattr(builder, "__name__", "builder"))
    report = DSAReport(profile, name, results, time.monotonic() - start, props, coverage_line(_produced(factory)),
                       release=release)
    report.not_run = [m for m in MODES if m not in declared]
    return report


def release_of(builder: Callable[..., Any] | None, device: str = "cpu") -> str | None:
    """The SGLang release ``builder`` (a factory, None: the bundled builder) runs, None when it is not upstream's."""
    return None if builder is None else _release_of(subject_factory(builder, device)())


def _release_of(subject: Any) -> str | None:
    """The SGLang release the builder runs (its ``release``): None for any builder that is not upstream's code."""
    release = getattr(subject.inner, "release", None)
    return release if isinstance(release, str) else None


def _default() -> Any:
    from metadata_builders.families.dsa.builder import DSABuilder

    return DSABuilder


def _produced(factory: Callable[[], Any]) -> list[str]:
    """The fields the builder returns on the worked example, eager target verify."""
    from metadata_builders.families.dsa.examples import worked_example
    from metadata_builders.families.dsa.variants import DSAVariant

    return list(factory().build(worked_example(), DSAVariant("eager")).fields)


def replay_file(path: str | Path, *, builder: Callable[..., Any] | None = None, device: str = "cpu",
                only: Sequence[str] | None = None) -> list[PropertyFailure]:
    """Every property (``only`` those) on the batch of a replay file, each on its own: the failures (empty: holds)."""
    from metadata_builders.families.dsa.properties import PROPERTIES

    batch = DSABatch.from_json(Path(path).read_text())
    factory = subject_factory(builder, device)
    out = []
    for prop, check in PROPERTIES.items():
        if only is not None and prop not in only:
            continue
        try:
            check(factory(), batch)
        except PropertyFailure as exc:
            out.append(exc)
    return out


@dataclass(frozen=True)
class MutantResult:
    """One mutant's run."""

    name: str
    killed: bool
    prop: str | None
    check: str | None
    mode: str | None
    examples: int
    seconds: float
    replay_file: str | None
    reproduced: bool
    """The replay file, run again on the mutant, fails the same property."""


def run_mutants(profile: str = "ci", *, only: Sequence[str] | None = None, failures_dir: str | Path | None = None,
                progress: Callable[[str], None] | None = None) -> list[MutantResult]:
    """Every mutant of the catalogue (``only`` those) through :func:`run_check`, stopping at its first failure."""
    from metadata_builders.families.dsa.mutants import MUTANTS
    from metadata_builders.families.dsa.mutants.patching import mutant_builder

    out = []
    for spec in MUTANTS:
        if only is not None and spec.name not in only:
            continue
        start = time.monotonic()
        factory = mutant_builder(spec.name)
        report = run_check(profile, builder=factory, modes=spec.modes, failures_dir=None, stop_at_first=True)
        failure = report.failures[0] if report.failures else None
        path, reproduced = None, False
        if failure is not None:
            exc = PropertyFailure(failure.prop, failure.message, check=failure.check)
            path = _write(failures_dir, f"dsa-mutant-{spec.name}", failure.batch, exc)
            if path is not None:
                reproduced = any(f.prop == failure.prop for f in replay_file(path, builder=factory,
                                                                             only=(failure.prop,)))
        examples = sum(m.examples for m in report.modes)
        result = MutantResult(spec.name, failure is not None, failure and failure.prop, failure and failure.check,
                              failure and failure.mode, examples, time.monotonic() - start, path, reproduced)
        out.append(result)
        if progress is not None:
            progress(f"{spec.name}: " + (f"killed by {result.prop} ({result.check}) in {result.mode} after "
                                         f"{examples} batches" if result.killed else "SURVIVED")
                     + f", {result.seconds:.1f}s")
    return out
