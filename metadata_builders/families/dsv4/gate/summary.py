"""What the gate says: the verdict table, what it could not judge, what blocks, as text and as Markdown.

The text goes to the terminal or CI log and ends with one line, ``gate: GREEN``
or ``gate: RED``, followed on the same line by what the gate could not judge
(DESIGN.md section 5: a green gate never hides a blind spot)::

    gate: GREEN (no new failures) in 74s; not judged: P1 on 34/100 batches, P5 on 80/80 (see above)

The Markdown (``--summary-md PATH``, and ``$GITHUB_STEP_SUMMARY`` when set) is
what a reviewer reads on the pull request page: the same table, the blind spots,
each new failure with its replay command and the picture of its smallest batch
(uploaded with the artifacts).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from metadata_builders.families.dsv4.gate.model import Crash, Side
from metadata_builders.families.dsv4.gate.replays import Replay
from metadata_builders.families.dsv4.gate.verdicts import PropertyVerdict
from metadata_builders.families.dsv4.gate.watched import Unjudged

__all__ = ["GateResult", "markdown", "text"]


@dataclass
class GateResult:
    """Everything a summary shows."""

    base: Side
    head: Side
    batches: int
    verdicts: list[PropertyVerdict]
    crash: Crash | None = None
    replays: list[Replay] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    """Lines worth knowing that are no verdict (a cached base, a crash that did not reproduce)."""
    unjudged_files: list[tuple[str, Unjudged]] = field(default_factory=list)
    """Files the change touches whose code this (CPU) gate does not run: never GREEN with any."""
    not_run: list[tuple[str, str]] = field(default_factory=list)
    """(path, why) for each watched Python file the change touches that no function of ran at head (measured,
    :mod:`~metadata_builders.gate.trace`): never GREEN with any, on any device."""
    switches: list[str] = field(default_factory=list)
    """What the head's builder says of upstream switches it does not run the other way (lines of a report)."""

    @property
    def blocking(self) -> list[str]:
        return (["crash"] if self.crash is not None else []) + [pv.row for pv in self.verdicts if pv.blocking]

    @property
    def judged(self) -> int:
        """(property, batch) pairs that got a verdict comparing base with head (a gate judging none is no gate)."""
        return sum(pv.counts[v] for pv in self.verdicts for v in ("held", "new", "changed", "pre-existing", "fixed",
                                                                 "partial"))

    @property
    def red(self) -> bool:
        """Exit 1: something blocks, or a changed file was not judged (on CPU, or by any job)."""
        return bool(self.blocking) or bool(self.unjudged_files) or bool(self.not_run)

    def rows(self) -> list[list[str]]:
        rows = [[pv.row, pv.title, "BLOCKS" if pv.blocking else "ok", pv.summary()] for pv in self.verdicts]
        if self.crash is not None:
            how = "alone" if self.crash.alone else "only after other batches"
            rows.insert(0, ["crash", "the head's process survives every batch", "BLOCKS",
                            (f"NEW: {self.crash.what} on batch {self.crash.index} ({how}); "
                             f"{self.crash.unfinished} batch(es) not judged")])
        return rows

    def blind_spots(self) -> list[tuple[str, str]]:
        """(property, what it could not judge) for every property with a blind spot."""
        return [(pv.row, why) for pv in self.verdicts if (why := pv.not_judged()) is not None]

    def verdict_line(self) -> str:
        blocking = self.blocking
        if blocking:
            head = f"gate: RED ({', '.join(blocking)} blocking)"
        elif self.not_run:
            head = ("gate: NOT JUDGED (" + "; ".join(f"{os.path.basename(path)} changed: {why}"
                                                    for path, why in self.not_run)
                    + "; the gate ran none of its code: no job of it judges the change)")
        elif self.unjudged_files:
            head = ("gate: NOT GREEN ON CPU (" + "; ".join(f"{os.path.basename(path)} changed: {entry.what}, "
                                                          f"{entry.stand_in}" for path, entry in self.unjudged_files)
                    + "; judged by the ROCm GPU job: gate --device cuda)")
        elif self.judged == 0:
            head = "gate: NOTHING JUDGED (no property compared base with head on any batch; not a verdict)"
        else:
            head = "gate: GREEN (no new failures)"
        line = f"{head} in {self.seconds:.0f}s"
        if self.not_run and (blocking or "NOT JUDGED" not in head):
            line += "; not run by the gate: " + ", ".join(os.path.basename(path) for path, _ in self.not_run)
        spots = [pv for pv in self.verdicts if pv.not_judged() is not None]
        if spots:
            line += "; not judged: " + ", ".join(_unjudged(pv) for pv in spots)
            line += " (see above)"
        return line


def _unjudged(pv: PropertyVerdict) -> str:
    """``P5 on 3/80 batches``, or ``P5 NOT JUDGED (80/80 batches)`` when most of the corpus went unjudged."""
    n = pv.counts["partial"] + pv.counts["not judged"]
    if pv.batches == 0 or pv.counts["not judged"] * 2 > pv.batches:
        return f"{pv.row} NOT JUDGED ({pv.counts['not judged']}/{pv.batches} batches)"
    return f"{pv.row} on {n}/{pv.batches} batches"


