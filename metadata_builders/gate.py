"""``metadata-builders gate``: the differential pre-merge gate (DESIGN.md section 5).

Run from the backend's checkout on a pull request, it tests the code under
review against the base it would merge into, on the *same* examples:

1. **a corpus** of derandomized batches drawn from every kind the properties
   focus on (``PropertySpec.focuses``: any batch, ragged on a graph tier, uniform,
   graph, diverging), each kind with its own fixed seed, written once to
   ``corpus.jsonl`` -- so both sides see identical batches and two runs of the
   gate see identical verdicts and replay files;
2. **two sides**: the base ref (a ``git worktree``) and the head (the checkout,
   or another ref), each a pytest run of :mod:`metadata_builders.gate_items`
   with SGLang imported from that side's ``python/`` tree (``PYTHONPATH``), spread
   over pytest-xdist workers, one chunk of the corpus per test item.  Every
   property is evaluated on every batch it applies to, each build shared between
   the properties (:class:`~metadata_builders.builders.MemoBuilder`): a failure
   never stops the search, so a known failure cannot mask another;
3. **verdicts** per (property, batch): ``new`` (held at base, fails at head),
   also when both fail but head has a difference base did not have -- every
   difference from the reference for P1, the failure's place for the others --,
   ``changed`` (fails at both, head with fewer differences: part fixed),
   ``pre-existing`` (fails the same way at both; a finding id when
   :mod:`metadata_builders.findings` knows it), ``fixed``.  ``new`` blocks.

Worked example: head drops the dspark gate.  Base holds P4 on all 100 batches;
head fails 41 of them (``decision.used_output_size``): P4 is ``NEW 41/100``, the
smallest of the 41 is written as ``failures/P4-<hash>.json`` with the command that
replays it, the gate exits 1.  P6's F2c batches fail at both sides the same way:
``pre-existing (F2c)``, listed, not blocking.

Exit codes: 0 green, 1 a new failure, 2 bad usage or a setup error (an unknown
ref, a tree without ``python/sglang``, an adapter that cannot find an upstream
piece, a side whose evaluation crashed).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

from metadata_builders.batch import VerifyBatch
from metadata_builders.errors import GateError
from metadata_builders.properties import PROPERTIES, PropertySpec

__all__ = ["GateError", "Outcome", "Side", "build_corpus", "classify", "corpus_focuses", "run_gate"]

CHUNKS = 16
"""Test items per side: enough for xdist to balance two to eight workers."""

ENV_CORPUS, ENV_OUT, ENV_BUILDER, ENV_DEVICE, ENV_PROPERTIES = (
    "MB_GATE_CORPUS", "MB_GATE_OUT", "MB_GATE_BUILDER", "MB_GATE_DEVICE", "MB_GATE_PROPERTIES")
"""How ``metadata-builders gate`` tells each side's pytest run (and its xdist workers) what to run."""


@dataclass(frozen=True)
class Outcome:
    """One property on one corpus batch, at one side."""

    prop: str
    index: int
    """Position of the batch in the corpus."""
    status: Literal["held", "failed", "partial", "not applicable"]
    signature: tuple[str, ...] = ()
    """What failed, stable across runs and sides, as ``variant|field`` entries (values left out): every
    difference from the reference for P1, the failure's place for the others."""
    message: str = ""
    why: str = ""
    """For ``partial``: the reason."""
    field: str = ""
    """The field of the (first) failure, as ``PropertyFailure.field`` names it."""

    def to_dict(self) -> dict[str, Any]:
        return {"prop": self.prop, "index": self.index, "status": self.status, "signature": list(self.signature),
                "message": self.message, "why": self.why, "field": self.field}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        return cls(d["prop"], d["index"], d["status"], tuple(d["signature"]), d["message"], d["why"], d["field"])


@dataclass(frozen=True)
class Side:
    """One side of the comparison: a builder, imported with ``pythonpath`` first on ``sys.path``."""

    name: str
    """``base`` or ``head``."""
    builder: str
    """A ``get_builder`` name: ``sglang`` for a gate on SGLang's code."""
    pythonpath: str | None = None
    """The side's ``python/`` tree (SGLang imported from there), or None for the environment's."""
    label: str = ""
    """What the side is, for people: a ref and commit, or a builder name."""


# -- the corpus ----------------------------------------------------------------------------------


def corpus_focuses(props: Iterable[PropertySpec]) -> list[dict[str, Any]]:
    """The distinct batch kinds the properties focus on, in property order."""
    focuses: list[dict[str, Any]] = []
    for spec in props:
        for focus in spec.focuses:
            if focus not in focuses:
                focuses.append(focus)
    return focuses


