"""The DSA family's pre-merge gate: the family's check on base and on head, and what the head breaks.

``metadata-builders gate --family dsa --base REF [--head REF] [--repo PATH]`` (docs/DSA.md, "The gate"): DESIGN.md
section 5's differential gate in the small.  Each side is a detached ``git worktree`` of the SGLang checkout at
its ref (the checkout itself when ``--head`` is not given: :func:`checkout_side`); the
family's ``check --builder sglang`` runs on it in a subprocess whose ``PYTHONPATH`` starts with that worktree's
``python/`` (then this harness), with the derandomized profile, so both sides draw the same batches and only
their code differs (the draws read no literal of the side's SGLang tree: ``runs.profiles.seed_alone``).  Each
side writes its verdicts as JSON (``check --json``), including where ``sglang`` was imported from: a side that did
not import its own tree is a setup error, never a verdict.

Verdict, per (mode, property):

* ``RED`` (exit 1): a (mode, property) held at base and fails at head; named with the head's replay file (copied
  to ``--failures-dir``) and the replay command;
* ``GREEN`` (exit 0): nothing held at base and fails at head; what fails on both sides is listed as pre-existing;
* ``NOTHING JUDGED`` or a setup error (exit 2): a side cannot run, or no (mode, property) ran on both sides.

Worked example (the miniature repository of tests/dsa/test_dsa_gate.py, ``pad.py``'s floor removed)::

    mode           P5
    draft_extend   ok/FAIL
    NEW draft_extend P5 (dsa.p5....): ...
    gate: RED (draft_extend P5 blocking) in 71s
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import metadata_builders
from metadata_builders.errors import GateError
from metadata_builders.worktrees import Worktrees

__all__ = ["GateResult", "SideResult", "Tree", "checkout_side", "compare", "run_gate", "side_env"]

HARNESS_ROOT = str(Path(metadata_builders.__file__).resolve().parent.parent)
"""This harness's root: on every side's path after the side's ``python/``, so the sides run this harness."""

DEFAULT_FAILURES_DIR = os.path.join("build", "metadata-builders", "failures")
"""Under ``--repo``, as the DSV4 gate's."""

SIDE_TIMEOUT_S = 1800.0
"""A side's check that runs longer is stopped: a setup error (the ``ci`` profile takes a few minutes on 2 cores)."""


@dataclass
class SideResult:
    """One side's check: each (mode, property)'s verdict (``holds``, ``FAILS <check>``, ``n/a``) and failures."""

    name: str
    label: str
    replay_env: str
    verdicts: dict[tuple[str, str], str]
    failures: dict[tuple[str, str], dict[str, Any]]
    seconds: float
    not_run: list[str] = field(default_factory=list)


