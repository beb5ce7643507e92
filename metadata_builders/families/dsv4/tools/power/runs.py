"""The catalogue runs of ``metadata-builders power``: each generator against each mutant, under a time budget.

A trial is one generator (``hypothesis``: our strategies, seeded, with
shrinking; ``random``: :func:`~metadata_builders.families.dsv4.tools.power.baseline.random_batches`)
against one mutant with one seed.  The oracle, :func:`first_failure`, runs the
harness's properties in order on each batch and stops at the first failure
(builds are memoised per batch, so properties share them); a generator *kills*
a mutant when the oracle fails within the budget.  :func:`run_power` runs every
trial, and each property's examples per second on the unmutated ``hip``
builder, on a process pool.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.builders import MemoBuilder
from metadata_builders.families.dsv4.mutants import mutant_builder
from metadata_builders.families.dsv4.properties import PROPERTIES, PropertySpec
from metadata_builders.families.dsv4.tools.power.baseline import random_batches

__all__ = [
    "GENERATORS",
    "HYPOTHESIS_FOCUSES",
    "ROUND_EXAMPLES",
    "Trial",
    "first_failure",
    "hypothesis_trial",
    "random_trial",
    "run_power",
]

GENERATORS = ("hypothesis", "random")
"""The two generators compared, in table order."""


# -- the oracle ----------------------------------------------------------------------------------


def _applies(spec: PropertySpec, batch: VerifyBatch) -> bool:
    return spec.why_not(batch) is None


def first_failure(builder: Any, batch: VerifyBatch,
                  props: tuple[PropertySpec, ...] = PROPERTIES) -> PropertyFailure | None:
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
            from metadata_builders.families.dsv4.properties.spec import raised_failure

            return raised_failure(spec.name, exc)
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

    from metadata_builders.families.dsv4.strategies import verify_batches

    trial = Trial(mutant, "hypothesis", seed)
    search = _HypothesisSearch(builder, trial, budget, shrink_budget)
    run_settings = settings(
        max_examples=ROUND_EXAMPLES, database=None, derandomize=False, deadline=None, print_blob=False,
        verbosity=Verbosity.quiet, phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck),
    )
    round_ = 0
    while not trial.killed and time.perf_counter() - search.start <= budget:
        focus = HYPOTHESIS_FOCUSES[round_ % len(HYPOTHESIS_FOCUSES)]
        test = run_settings(hypothesis_seed(seed * 1_000_003 + round_)(
            given(batch=verify_batches(**focus))(search.check)))
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
    from metadata_builders.families.dsv4.builders import get_builder

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

    from metadata_builders.families.dsv4.strategies import verify_batches

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
                verdict = f"killed by {result.prop} after {result.examples} ex, {result.seconds:.2f}s" \
                    if result.killed else f"survived {result.examples} ex"
                text = f"{result.mutant} {result.generator} seed={result.seed}: {verdict}"
            else:
                rates.append(result)
                text = f"rate {result['property']} {result['generator']}: {result['per_second']} ex/s"
            if progress is not None:
                progress(f"[{done}/{len(futures)}] {text}")
    order = {m: i for i, m in enumerate(mutants)}
    trials.sort(key=lambda t: (order[t.mutant], t.generator, t.seed))
    return trials, rates

