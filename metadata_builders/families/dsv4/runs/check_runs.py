"""``check``'s property runs: in order in this process, or side by side on worker processes.

``check --workers 1`` runs each property in turn, with a progress line on
stderr.  Each property's Hypothesis run is independent of the others (its own
examples, derandomized under ``ci``), so ``check --workers N`` hands them to
``N`` processes and prints the table as a sequential run would.  Longest first
(by the ``ci`` profile's measured times), so two workers finish together:

    P5 18 s, P2 15 s, P1 13 s, P7 10 s, P9/P8 5 s, P6/P4 4 s, P3 3 s   (hip, 2 cores)
    each worker takes the longest property left when it frees: 40 s of work each
    check --profile ci: 79.8 s wall in one process, 42.6 s on two workers

Workers are spawned (not forked: torch's thread pools do not survive a fork),
each imports the harness once (about 3 s) and builds its own builder.  A worker
that dies (killed, out of memory, a crash in native code) fails the properties
it had not returned, each saying how to rerun it alone.  ``--builder sglang``
workers return each property's combined coverage.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from metadata_builders.errors import UsageError

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.properties import PropertySpec

__all__ = ["check_settings", "resolve_workers", "run_check_in_workers", "run_in_order", "run_in_workers"]


def _progress_line(text: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + text)
    else:
        sys.stderr.write(text + "\n")
    sys.stderr.flush()


def check_settings(args: Any) -> Any:
    """The profile's settings with ``--max-examples`` and ``--github-artifacts`` applied."""
    from metadata_builders.runs.profiles import example_database, load_profile

    settings_ = load_profile(args.profile)
    overrides = {}
    if args.max_examples is not None and args.max_examples < 1:
        raise UsageError("--max-examples", "a positive number of examples per focused run", args.max_examples)
    if args.max_examples is not None:
        overrides["max_examples"] = args.max_examples
    if args.github_artifacts:
        overrides["database"] = example_database(args.github_artifacts, local=args.profile != "ci")
    if overrides:
        from hypothesis import settings

        settings_ = settings(settings_, **overrides)
    return settings_


class _Ticker:
    """Progress of a running property: a terminal gets every update on one line; a CI log one line per 10 s."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, run: Any) -> None:
        now = time.perf_counter()
        if not sys.stderr.isatty() and now - self.last < 10.0:
            return
        self.last = now
        state = "FAILING, shrinking" if run.failure is not None or run.examples_to_failure else "running"
        _progress_line(f"  {run.spec.name} {run.spec.title}: {run.examples} examples ({state})")


def run_in_order(props: list[PropertySpec], builder: Any, settings_: Any) -> list:
    """Each property's run, in order, with a progress line per property on stderr."""
    from metadata_builders.families.dsv4.runs.runner import run_property

    runs = []
    tick = _Ticker()
    for spec in props:
        run = run_property(spec, builder, settings_, progress=tick)
        runs.append(run)
        _finished(run)
    return runs


def _finished(run: Any) -> None:
    status = "ok" if run.passed else "FAIL"
    _progress_line(f"  {run.spec.name} {run.spec.title}: {status} after {run.examples} examples in {run.seconds:.1f}s")
    if sys.stderr.isatty():
        sys.stderr.write("\n")


_COST = {"P5": 18, "P2": 15, "P1": 13, "P7": 10, "P9": 5, "P8": 5, "P6": 4, "P4": 4, "P3": 3}
"""Seconds each property took under ``check --profile ci`` on the bundled builder (2 cores): the schedule."""


def resolve_workers(spelled: str, device: str, properties: int) -> int:
    """``auto``: one per core, at most one per property; on a GPU one (``--workers N`` to share it)."""
    if spelled == "auto":
        if device.startswith("cuda"):
            return 1
        return max(1, min(os.cpu_count() or 1, properties))
    try:
        workers = int(spelled)
    except ValueError:
        raise UsageError("--workers", "'auto' or a positive integer", repr(spelled)) from None
    if workers < 1:
        raise UsageError("--workers", "'auto' or a positive integer", repr(spelled))
    return min(workers, properties)


