"""Evaluating corpus batches with one side's builder: shared by the pytest items and the isolation runner.

Every property runs on every batch (a failure is recorded, never raised, so
nothing stops the search), on one builder per batch whose builds the properties
share (:class:`~metadata_builders.families.dsv4.builders.MemoBuilder`): a fresh twin of the
side's builder that has first built the batch's P9 history (:func:`seasoned`).  Each batch's outcomes are
written and flushed as soon as it is done, one JSON line per (property, batch),
and a progress file says which batch is running since when::

    start 12 1764513600.25
    done 12

so the parent can tell a process that died on batch 12 (no ``done 12``) from one
that hangs on it (``start 12`` older than the per-batch limit), and everything
finished before either is kept.

Run as a module it is the isolation runner: ``python -m metadata_builders.families.dsv4.gate.evaluate
CORPUS OUT PROGRESS INDEX...`` evaluates those batches in that order in a fresh
process, configured like a side's items (:data:`~metadata_builders.families.dsv4.gate.model.ENV_BUILDER` ...).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable
from typing import Any

from metadata_builders.families.dsv4.gate.model import (
    ENV_BUILDER,
    ENV_DEVICE,
    ENV_PROPERTIES,
    SETUP_ERROR,
    Outcome,
    shorten,
)

__all__ = ["evaluate_batches", "main", "make_builder", "seasoned"]


def make_builder(name: str, device: str) -> Any:
    """This process's builder on ``device`` (``auto``: the xdist worker's GPU), one torch thread."""
    import torch

    from metadata_builders.families.dsv4.builders import get_builder

    torch.set_num_threads(1)
    if device == "auto" and torch.cuda.is_available():
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        device = f"cuda:{int(worker[2:] or 0) % torch.cuda.device_count()}"
    return get_builder(name, device)


def _signature(prop: str, failure: Any, builder: Any, batch: Any) -> tuple[str, ...]:
    """What failed, as a set the gate compares between sides: every difference for P1, else the failure's place."""
    if failure is None:
        return ()
    if prop == "P1":
        from metadata_builders.families.dsv4.properties import p1_differences

        try:
            differences = p1_differences(builder, batch)
        except Exception:  # noqa: BLE001 - a builder that raises: its failure's place is the signature
            differences = set()
        if differences:
            return tuple(sorted(differences))
    return (f"{failure.variant}|{failure.field}",)


def seasoned(builder: Any, batch: Any) -> Any:
    """A memo over a fresh twin of ``builder`` that has built ``batch``'s P9 history; None when there is none.

    The properties of one batch then share one builder: P9's builds after the
    history are P1's builds (half of a batch's cost on SGLang).  None when the
    builder cannot be made afresh, the batch has no history, or the history
    raises (P9 plays it again on its own twin and reports that).
    """
    from metadata_builders.families.dsv4.builders import MemoBuilder
    from metadata_builders.families.dsv4.properties.state import can_be_made_afresh, history_for, play_history

    history = tuple(history_for(batch)) if can_be_made_afresh(builder) else ()
    if not history:
        return None
    memo = MemoBuilder(builder.fresh(), history)
    try:
        play_history(memo, list(history))
    except Exception:  # noqa: BLE001 - P9's own run reports it, with the exception named
        return None
    return memo


def _outcomes(props: list, builder: Any, batch: Any, index: int) -> list[Outcome]:
    """Every property on ``batch``, on one seasoned builder when P9 is judged; P1-P8 failures confirmed on a fresh one.

    A P1-P8 failure that a freshly constructed builder does not repeat is hidden
    state, which is P9's to report: the outcome recorded is the fresh builder's,
    so every replay file the gate writes reproduces on a fresh builder.  The fresh
    builder is one twin per batch (:meth:`MemoBuilder.fresh`), P9's own: P9 runs
    first, so the twin's first builds are the batch's, and the others reuse them.
    """
    from metadata_builders.families.dsv4.builders import MemoBuilder
    from metadata_builders.families.dsv4.properties import verdict

    season = seasoned(builder, batch) if any(spec.name == "P9" for spec in props) else None
    memo = season or MemoBuilder(builder)
    out: dict[str, Outcome] = {}
    for spec in sorted(props, key=lambda spec: spec.name != "P9"):  # P9 first: the fresh twin's first builds
        start = time.perf_counter()
        result, judged = verdict(spec, memo, batch), memo
        if result.failure is not None and season is not None and spec.name != "P9":
            judged = season.fresh()
            result = verdict(spec, judged, batch)
        failure = result.failure
        out[spec.name] = Outcome(spec.name, index, result.status, _signature(spec.name, failure, judged, batch),
                                 shorten(str(failure)) if failure is not None else "", result.why,
                                 str(failure.field) if failure is not None else "",
                                 (failure.check or "") if failure is not None else "",
                                 failure.origin if failure is not None else None,
                                 (failure.where or "") if failure is not None else "", time.perf_counter() - start)
    return [out[spec.name] for spec in props]


def evaluate_batches(builder: Any, corpus_path: str, indices: Iterable[int], out_path: str, progress_path: str,
                     prop_names: list[str]) -> None:
    """Every property on each of ``indices`` (in that order); outcomes and progress flushed batch by batch."""
    from metadata_builders.families.dsv4.batch import VerifyBatch
    from metadata_builders.families.dsv4.properties import PROPERTIES
    from metadata_builders.harness import harness_session

    props = [p for p in PROPERTIES if p.name in prop_names]
    with open(corpus_path) as fh:
        lines = fh.readlines()
    with open(out_path, "a") as out, open(progress_path, "a") as progress, harness_session():
        for index in indices:
            batch = VerifyBatch.from_dict(json.loads(lines[index]))
            progress.write(f"start {index} {time.time():.3f}\n")
            progress.flush()
            text = "".join(json.dumps(o.to_dict()) + "\n" for o in _outcomes(props, builder, batch, index))
            out.write(text)
            out.flush()
            progress.write(f"done {index}\n")
            progress.flush()
    from metadata_builders.gate import trace

    trace.dump(os.path.dirname(os.path.abspath(out_path)), builder)


def main(argv: list[str] | None = None) -> int:
    """The isolation runner: ``CORPUS OUT PROGRESS INDEX...`` with the side's environment.

    ``--probe`` only makes the side's builder and exits (0, or :data:`SETUP_ERROR` with the
    reason on stderr): the gate asks it of the head before the base runs.
    """
    from metadata_builders.errors import BuilderNotFound, DeviceUnavailable, UpstreamNotFound

    argv = list(argv if argv is not None else sys.argv[1:])
    if argv != ["--probe"]:
        from metadata_builders.gate import trace

        trace.start()
    try:
        builder = make_builder(os.environ[ENV_BUILDER], os.environ.get(ENV_DEVICE, "cpu"))
    except (BuilderNotFound, UpstreamNotFound, DeviceUnavailable) as exc:
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        return SETUP_ERROR
    if argv == ["--probe"]:
        return 0
    corpus, out, progress, *indices = argv
    evaluate_batches(builder, corpus, [int(i) for i in indices], out, progress,
                     os.environ[ENV_PROPERTIES].split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
