"""What ``check`` says about its runs besides the table: each failure reproduced on a fresh builder (and what
its replay file must carry), the known upstream findings among the failures, upstream coverage, the boundary
coverage table, JUnit."""

from __future__ import annotations

import contextlib
from typing import Any

from metadata_builders.builders import registration
from metadata_builders.runs.report import format_table, write_junit

__all__ = ["coverage_table", "known_findings", "reproduced", "upstream_coverage", "write_check_junit"]


def reproduced(builder: Any, spec: Any, found: Any) -> tuple[dict, str | None]:
    """Replay the failure on a fresh builder before its file is written: what the file must carry to reproduce
    (its ``meta``), and a line for people when there is something to say."""
    from metadata_builders.runs.reproduce import reproduce

    result = reproduce(builder, spec, found.batch, found.history)
    if not result.verified:
        return ({"reproduces_on_fresh_builder": None},
                f"  {spec.name}: not verified on a fresh builder ({builder.name} has no factory)")
    if result.history is None:
        return ({"reproduces_on_fresh_builder": False},
                f"  {spec.name}: WARNING: does not fail on a fresh builder, even after the {len(found.history)} "
                "batches built before it; the replay file alone will not reproduce it")
    meta = {"reproduces_on_fresh_builder": True, "history": [b.to_dict() for b in result.history]}
    if result.history:
        return meta, (f"  {spec.name}: fails on a fresh builder only after {len(result.history)} earlier batch(es) "
                      "(hidden state); the replay file carries them as its history")
    return meta, None


def write_check_junit(path: str, builder: str, runs: list) -> None:
    """One JUnit testcase per property: its time, the failure as the message, its notes."""
    cases = []
    for run in runs:
        msg = None if run.passed else "\n".join(str(found.failure) for found in run.failures)
        notes = "\n".join(run.notes)
        cases.append((f"{run.spec.name} {run.spec.title}", run.seconds, msg, notes))
    write_junit(path, f"metadata-builders[{builder}]", cases)


@contextlib.contextmanager
def upstream_coverage(family: str):
    """For a builder of upstream's code: the coverage of every upstream build of the run (fields judged / produced)."""
    if not registration(family).coverage:
        yield []
        return
    from metadata_builders.families.dsv4.sglang import coverage

    with coverage.recording() as builds:
        yield builds


def known_findings(upstream: bool, run) -> list[str | None]:
    """The known upstream finding each failure of a run is (upstream subjects only: findings describe upstream code)."""
    from metadata_builders.runs.findings import known_finding

    return [known_finding(found.failure, found.batch) if upstream and found.batch else None for found in run.failures]


def coverage_table(runs) -> str:
    """Boundary hits per 100 generated examples; a boundary hit at all never reads 0 (``<1``), and each
    failing property's shrunk batch is marked with ``*`` on the boundaries it hits."""
    from strategies import COVERAGE_EVENTS, boundary_hits

    failing = {run.spec.name: set(boundary_hits(run.batch)) for run in runs if run.batch is not None}
    rows = []
    for event in COVERAGE_EVENTS:
        cells = []
        for run in runs:
            hits = run.events.get(event, 0)
            share = 100.0 * hits / max(run.generated, 1)
            cell = "<1" if 0 < share < 0.5 else f"{share:.0f}"
            cells.append(cell + ("*" if event in failing.get(run.spec.name, ()) else ""))
        rows.append([event, *cells])
    legend = "; * = the failing batch hits it" if failing else ""
    return f"coverage: boundary hits per 100 generated examples{legend}\n" + format_table(
        ["boundary", *[r.spec.name for r in runs]], rows
    )


