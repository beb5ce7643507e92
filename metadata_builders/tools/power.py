"""``metadata-builders power``: how much harder our strategies hit than plain random sampling.

For every mutant of :mod:`metadata_builders.tools.mutants` and every seed, two
generators get the same time budget and the same oracle:

* **hypothesis** -- ``strategies.verify_batches(divergence=None)``, seeded
  (``derandomize=False`` plus ``hypothesis.seed``), with shrinking;
* **random** -- the baseline peers use: :func:`random_batches`, seeded
  ``random.Random`` batches drawn uniformly from the *same input domain* as the
  strategies (every value the strategies can produce, each choice uniform and
  independent), with no boundary targeting and no shrinking.  So what random
  sampling misses, it misses for want of aim, not for want of reach.

The oracle is the harness's properties P1..P7 in order on each batch, stopping
at the first failure (builds are memoised per batch, so properties share them).
A generator *kills* a mutant when the oracle fails within the budget.  Reported
per mutant: kill rate over seeds, median examples and seconds to the first kill,
and the median size of the counterexample each reports (Hypothesis: its shrunk
batch, shrinking bounded by the same budget; random: the first failing batch).
A second table gives examples per second of each property under each generator
on the unmutated ``hip`` builder (each property with its own batch kind).

Worked example of one trial: mutant ``tier_slack_first_real_row``, seed 2,
budget 8 s.  Hypothesis draws an ``absorbed`` tier (no pad rows, slack on a real
row) within a few examples and P1 fails; it then shrinks to two requests of one
token each.  The random baseline kills it only when it happens to draw a ragged
graph batch with ``padded_bs == bs``, slack and no cap, and reports that batch
(e.g. 6 requests, 14 tokens) as is.

Timings are wall clock on this machine; the run is a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator

from metadata_builders.batch import Divergence, Geometry, GraphTier, VerifyBatch
from metadata_builders.builders import MemoBuilder
from metadata_builders.errors import InvalidBatch, PropertyFailure
from metadata_builders.properties import PROPERTIES, PropertySpec
from metadata_builders.tier import tier_verify_lens
from metadata_builders.tools.mutants import mutant_builder, select_mutants

__all__ = [
    "GENERATORS",
    "HYPOTHESIS_FOCUSES",
    "ROUND_EXAMPLES",
    "Trial",
    "add_cli",
    "first_failure",
    "hypothesis_trial",
    "random_batches",
    "random_trial",
    "run_power",
]

GENERATORS = ("hypothesis", "random")
"""The two generators compared, in table order."""

_BASELINE_MAX_BS = 16
_BASELINE_MAX_DRAFT = 8
_BASELINE_MAX_PAD_ROWS = 8
_SMALL_OR_NAMED = {
    "page_size": (16, 32, 64, 256),
    "swa_window": (16, 32, 64, 128),
    "page_index_align": (16, 32, 64),
}
"""Per geometry dimension, the values the strategies use besides 1..8."""


# -- the baseline generator ----------------------------------------------------------------------


def random_batches(
    rng: random.Random,
    *,
    ragged: bool | None = None,
    graph: bool | None = None,
    divergence: bool | None = None,
) -> Iterator[VerifyBatch]:
    """Endless seeded random batches over the strategies' input domain, drawn uniformly.

    Every choice is uniform and independent: ``num_draft_tokens`` in 1..8, bs in
    1..16, each geometry dimension from the values the strategies use (1..8 or a
    named middle/upstream value; a ring of 1..8, ``window + draft - 1`` or the
    largest the table allows), each prefix in 1..``MAX_CONTEXT`` less its tokens,
    each ragged verify length in 1..draft; half the batches ragged, half DSpark,
    half with a graph tier (0..8 pad rows, a ragged tier's total up to
    ``padded_bs * (draft + 2)``, half of ragged tiers capped at a cap in
    ``max(verify_lens)..draft + 2``, the absorbed slack past the table width half
    the time it can be); ``max_context`` the tightest width plus 0..8; a shuffled
    pool of locations with 0..3 ``-1`` or sentinel table entries and 0..2
    ``full_to_swa`` holes; and, half the time, a divergence: one row redrawn
    uniformly in its valid range.  ``ragged``/``graph``/``divergence`` pin a coin
    as ``verify_batches`` does.  No boundary is aimed at and nothing shrinks.
    """
    while True:
        batch = _random_batch(rng, ragged, graph, divergence)
        if batch is not None:
            yield batch


def _coin(rng: random.Random, pinned: bool | None) -> bool:
    return rng.random() < 0.5 if pinned is None else pinned


def _dimension(rng: random.Random, name: str) -> int:
    return rng.choice((*range(1, 9), *_SMALL_OR_NAMED[name]))


def _random_tier(rng: random.Random, real: list[int], bs: int, draft: int, is_ragged: bool) -> GraphTier:
    padded_bs = bs + rng.randint(0, _BASELINE_MAX_PAD_ROWS)
    if not is_ragged:
        return GraphTier(padded_bs, padded_bs * draft, rng.randint(1, draft) if rng.random() < 0.5 else None)
    total = rng.randint(sum(real), max(sum(real), padded_bs * (draft + 2)))
    cap = rng.randint(max(real), draft + 2) if rng.random() < 0.5 else None
    return GraphTier(padded_bs, total, cap)


def _random_batch(rng: random.Random, ragged: bool | None, graph: bool | None, divergence: bool | None) -> VerifyBatch | None:
    from strategies import MAX_CONTEXT

    draft = rng.randint(1, _BASELINE_MAX_DRAFT)
    bs = rng.randint(1, _BASELINE_MAX_BS)
    is_ragged, is_dspark, has_graph, diverged = (_coin(rng, ragged), _coin(rng, None), _coin(rng, graph),
                                                  _coin(rng, divergence))
    real = [rng.randint(1, draft) for _ in range(bs)] if is_ragged else [draft] * bs
    tier = _random_tier(rng, real, bs, draft, is_ragged) if has_graph else None
    lens = list(real) if tier is None else (
        tier_verify_lens(real, tier.padded_bs, tier.graph_num_tokens, tier.cap) if is_ragged
        else [draft] * tier.padded_bs)
    fits = list(lens)
    if tier is not None and tier.padded_bs == bs and rng.random() < 0.5:
        fits[bs - 1] = real[-1]  # the absorbed slack may run past the width (F2c)
    if max(fits) >= MAX_CONTEXT:
        return None
    seq_lens = [rng.randint(1, MAX_CONTEXT - e) for e in fits[:bs]]
    need = max([s + e for s, e in zip(seq_lens, fits)] + [1 + e for e in fits[bs:]])
    max_context = min(MAX_CONTEXT, need + rng.randint(0, 8))
    num_slots = bs + 1 + rng.randint(0, 4)
    slots = rng.sample(range(1, num_slots), bs)
    pool = list(range(num_slots * max_context + rng.randint(0, 3)))
    rng.shuffle(pool)
    table = [pool[s * max_context : (s + 1) * max_context] for s in range(num_slots)]
    full_to_swa = list(range(len(pool)))
    rng.shuffle(full_to_swa)
    out_cache_loc = [table[slot][s + j] for slot, s, e in zip(slots, seq_lens, real) for j in range(e)]
    sentinel = len(full_to_swa)
    for _ in range(rng.randint(0, 3)):
        b = rng.randrange(bs)
        table[slots[b]][rng.randrange(seq_lens[b] + real[b])] = rng.choice((-1, sentinel))
    for _ in range(rng.randint(0, 2)):
        full_to_swa[rng.randrange(len(full_to_swa))] = -1
    full_to_swa.append(-1)
    ring = rng.choice((*range(1, 9), None, 0))
    window = _dimension(rng, "swa_window")
    if ring is None:
        ring = window + draft - 1
    elif ring == 0:
        ring = 2**31 // num_slots - rng.randint(0, 3)
    geometry = Geometry(
        page_size=_dimension(rng, "page_size"), swa_window=window, ring_size=ring,
        unified_swa_window=rng.choice((*range(1, 9), window, 128)), page_index_align=_dimension(rng, "page_index_align"),
    )
    try:
        batch = VerifyBatch(
            seq_lens=seq_lens, req_pool_indices=slots, verify_lens=real if is_ragged else None,
            num_draft_tokens=draft, out_cache_loc=out_cache_loc, req_to_token=table, full_to_swa=full_to_swa,
            is_dspark=is_dspark, geometry=geometry, graph=tier,
        )
    except InvalidBatch:
        return None
    if not diverged:
        return batch
    return _random_divergence(rng, batch, divergence)


def _random_divergence(rng: random.Random, batch: VerifyBatch, pinned: bool | None) -> VerifyBatch | None:
    """One row of the device lengths redrawn uniformly in its valid range (the strategies' domain)."""
    rows = batch.bs
    if batch.verify_lens is None and batch.graph is not None and rng.random() < 0.5:
        rows = batch.graph.padded_bs
    host, lo, hi, _ = batch.divergence_bounds(rows)
    row = rng.randrange(rows)
    device = list(host)
    device[row] = rng.randint(lo[row], max(lo[row], hi[row]))
    if device == host:
        return None if pinned else batch
    try:
        return batch.replace(divergence=Divergence(tuple(device)))
    except InvalidBatch:
        return None if pinned else batch


# -- the oracle ----------------------------------------------------------------------------------


def _applies(spec: PropertySpec, batch: VerifyBatch) -> bool:
    return spec.applies(batch) is None


def first_failure(builder: Any, batch: VerifyBatch, props: tuple[PropertySpec, ...] = PROPERTIES) -> PropertyFailure | None:
    """Run ``props`` in order on one batch; the first failure (a builder crash counts), or None."""
    memo = MemoBuilder(builder)
    for spec in props:
        if not _applies(spec, batch):
            continue
        try:
            spec.check(memo, batch)
        except PropertyFailure as failure:
            return failure
        except Exception as exc:  # noqa: BLE001 - a crashing builder is a kill, as in the runner
            return PropertyFailure(spec.name, f"builder raised {type(exc).__name__}: {exc}")
    return None


# -- trials ----------------------------------------------------------------------------------------


@dataclass
class Trial:
    """One generator against one mutant with one seed and a time budget."""

    mutant: str
    generator: str
    seed: int
    killed: bool = False
    prop: str | None = None
    """The property that failed first."""
    examples: int = 0
    """Examples run before the kill (the killing one included), or in the whole budget."""
    seconds: float | None = None
    """Seconds to the first failure (before shrinking)."""
    bs: int | None = None
    """Counterexample: requests."""
    tokens: int | None = None
    """Counterexample: real verify tokens."""
    shrink_seconds: float = 0.0


class _OutOfBudget(BaseException):
    """Stops a Hypothesis run when its time is spent; not an ``Exception``, so it is not shrunk."""


HYPOTHESIS_FOCUSES: tuple[dict[str, Any], ...] = (
    {"divergence": None},
    {"graph": True, "ragged": True, "divergence": None},
    {"ragged": False, "divergence": None},
    {"divergence": True},
)
"""The ``verify_batches`` arguments the Hypothesis side cycles through, one short run each:
the union of the harness's per-property focuses (``PropertySpec.focuses``), divergence drawn."""

ROUND_EXAMPLES = 25
"""Examples per Hypothesis run before the next focus (and seed) takes over."""


class _HypothesisSearch:
    """The body of the Hypothesis side's runs: search under a budget, then shrink under another."""

    def __init__(self, builder: Any, trial: Trial, budget: float, shrink_budget: float) -> None:
        self.builder, self.trial = builder, trial
        self.budget, self.shrink_budget = budget, shrink_budget
        self.start = time.perf_counter()
        self.killer: PropertySpec | None = None
        self.kill_time = 0.0
        self.best: VerifyBatch | None = None

    def check(self, batch: VerifyBatch) -> None:
        """One example: the full oracle while searching, the killing property while shrinking."""
        now = time.perf_counter()
        if self.killer is None:
            if now - self.start > self.budget:
                raise _OutOfBudget
            self.trial.examples += 1
            failure = first_failure(self.builder, batch)
            if failure is None:
                return
            self.trial.killed, self.trial.prop = True, failure.prop
            self.trial.seconds = time.perf_counter() - self.start
            self.killer = next(p for p in PROPERTIES if p.name == failure.prop)
            self.kill_time, self.best = time.perf_counter(), batch
            raise failure
        if now - self.kill_time > self.shrink_budget:
            raise _OutOfBudget
        # Shrinking: only the property that killed the mutant decides.
        failure = first_failure(self.builder, batch, (self.killer,))
        if failure is None:
            return
        if batch.size_key() < self.best.size_key():
            self.best = batch
        raise failure


def hypothesis_trial(builder: Any, mutant: str, seed: int, budget: float, shrink_budget: float) -> Trial:
    """Our strategies under ``budget`` seconds of search, then up to ``shrink_budget`` of shrinking.

    Runs of :data:`ROUND_EXAMPLES` examples cycle through :data:`HYPOTHESIS_FOCUSES`,
    each with its own seed derived from ``seed``, as the harness's focused runs do.
    """
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed

    from strategies import verify_batches

    trial = Trial(mutant, "hypothesis", seed)
    search = _HypothesisSearch(builder, trial, budget, shrink_budget)
    run_settings = settings(
        max_examples=ROUND_EXAMPLES, database=None, derandomize=False, deadline=None, print_blob=False,
        verbosity=Verbosity.quiet, phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck),
    )
    round_ = 0
    while not trial.killed and time.perf_counter() - search.start <= budget:
        focus = HYPOTHESIS_FOCUSES[round_ % len(HYPOTHESIS_FOCUSES)]
        test = run_settings(hypothesis_seed(seed * 1_000_003 + round_)(given(batch=verify_batches(**focus))(search.check)))
        round_ += 1
        try:
            test()
        except _OutOfBudget:
            break
        except Exception:  # noqa: BLE001 - the (shrunk) failure: recorded by the search already
            break
    if search.best is not None:
        trial.bs, trial.tokens = search.best.bs, search.best.num_real_tokens
        trial.shrink_seconds = time.perf_counter() - search.kill_time
    return trial


