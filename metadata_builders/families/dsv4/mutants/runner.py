"""``metadata-builders mutants``: run the ``ci`` profile against each mutant and tabulate the kills.

:func:`run_mutant` runs the properties in order against one mutant until one
fails (the mutant is *killed*) and returns a JSON-ready row; the command runs
the selected mutants in worker processes (``--jobs``), prints the kill table,
and writes it as JSON and, optionally, as ``docs/MUTANTS.md``.  An error raised
in a worker (a :class:`~metadata_builders.errors.MutantDoesNotApply` after
``hip.py`` changed) pickles, so it reaches the command, and the CLI's exit 2,
as itself.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable

from metadata_builders.errors import UsageError
from metadata_builders.families.dsv4.mutants.catalogue import MUTANTS
from metadata_builders.families.dsv4.mutants.patching import mutant_builder
from metadata_builders.runs.profiles import WORK_DIR, work_dir

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = ["add_cli", "batch_size", "run_mutant", "select_mutants"]


def batch_size(batch: VerifyBatch | None) -> dict[str, int] | None:
    """How big a counterexample is: requests, real verify tokens, graph rows, table width."""
    if batch is None:
        return None
    return {
        "bs": batch.bs,
        "tokens": batch.num_real_tokens,
        "padded_bs": batch.graph.padded_bs if batch.graph is not None else batch.bs,
        "max_context": batch.max_context,
    }


def property_order(first: str | None = None) -> list[Any]:
    """The properties a mutant is run against: ``first`` (its recorded killer) then the rest in order P1..P10.

    The verdict -- killed by some property, or survived every one -- is the same in any order; trying the
    killer a catalogue recorded first only stops sooner (a mutant P7 kills no longer waits on six properties'
    full runs).  An unknown ``first`` is ignored: the plain order.
    """
    from metadata_builders.families.dsv4.properties import PROPERTIES

    head = [p for p in PROPERTIES if p.name == first]
    return head + [p for p in PROPERTIES if p.name != first]


def recorded_killers(path: str | None) -> dict[str, tuple[str, int | None]]:
    """Mutant -> (the property that killed it, the index of its focus that did, None when not recorded) in an
    earlier kill table (``--json`` output, e.g. docs/mutants.json)."""
    if not path:
        return {}
    try:
        with open(path) as fh:
            rows = json.load(fh).get("mutants", [])
    except (OSError, ValueError, AttributeError) as exc:
        raise UsageError("--killers", "a kill table written by `mutants --json`", f"{path}: {exc}") from exc
    return {r["mutant"]: (r["property"], r.get("focus")) for r in rows
            if isinstance(r, dict) and r.get("killed") and r.get("property")}


def run_mutant(
    name: str, settings_: Any = None, *, device: str = "cpu", progress: Callable[[str], None] | None = None,
    first: str | None = None, first_focus: int | None = None,
) -> dict[str, Any]:
    """Run the properties against mutant ``name`` until one kills it (``first`` tried first:
    :func:`property_order`, and of it the focus ``first_focus``); a JSON-ready row.

    Every focus keeps its own seed, so the recorded killer's focus draws the batches that killed the mutant
    before, first: the same verdict as the plain order, without the examples every earlier focus ran (the
    catalogue's long kills, 300-800 examples of other modes' focuses, each end in their own focus's first few).

    ``settings_`` defaults to the ``ci`` profile.  The row names the killing
    property, ``examples_to_failure`` of that property's run, the shrunk batch's
    size and the failure (variant, field, message).
    """
    from metadata_builders.families.dsv4.runs.runner import run_property
    from metadata_builders.runs.profiles import load_profile

    spec = MUTANTS[name]
    settings_ = settings_ if settings_ is not None else load_profile("ci")
    builder = mutant_builder(name, device)
    start = time.perf_counter()
    row: dict[str, Any] = {"mutant": name, "stage": spec.stage, "bug_class": spec.bug_class, "killed": False,
                           "property": None, "examples_to_failure": None, "examples": 0, "counterexample": None,
                           "failure": None, "focus": None}
    for prop in property_order(first):
        if progress is not None:
            progress(f"{prop.name} ...")
        run = run_property(prop, builder, settings_, stop_at_first=True,
                           first_focus=first_focus if prop.name == first else None)
        row["examples"] += run.examples
        if not run.passed:
            failure = run.failure
            row.update(
                killed=True, property=prop.name, examples_to_failure=run.examples_to_failure, focus=run.failed_focus,
                counterexample=batch_size(run.batch),
                failure={"variant": failure.variant, "field": failure.field, "message": failure.message},
            )
            break
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


# -- the worker side ----------------------------------------------------------------------------------


def _single_threaded() -> None:
    """Worker initialiser: one torch thread per process, so ``--jobs`` processes share the cores."""
    import torch

    torch.set_num_threads(1)


def _progress(label: str, name: str, text: str) -> None:
    """One progress line on stderr, prefixed with the job's ``[i/n]`` and the mutant."""
    sys.stderr.write(f"{label} {name}: {text}\n")
    sys.stderr.flush()


def _run_mutant_job(name: str, max_examples: int | None, device: str, label: str,
                    first: tuple[str, int | None] | None = None, shrink: bool = True) -> dict[str, Any]:
    """One mutant in a worker process (settings rebuilt there: they do not pickle)."""
    from hypothesis import Phase, settings

    from metadata_builders.runs.profiles import load_profile

    settings_ = load_profile("ci")
    if max_examples is not None:
        settings_ = settings(settings_, max_examples=max_examples)
    if not shrink:  # the same kill, found on the same example; the counterexample as drawn, not shrunk
        settings_ = settings(settings_, phases=[phase for phase in settings_.phases if phase is not Phase.shrink])
    progress = functools.partial(_progress, label, name)
    killer, focus = first if first is not None else (None, None)
    row = run_mutant(name, settings_, device=device, progress=progress, first=killer, first_focus=focus)
    row["shrunk"] = shrink
    verdict = (f"killed by {row['property']} after {row['examples_to_failure']} examples" if row["killed"]
               else "SURVIVED")
    progress(f"{verdict} ({row['seconds']:.1f}s)")
    return row


_Job = tuple[str, int | None, str, str, tuple[str, int | None] | None, bool]
"""(mutant, max examples, device, progress label, its recorded killer and focus, shrink its counterexample)."""


def _run_jobs(jobs: list[_Job], workers: int) -> list[dict[str, Any]]:
    """Every job's row, in order: in this process for one worker, else in a process pool.

    A worker's exception is re-raised here as itself (the harness's errors pickle).
    """
    from concurrent.futures import ProcessPoolExecutor

    if workers <= 1:
        _single_threaded()
        return [_run_mutant_job(*job) for job in jobs]
    with ProcessPoolExecutor(max_workers=workers, initializer=_single_threaded) as pool:
        return list(pool.map(_run_mutant_job, *zip(*jobs)))


# -- output -------------------------------------------------------------------------------------------------


def _size_cell(size: dict[str, int] | None, shrunk: bool = True) -> str:
    if size is None:
        return "-"
    tier = f" pbs={size['padded_bs']}" if size["padded_bs"] != size["bs"] else ""
    return f"bs={size['bs']} tok={size['tokens']}{tier}" + ("" if shrunk else " (not shrunk)")


def _what(failure: dict[str, Any]) -> str:
    """The failing field, or for a crash the exception's name (``raised IndexError``)."""
    if not failure:
        return "-"
    if failure.get("field"):
        return failure["field"]
    message = failure.get("message") or ""
    return message.removeprefix("builder ").split(":")[0] if message.startswith("builder raised") else message[:30]


def _cells(row: dict[str, Any], survived: str) -> list[Any]:
    """One kill-table row: mutant, stage, killed, by, examples, shrunk batch, field / error, time."""
    examples = row["examples_to_failure"] if row["examples_to_failure"] is not None else "-"
    return [row["mutant"], row["stage"], "yes" if row["killed"] else survived, row["property"] or "-", examples,
            _size_cell(row["counterexample"], row.get("shrunk", True)), _what(row["failure"] or {}),
            f"{row['seconds']:.1f}s"]


_COLUMNS = ["mutant", "stage", "killed", "by", "examples", "shrunk batch", "field / error", "time"]


def _table(rows: list[dict[str, Any]]) -> str:
    from metadata_builders.families.dsv4.runs.report import format_table

    return format_table(_COLUMNS, [_cells(r, "SURVIVED") for r in rows])


def _markdown(rows: list[dict[str, Any]], command: str) -> str:
    """docs/MUTANTS.md: the results table, then each mutant's diff and docstring."""
    killed = sum(r["killed"] for r in rows)
    out = [
        "# Mutant catalogue",
        "",
        f"Generated by `{command}`. {killed}/{len(rows)} mutants killed in the `ci` profile (derandomized).",
        "Each mutant is a one-place source edit of one stage of the bundled builder, "
        "`metadata_builders/families/dsv4/hip/`",
        "(`pipeline.py`, `builder.py`, `compression.py`, `low_ratios.py`, `decode.py`; the catalogue in",
        "`metadata_builders/families/dsv4/mutants/catalogue.py`, the groups' in `groups.py`, the modes' in "
        "`modes.py`); the",
        "properties run in order P1..P10 (with `--killers`, each mutant's recorded killer first) and stop at the",
        "first that fails. *examples* is `PropertyRun.examples_to_failure` (examples run by the killing property "
        "until its",
        "first failure), *shrunk batch* the counterexample after Hypothesis shrank it (`pbs` = graph rows).",
        "",
        "| " + " | ".join(_COLUMNS) + " |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mutant, stage, *rest = _cells(r, "**SURVIVED**")
        out.append(f"| `{mutant}` | `{stage}` | " + " | ".join(str(c) for c in rest) + " |")
    out += ["", "## The mutants", ""]
    for spec in MUTANTS.values():
        out += [f"### `{spec.name}` — {spec.bug_class}", "", f"Stage `hip.{spec.stage}`. {spec.summary}"]
        if spec.incident:
            out += ["", f"Resembles: {spec.incident}."]
        out += ["", "```diff", spec.diff, "```", ""]
    return "\n".join(out)


def _write_outputs(args: argparse.Namespace, rows: list[dict[str, Any]], max_examples: int) -> None:
    """The kill table as JSON (``--json``) and the catalogue as markdown (``--markdown``)."""
    if args.json:
        if os.path.dirname(args.json) == WORK_DIR:
            work_dir()
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump({"profile": "ci", "max_examples": max_examples, "mutants": rows}, fh, indent=1)
            fh.write("\n")
        print(f"JSON: {args.json}")
    if args.markdown:
        command = "metadata-builders mutants" + (f" --max-examples {args.max_examples}" if args.max_examples else "")
        command += (f" --json {args.json}" if args.json else "") + (f" --killers {args.killers}" if args.killers
                                                                      else "") + f" --markdown {args.markdown}"
        with open(args.markdown, "w") as fh:
            fh.write(_markdown(rows, command) + "\n")
        print(f"markdown: {args.markdown}")


# -- the command ----------------------------------------------------------------------------------------------


def select_mutants(only: str | None) -> list[str]:
    """Names from a comma-separated ``--only`` (all when empty); unknown names are a usage error."""
    if not only:
        return list(MUTANTS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        raise UsageError("--only", f"choose from {sorted(MUTANTS)}", f"unknown mutant(s) {unknown}")
    return names


def _cmd_mutants(args: argparse.Namespace) -> int:
    from metadata_builders.runs.profiles import PROFILE_EXAMPLES

    names = select_mutants(args.only)
    max_examples = args.max_examples if args.max_examples is not None else PROFILE_EXAMPLES["ci"]
    print(f"metadata-builders mutants: {len(names)} mutant(s), profile=ci max_examples={max_examples} "
          f"device={args.device} jobs={args.jobs}", flush=True)
    killers = recorded_killers(args.killers)
    if killers:
        print(f"  each mutant's recorded killer ({args.killers}) is tried first, its killing focus first of its "
              "focuses; the verdict is the same in any order", flush=True)
    jobs = [(name, args.max_examples, args.device, f"[{i}/{len(names)}]", killers.get(name), not args.no_shrink)
            for i, name in enumerate(names, 1)]
    rows = _run_jobs(jobs, args.jobs)
    print()
    print(_table(rows))
    survivors = [r["mutant"] for r in rows if not r["killed"]]
    print()
    print(f"{len(rows) - len(survivors)}/{len(rows)} mutants killed"
          + (f"; SURVIVED: {', '.join(survivors)}" if survivors else ""))
    _write_outputs(args, rows, max_examples)
    return 0 if not survivors else 1


def add_cli(sub: Any) -> None:
    """Register ``mutants`` on the CLI's subparsers."""
    p = sub.add_parser("mutants", help="run the ci profile against every mutant; exit 0 only if all are killed")
    p.add_argument("--only", default=None, metavar="NAME[,NAME]", help="run only these mutants (default: all)")
    p.add_argument("--max-examples", type=int, default=None, help="override the ci profile's examples per property")
    p.add_argument("--device", default="cpu", help="cpu (default) | cuda | cuda:N")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                   help="mutants run in parallel worker processes (default 2; 1 runs in this process)")
    p.add_argument("--json", default=os.path.join(".metadata-builders", "mutants.json"), metavar="PATH",
                   help="write the kill table as JSON (default .metadata-builders/mutants.json; '' to skip)")
    p.add_argument("--killers", default=None, metavar="PATH",
                   help="a kill table from an earlier run (e.g. docs/mutants.json): try each mutant's recorded killer "
                        "first, then the rest in order -- the same verdict, sooner")
    p.add_argument("--no-shrink", action="store_true",
                   help="do not shrink a killing batch: the same kills, found on the same examples, the counterexample "
                        "as drawn (the pre-merge run: shrinking is most of the catalogue's time; docs/MUTANTS.md is "
                        "written with shrinking)")
    p.add_argument("--markdown", default=None, metavar="PATH",
                   help="also write the catalogue with its kill table as markdown (e.g. docs/MUTANTS.md)")
    from metadata_builders.families import DEFAULT_FAMILY, FAMILIES, FAMILY_HELP

    p.add_argument("--family", default=DEFAULT_FAMILY, choices=FAMILIES, help=FAMILY_HELP)
    p.set_defaults(func=_cmd_mutants)