def side_env(pythonpath: str | None) -> dict[str, str]:
    """The environment of a side's check: its ``python/`` tree first, then this harness, then the caller's path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, HARNESS_ROOT, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"  # each mode's progress line as it ends
    return env


def _command(out: str, failures: str, profile: str, modes: str | None, props: str | None,
             max_examples: int | None) -> list[str]:
    command = [sys.executable, "-m", "metadata_builders.families.dsa", "check", "--builder", "sglang",
               "--profile", profile, "--json", out, "--failures-dir", failures]
    for flag, value in (("--modes", modes), ("--properties", props), ("--max-examples", max_examples)):
        if value:
            command += [flag, str(value)]
    return command


def run_side(side: Any, workdir: str, profile: str, modes: str | None, props: str | None,
             max_examples: int | None, progress: Any = print) -> SideResult:
    """The family's check on ``side`` (a :class:`Tree`) in a subprocess; a :class:`SideResult`."""
    out = os.path.join(workdir, f"{side.name}.json")
    failures = os.path.join(workdir, f"{side.name}-failures")
    start = time.monotonic()
    proc = subprocess.Popen(_command(out, failures, profile, modes, props, max_examples), cwd=workdir,
                            env=side_env(side.pythonpath), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    log: list[str] = []
    timer = threading.Timer(SIDE_TIMEOUT_S, proc.kill)  # a side that hangs is stopped: a setup error below
    timer.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        log.append(line.rstrip())
        if line.split(":")[0].strip() in _MODES and progress is not None:
            progress(f"{side.name}: {line.rstrip()}")
    code = proc.wait()
    timer.cancel()
    tail = "\n".join(log[-12:])
    if code not in (0, 1) or not os.path.exists(out):
        raise GateError(f"{side.name} side ({side.label})", f"its check did not run (exit {code}):\n{tail}")
    with open(out) as fh:
        data = json.load(fh)
    imported = data.get("sglang") or ""
    if side.pythonpath and not os.path.abspath(imported).startswith(os.path.abspath(side.pythonpath) + os.sep):
        raise GateError(f"{side.name} side ({side.label})",
                        f"imported sglang from {imported or 'nowhere'}, not from its tree {side.pythonpath}")
    verdicts = {(mode, prop): verdict for mode, row in data["modes"].items()
                for prop, verdict in row["verdicts"].items()}
    found = {(f["mode"], f["prop"]): f for f in data["failures"]}
    return SideResult(side.name, side.label, side.replay_env, verdicts, found, time.monotonic() - start,
                      data.get("not_run", []))


_MODES = ("target_verify", "draft_extend", "decode", "draft_decode", "idle")


@dataclass
class GateResult:
    """Base against head, per (mode, property)."""

    base: SideResult
    head: SideResult
    new: list[tuple[str, str]]
    """Held at base, fails at head: what blocks."""
    pre_existing: list[tuple[str, str]]
    fixed: list[tuple[str, str]]
    not_compared: list[tuple[str, str]]
    """Run on one side only (a mode a side does not declare): named, never a verdict."""
    judged: int
    seconds: float = 0.0
    copied: dict[tuple[str, str], str] = field(default_factory=dict)
    """New failure -> its replay file under ``--failures-dir``."""

    @property
    def exit_code(self) -> int:
        return 1 if self.new else 2 if self.judged == 0 else 0

    def verdict_line(self) -> str:
        if self.new:
            head = f"gate: RED ({', '.join(f'{m} {p}' for m, p in self.new)} blocking)"
        elif self.judged == 0:
            head = "gate: NOTHING JUDGED (no (mode, property) ran on both sides; not a verdict)"
        else:
            head = "gate: GREEN (no new failures)"
        line = f"{head} in {self.seconds:.0f}s"
        if self.pre_existing:
            line += "; pre-existing: " + ", ".join(f"{m} {p}" for m, p in self.pre_existing)
        if self.not_compared:
            line += "; not compared: " + ", ".join(f"{m} {p}" for m, p in self.not_compared)
        return line


def _kind(verdict: str | None) -> str:
    if verdict is None:
        return "-"
    return "ok" if verdict == "holds" else "FAIL" if verdict.startswith("FAILS") else verdict


def compare(base: SideResult, head: SideResult) -> GateResult:
    """Each (mode, property) of either side: new (ok -> FAIL), pre-existing (FAIL -> FAIL), fixed, not compared."""
    new, pre, fixed, other, judged = [], [], [], [], 0
    for key in sorted(set(base.verdicts) | set(head.verdicts), key=_order):
        b, h = _kind(base.verdicts.get(key)), _kind(head.verdicts.get(key))
        if b in ("ok", "FAIL") and h in ("ok", "FAIL"):
            judged += 1
            {("ok", "FAIL"): new, ("FAIL", "FAIL"): pre, ("FAIL", "ok"): fixed}.get((b, h), []).append(key)
        elif "FAIL" in (b, h) or (b == "-") != (h == "-"):
            other.append(key)
    return GateResult(base, head, new, pre, fixed, other, judged)


def _order(key: tuple[str, str]) -> tuple[int, str]:
    mode, prop = key
    return (_MODES.index(mode) if mode in _MODES else len(_MODES), prop)


def _cell(base: str | None, head: str | None) -> str:
    both = (_kind(base), _kind(head))
    return "n/a" if both == ("n/a", "n/a") else "/".join(both)


def table(result: GateResult) -> str:
    """A row per mode, a column per property, each cell ``base/head`` (``ok``, ``FAIL``, ``n/a``, ``-`` not run)."""
    keys = set(result.base.verdicts) | set(result.head.verdicts)
    modes = sorted({m for m, _ in keys}, key=lambda m: _order((m, "")))
    props = sorted({p for _, p in keys}, key=lambda p: (len(p), p))
    head = ["mode (base/head)", *props]
    rows = [[m, *(_cell(result.base.verdicts.get((m, p)), result.head.verdicts.get((m, p))) for p in props)]
            for m in modes]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows]]
    lines.append(f"base: {result.base.label} ({result.base.seconds:.0f}s); head: {result.head.label} "
                 f"({result.head.seconds:.0f}s)")
    for key in result.new:
        failure = result.head.failures.get(key, {})
        lines.append(f"NEW {key[0]} {key[1]} ({failure.get('check')}): {failure.get('message', '')}")
        path = result.copied.get(key)
        if path:
            env = f"{result.head.replay_env} " if result.head.replay_env else ""
            lines.append(f"  replay file: {path}")
            lines.append(f"  replay: {env}metadata-builders replay {path} --family dsa --builder sglang "
                         f"--properties {key[1]}")
    for title, found in (("pre-existing (fails at base too, not blocking)", result.pre_existing),
                         ("fixed (fails at base, holds at head)", result.fixed),
                         ("not compared (run on one side only)", result.not_compared)):
        lines += [f"{title}: {m} {p}" for m, p in found]
    for side in (result.base, result.head):
        lines += [f"not run at {side.name} {mode}: the builder does not declare it" for mode in side.not_run]
    return "\n".join(lines)