def random_trial(builder: Any, mutant: str, seed: int, budget: float) -> Trial:
    """The baseline under ``budget`` seconds; reports the first failing batch unshrunk."""
    trial = Trial(mutant, "random", seed)
    rng = random.Random(seed)
    start = time.perf_counter()
    for batch in random_batches(rng):
        if time.perf_counter() - start > budget:
            break
        trial.examples += 1
        failure = first_failure(builder, batch)
        if failure is not None:
            trial.killed, trial.prop, trial.seconds = True, failure.prop, time.perf_counter() - start
            trial.bs, trial.tokens = batch.bs, batch.num_real_tokens
            break
    return trial


def _worker_init() -> None:
    import torch

    torch.set_num_threads(1)


def _run_trial(mutant: str, generator: str, seed: int, budget: float) -> Trial:
    builder = mutant_builder(mutant)
    if generator == "hypothesis":
        return hypothesis_trial(builder, mutant, seed, budget, shrink_budget=budget)
    return random_trial(builder, mutant, seed, budget)


def _throughput(spec_name: str, generator: str, seconds: float, seed: int) -> dict[str, Any]:
    """Examples per second of one property on the unmutated hip builder.

    The time is split evenly over the property's focuses (``PropertySpec.focuses``:
    the batch kinds the harness draws it on); the random baseline gets the same
    ``ragged``/``graph``/``divergence`` pins.
    """
    from metadata_builders.builders import get_builder

    spec = next(p for p in PROPERTIES if p.name == spec_name)
    builder = get_builder("hip")
    count = 0
    start = time.perf_counter()
    share = seconds / len(spec.focuses)
    for index, focus in enumerate(spec.focuses):
        deadline = start + share * (index + 1)
        if generator == "random":
            count += _random_throughput(spec, builder, focus, seed + index, deadline)
        else:
            count += _hypothesis_throughput(spec, builder, focus, seed + index, deadline)
    elapsed = time.perf_counter() - start
    return {"property": spec_name, "generator": generator, "examples": count, "seconds": round(elapsed, 2),
            "per_second": round(count / elapsed, 2) if elapsed else None}


