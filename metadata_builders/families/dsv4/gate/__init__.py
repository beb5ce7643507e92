"""``metadata-builders gate``: the differential pre-merge gate (DESIGN.md section 5).

Run from the backend's checkout on a pull request, it tests the code under
review against the base it would merge into, on the *same* examples.  One
module per concept:

=============  ===============================================================================
module         what it holds
=============  ===============================================================================
``model``      :class:`Outcome`, :class:`Side`, :class:`Crash`: what the pieces pass each other
``corpus``     the derandomized batches of every kind the properties focus on (``--per-kind``)
``evaluate``   every property on a batch, outcomes flushed batch by batch (items and isolation)
``running``    child processes watched: progress lines, the per-batch limit, what ended them
``sides``      one side's run: pytest-xdist over ``gate_items`` with the side's tree first
``isolation``  a head that crashed or hung: the smallest batch that does it alone
``cache``      side results by commit, harness version, corpus, properties, device
``refs``       sides from git refs (worktrees) or from builders; plain errors for bad refs
``verdicts``   per (property, batch): new, changed, pre-existing, fixed, partial, not judged
``replays``    replay files, replay commands, pictures of the smallest batches
``summary``    the report: text ending in ``gate: GREEN``/``RED`` with its blind spots; Markdown
``command``    the command and its options
=============  ===============================================================================

Worked example: head drops the dspark gate.  Base holds P4 on all 500 batches;
head fails 205 of them (``decision.used_output_size``): P4 is ``NEW 205/500``,
the smallest of them is written as ``build/metadata-builders/failures/P4-<hash>.json``
with the command that replays it, the gate exits 1.  A head killed by a signal on
batches of three requests or more gates red too: ``crash | NEW: killed by SIGKILL
on batch 41 (alone)``, with ``crash-<hash>.json``.

Exit codes: 0 green, 1 a new failure or a head that crashed or hung, 2 bad usage
or a setup error (an unknown ref, a tree without ``python/sglang``, an adapter
that cannot find an upstream piece, a base that cannot complete).
"""

from __future__ import annotations

from metadata_builders.errors import GateError
from metadata_builders.families.dsv4.gate.command import (
    BATCH_TIMEOUT,
    DEFAULT_FAILURES_DIR,
    add_cli,
    run_gate,
)
from metadata_builders.families.dsv4.gate.corpus import (
    PER_KIND,
    build_corpus,
    corpus_focuses,
    read_corpus,
    write_corpus,
)
from metadata_builders.families.dsv4.gate.model import (
    CHUNKS,
    ENV_BUILDER,
    ENV_CORPUS,
    ENV_DEVICE,
    ENV_OUT,
    ENV_PROPERTIES,
    Crash,
    Outcome,
    Side,
    shorten,
)
from metadata_builders.families.dsv4.gate.verdicts import PropertyVerdict, classify

__all__ = [
    "BATCH_TIMEOUT",
    "CHUNKS",
    "DEFAULT_FAILURES_DIR",
    "ENV_BUILDER",
    "ENV_CORPUS",
    "ENV_DEVICE",
    "ENV_OUT",
    "ENV_PROPERTIES",
    "PER_KIND",
    "Crash",
    "GateError",
    "Outcome",
    "PropertyVerdict",
    "Side",
    "add_cli",
    "build_corpus",
    "classify",
    "corpus_focuses",
    "read_corpus",
    "run_gate",
    "shorten",
    "write_corpus",
]
