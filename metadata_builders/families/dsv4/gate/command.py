"""``metadata-builders gate``: the command that puts the pieces together, and its options."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from typing import Any

from metadata_builders.errors import GateError
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.builders.registry import REGISTERED, Route, registration, routes_of
from metadata_builders.families.dsv4.gate import cache
from metadata_builders.families.dsv4.gate.corpus import (
    PER_KIND,
    build_corpus,
    corpus_size,
    write_corpus,
)
from metadata_builders.families.dsv4.gate.isolation import find_crash
from metadata_builders.families.dsv4.gate.model import Crash, Outcome, Side
from metadata_builders.families.dsv4.gate.refs import Worktrees, builder_side
from metadata_builders.families.dsv4.gate.replays import draw_pictures, write_replays
from metadata_builders.families.dsv4.gate.running import HANG_FACTOR, HANG_FLOOR, HangRule
from metadata_builders.families.dsv4.gate.shrink import shrink_examples
from metadata_builders.families.dsv4.gate.sides import log_tail, run_side, side_env
from metadata_builders.families.dsv4.gate.summary import GateResult, markdown, text
from metadata_builders.families.dsv4.gate.verdicts import classify, fill_not_judged, raise_setup_failure, setup_failures
from metadata_builders.families.dsv4.properties import PROPERTIES, PropertySpec
from metadata_builders.families.dsv4.gate.watched import (
    Change,
    SideTrace,
    Unjudged,
    change_of,
    changed_files,
    changed_lines,
    deleted_files,
    is_watched,
    not_run,
    unjudged_on_cpu,
)

__all__ = ["BATCH_TIMEOUT", "DEFAULT_FAILURES_DIR", "add_cli", "run_gate"]

BATCH_TIMEOUT = 600.0
"""Default per-batch limit in seconds: generous (a large batch under the Triton interpreter takes seconds)."""

SHRINK_SECONDS = 60.0
"""Default time to shrink one blocking property's example (each candidate is one evaluation at head)."""

DEFAULT_FAILURES_DIR = os.path.join("build", "metadata-builders", "failures")
"""Under ``build/``, which SGLang's ``.gitignore`` (like most Python projects') already ignores."""


def _say(line: str) -> None:
    print(line, flush=True)


def _sides(args: argparse.Namespace, workdir: str, trees: list[Worktrees]) -> tuple[Side, Side]:
    if args.base is not None:
        tree = Worktrees(os.path.abspath(args.repo))
        trees.append(tree)
        return tree.side("base", args.base, workdir, args.builder), tree.side("head", args.head, workdir, args.builder)
    return builder_side("base", args.base_builder), builder_side("head", args.head_builder)


def _validate(args: argparse.Namespace) -> list[PropertySpec]:
    """Every option checked before anything runs (a bad head builder is said in a second, not after the base)."""
    from metadata_builders.devices import usable_device
    from metadata_builders.families.dsv4.builders import check_builder_name, check_declarations

    props = _select(args.properties)
    usable_device(args.device, "--device")
    if args.per_kind is not None and args.examples is not None:
        raise GateError("--per-kind and --examples", "give one: batches of each kind, or batches in all")
    for option, value in (("--per-kind", args.per_kind), ("--examples", args.examples)):
        if value is not None and value < 1:
            raise GateError(option, f"{value} would make an empty corpus, and a gate that judges nothing is no "
                                    "verdict: give at least 1 (or leave it out for the profile's default)")
    if args.shrink_seconds < 0:
        raise GateError("--shrink-seconds", f"{args.shrink_seconds:g}: give 0 (no shrinking) or a positive number")
    for option, value in (("--batch-timeout", args.batch_timeout), ("--hang-floor", args.hang_floor)):
        if not value > 0:
            raise GateError(option, f"{value:g}: give a positive number of seconds")
    if args.workers != "auto" and not (args.workers.isdigit()):
        raise GateError("--workers", f"{args.workers!r}: give auto or a number of worker processes (0: none)")
    if args.base is not None and (args.base_builder or args.head_builder):
        raise GateError("--base with --base-builder/--head-builder", "choose one: --base REF [--head REF] compares "
                        "two refs of the checkout with --builder; --base-builder X --head-builder Y compares two "
                        "builders of this environment")
    if args.base is None:
        if args.head is not None:
            raise GateError("--head", "needs --base REF (the ref the change merges into)")
        if not (args.base_builder and args.head_builder):
            raise GateError("gate", "give --base REF (run from the backend's checkout), or --base-builder and "
                                    "--head-builder")
        for option, name in (("--base-builder", args.base_builder), ("--head-builder", args.head_builder)):
            check_builder_name(name, option)
            check_declarations(name, option)
    elif args.builder not in REGISTERED and ":" not in args.builder:
        check_builder_name(args.builder, "--builder")
    return props