def build_corpus(props: Iterable[PropertySpec], examples: int) -> list[VerifyBatch]:
    """``examples`` batches, spread evenly over the properties' focuses, each focus with its own seed.

    Generation only (no verdicts), so the corpus depends on no builder and is the
    same at every run: a focus's seed is ``crc32("gate/<focus>")``.
    """
    from hypothesis import HealthCheck, Phase, given, seed, settings

    from strategies import verify_batches

    focuses = corpus_focuses(props)
    corpus: list[VerifyBatch] = []
    for index, focus in enumerate(focuses):
        share = examples // len(focuses) + (1 if index < examples % len(focuses) else 0)
        if share == 0:
            continue
        drawn: list[VerifyBatch] = []

        def collect(batch: VerifyBatch) -> None:
            drawn.append(batch)

        run = settings(max_examples=share, database=None, deadline=None, derandomize=False,
                       phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
        key = json.dumps(focus, sort_keys=True)
        seeded = seed(zlib.crc32(f"gate/{key}".encode()))(given(batch=verify_batches(**focus))(collect))
        run(seeded)()
        corpus += drawn[:share]
    return corpus


def write_corpus(corpus: list[VerifyBatch], path: str) -> None:
    """``corpus.jsonl``: one batch per line."""
    with open(path, "w") as fh:
        for batch in corpus:
            fh.write(json.dumps(batch.to_dict()) + "\n")


def read_corpus(path: str) -> list[VerifyBatch]:
    with open(path) as fh:
        return [VerifyBatch.from_dict(json.loads(line)) for line in fh]


# -- one side ---------------------------------------------------------------------------------------


def run_side(side: Side, corpus_path: str, props: list[PropertySpec], workdir: str, workers: str,
             device: str) -> list[Outcome]:
    """Evaluate every property on the corpus with ``side``'s code: a pytest-xdist run of ``gate_items``."""
    items = importlib.util.find_spec("metadata_builders.gate_items").origin  # run by pytest, never imported here
    out = os.path.join(workdir, side.name)
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ)
    env.update({ENV_CORPUS: corpus_path, ENV_OUT: out, ENV_BUILDER: side.builder, ENV_DEVICE: device,
                ENV_PROPERTIES: ",".join(p.name for p in props)})
    if side.pythonpath:
        env["PYTHONPATH"] = side.pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    ini = os.path.join(workdir, "pytest.ini")
    with open(ini, "w") as fh:
        fh.write("[pytest]\naddopts = -p no:cacheprovider\n")
    command = [sys.executable, "-m", "pytest", items, "-c", ini, "--rootdir", workdir, "-q",
               "-p", "no:randomly", "-n", workers, "--junit-xml", os.path.join(out, "junit.xml")]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    with open(os.path.join(out, "pytest.log"), "w") as fh:
        fh.write(done.stdout + done.stderr)
    outcomes = _read_outcomes(out)
    expected = sum(1 for _ in open(corpus_path)) * len(props)
    if done.returncode != 0 or len(outcomes) != expected:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise GateError(f"{side.name} side ({side.label})",
                        f"evaluation did not complete (pytest exit {done.returncode}, {len(outcomes)}/{expected} "
                        f"outcomes); log: {os.path.join(out, 'pytest.log')}\n{tail}")
    print(f"  {side.name}: {len(outcomes)} (property, batch) outcomes in {seconds:.0f}s", flush=True)
    return outcomes


def _read_outcomes(out: str) -> list[Outcome]:
    outcomes = []
    for name in sorted(os.listdir(out)):
        if name.endswith(".jsonl"):
            with open(os.path.join(out, name)) as fh:
                outcomes += [Outcome.from_dict(json.loads(line)) for line in fh]
    return outcomes


# -- verdicts ----------------------------------------------------------------------------------------


Verdict = Literal["held", "new", "changed", "pre-existing", "fixed", "partial", "not applicable"]


