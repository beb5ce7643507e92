"""The gate's test items: one chunk of the corpus per item, run by pytest-xdist.

Not a test suite of this project: ``metadata-builders gate`` runs this file
with pytest in a subprocess per side (SGLang imported from that side's tree),
configured through the environment (:data:`~metadata_builders.families.dsv4.gate.ENV_CORPUS`
...).  Each item evaluates every property on every batch of its chunk
(:func:`metadata_builders.families.dsv4.gate.evaluate.evaluate_batches`): a failure is
recorded, never raised, so nothing stops the search; each batch's outcomes and
progress are flushed as soon as it is done, so a worker that dies or hangs
loses only the batch it was on.
"""

from __future__ import annotations

import os

import pytest

from metadata_builders.families.dsv4.gate.model import (
    CHUNKS,
    ENV_BUILDER,
    ENV_CORPUS,
    ENV_DEVICE,
    ENV_OUT,
    ENV_PROPERTIES,
)

_BUILDER = None


def _builder():
    """This worker's builder, built once: SGLang is imported once per worker."""
    global _BUILDER
    if _BUILDER is None:
        from metadata_builders.families.dsv4.gate.evaluate import make_builder
        from metadata_builders.gate import trace

        trace.start()  # before SGLang is imported: what the side imports and runs of its tree (gate/trace.py)

        _BUILDER = make_builder(os.environ[ENV_BUILDER], os.environ.get(ENV_DEVICE, "cpu"))
    return _BUILDER


@pytest.mark.parametrize("chunk", range(CHUNKS) if os.environ.get(ENV_CORPUS) else [])
def test_gate_chunk(chunk: int) -> None:
    """Every property on every ``CHUNKS``-th corpus batch from ``chunk``; every outcome recorded."""
    from metadata_builders.families.dsv4.gate.evaluate import evaluate_batches

    corpus, out = os.environ[ENV_CORPUS], os.environ[ENV_OUT]
    with open(corpus) as fh:
        count = sum(1 for _ in fh)
    evaluate_batches(_builder(), corpus, range(chunk, count, CHUNKS), os.path.join(out, f"{chunk}.jsonl"),
                     os.path.join(out, f"{chunk}.progress"), os.environ[ENV_PROPERTIES].split(","))
