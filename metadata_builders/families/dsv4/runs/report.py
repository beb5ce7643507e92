"""Human- and machine-readable output: tables, JUnit XML, replay files."""

from __future__ import annotations

import hashlib
import json
import os
import xml.etree.ElementTree as ET
from typing import Any, Iterable, Mapping, Sequence

from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = ["capabilities_line", "format_table", "modes_table", "replay_command", "runner_line", "stores_line",
           "streams_line", "write_junit", "write_replay_file"]


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain aligned text table that reads at a glance in a terminal or CI log."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def replay_command(path: str, builder: str, env: str | None = None) -> str:
    """``[PYTHONPATH=...] metadata-builders replay PATH --builder B``: runs as printed in a fresh shell."""
    import shlex

    from metadata_builders.builders.loading import replay_env

    env = replay_env(builder) if env is None else env
    # Absolute: the command runs as printed from any directory, in a fresh shell.
    command = f"metadata-builders replay {shlex.quote(os.path.abspath(path))} --builder {shlex.quote(builder)}"
    return f"{env} {command}" if env else command


def write_replay_file(
    directory: str, prop: str, batch: VerifyBatch, failure: PropertyFailure | None, builder: str,
    extra: dict[str, Any] | None = None,
) -> str:
    """Write ``batch`` as ``DIR/<prop>-<hash>.json`` with a one-line why; return the path.

    ``extra`` goes into ``meta`` as is (``history``: the batches to build first).
    """
    os.makedirs(directory, exist_ok=True)
    text = batch.to_json()
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    path = os.path.join(directory, f"{prop}-{digest}.json")
    why = f"{prop} failed on builder {builder}: {failure}" if failure is not None else f"{prop} failed"
    meta = {"property": prop, "builder": builder}
    if failure is not None:
        meta.update(
            {
                "variant": failure.variant,
                "field": failure.field,
                "index": _jsonable(failure.index),
                "expected": _jsonable(failure.expected),
                "actual": _jsonable(failure.actual),
            }
        )
    meta.update(extra or {})
    with open(path, "w") as fh:
        fh.write(batch.to_json(why=why.splitlines()[0][:300], meta=meta))
        fh.write("\n")
    return path


def _jsonable(x: Any) -> Any:
    try:
        json.dumps(x)
        return x
    except TypeError:
        return repr(x)


def write_junit(path: str, suite: str, cases: Iterable[tuple[str, float, str | None, str]]) -> None:
    """JUnit XML: one testcase per (name, seconds, failure message or None, system-out)."""
    cases = list(cases)
    root = ET.Element(
        "testsuite",
        name=suite,
        tests=str(len(cases)),
        failures=str(sum(1 for c in cases if c[2] is not None)),
        time=f"{sum(c[1] for c in cases):.3f}",
    )
    for name, seconds, failure, out in cases:
        case = ET.SubElement(root, "testcase", classname=suite, name=name, time=f"{seconds:.3f}")
        if failure is not None:
            node = ET.SubElement(case, "failure", message=failure.splitlines()[0][:500])
            node.text = failure
        if out:
            ET.SubElement(case, "system-out").text = out
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def modes_table(judged: Sequence[tuple[str, Mapping[str, int]]], capabilities: Any = None) -> str | None:
    """Examples (or batches) judged per (mode of the MTP step, property), from ``(property, mode -> count)``
    pairs: one row per mode, ``-`` where the property does not judge the mode.  None when only target verify was
    judged, as before the modes existed, unless ``capabilities`` (the builder's) say it builds fewer modes than
    the harness judges: then the table is shown with a line naming what the builder declares (or that it declares
    nothing and is judged on target verify alone), so a mode left out is never left out in silence."""
    from metadata_builders.families.dsv4.properties import PROPERTIES
    from metadata_builders.families.dsv4.runs.runner import DRAFT_WORKER
    from metadata_builders.families.dsv4.variants import BUILT_MODES

    fewer = capabilities is not None and set(capabilities.modes) < set(BUILT_MODES)
    if not fewer and {mode for _, counts in judged for mode, n in counts.items() if n} <= {"target_verify"}:
        return None
    modes = {spec.name: spec.modes for spec in PROPERTIES}
    drafts = any(counts.get(DRAFT_WORKER) for _, counts in judged)  # a row of its own, judged as target verify
    rows = [[mode, *(str(counts.get(mode, 0)) if _mode_of(mode) in modes.get(prop, BUILT_MODES) else "-"
                     for prop, counts in judged)]
            for mode in (BUILT_MODES[0], *([DRAFT_WORKER] if drafts else []), *BUILT_MODES[1:])]
    table = ("judged per mode of the MTP step (- = the property does not judge the mode):\n"
             + format_table(["mode", *(prop for prop, _ in judged)], rows))
    if fewer:
        left = ", ".join(m for m in BUILT_MODES if m not in capabilities.modes)
        said = (f"declares modes = {tuple(capabilities.modes)!r}" if capabilities.modes_declared else
                "declares no modes: judged on target_verify alone (the documented default)")
        table += (f"\nthe builder {said}; not judged: {left} (declare modes = (...) on its class to be judged on "
                  "them: docs/BUILDERS.md)")
    return table