def _copy_new(result: GateResult, failures_dir: str) -> None:
    """The head's replay file of each new failure, copied to ``failures_dir``."""
    for key in result.new:
        source = result.head.failures.get(key, {}).get("replay_file")
        if source and os.path.exists(source):
            os.makedirs(failures_dir, exist_ok=True)
            target = os.path.join(failures_dir, os.path.basename(source))
            shutil.copyfile(source, target)
            result.copied[key] = os.path.abspath(target)


@dataclass(frozen=True)
class Tree:
    """One side's code: the folder its ``sglang`` is imported from, and how people and a replay command name it."""

    name: str
    pythonpath: str
    label: str
    replay_env: str


def checkout_side(trees: Worktrees, name: str, ref: str | None, workdir: str) -> Tree:
    """``ref`` of the repository as a detached worktree under ``workdir``; None: the checkout itself."""
    if ref is None:
        root, commit = trees.repo, trees.commit("HEAD")
    else:
        root, commit = trees.add(name, ref, workdir)
    python = os.path.join(root, "python")
    if not os.path.isdir(os.path.join(python, "sglang")):
        raise GateError(f"{name} ({ref or 'the checkout'})", f"{root} has no python/sglang: run the gate from an "
                                                             "SGLang checkout (or pass --repo)")
    label = f"{ref} at {commit[:10]}" if ref is not None else f"checkout at {commit[:10]}"
    env = f"PYTHONPATH=<a checkout of {commit[:10]}>/python" if ref is not None else f"PYTHONPATH={python}"
    return Tree(name, python, label, env)


def _failures_dir(repo: str, failures_dir: str | None) -> str:
    """``--failures-dir``, else ``build/metadata-builders/failures`` under the checkout, ignored by git there."""
    if failures_dir is not None:
        return failures_dir
    build = os.path.join(repo, os.path.dirname(DEFAULT_FAILURES_DIR))
    os.makedirs(build, exist_ok=True)
    if not os.path.exists(os.path.join(build, ".gitignore")):
        with open(os.path.join(build, ".gitignore"), "w") as fh:
            fh.write("# made by metadata-builders: replay files\n*\n")
    return os.path.join(repo, DEFAULT_FAILURES_DIR)


def run_gate(base: str, head: str | None = None, *, repo: str = ".", profile: str = "ci", modes: str | None = None,
             properties: str | None = None, max_examples: int | None = None, failures_dir: str | None = None,
             progress: Any = print) -> GateResult:
    """Base against head on the family's check (``--builder sglang``); the comparison (not yet printed)."""
    start = time.monotonic()
    repo = os.path.abspath(repo)
    trees = Worktrees(repo)
    workdir = tempfile.mkdtemp(prefix="dsa-gate-")
    try:
        sides = [checkout_side(trees, "base", base, workdir), checkout_side(trees, "head", head, workdir)]
        results = [run_side(side, workdir, profile, modes, properties, max_examples, progress) for side in sides]
        result = compare(*results)
        _copy_new(result, _failures_dir(repo, failures_dir))
    finally:
        trees.remove()
        shutil.rmtree(workdir, ignore_errors=True)
    result.seconds = time.monotonic() - start
    return result


def main(args: Any) -> int:
    """``gate --family dsa``: run, print the table and the verdict line; exit 0 green, 1 red, 2 nothing judged."""
    result = run_gate(args.base, args.head, repo=args.repo, profile=args.profile, modes=args.modes,
                      properties=args.only, max_examples=args.max_examples, failures_dir=args.failures_dir)
    print(table(result))
    print(result.verdict_line())
    return result.exit_code