@dataclass(frozen=True)
class _Job:
    """What a worker needs to make its builder and settings (plain values: they cross a process boundary)."""

    builder: str
    device: str
    profile: str
    max_examples: int | None
    github_artifacts: str | None
    coverage: bool


_WORKER: dict[str, Any] = {}


def _start(job: _Job) -> None:
    import contextlib
    import types

    import torch
    from hypothesis.configuration import set_hypothesis_home_dir

    from metadata_builders.families.dsv4.builders import get_builder
    from metadata_builders.runs.profiles import work_dir

    torch.set_num_threads(1)
    set_hypothesis_home_dir(work_dir("hypothesis"))  # this worker process's: Hypothesis' caches in the hidden folder
    args = types.SimpleNamespace(profile=job.profile, max_examples=job.max_examples,
                                 github_artifacts=job.github_artifacts)
    _WORKER["settings"] = check_settings(args)
    _WORKER["builder"] = get_builder(job.builder, job.device)
    _WORKER["builds"] = None
    if job.coverage:
        from metadata_builders.families.dsv4.sglang import coverage

        stack = _WORKER["stack"] = contextlib.ExitStack()
        _WORKER["builds"] = stack.enter_context(coverage.recording())


def _run(name: str) -> tuple[Any, Any]:
    """One property in this worker: its run, and the coverage of its upstream builds combined per mode (or None)."""
    from metadata_builders.families.dsv4.properties import PROPERTIES
    from metadata_builders.families.dsv4.runs.runner import run_property

    spec = next(p for p in PROPERTIES if p.name == name)
    run = run_property(spec, _WORKER["builder"], _WORKER["settings"], progress=_Ticker())
    _finished(run)
    builds = _WORKER["builds"]
    combined = None
    if builds:
        from metadata_builders.families.dsv4.sglang.coverage import by_mode

        combined = by_mode(builds)
        builds.clear()
    return run, combined


def run_in_workers(names: list[str], job: _Job, workers: int) -> tuple[dict[str, Any], list[Any]]:
    """Each property's run by name, and the coverage each returned, from ``workers`` spawned processes."""
    order = sorted(names, key=lambda name: -_COST.get(name, 10))
    context = multiprocessing.get_context("spawn")
    runs: dict[str, Any] = {}
    covered: list[Any] = []
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start, initargs=(job,)) as pool:
        futures = {name: pool.submit(_run, name) for name in order}
        for name in order:
            try:
                run, combined = futures[name].result()
            except BrokenProcessPool as exc:
                runs[name] = _died(name, exc)
                continue
            runs[name] = run
            if combined is not None:
                covered.extend(combined)
    return runs, covered


def run_check_in_workers(args: Any, names: list[str], workers: int, family: str) -> tuple[list, list]:
    """``check``'s runs of ``names`` (in that order) on ``workers`` processes, and upstream coverage."""
    from metadata_builders.families.dsv4.builders import registration

    job = _Job(args.builder, args.device, args.profile, args.max_examples, args.github_artifacts,
               registration(family).coverage)
    runs, covered = run_in_workers(names, job, workers)
    return [runs[name] for name in names], covered


def _died(name: str, exc: BaseException) -> Any:
    """A failed run for a property whose worker ended without a result."""
    from metadata_builders.errors import PropertyFailure
    from metadata_builders.families.dsv4.properties import PROPERTIES
    from metadata_builders.families.dsv4.runs.runner import PropertyRun

    spec = next(p for p in PROPERTIES if p.name == name)
    why = str(exc) or type(exc).__name__
    return PropertyRun(spec, failure=PropertyFailure(
        name, f"its worker process died ({why}); rerun it alone: --properties {name} --workers 1",
        check="run.worker_died"))