def capabilities_line(capabilities: Any) -> str:
    """Where the builder's capabilities came from, for ``check``'s header: its class's declarations, or its methods
    (the capabilities no class of it declares, named: docs/BUILDERS.md, "Declaring capabilities")."""
    if capabilities.declared:
        return "  capabilities: declared (class variables)"
    return (f"  capabilities: inferred from methods: {', '.join(capabilities.inferred)} (declare them: "
            "docs/BUILDERS.md, 'Declaring capabilities')")


def _mode_of(build: str) -> str:
    """The mode of the MTP step a row of :func:`modes_table` is built in (a DSpark draft worker's: target verify)."""
    return build.split(" ", 1)[0]


def runner_line(run: Any) -> str | None:
    """What P5's runner half captured over the run, from its tallies (None when it captured nothing)."""
    tally = {k: v for (what, k), v in run.tallies.items() if what == "P5 runner"}
    if not tally.get("runners"):
        return None
    runners, tiers = tally["runners"], tally.get("tiers", 0)
    return (f"{run.spec.name} runner: {tiers} tiers captured on {runners} backends ({tiers / runners:.1f} each, "
            f"largest first), {tally.get('keys', 0)} keys; {tally.get('shared_bs', 0)} backends had tiers sharing bs; "
            f"{tally.get('replays', 0)} replays interleaved")


def stores_line(run: Any) -> str | None:
    """How P10 judged the fp8 SWA ring store over the run: through the builder's own store kernel, or the harness's
    model of it (None when P10 judged no such store).  A held P10 says which it was."""
    tally = {k: v for (what, k), v in run.tallies.items() if what == "P10 stores"}
    states = {k: v for (what, k), v in run.tallies.items() if what == "P10 states"}
    kernel, model = tally.get("kernel", 0), tally.get("model", 0)
    if not kernel + model:
        return None
    pools = {k: v for (what, k), v in run.tallies.items() if what == "P10 compressed"}
    reads = {k: v for (what, k), v in run.tallies.items() if what == "P10 page reads"}
    suffix = ""
    if reads:
        suffix += (f"; page-table reads: {reads.get('judged', 0)} request builds judged, {reads.get('unpaged', 0)} not "
                   "(a table row that is not paged)")
    if pools:
        suffix += (f"; compressed pools: {pools.get('judged', 0)} request builds judged, {pools.get('unpaged', 0)} "
                   "not (a table row that is not paged: the strategies' deliberate holes)")
    if states:
        suffix += (f"; compressor states: {states.get('judged', 0)} write plans judged, {states.get('unfit', 0)} not "
                   "(a state ring too small for a step's live states)")
    line = (f"{run.spec.name} stores: the fp8 SWA store of {kernel + model} builds judged, {kernel} through the "
            "builder's own store kernel")
    if model:
        declined = tally.get("kernel_declined", 0)
        why = (f"{declined} where its kernel could not run (no store module in the release, or a pool over its "
               "size guard)" if declined else "the builder brings no store kernel")
        line += f", {model} through the harness's model of it ({why})"
    return line + suffix


def streams_line(runs: Sequence[Any]) -> str | None:
    """What the audit's stream model (asynchronous copies as a stream orders them: audit/streams.py) saw over the whole
    check: the copies from pinned memory it tracked and how many were faults; None when nothing ran."""
    if not runs:
        return None
    copies = sum(run.tallies.get(("stream model", "pinned_copies"), 0) for run in runs)
    faults = sum(run.tallies.get(("stream model", "faults"), 0) for run in runs)
    line = (f"stream model: {copies} asynchronous copies from pinned memory seen, {faults} faults (a pinned source "
            "rewritten before the stream read it: stale_async_copy)")
    return line + ("; the builder stages no copy from pinned memory, so the model judged none" if not copies else "")
