"""The report of ``metadata-builders power``: per-mutant medians, the markdown tables, the figure, the command.

The trials become one row per mutant (kill rate over seeds, median examples
and seconds to the first kill, median counterexample size, the killing
properties, per generator); the command writes ``power.md``, ``power.json`` and
``power.png`` from those rows and the per-property rates.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict
from typing import Any

from metadata_builders.families.dsv4.mutants import select_mutants
from metadata_builders.families.dsv4.properties import PROPERTIES
from metadata_builders.families.dsv4.tools.power.runs import GENERATORS, Trial, run_power

__all__ = ["add_cli"]

# -- aggregation and output ---------------------------------------------------------------------------


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _summarise(trials: list[Trial], mutants: list[str], seeds: int) -> list[dict[str, Any]]:
    rows = []
    for mutant in mutants:
        row: dict[str, Any] = {"mutant": mutant}
        for gen in GENERATORS:
            mine = [t for t in trials if t.mutant == mutant and t.generator == gen]
            kills = [t for t in mine if t.killed]
            row[gen] = {
                "kills": len(kills), "seeds": len(mine),
                "examples": _median([t.examples for t in kills]),
                "seconds": _median([t.seconds for t in kills if t.seconds is not None]),
                "bs": _median([t.bs for t in kills if t.bs is not None]),
                "tokens": _median([t.tokens for t in kills if t.tokens is not None]),
                "by": sorted({t.prop for t in kills if t.prop}),
            }
        rows.append(row)
    return rows


def _fmt(value: float | None, spec: str = "g") -> str:
    if value is None:
        return "–"
    return format(value, spec)


def _totals(rows: list[dict[str, Any]], gen: str) -> dict[str, Any]:
    kills = sum(r[gen]["kills"] for r in rows)
    trials = sum(r[gen]["seeds"] for r in rows)
    always = sum(r[gen]["kills"] == r[gen]["seeds"] for r in rows)
    never = sum(r[gen]["kills"] == 0 for r in rows)
    return {
        "kill_rate": kills / trials if trials else 0.0, "kills": kills, "trials": trials,
        "mutants_always_killed": always, "mutants_never_killed": never,
        "median_examples": _median([r[gen]["examples"] for r in rows if r[gen]["examples"] is not None]),
        "median_seconds": _median([r[gen]["seconds"] for r in rows if r[gen]["seconds"] is not None]),
        "median_tokens": _median([r[gen]["tokens"] for r in rows if r[gen]["tokens"] is not None]),
        "median_bs": _median([r[gen]["bs"] for r in rows if r[gen]["bs"] is not None]),
    }


def _hard(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mutants random sampling needs more than 5 examples for (median over its kills), or never kills."""
    return [r for r in rows if r["random"]["kills"] == 0 or (r["random"]["examples"] or 0) > 5]