@dataclass
class PropertyVerdict:
    """One property across the corpus: how many batches fell under each verdict."""

    prop: str
    title: str
    batches: int = 0
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    examples: dict[str, list[tuple[int, Outcome, Outcome]]] = field(default_factory=lambda: defaultdict(list))
    """Verdict -> (index, base outcome, head outcome), in corpus order."""
    findings: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Finding id -> pre-existing batches it explains."""

    @property
    def blocking(self) -> bool:
        return self.counts["new"] > 0

    def summary(self) -> str:
        parts = []
        for verdict in ("new", "changed", "pre-existing", "fixed", "partial"):
            n = self.counts[verdict]
            if n:
                label = verdict.upper() if verdict == "new" else verdict
                if verdict == "pre-existing" and self.findings:
                    label += " (" + ", ".join(f"{f} x{c}" for f, c in sorted(self.findings.items())) + ")"
                parts.append(f"{label} {n}/{self.batches}")
        return "; ".join(parts) or f"held {self.batches}/{self.batches}"


def _verdict(base: Outcome, head: Outcome) -> Verdict:
    if head.status == "failed":
        if base.status != "failed":
            return "new"
        if set(head.signature) - set(base.signature):
            return "new"  # a difference base did not have: a pre-existing failure must not hide it
        return "pre-existing" if base.signature == head.signature else "changed"
    if base.status == "failed":
        return "fixed"
    if head.status == "partial" or base.status == "partial":
        return "partial"
    return "not applicable" if head.status == "not applicable" else "held"


def classify(corpus: list[VerifyBatch], props: list[PropertySpec], base: list[Outcome], head: list[Outcome],
             head_side_upstream: bool = True) -> list[PropertyVerdict]:
    """Per property, each batch's base and head outcomes compared (see the module docstring).

    ``head_side_upstream``: the sides run SGLang's code, so known findings may name
    what already failed at base.
    """
    from metadata_builders.findings import known_finding

    by_base = {(o.prop, o.index): o for o in base}
    by_head = {(o.prop, o.index): o for o in head}
    verdicts = []
    for spec in props:
        pv = PropertyVerdict(spec.name, spec.title)
        for index, batch in enumerate(corpus):
            b, h = by_base[(spec.name, index)], by_head[(spec.name, index)]
            verdict = _verdict(b, h)
            if verdict == "not applicable":
                continue
            pv.batches += 1
            pv.counts[verdict] += 1
            pv.examples[verdict].append((index, b, h))
            if verdict in ("pre-existing", "changed") and head_side_upstream:
                finding = known_finding(spec.name, b.field, b.message, batch)  # what already failed at base
                if finding is not None:
                    pv.findings[finding] += 1
        verdicts.append(pv)
    return verdicts


def _write_replays(verdicts: list[PropertyVerdict], corpus: list[VerifyBatch], failures_dir: str,
                   head: Side) -> list[tuple[str, str, Outcome, str]]:
    """For each property with new failures, the smallest failing batch as a replay file (deterministic)."""
    written = []
    for pv in verdicts:
        new = pv.examples.get("new") or []
        if not new:
            continue
        index, base_outcome, head_outcome = min(new, key=lambda e: (corpus[e[0]].size_key(), e[0]))
        batch = corpus[index]
        os.makedirs(failures_dir, exist_ok=True)
        text = batch.to_json()
        path = os.path.join(failures_dir, f"{pv.prop}-{hashlib.sha1(text.encode()).hexdigest()[:10]}.json")
        new = _new_differences(base_outcome, head_outcome)
        why = f"{pv.prop} fails at head ({head.label}) with what base did not have: {new}"
        with open(path, "w") as fh:
            fh.write(batch.to_json(why=why.splitlines()[0][:300], meta={
                "property": pv.prop, "gate": "new", "head": head.label, "new": new,
                "signature": list(head_outcome.signature), "base_status": base_outcome.status,
            }))
            fh.write("\n")
        written.append((pv.prop, path, head_outcome, new))
    return written


def _new_differences(base: Outcome, head: Outcome) -> str:
    """What head adds: the failure itself when base held, else the differences base did not have."""
    if base.status != "failed":
        return head.message
    extra = sorted(set(head.signature) - set(base.signature))
    shown = ", ".join(extra[:4]) + (f" (+{len(extra) - 4} more)" if len(extra) > 4 else "")
    return f"{shown} (base already failed: {base.message[:120]})"


# -- git sides ----------------------------------------------------------------------------------------


def _git(repo: str, *args: str) -> str:
    done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise GateError(f"git {' '.join(args)}", done.stderr.strip() or f"exit {done.returncode}")
    return done.stdout.strip()


def _sglang_tree(root: str, what: str) -> str:
    python = os.path.join(root, "python")
    if not os.path.isdir(os.path.join(python, "sglang")):
        raise GateError(what, f"{root} has no python/sglang: run the gate from an SGLang checkout (or pass --repo)")
    return python


@dataclass
class _Worktrees:
    """Detached worktrees made for refs, removed afterwards."""

    repo: str
    made: list[str] = field(default_factory=list)

    def side(self, name: str, ref: str | None, workdir: str, builder: str) -> Side:
        if ref is None:
            commit = _git(self.repo, "rev-parse", "--short", "HEAD")
            dirty = " + uncommitted changes" if _git(self.repo, "status", "--porcelain", "--untracked-files=no") else ""
            return Side(name, builder, _sglang_tree(self.repo, f"{name} (the checkout)"),
                        f"checkout at {commit}{dirty}")
        commit = _git(self.repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        path = os.path.join(workdir, f"worktree-{name}")
        _git(self.repo, "worktree", "add", "--detach", "--force", path, commit)
        self.made.append(path)
        return Side(name, builder, _sglang_tree(path, f"{name} ({ref})"), f"{ref} at {commit[:10]}")

    def remove(self) -> None:
        for path in self.made:
            subprocess.run(["git", "-C", self.repo, "worktree", "remove", "--force", path], capture_output=True)


# -- the command -------------------------------------------------------------------------------------


def run_gate(args: argparse.Namespace) -> int:
    from metadata_builders.profiles import PROFILE_EXAMPLES
    from metadata_builders.report import format_table, write_junit

    props = _select(args.properties)
    examples = args.examples or PROFILE_EXAMPLES[args.profile]
    workdir = tempfile.mkdtemp(prefix="metadata-builders-gate-")
    trees = _Worktrees(os.path.abspath(args.repo))
    try:
        if args.base is not None:
            base = trees.side("base", args.base, workdir, args.builder)
            head = trees.side("head", args.head, workdir, args.builder)
        else:
            if not (args.base_builder and args.head_builder):
                raise GateError("gate", "give --base REF (an SGLang checkout), or --base-builder and --head-builder")
            base = Side("base", args.base_builder, None, args.base_builder)
            head = Side("head", args.head_builder, None, args.head_builder)
        print(f"metadata-builders gate: base = {base.label}, head = {head.label}; builder {base.builder}, "
              f"profile {args.profile} ({examples} batches), workers {args.workers}", flush=True)
        start = time.perf_counter()
        corpus = build_corpus(props, examples)
        corpus_path = os.path.join(workdir, "corpus.jsonl")
        write_corpus(corpus, corpus_path)
        print(f"  corpus: {len(corpus)} batches over {len(corpus_focuses(props))} kinds, "
              f"{len(props)} properties each", flush=True)
        base_outcomes = run_side(base, corpus_path, props, workdir, args.workers, args.device)
        head_outcomes = run_side(head, corpus_path, props, workdir, args.workers, args.device)
        verdicts = classify(corpus, props, base_outcomes, head_outcomes, head_side_upstream=head.builder == "sglang")
        replays = _write_replays(verdicts, corpus, args.failures_dir, head)
        seconds = time.perf_counter() - start
    finally:
        trees.remove()
        if not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    rows = [[pv.prop, pv.title, "BLOCKS" if pv.blocking else "ok", pv.summary()] for pv in verdicts]
    print()
    print(format_table(["property", "what", "gate", "verdicts (batches)"], rows))
    blocking = [pv for pv in verdicts if pv.blocking]
    for prop, path, outcome, new in replays:
        print()
        print(f"{prop} NEW at head: {new}")
        print(f"  replay: metadata-builders replay {path} --builder {head.builder}")
    pre = [pv for pv in verdicts if pv.counts["pre-existing"] or pv.counts["changed"]]
    if pre:
        print()
        print("already failing at base (not blocking): " + "; ".join(
            f"{pv.prop} {pv.counts['pre-existing'] + pv.counts['changed']} batch(es)"
            + (f" [{', '.join(sorted(pv.findings))}]" if pv.findings else " [no known finding: see docs/FINDINGS.md]")
            for pv in pre))
    fixed = [pv for pv in verdicts if pv.counts["fixed"]]
    if fixed:
        print("fixed at head: " + "; ".join(f"{pv.prop} {pv.counts['fixed']} batch(es)" for pv in fixed))
    print()
    print(f"gate: {'RED' if blocking else 'GREEN'} ({len(blocking)} propert{'y' if len(blocking) == 1 else 'ies'} "
          f"with new failures) in {seconds:.0f}s")
    if args.junit_xml:
        cases = [(f"{pv.prop} {pv.title}", 0.0, f"new failures: {pv.summary()}" if pv.blocking else None, pv.summary())
                 for pv in verdicts]
        write_junit(args.junit_xml, "metadata-builders gate", cases)
    return 1 if blocking else 0


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
    p.add_argument("--profile", default="ci", choices=["dev", "ci", "nightly"],
                   help="corpus size: the profile's examples per focused run (ci: 100 batches)")
    p.add_argument("--examples", type=int, default=None, help="corpus size (overrides the profile)")
    p.add_argument("--properties", default=None, help="comma-separated subset, e.g. P1,P4 (default: all)")
    p.add_argument("--workers", "-n", default="auto", help="pytest-xdist workers per side (default auto)")
    p.add_argument("--device", default="cpu", help="cpu (default) | auto | cuda: the device the builders run on")
    p.add_argument("--junit-xml", default=None, metavar="PATH", help="one JUnit testcase per property")
    p.add_argument("--failures-dir", default="failures", metavar="DIR", help="where new failures' replay files go")
    p.add_argument("--keep-workdir", action="store_true", help="keep the corpus, outcomes and pytest logs")
    p.set_defaults(func=run_gate)