def _pre_existing(result: GateResult) -> str | None:
    pre = [pv for pv in result.verdicts if pv.counts["pre-existing"] or pv.counts["changed"]]
    if not pre:
        return None
    return "already failing at base (not blocking): " + "; ".join(
        f"{pv.row} {pv.counts['pre-existing'] + pv.counts['changed']} batch(es)"
        + (f" [{', '.join(sorted(pv.findings))}]" if pv.findings else " [no known finding: see docs/FINDINGS.md]")
        for pv in pre)


def text(result: GateResult) -> str:
    """The gate's report for a terminal or CI log, ending with the verdict line."""
    from metadata_builders.families.dsv4.runs.report import format_table, modes_table

    out = ["", format_table(["property", "what", "gate", "verdicts (batches)"], result.rows())]
    if (by_mode := modes_table([(pv.row, pv.by_mode) for pv in result.verdicts])) is not None:
        out += ["", by_mode]
    for replay in result.replays:
        label = "crash at head" if replay.prop == "crash" else f"{replay.prop} NEW at head"
        out += ["", f"{label}: {replay.new}", f"  replay: {replay.command}"]
        if replay.picture:
            out.append(f"  picture: {replay.picture}")
    if (pre := _pre_existing(result)) is not None:
        out += ["", pre]
    fixed = [pv for pv in result.verdicts if pv.counts["fixed"]]
    if fixed:
        out.append("fixed at head: " + "; ".join(f"{pv.row} {pv.counts['fixed']} batch(es)" for pv in fixed))
    spots = result.blind_spots()
    if spots:
        out += ["", "not judged (a blind spot of this builder, not a verdict):"]
        out += [f"  {prop}: {why}" for prop, why in spots]
    out += [f"note: {note}" for note in result.notes]
    for path, entry in result.unjudged_files:
        out.append(f"not run on CPU: {path} ({entry.what}; {entry.stand_in}): judged by the ROCm GPU job")
    for path, why in result.not_run:
        out.append(f"not run by the gate: {path} ({why}): not judged by this gate on any device")
    if result.switches:
        out += [""] + result.switches
    out += ["", result.verdict_line()]
    return "\n".join(out)


def _cell(text_: str) -> str:
    return text_.replace("|", "\\|").replace("\n", " ")


def markdown(result: GateResult, *, relative_to: str | None) -> str:
    """The summary as GitHub-flavoured Markdown; pictures linked relative to ``relative_to`` (None: named only)."""
    from metadata_builders.families.dsv4.runs.report import modes_table

    if result.blocking:
        icon = "🔴 RED"
    elif result.not_run:
        icon = "🟠 NOT JUDGED"
    elif result.unjudged_files:
        icon = "🟠 NOT GREEN ON CPU"
    elif result.judged == 0:
        icon = "⚪ NOTHING JUDGED"
    else:
        icon = "🟢 GREEN"
    out = [f"## metadata-builders gate: {icon}", "",
           (f"base = `{result.base.label}`, head = `{result.head.label}`; {result.batches} batches; "
            f"{result.seconds:.0f}s"), "", "| property | what | gate | verdicts (batches) |", "|---|---|---|---|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in result.rows()]
    if (by_mode := modes_table([(pv.row, pv.by_mode) for pv in result.verdicts])) is not None:
        out += ["", "```", by_mode, "```"]
    spots = result.blind_spots()
    out += ["", "### Not judged", ""]
    files = [f"- `{path}`: {_cell(why)}; the gate ran none of its code" for path, why in result.not_run]
    files += [f"- `{path}`: {_cell(entry.what)}, {_cell(entry.stand_in)}; judged by the ROCm GPU job"
              for path, entry in result.unjudged_files]
    out += [f"- **{prop}**: {_cell(why)}" for prop, why in spots] + files or ["Nothing: every property ran in full."]
    if result.switches:
        out += ["", "### Upstream switches", ""] + [f"- {_cell(line.strip())}" for line in result.switches]
    for replay in result.replays:
        title = "crash at head" if replay.prop == "crash" else f"{replay.prop} NEW at head"
        out += ["", f"### {title}", "", _cell(replay.new), "", "```bash", replay.command, "```"]
        if replay.picture:
            if relative_to is not None:
                link = os.path.relpath(replay.picture, relative_to)
                shown = "!" if link.endswith(".png") else ""  # a page (no matplotlib) is linked, not shown
                out += ["", f"{shown}[smallest batch for {replay.prop}]({link})"]
            else:
                name = os.path.basename(replay.picture)
                out += ["", f"Picture of the smallest batch: `{name}` in the uploaded artifacts."]
    if (pre := _pre_existing(result)) is not None:
        out += ["", "### Already failing at base", "", _cell(pre)]
    out += ["", f"`{result.verdict_line()}`", ""]
    return "\n".join(out)