def _summary_table(subset: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[str]:
    out = [
        (
            "| generator | kill rate | mutants killed on every seed | never killed | median examples to kill | "
            "median s to kill | median counterexample (bs / tokens) |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for gen in GENERATORS:
        t = _totals(subset, gen)
        out.append(
            f"| {gen} | {100 * t['kill_rate']:.0f}% ({t['kills']}/{t['trials']}) "
            f"| {t['mutants_always_killed']}/{len(subset)} "
            f"| {t['mutants_never_killed']} | {_fmt(t['median_examples'])} | {_fmt(t['median_seconds'], '.2f')} "
            f"| {_fmt(t['median_bs'])} / {_fmt(t['median_tokens'])} |"
        )
    return out


def _per_mutant_table(rows: list[dict[str, Any]]) -> list[str]:
    """One line per mutant: kill rate, examples, seconds, counterexample and killer under each generator."""
    out = [
        (
            "| mutant | kill rate H | kill rate R | examples H | examples R | s to kill H | s to kill R | "
            "counterexample H (bs/tok) | counterexample R (bs/tok) | killed by H | killed by R |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        hh, rr = row["hypothesis"], row["random"]
        out.append(
            f"| `{row['mutant']}` | {hh['kills']}/{hh['seeds']} | {rr['kills']}/{rr['seeds']} "
            f"| {_fmt(hh['examples'])} | {_fmt(rr['examples'])} "
            f"| {_fmt(hh['seconds'], '.2f')} | {_fmt(rr['seconds'], '.2f')} "
            f"| {_fmt(hh['bs'])}/{_fmt(hh['tokens'])} | {_fmt(rr['bs'])}/{_fmt(rr['tokens'])} "
            f"| {','.join(hh['by']) or '–'} | {','.join(rr['by']) or '–'} |"
        )
    return out


def _rates_section(rates: list[dict[str, Any]], rate_seconds: float) -> list[str]:
    """Examples per second of each property on the unmutated builder, under each generator."""
    out = [
        f"## Examples per second per property (unmutated `hip`, {rate_seconds:g} s each)",
        "",
        "Each property on its own batch kind (`PropertySpec.focuses`, time split evenly: P1 any / ragged graph / "
        "uniform, P2 uniform, P5 graph / ragged graph / DSpark uniform graph, P6 divergence, P7 any / DSpark uniform "
        "graph).",
        "",
        "| property | what | hypothesis ex/s | random ex/s |",
        "|---|---|---|---|",
    ]
    by = {(x["property"], x["generator"]): x for x in rates}
    for spec in PROPERTIES:
        hx, rx = by.get((spec.name, "hypothesis")), by.get((spec.name, "random"))
        out.append(f"| {spec.name} | {spec.title} | {_fmt(hx and hx['per_second'])} "
                   f"| {_fmt(rx and rx['per_second'])} |")
    return out


def _markdown(rows: list[dict[str, Any]], rates: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """docs/power.md: how it was run, the summary, the hard half, per mutant, examples per second."""
    out = [
        "# Harness power: Hypothesis strategies vs random sampling",
        "",
        (
            f"Generated by `{meta['command']}` ({meta['seeds']} seeds, {meta['budget']:g} s search budget per "
            f"(mutant, seed, generator), Hypothesis shrinking bounded by the same budget; {meta['jobs']} worker(s), "
            f"{meta['wall_seconds']:.0f} s wall clock). Oracle: properties {meta.get('oracle', 'P1..P8')} in order, "
            "first failure kills. "
            "Baseline: `metadata_builders.families.dsv4.tools.power.random_batches`, drawn uniformly from the same "
            "input domain as "
            "the strategies (geometries, large rings, `-1` and sentinel table entries, `full_to_swa` holes, capped and "
            "absorbing tiers, valid divergences), with no boundary targeting and no shrinking."
        ),
        "",
        "## Summary: the whole catalogue",
        "",
        *_summary_table(rows, rows),
        "",
        "Medians in the summary are medians of the per-mutant medians, over mutants killed at least once.",
        "",
        "## The hard half",
        "",
        "Mutants random sampling needs more than 5 examples for (median over its kills), or never kills:",
        ", ".join(f"`{m['mutant']}`" for m in _hard(rows)) + ".",
        "",
        *_summary_table(_hard(rows), rows),
        "",
        "## Per mutant",
        "",
        *_per_mutant_table(rows),
        "",
        *_rates_section(rates, meta["rate_seconds"]),
    ]
    return "\n".join(out) + "\n"


def _plot(rows: list[dict[str, Any]], path: str, meta: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["mutant"] for r in rows]
    y = list(range(len(names)))
    colors = {"hypothesis": "#1f77b4", "random": "#ff7f0e"}
    fig, axes = plt.subplots(1, 3, figsize=(15, 0.32 * len(names) + 2.2), sharey=True)
    height = 0.38
    panels = (
        ("kill rate over seeds", lambda g: g["kills"] / g["seeds"] if g["seeds"] else 0.0, False),
        ("median seconds to first kill (log)", lambda g: g["seconds"], True),
        ("median counterexample tokens (log)", lambda g: g["tokens"], True),
    )
    for ax, (title, value, log) in zip(axes, panels):
        for k, gen in enumerate(GENERATORS):
            vals = [value(r[gen]) for r in rows]
            pos = [i + (k - 0.5) * height for i in y]
            ax.barh(pos, [v if v is not None else 0 for v in vals], height=height, color=colors[gen], label=gen)
            for p, v in zip(pos, vals):
                if v is None:
                    ax.text(0.0, p, " not killed", va="center", fontsize=6, color=colors[gen],
                            transform=ax.get_yaxis_transform())
        if log:
            ax.set_xscale("log")
            if "tokens" in title:
                ax.set_xlim(left=0.5)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(names, fontsize=8)
    axes[0].invert_yaxis()
    axes[0].set_xlim(0, 1.05)
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(
        f"Mutant kills: Hypothesis strategies vs random sampling ({meta['seeds']} seeds, "
        f"{meta['budget']:g} s per trial)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

def _stderr_line(text: str) -> None:
    """A progress line on stderr (the report itself goes to stdout)."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _cmd_power(args: argparse.Namespace) -> int:
    mutants = select_mutants(args.only)
    command = f"metadata-builders power --seeds {args.seeds} --budget {args.budget:g} --jobs {args.jobs}"
    if args.only:
        command += f" --only {args.only}"
    print(f"{command}: {len(mutants)} mutants x {args.seeds} seeds x {len(GENERATORS)} generators", flush=True)

    start = time.perf_counter()
    trials, rates = run_power(mutants, args.seeds, args.budget, args.jobs, args.rate_seconds, _stderr_line)
    wall = time.perf_counter() - start
    rows = _summarise(trials, mutants, args.seeds)
    meta = {"command": command, "seeds": args.seeds, "budget": args.budget, "jobs": args.jobs,
            "rate_seconds": args.rate_seconds, "wall_seconds": wall,
            "oracle": f"{PROPERTIES[0].name}..{PROPERTIES[-1].name}"}
    text = _markdown(rows, rates, meta)
    os.makedirs(args.out, exist_ok=True)
    md_path, png_path, json_path = (os.path.join(args.out, f"power.{ext}") for ext in ("md", "png", "json"))
    with open(md_path, "w") as fh:
        fh.write(text)
    with open(json_path, "w") as fh:
        json.dump({"meta": meta, "summary": {g: _totals(rows, g) for g in GENERATORS},
                   "hard_half": {"mutants": [r["mutant"] for r in _hard(rows)],
                                 "summary": {g: _totals(_hard(rows), g) for g in GENERATORS}}, "mutants": rows,
                   "rates": rates, "trials": [asdict(t) for t in trials]}, fh, indent=1)
        fh.write("\n")
    try:
        _plot(rows, png_path, meta)
    except ImportError:
        png_path = "(matplotlib not installed: pip install -e '.[plot]')"
    print(text)
    print(f"wrote {md_path}, {json_path}, {png_path} in {wall:.0f}s")
    return 0


def add_cli(sub: Any) -> None:
    """Register ``power`` on the CLI's subparsers."""
    p = sub.add_parser("power", help="benchmark: mutant kills of Hypothesis strategies vs random sampling")
    p.add_argument("--seeds", type=int, default=5, help="seeds per (mutant, generator) (default 5)")
    p.add_argument("--budget", type=float, default=10.0,
                   help="seconds of search per (mutant, seed, generator); Hypothesis may shrink as long again")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes (default 2)")
    p.add_argument("--only", default=None, metavar="NAME[,NAME]", help="only these mutants")
    p.add_argument("--rate-seconds", type=float, default=3.0,
                   help="seconds per (property, generator) for the examples/s table (0 to skip)")
    p.add_argument("--out", default="docs", metavar="DIR", help="where power.md, power.png, power.json go")
    p.set_defaults(func=_cmd_power)