def _random_throughput(spec: PropertySpec, builder: Any, focus: dict[str, Any], seed: int, deadline: float) -> int:
    count = 0
    for batch in random_batches(random.Random(seed), **focus):
        if time.perf_counter() > deadline:
            break
        if _applies(spec, batch):
            spec.check(builder, batch)
        count += 1
    return count


def _hypothesis_throughput(spec: PropertySpec, builder: Any, focus: dict[str, Any], seed: int, deadline: float) -> int:
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed

    from strategies import verify_batches

    count = 0

    def body(batch: VerifyBatch) -> None:
        nonlocal count
        if time.perf_counter() > deadline:
            raise _OutOfBudget
        spec.check(builder, batch)
        count += 1

    test = settings(
        max_examples=10**6, database=None, derandomize=False, deadline=None, print_blob=False,
        verbosity=Verbosity.quiet, phases=(Phase.generate,), suppress_health_check=list(HealthCheck),
    )(hypothesis_seed(seed)(given(batch=verify_batches(**focus))(body)))
    try:
        test()
    except _OutOfBudget:
        pass
    return count


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
            f"| {gen} | {100 * t['kill_rate']:.0f}% ({t['kills']}/{t['trials']}) | {t['mutants_always_killed']}/{len(subset)} "
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
            f"| {_fmt(hh['examples'])} | {_fmt(rr['examples'])} | {_fmt(hh['seconds'], '.2f')} | {_fmt(rr['seconds'], '.2f')} "
            f"| {_fmt(hh['bs'])}/{_fmt(hh['tokens'])} | {_fmt(rr['bs'])}/{_fmt(rr['tokens'])} "
            f"| {','.join(hh['by']) or '–'} | {','.join(rr['by']) or '–'} |"
        )
    return out