def _probe(side: Side, workdir: str, names: list[str], device: str) -> subprocess.Popen:
    """Start making ``side``'s builder in a fresh process with the side's code (``evaluate --probe``)."""
    env = side_env(side, "", workdir, names, device)
    return subprocess.Popen([sys.executable, "-m", "metadata_builders.families.dsv4.gate.evaluate", "--probe"], env=env,
                            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _probed(side: Side, probe: subprocess.Popen) -> None:
    """The probe's verdict: a builder that cannot be made is a setup error naming the side."""
    out, _ = probe.communicate()
    if probe.returncode != 0:
        lines = [line for line in out.strip().splitlines() if line.strip()]
        raise GateError(f"{side.name} side ({side.label})", "its builder cannot be made: "
                        + (lines[-1] if lines else f"exited with status {probe.returncode}"))


class _Run:
    """One gate run's shared state: options, workdir, corpus, properties."""

    def __init__(self, args: argparse.Namespace, workdir: str, props: list[PropertySpec]) -> None:
        self.args, self.workdir, self.props = args, workdir, props
        self.names = [p.name for p in props]
        self.corpus: list[VerifyBatch] = []
        self.corpus_path = os.path.join(workdir, "corpus.jsonl")
        self.corpus_sha = ""
        self.cache_dir = cache.cache_dir(args.cache_dir)
        self.notes: list[str] = []
        self.unjudged: list[tuple[str, Unjudged]] = []
        """Files the change touches that the CPU gate cannot judge (:mod:`~.watched`)."""
        self.changed: list[str] = []
        self.deleted: set[str] = set()
        self.changes: dict[str, Change] = {}
        """Each changed watched Python file at head: the functions the change touches (gate/watched.py)."""
        self.traces: dict[str, SideTrace] = {}
        """Side name -> what its processes imported and ran of its tree, over every route (gate/trace.py)."""
        self._main: tuple[list[VerifyBatch], str, str] = ([], self.corpus_path, "")
        self._routes: dict[str, tuple[list[VerifyBatch], str, str]] = {}

    def draw(self) -> None:
        sizes = corpus_size(self.props, per_kind=self.args.per_kind, examples=self.args.examples,
                            profile=self.args.profile)
        start = time.perf_counter()
        self.corpus = build_corpus(self.props, sizes)
        self.corpus_sha = write_corpus(self.corpus, self.corpus_path)
        self._main = (self.corpus, self.corpus_path, self.corpus_sha)
        _say(f"  corpus: {len(self.corpus)} batches over {len(sizes)} kinds, {len(self.props)} properties each "
             f"(drawn in {time.perf_counter() - start:.0f}s)")

    def use(self, route: Route, props: list[PropertySpec]) -> None:
        """Judge ``route`` on the run's corpus, or on its own kinds (``Route.focuses``, drawn once): a route that
        turns an upstream switch on is judged where the switched path is reached, which the run's corpus seldom is."""
        if not route.focuses:
            self.corpus, self.corpus_path, self.corpus_sha = self._main
            return
        if route.label not in self._routes:
            specs = [replace(spec, focuses=route.focuses) for spec in props[:1]]
            sizes = corpus_size(specs, per_kind=self.args.per_kind, examples=self.args.examples,
                                profile=self.args.profile)
            batches = build_corpus(specs, sizes)
            path = os.path.join(self.workdir, f"corpus-{route.label}.jsonl")
            self._routes[route.label] = (batches, path, write_corpus(batches, path))
            _say(f"  corpus of route {route.label}: {len(batches)} batches over {len(sizes)} kinds of its own")
        self.corpus, self.corpus_path, self.corpus_sha = self._routes[route.label]

    def _cached(self, side: Side, names: list[str]) -> tuple[dict | None, list[Outcome] | None]:
        key = None if self.args.no_cache else cache.cache_key(side, self.corpus_sha, names, self.args.device)
        found = cache.load(self.cache_dir, key)
        if found is not None:
            trace = cache.load_trace(self.cache_dir, key)
            if trace is None or not set(side.traced) <= SideTrace.from_dict(trace).traced:
                return key, None  # measured for other files than this change's: evaluate again
            self._trace(side, SideTrace.from_dict(trace))
        if found is not None:
            _say(f"  {side.name}: {len(found)} outcomes from the cache ({self.cache_dir})")
        return key, found

    def _trace(self, side: Side, trace: SideTrace | None) -> None:
        if trace is not None:
            self.traces[side.name] = self.traces.get(side.name, SideTrace()).union(trace)

    def evaluate(self, side: Side, rule: HangRule, props: list[PropertySpec] | None = None
                 ) -> tuple[list[Outcome], Crash | None]:
        """A side's outcomes on ``props`` (default: all the run's; cached when it can be); a base that cannot
        complete is a setup error."""
        names = [p.name for p in props] if props is not None else self.names
        key, found = self._cached(side, names)
        if found is not None:
            return found, None
        args = self.args
        run = run_side(side, self.corpus_path, names, self.workdir, args.workers, args.device,
                       rule, len(self.corpus))
        if run.ending.completed and len(run.complete) == len(self.corpus):
            _say(f"  {side.name}: {len(run.outcomes)} (property, batch) outcomes in {run.seconds:.0f}s")
            if side.name == "base":
                raise_setup_failure(side, run.outcomes)
            self._trace(side, run.trace)
            cache.store(self.cache_dir, key, run.outcomes, run.trace.to_dict() if run.trace is not None else None)
            return run.outcomes, None
        what = f"{run.ending.describe()} after {len(run.complete)}/{len(self.corpus)} batches"
        if side.name == "base":
            raise GateError(f"base side ({side.label})", f"evaluation did not complete: {what}; the base must "
                            "complete for a verdict (its log, with --keep-workdir: "
                            f"{os.path.join(run.out, 'pytest.log')})\n"
                            f"{log_tail(run.ending.log)}")
        self._trace(side, run.trace)
        _say(f"  {side.name}: did not complete ({what}); running the {len(self.corpus) - len(run.complete)} "
             f"unfinished batches in isolation, smallest first")
        found_, crash = find_crash(side, self.corpus, self.corpus_path, run.complete, names, self.workdir,
                                   args.device, rule)
        if crash is None:
            self.notes.append(f"head's run did not complete ({what}), but every batch completed in isolation")
        outcomes = fill_not_judged(run.outcomes + found_, names, len(self.corpus),
                                   f"head {crash.what} on batch {crash.index}" if crash else "")
        return outcomes, crash


def _gate(args: argparse.Namespace, run: _Run, base: Side, head: Side, start: float) -> GateResult:
    probe = _probe(head, run.workdir, run.names, args.device)
    try:
        run.draw()
    finally:
        _probed(head, probe)
    verdicts, replays, crash = [], [], None
    # A builder name with several routes (sglang: triton and torch) is gated route by route; the
    # second route's rows are named P1-torch, ... (metadata_builders.families.dsv4.builders.registry).
    routes = routes_of(head.builder) if base.builder == head.builder else routes_of(head.builder)[:1]
    for route in routes:
        b, h = (base, head) if route.primary else (replace(base, builder=route.builder),
                                                    replace(head, builder=route.builder))
        if not route.primary:
            _say(f"  route {route.label}: {route.what}")
        props = [p for p in run.props if not route.properties or p.name in route.properties]
        if not props:
            continue
        run.use(route, props)
        base_outcomes, _ = run.evaluate(b, HangRule(args.batch_timeout), props)
        head_outcomes, crashed = run.evaluate(h, HangRule.from_base(args.batch_timeout, args.hang_floor, base_outcomes),
                                              props)
        run.notes += [f"{h.name}: {line}" for line in setup_failures(head_outcomes)]
        found = classify(run.corpus, props, base_outcomes, head_outcomes,
                         head_side_upstream=registration(head.builder).upstream)
        shrunk = shrink_examples(found, run.corpus, lambda side: side_env(h if side == "head" else b, run.corpus_path,
                                                                         run.workdir, [p.name for p in props],
                                                                         args.device),
                                 run.workdir, args.shrink_seconds) if any(pv.blocking for pv in found) else {}
        if shrunk:
            _say("  shrunk " + ", ".join(f"{prop}'s example in {steps} step(s)" for prop, (_, steps) in shrunk.items())
                 + " (head still fails the same check, base holds)")
        for pv in found:
            pv.route = "" if route.primary else route.label
        shrunk = {pv.row: shrunk[pv.prop] for pv in found if pv.prop in shrunk}
        written = write_replays(found, crashed, run.corpus, _failures_dir(args), h, shrunk)
        verdicts, replays, crash = verdicts + found, replays + written, crash or crashed
    run.corpus, run.corpus_path, run.corpus_sha = run._main
    if replays and not args.no_pictures:
        _say(f"  drawing the smallest batch of {len(replays)} blocking result(s)")
        env = side_env(head, run.corpus_path, run.workdir, run.names, args.device)
        draw_pictures(replays, env, args.device, args.batch_timeout)
    head_trace, base_trace = run.traces.get("head"), run.traces.get("base")
    unrun = not_run(run.changes, run.deleted, head_trace or SideTrace(), base_trace or SideTrace()) \
        if head.root is not None else []
    switches = head_trace.switches if head_trace is not None else []
    return GateResult(base, head, len(run.corpus), verdicts, crash, replays, time.perf_counter() - start, run.notes,
                      run.unjudged if args.device == "cpu" else [], unrun, switches)


def _changes(repo: str, args: argparse.Namespace, head: Side, run: _Run) -> dict[str, Change]:
    """What the change does to each watched Python file that exists at head: its functions, its module level."""
    found = {}
    for path in run.changed:
        if not (is_watched(path, "dsv4") and path.endswith(".py")) or path in run.deleted or head.root is None:
            continue
        try:
            with open(os.path.join(head.root, path)) as fh:
                source = fh.read()
        except OSError:
            continue
        found[path] = change_of(source, changed_lines(repo, args.base, args.head, path))
    return found


def _failures_dir(args: argparse.Namespace) -> str:
    if args.failures_dir:
        return args.failures_dir
    from metadata_builders.runs.profiles import ignored_dir, work_dir

    if args.base:
        # build/metadata-builders/ ignores itself: a later gate must not see it as the head's uncommitted change.
        ignored_dir(os.path.join(os.path.abspath(args.repo), os.path.dirname(DEFAULT_FAILURES_DIR)))
        return os.path.join(os.path.abspath(args.repo), DEFAULT_FAILURES_DIR)

    return work_dir("failures")


def _raise_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def run_gate(args: argparse.Namespace) -> int:
    """The command; SIGTERM (a cancelled CI job) unwinds like Ctrl-C, so children and worktrees are cleaned up."""
    if threading.current_thread() is not threading.main_thread():
        return _run_gate(args)
    previous = signal.signal(signal.SIGTERM, _raise_exit)
    try:
        return _run_gate(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_gate(args: argparse.Namespace) -> int:
    props = _validate(args)
    workdir = tempfile.mkdtemp(prefix="metadata-builders-gate-")
    trees: list[Worktrees] = []
    try:
        base, head = _sides(args, workdir, trees)
        builders = f"builder {base.builder}" if base.builder == head.builder else \
            f"builders {base.builder} (base) and {head.builder} (head)"
        _say(f"metadata-builders gate: base = {base.label}, head = {head.label}; {builders}, "
             f"profile {args.profile}, workers {args.workers}, hang after {HANG_FACTOR:g}x a batch's base time "
             f"(at least {args.hang_floor:g}s, at most {args.batch_timeout:g}s)")
        run = _Run(args, workdir, props)
        if args.base is not None:
            run.changed = changed_files(trees[0].repo, args.base, args.head)
            run.deleted = deleted_files(trees[0].repo, args.base, args.head)
            run.unjudged = unjudged_on_cpu(run.changed)
            run.changes = _changes(trees[0].repo, args, head, run)
            head = replace(head, traced=tuple((path, first) for path, change in run.changes.items()
                                              for first in change.functions))
        result = _gate(args, run, base, head, time.perf_counter())
    finally:
        for tree in trees:
            tree.remove()
        if args.keep_workdir:
            _say(f"workdir kept: {workdir} (corpus.jsonl, each side's outcomes and logs)")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    _say(text(result))
    _write_summaries(args, result)
    if args.junit_xml:
        _write_junit(args.junit_xml, result)
    if not result.red and result.judged == 0:
        return 2  # nothing was judged: never GREEN (the verdict line says why)
    return 1 if result.red else 0


def _write_junit(path: str, result: GateResult) -> None:
    """One testcase per property (and one for a crash at head), the not-judged part in its output."""
    from metadata_builders.families.dsv4.runs.report import write_junit

    cases = [(f"{pv.row} {pv.title}", pv.seconds, f"new failures: {pv.summary()}" if pv.blocking else None,
              pv.summary() + (f"\nnot judged: {pv.not_judged()}" if pv.not_judged() else ""))
             for pv in result.verdicts]
    if result.crash is not None:
        cases.insert(0, ("crash the head's process survives every batch", 0.0, result.rows()[0][3], ""))
    if result.not_run:
        cases.append(("files the gate ran of the change", 0.0, "not run by the gate: " + ", ".join(
            f"{path} ({why})" for path, why in result.not_run), ""))
    write_junit(path, "metadata-builders gate", cases)


def _write_summaries(args: argparse.Namespace, result: GateResult) -> None:
    """``--summary-md PATH`` (pictures linked relative to it) and ``$GITHUB_STEP_SUMMARY`` (appended)."""
    if args.summary_md:
        directory = os.path.dirname(os.path.abspath(args.summary_md))
        os.makedirs(directory, exist_ok=True)
        with open(args.summary_md, "w") as fh:
            fh.write(markdown(result, relative_to=directory))
        _say(f"summary: {args.summary_md}")
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a") as fh:
            fh.write(markdown(result, relative_to=None))


def _select(names: str | None) -> list[PropertySpec]:
    if not names:
        return list(PROPERTIES)
    known = {p.name: p for p in PROPERTIES}
    wanted = [n.strip().upper() for n in names.split(",") if n.strip()]
    bad = [n for n in wanted if n not in known]
    if bad:
        raise GateError("--properties", f"unknown {bad}; choose from {sorted(known)}")
    return [known[n] for n in wanted]


def add_cli(sub: Any) -> None:
    """Register ``gate`` on the CLI's subparsers."""
    p = sub.add_parser("gate", help="differential pre-merge gate: base ref vs head on the same examples; "
                                    "exit 1 only on what head breaks")
    p.add_argument("--base", default=None, metavar="REF", help="the ref the change merges into (e.g. origin/main)")
    p.add_argument("--head", default=None, metavar="REF", help="the code under review (default: the checkout itself)")
    p.add_argument("--repo", default=".", metavar="PATH", help="the SGLang checkout (default: the current directory)")
    p.add_argument("--builder", default="sglang", help="builder run on both sides (default sglang)")
    p.add_argument("--base-builder", default=None, metavar="NAME",
                   help="without --base: compare two builders in this environment (e.g. hip vs a module:attr)")
    p.add_argument("--head-builder", default=None, metavar="NAME", help="see --base-builder")
    p.add_argument("--profile", default="ci", choices=sorted(PER_KIND),
                   help="corpus size: " + ", ".join(f"{k} {v}" for k, v in PER_KIND.items()) + " batches per kind")
    p.add_argument("--per-kind", type=int, default=None, metavar="N",
                   help="batches of each kind the properties focus on (overrides the profile)")
    p.add_argument("--examples", type=int, default=None, help="corpus size in all, spread over the kinds")
    p.add_argument("--properties", default=None, help="comma-separated subset, e.g. P1,P4 (default: all)")
    p.add_argument("--workers", "-n", default="auto", help="pytest-xdist workers per side (default auto)")
    p.add_argument("--device", default="cpu", help="the device the builders run on: cpu (default) | auto | cuda | "
                                                   "cuda:N (auto: each xdist worker its own GPU)")
    p.add_argument("--batch-timeout", type=float, default=BATCH_TIMEOUT, metavar="SECONDS",
                   help=f"per-batch ceiling: a batch running longer is a hang (default {BATCH_TIMEOUT:g}); at head a "
                        f"batch is hung sooner, after {HANG_FACTOR:g}x what it took at base")
    p.add_argument("--hang-floor", type=float, default=HANG_FLOOR, metavar="SECONDS",
                   help=f"a head batch is never called hung before this (default {HANG_FLOOR:g}: a loaded machine "
                        "is slower than the base's timing)")
    p.add_argument("--junit-xml", default=None, metavar="PATH", help="one JUnit testcase per property")
    p.add_argument("--summary-md", default=None, metavar="PATH",
                   help="write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set)")
    p.add_argument("--failures-dir", default=None, metavar="DIR",
                   help=f"where new failures' replay files and pictures go (default {DEFAULT_FAILURES_DIR} "
                        "in the checkout with --base: ignored by SGLang's .gitignore; .metadata-builders/failures "
                        "otherwise)")
    p.add_argument("--no-pictures", action="store_true", help="do not draw the smallest batches")
    p.add_argument("--shrink-seconds", type=float, default=SHRINK_SECONDS, metavar="SECONDS",
                   help=f"time to shrink each blocking property's example with head's code before its replay file is "
                        f"written (default {SHRINK_SECONDS:g}; 0: keep the smallest corpus batch as drawn)")
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="where side results are cached (default $METADATA_BUILDERS_CACHE or "
                        "~/.cache/metadata-builders/gate; delete it to clear)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write cached side results")
    p.add_argument("--keep-workdir", action="store_true", help="keep the corpus, outcomes and pytest logs")
    p.set_defaults(func=run_gate)
