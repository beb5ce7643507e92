"""What ``check`` says about its runs besides the table: each failure reproduced on a fresh builder (and what
its replay file must carry), the known upstream findings among the failures, upstream coverage, the boundary
coverage table, JUnit."""

from __future__ import annotations

import contextlib
from typing import Any

from metadata_builders.families.dsv4.builders import registration
from metadata_builders.families.dsv4.runs.report import format_table, write_junit

__all__ = ["coverage_table", "gate_only_routes", "known_findings", "reproduced", "switch_lines", "sync_fault_table",
           "upstream_coverage", "write_check_junit"]


def reproduced(builder: Any, spec: Any, found: Any) -> tuple[dict, str | None]:
    """Replay the failure on a fresh builder before its file is written: what the file must carry to reproduce
    (its ``meta``), and a line for people when there is something to say."""
    from metadata_builders.families.dsv4.runs.reproduce import reproduce

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
    from metadata_builders.families.dsv4.runs.findings import known_finding

    return [known_finding(found.failure, found.batch) if upstream and found.batch else None for found in run.failures]


def coverage_table(runs) -> str:
    """Boundary hits per 100 generated examples; a boundary hit at all never reads 0 (``<1``), and each
    failing property's shrunk batch is marked with ``*`` on the boundaries it hits."""
    from metadata_builders.families.dsv4.strategies import COVERAGE_EVENTS, boundary_hits

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


def gate_only_routes(routes: tuple) -> tuple[list[str], tuple]:
    """Lines naming the routes only the gate runs (``Route.gate_only``), and the routes ``check`` runs itself."""
    named = [f"== route {r.label} ({r.what}): run by the gate only ({', '.join(r.properties) or 'all'}); "
             f"alone: check --builder {r.builder}" for r in routes if r.gate_only]
    return named, tuple(r for r in routes if not r.gate_only)


def switch_lines(builder: Any, *, why: bool) -> list[str]:
    """The upstream switches a builder of upstream's code does not run the other way (docs/SGLANG.md, "Environment
    switches"): every report names them; nothing for a builder that declares none."""
    lines = getattr(builder, "unjudged_switches", None)
    return lines(why=why) if callable(lines) else []


def sync_fault_table(builder: Any, batch: Any) -> str:
    """Each variant's build of ``batch``: whether it used output_size, its host syncs against the contract, its faults
    (``replay`` prints it under a failure)."""
    from metadata_builders.families.dsv4.reference import expected_host_syncs
    from metadata_builders.families.dsv4.variants import variants_for

    rows = []
    for variant in variants_for(batch):
        try:
            md = builder.build(batch, variant)
        except Exception as exc:  # noqa: BLE001 - shown in the table, the property above already failed
            rows.append([variant.label_in(batch.mode), "-", "-", f"raised {type(exc).__name__}", ""])
            continue
        want = len(expected_host_syncs(batch, variant))
        syncs = ", ".join(f"{s.op}@{s.stage}" for s in md.audit.host_syncs) or "none"
        faults = ", ".join(f"{f.kind} x{f.count}" for f in md.audit.faults) or "none"
        rows.append([variant.label_in(batch.mode), "yes" if md.decision.used_output_size else "no",
                     f"{len(md.audit.host_syncs)} (contract {want})", syncs, faults])
    return "syncs and faults per variant\n" + format_table(
        ["variant", "output_size", "host syncs", "ops", "faults"], rows
    )
