"""The gate's test items: one chunk of the corpus per item, run by pytest-xdist.

Not a test suite of this project: ``metadata-builders gate`` runs this file
with pytest in a subprocess per side (SGLang imported from that side's tree),
configured through the environment (:data:`~metadata_builders.gate.ENV_CORPUS`
...).  Each item evaluates every property on every batch of its chunk, the
builds shared between properties; a failure is recorded, never raised, so
nothing stops the search.  One JSON line per (property, batch) outcome.
"""

from __future__ import annotations

import json
import os

import pytest

from metadata_builders.gate import CHUNKS, ENV_BUILDER, ENV_CORPUS, ENV_DEVICE, ENV_OUT, ENV_PROPERTIES, Outcome

_BUILDER = None


def _builder():
    """This worker's builder, built once: SGLang is imported once per worker."""
    global _BUILDER
    if _BUILDER is None:
        import torch

        from metadata_builders.builders import get_builder

        torch.set_num_threads(1)
        device = os.environ.get(ENV_DEVICE, "cpu")
        if device == "auto" and torch.cuda.is_available():
            worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
            device = f"cuda:{int(worker[2:] or 0) % torch.cuda.device_count()}"
        _BUILDER = get_builder(os.environ[ENV_BUILDER], device)
    return _BUILDER


def _signature(prop: str, failure, builder, batch) -> tuple[str, ...]:
    """What failed, as a set the gate compares between sides: every difference for P1, else the failure's place."""
    if failure is None:
        return ()
    if prop == "P1":
        from metadata_builders.properties import p1_differences

        try:
            differences = p1_differences(builder, batch)
        except Exception:  # noqa: BLE001 - a builder that raises: its failure's place is the signature
            differences = set()
        if differences:
            return tuple(sorted(differences))
    return (f"{failure.variant}|{failure.field}",)


@pytest.mark.parametrize("chunk", range(CHUNKS) if os.environ.get(ENV_CORPUS) else [])
def test_gate_chunk(chunk: int) -> None:
    """Every property on every ``CHUNKS``-th corpus batch from ``chunk``; every outcome recorded."""
    from metadata_builders.batch import VerifyBatch
    from metadata_builders.builders import MemoBuilder
    from metadata_builders.properties import PROPERTIES, verdict

    wanted = os.environ[ENV_PROPERTIES].split(",")
    props = [p for p in PROPERTIES if p.name in wanted]
    builder = _builder()
    with open(os.environ[ENV_CORPUS]) as fh, open(os.path.join(os.environ[ENV_OUT], f"{chunk}.jsonl"), "w") as out:
        for index, line in enumerate(fh):
            if index % CHUNKS != chunk:
                continue
            batch = VerifyBatch.from_dict(json.loads(line))
            memo = MemoBuilder(builder)
            for spec in props:
                result = verdict(spec, memo, batch)
                failure = result.failure
                outcome = Outcome(spec.name, index, result.status, _signature(spec.name, failure, memo, batch),
                                  str(failure).splitlines()[0][:400] if failure is not None else "", result.why,
                                  str(failure.field) if failure is not None else "")
                out.write(json.dumps(outcome.to_dict()) + "\n")