def _rates_section(rates: list[dict[str, Any]], rate_seconds: float) -> list[str]:
    """Examples per second of each property on the unmutated builder, under each generator."""
    out = [
        f"## Examples per second per property (unmutated `hip`, {rate_seconds:g} s each)",
        "",
        "Each property on its own batch kind (`PropertySpec.focuses`, time split evenly: P1 any / ragged graph / uniform, P2 uniform, P5 graph, P6 divergence).",
        "",
        "| property | what | hypothesis ex/s | random ex/s |",
        "|---|---|---|---|",
    ]
    by = {(x["property"], x["generator"]): x for x in rates}
    for spec in PROPERTIES:
        hx, rx = by.get((spec.name, "hypothesis")), by.get((spec.name, "random"))
        out.append(f"| {spec.name} | {spec.title} | {_fmt(hx and hx['per_second'])} | {_fmt(rx and rx['per_second'])} |")
    return out


def _markdown(rows: list[dict[str, Any]], rates: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """docs/power.md: how it was run, the summary, the hard half, per mutant, examples per second."""
    out = [
        "# Harness power: Hypothesis strategies vs random sampling",
        "",
        (
            f"Generated by `{meta['command']}` ({meta['seeds']} seeds, {meta['budget']:g} s search budget per "
            f"(mutant, seed, generator), Hypothesis shrinking bounded by the same budget; {meta['jobs']} worker(s), "
            f"{meta['wall_seconds']:.0f} s wall clock). Oracle: properties P1..P8 in order, first failure kills. "
            "Baseline: `metadata_builders.tools.power.random_batches`, drawn uniformly from the same input domain as "
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
        f"Mutant kills: Hypothesis strategies vs random sampling ({meta['seeds']} seeds, {meta['budget']:g} s per trial)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_power(
    mutants: list[str], seeds: int, budget: float, jobs: int, rate_seconds: float,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Trial], list[dict[str, Any]]]:
    """Every (mutant, seed, generator) trial and the per-property rates, on ``jobs`` processes."""
    tasks = [(m, g, s, budget) for m in mutants for s in range(seeds) for g in GENERATORS]
    rate_tasks = [(p.name, g, rate_seconds, 0) for p in PROPERTIES for g in GENERATORS] if rate_seconds > 0 else []
    trials: list[Trial] = []
    rates: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init) as pool:
        futures = {pool.submit(_run_trial, *t): t for t in tasks}
        futures.update({pool.submit(_throughput, *t): t for t in rate_tasks})
        for done, future in enumerate(as_completed(futures), 1):
            result = future.result()
            if isinstance(result, Trial):
                trials.append(result)
                verdict = f"killed by {result.prop} after {result.examples} ex, {result.seconds:.2f}s" if result.killed \
                    else f"survived {result.examples} ex"
                text = f"{result.mutant} {result.generator} seed={result.seed}: {verdict}"
            else:
                rates.append(result)
                text = f"rate {result['property']} {result['generator']}: {result['per_second']} ex/s"
            if progress is not None:
                progress(f"[{done}/{len(futures)}] {text}")
    order = {m: i for i, m in enumerate(mutants)}
    trials.sort(key=lambda t: (order[t.mutant], t.generator, t.seed))
    return trials, rates


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
            "rate_seconds": args.rate_seconds, "wall_seconds": wall}
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
