"""``metadata-builders power``: how much harder our strategies hit than plain random sampling.

For every mutant of :mod:`metadata_builders.families.dsv4.mutants` and every seed, two
generators get the same time budget and the same oracle:

* **hypothesis** -- ``strategies.verify_batches(divergence=None)``, seeded
  (``derandomize=False`` plus ``hypothesis.seed``), with shrinking;
* **random** -- the baseline peers use: :func:`random_batches`, seeded
  ``random.Random`` batches drawn uniformly from the *same input domain* as the
  strategies (every value the strategies can produce, each choice uniform and
  independent), with no boundary targeting and no shrinking.  So what random
  sampling misses, it misses for want of aim, not for want of reach.

The oracle is the harness's properties (P1..P10) in order on each batch, stopping
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

=============  ==========================================================================
module         what it holds
=============  ==========================================================================
``baseline``   :func:`random_batches`: the random generator peers use, uniform over the
               strategies' input domain
``runs``       :func:`first_failure` (the oracle), :class:`Trial`, :func:`hypothesis_trial`,
               :func:`random_trial` and :func:`run_power` (every trial on a process pool)
``report``     per-mutant medians, the markdown tables, the figure and ``add_cli``
               (``metadata-builders power``, which writes ``power.md/.json/.png``)
=============  ==========================================================================
"""

from __future__ import annotations

from metadata_builders.families.dsv4.tools.power.baseline import random_batches
from metadata_builders.families.dsv4.tools.power.report import add_cli
from metadata_builders.families.dsv4.tools.power.runs import (
    GENERATORS,
    HYPOTHESIS_FOCUSES,
    ROUND_EXAMPLES,
    Trial,
    first_failure,
    hypothesis_trial,
    random_trial,
    run_power,
)

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
