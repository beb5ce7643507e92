"""The gate's corpus: derandomized batches of every kind the properties focus on, written once.

Both sides evaluate the same ``corpus.jsonl``, and two runs of the gate draw the
same corpus, so verdicts and replay files are the same run after run.  Its size
is a knob (``--per-kind``; the profile's default otherwise): how many batches of
each kind (``PropertySpec.focuses``: any batch, ragged on a graph tier, uniform,
graph, diverging ...).  The ``ci`` default, :data:`PER_KIND`, is sized so that the
gate kills the mutant catalogue as ``check --profile ci`` does (README "The
pre-merge gate", measured there).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable
from typing import Any

from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.properties import PropertySpec

__all__ = ["PER_KIND", "build_corpus", "corpus_focuses", "corpus_size", "read_corpus", "write_corpus"]

PER_KIND = {"dev": 5, "ci": 10, "nightly": 100}
"""Batches per kind in each profile (``--per-kind`` overrides): ``ci`` reaches the shapes ``check`` reaches.

Measured (35 catalogue mutants, ``gate --base-builder hip --head-builder <mutant>``): killed 33
at 5 per kind (``tier_slack_first_real_row`` and ``swa_window_reads_past_table`` need rarer
shapes), 35 at 10, 15 and 20; at 10 those two are killed by 5 and 2 of the 60 batches, at 15 by
10 and 3 of 90.  ``ci`` takes 10 because SGLang's gate pays per batch (0.5.23, CPU, two
workers, the default 80 batches over 8 kinds, P5 and P7 on recorded replays): about 0.6 CPU s
a batch a side on the Triton route with interpreted launches remembered
(:mod:`metadata_builders.audit.launch_memo`; 2.4 s without), one build of every variant after P9's
history shared by all properties (:func:`~metadata_builders.families.dsv4.gate.evaluate.seasoned`), plus the
process start-up (8 s a worker to import SGLang): base and head on both routes took 120 s on two
idle cores (322 s without the memo).
"""


def corpus_focuses(props: Iterable[PropertySpec]) -> list[dict[str, Any]]:
    """The distinct batch kinds the properties focus on, in property order."""
    focuses: list[dict[str, Any]] = []
    for spec in props:
        for focus in spec.focuses:
            if focus not in focuses:
                focuses.append(focus)
    return focuses


def corpus_size(props: list[PropertySpec], *, per_kind: int | None, examples: int | None, profile: str) -> list[int]:
    """How many batches of each kind: ``per_kind`` each, or ``examples`` spread evenly, or the profile's."""
    kinds = len(corpus_focuses(props))
    if per_kind is None and examples is not None:
        return [examples // kinds + (1 if i < examples % kinds else 0) for i in range(kinds)]
    return [per_kind if per_kind is not None else PER_KIND[profile]] * kinds


def build_corpus(props: Iterable[PropertySpec], examples: int | list[int]) -> list[VerifyBatch]:
    """Batches of every focus (``examples`` in all, spread evenly, or one count per focus), each focus with its own
    seed.

    Generation only (no verdicts), so the corpus depends on no builder and is the
    same at every run: a focus's seed is ``crc32("gate/<focus>")``.
    """
    from hypothesis import HealthCheck, Phase, given, seed, settings

    from metadata_builders.families.dsv4.strategies import verify_batches
    from metadata_builders.runs.profiles import seed_alone

    focuses = corpus_focuses(props)
    if isinstance(examples, int):
        shares = [examples // len(focuses) + (1 if i < examples % len(focuses) else 0) for i in range(len(focuses))]
    else:
        shares = list(examples)
    corpus: list[VerifyBatch] = []
    for focus, share in zip(focuses, shares):
        if share == 0:
            continue
        drawn: list[VerifyBatch] = []
        collect = _collector(drawn)
        run = settings(max_examples=share, database=None, deadline=None, derandomize=False,
                       phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
        key = json.dumps(focus, sort_keys=True)
        seeded = seed(zlib.crc32(f"gate/{key}".encode()))(given(batch=verify_batches(**focus))(collect))
        with seed_alone():
            run(seeded)()
        corpus += drawn[:share]
    return corpus


def _collector(drawn: list[VerifyBatch]):
    """A Hypothesis test body that keeps every batch it is given."""

    def collect(batch: VerifyBatch) -> None:
        drawn.append(batch)

    return collect


def write_corpus(corpus: list[VerifyBatch], path: str) -> str:
    """``corpus.jsonl``, one batch per line; returns the file's sha256 (part of a cache key)."""
    text = "".join(json.dumps(batch.to_dict()) + "\n" for batch in corpus)
    with open(path, "w") as fh:
        fh.write(text)
    return hashlib.sha256(text.encode()).hexdigest()


def read_corpus(path: str) -> list[VerifyBatch]:
    with open(path) as fh:
        return [VerifyBatch.from_dict(json.loads(line)) for line in fh]
