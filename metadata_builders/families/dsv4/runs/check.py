"""``check``'s use case: every property on a builder (each of its routes), the replay files, the verdict.

:func:`check` takes the parsed command line and a writer for its lines (the CLI passes ``print``), and returns one
:class:`CheckReport`: the exit code and what ran and failed.  Worked example: ``--builder sglang`` is two routes, so
``check`` runs the ``triton`` route then the ``torch`` route, each with its own table, replay files under
``<failures-dir>/torch`` for the second, and ends with one line per route; the report's code is the worst route's.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from metadata_builders.devices import usable_device
from metadata_builders.errors import UsageError
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.builders import get_builder, routes_of
from metadata_builders.families.dsv4.properties import PROPERTIES, PropertySpec
from metadata_builders.families.dsv4.runs.check_report import (
    coverage_table,
    gate_only_routes,
    known_findings,
    reproduced,
    switch_lines,
    upstream_coverage,
    write_check_junit,
)
from metadata_builders.families.dsv4.runs.check_runs import (
    check_settings,
    resolve_workers,
    run_check_in_workers,
    run_in_order,
)
from metadata_builders.families.dsv4.runs.report import (
    capabilities_line,
    format_table,
    modes_table,
    replay_command,
    runner_line,
    stores_line,
    streams_line,
    write_replay_file,
)

__all__ = ["CheckReport", "check", "picture", "select_properties"]

Out = Callable[[str], None]
"""Where ``check`` writes a line (the CLI: ``print`` with flush)."""


@dataclass
class CheckReport:
    """What one ``check`` (or one route of it) ended with."""

    code: int
    """0 every property held; 1 one failed; 2 nothing was judged."""
    ran: int = 0
    """Properties run."""
    failed: list[str] = field(default_factory=list)
    """The properties that failed (``["nothing judged"]`` when nothing was)."""
    replay_files: list[tuple[str, str, bool]] = field(default_factory=list)
    """(property, path, reproduced on a fresh builder) of each replay file written."""

    def summary(self) -> str:
        """What the overall line adds: the properties that failed, or how many held."""
        return ("failed: " + ", ".join(self.failed)) if self.failed else f"{self.ran} properties, none failed"


def select_properties(names: str | None) -> list[PropertySpec]:
    """``--properties P1,P6`` as specs (all when none is named); an unknown name is a usage error."""
    if not names:
        return list(PROPERTIES)
    wanted = [n.strip().upper() for n in names.split(",") if n.strip()]
    known = {p.name: p for p in PROPERTIES}
    bad = [n for n in wanted if n not in known]
    if bad:
        raise UsageError("--properties", f"choose from {sorted(known)}", f"unknown {bad}")
    return [known[n] for n in wanted]


def check(args: argparse.Namespace, out: Out) -> CheckReport:
    """Every property on ``--builder``; a name with several routes (``sglang``) runs each, one table per route.

    One harness session around it all: torch and Hypothesis are as they were when it returns.
    """
    from metadata_builders.harness import harness_session
    from metadata_builders.runs.profiles import work_dir

    args.device = usable_device(args.device)  # before anything runs: a job without its GPU stops here, exit 2
    check_settings(args)
    if args.failures_dir is None:
        args.failures_dir = work_dir("failures")
    with harness_session(hypothesis_home=work_dir("hypothesis")):
        return _routes(args, out)


def _routes(args: argparse.Namespace, out: Out) -> CheckReport:
    routes = routes_of(args.builder)
    if len(routes) == 1:
        report = _one(args, args.builder, out)
        out("")
        out(f"check --builder {args.builder}: " + {0: "held", 2: "NOTHING JUDGED"}.get(report.code, "FAILED")
            + f" ({report.summary()})")
        return report
    reports = []
    named, routes = gate_only_routes(routes)
    for line in named:
        out(line)
    for route in routes:
        out(f"== route {route.label} ({route.what}): --builder {route.builder}")
        junit = args.junit_xml and (args.junit_xml if route.primary else
                                    os.path.splitext(args.junit_xml)[0] + f"-{route.label}.xml")
        failures = args.failures_dir if route.primary else os.path.join(args.failures_dir, route.label)
        reports.append(_one(argparse.Namespace(**{**vars(args), "builder": route.builder, "junit_xml": junit,
                                                  "failures_dir": failures}), args.builder, out))
        out("")
    out(f"check --builder {args.builder}: " + ", ".join(
        f"route {route.label} {'held' if r.code == 0 else 'FAILED'}" for route, r in zip(routes, reports)))
    return CheckReport(max(r.code for r in reports), sum(r.ran for r in reports),
                       [f for r in reports for f in r.failed], [f for r in reports for f in r.replay_files])


def _rows(args: argparse.Namespace, runs: list, known: dict[str, list[str | None]], builder,
          out: Out) -> tuple[list, list[tuple[str, str, bool]]]:
    """The result table's rows, and a replay file (with a picture when it can) per failure (one per mode at most),
    each with whether it reproduced on a fresh builder (a file that did not is listed apart)."""
    rows = []
    replay_files: list[tuple[str, str, bool]] = []
    for run in runs:
        labels = known[run.spec.name]
        status = f"FAILED (known {', '.join(labels)})" if labels and all(labels) else run.status
        rows.append([run.spec.name, run.spec.title, run.examples, len(run.failures), f"{run.seconds:.1f}s", status])
        for found in (f for f in run.failures if f.batch is not None):
            meta, said = reproduced(builder, run.spec, found)
            if said:
                out(said)
            path = write_replay_file(args.failures_dir, run.spec.name, found.batch, found.failure, args.builder, meta)
            replay_files.append((run.spec.name, path, meta["reproduces_on_fresh_builder"] is not False))
            history = [VerifyBatch.from_dict(d) for d in meta.get("history", [])]
            picture(path, found.batch, args.builder, args.device, out, found.failure, history)
    return rows, replay_files


def _one(args: argparse.Namespace, family: str, out: Out) -> CheckReport:
    """``check`` on one builder; ``family`` is the name the user gave (one of its routes, or itself)."""
    settings_ = check_settings(args)
    _one_torch_thread()
    builder = get_builder(args.builder, args.device)
    props = select_properties(args.properties)
    workers = resolve_workers(args.workers, args.device, len(props))  # a bad --workers is refused before the header
    out(f"metadata-builders check: builder={args.builder} device={args.device} "
        f"profile={args.profile} max_examples={settings_.max_examples} properties={','.join(p.name for p in props)}")
    out(capabilities_line(builder.capabilities))
    for line in switch_lines(builder, why=False):
        out(line)
    if workers > 1:
        out(f"  {len(props)} properties on {workers} worker processes (--workers 1: one process, in order)")
        runs, builds = run_check_in_workers(args, [p.name for p in props], workers, family)
    else:
        with upstream_coverage(family) as builds:
            runs = run_in_order(props, builder, settings_)
    known = {run.spec.name: known_findings(builder.capabilities.upstream, run) for run in runs}
    rows, replay_files = _rows(args, runs, known, builder, out)
    out("")
    out(format_table(["property", "what", "examples", "failures", "time", "result"], rows))
    if (by_mode := modes_table([(r.spec.name, r.judged_by_mode) for r in runs], builder.capabilities)) is not None:
        out("\n" + by_mode)
    _tally_lines(args, runs, builds, out)
    _failure_lines(args, runs, known, replay_files, out)
    if args.junit_xml:
        write_check_junit(args.junit_xml, args.builder, runs)
        out(f"JUnit XML: {args.junit_xml}")
    for line in switch_lines(builder, why=True):
        out(line)
    report = CheckReport(0 if all(r.passed for r in runs) else 1, len(runs),
                         [r.spec.name for r in runs if not r.passed], replay_files)
    if all(r.passed for r in runs) and not any(sum(r.judged_by_mode.values()) for r in runs):
        out("")
        out(f"NOTHING JUDGED: every example was 'not applicable' to builder {args.builder} (it declares modes = "
            f"{builder.capabilities.modes!r}); a run that judged nothing is no green (exit 2)")
        report.code, report.failed = 2, ["nothing judged"]
    return report


def _tally_lines(args: argparse.Namespace, runs: list, builds, out: Out) -> None:
    """The coverage of upstream's fields, the runner's, the stores' and the streams' tallies, the boundary hits."""
    if builds:
        from metadata_builders.families.dsv4.sglang.coverage import report_lines

        for line in report_lines(builds):
            out(line)
    for line in filter(None, [*map(runner_line, runs), *map(stores_line, runs), streams_line(runs)]):
        out(line)
    if args.show_coverage:
        out("")
        out(coverage_table(runs))
    for run in runs:
        if run.partial is not None:
            out(f"{run.spec.name} partial: {run.partial}")


def _failure_lines(args: argparse.Namespace, runs: list, known: dict[str, list[str | None]],
                   replay_files: list[tuple[str, str, bool]], out: Out) -> None:
    """Each failure with its mode, the replay commands (apart: the files that did not reproduce), the known note."""
    for run in (r for r in runs if not r.passed):
        out("")
        for found in run.failures:
            mode = f" (mode {found.batch.mode})" if found.batch is not None else ""
            out(f"{run.spec.name} FAILED{mode}: {found.failure}")
    for name, path, reproduces in replay_files:
        if reproduces:
            out(f"  replay {name}: {replay_command(path, args.builder)}")
    if not all(reproduces for _, _, reproduces in replay_files):
        out("  did NOT reproduce on a fresh builder (the file alone does not show the failure: state or "
            "nondeterminism it does not carry; replay says so):")
        for name, path, reproduces in replay_files:
            if not reproduces:
                out(f"    replay {name}: {replay_command(path, args.builder)}")
    if any(any(labels) for labels in known.values()):
        out("")
        out("Failures marked 'known' are upstream findings explained in docs/FINDINGS.md. check stops a property's "
            "mode at its first failure; for a verdict that sees past them, `metadata-builders gate` compares a "
            "change with its base on every example.")


def _one_torch_thread() -> None:
    """Target-verify tensors are tiny: intra-op threads only contend (measured: 3x slower builds on 2 busy cores)."""
    import torch

    torch.set_num_threads(1)


def picture(path: str, batch: VerifyBatch, builder_name: str, device: str, out: Out, failure=None,
            history: Sequence[VerifyBatch] = ()) -> None:
    """The batch's picture beside its replay file, when matplotlib is installed; never hides the failure."""
    try:
        from metadata_builders.families.dsv4.render import render_files
    except ImportError:
        return
    try:
        for drawn in render_files(batch, path, builder_name=builder_name, device=device, failure=failure,
                                  history=history):
            out(f"  picture: {drawn}")
    except Exception as exc:  # noqa: BLE001 - a picture is a convenience; never hide the failure itself
        out(f"  (no picture: {type(exc).__name__}: {exc})")
