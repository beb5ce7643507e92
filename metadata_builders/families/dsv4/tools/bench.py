"""``metadata-builders bench``: how fast builders build and properties run.

Two measurements on this machine, never asserted in a test:

* **per-build time**: median over many builds of one small and one large batch,
  averaged over every variant, for each builder (process CPU time, one torch
  thread); for an audited builder also the same build without the audit (the
  harness's inputs, the bare builder, the list conversion) and the ratio of the two,
  their rounds interleaved so that a change in the machine's load hits both;
* **examples per second** of each property (Hypothesis, derandomized).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import time
from typing import Any, Callable

from metadata_builders.families.dsv4.batch import Geometry, GraphTier, VerifyBatch
from metadata_builders.families.dsv4.builders import get_builder
from metadata_builders.families.dsv4.runs.report import format_table
from metadata_builders.families.dsv4.variants import Variant, variants_for

__all__ = ["add_cli", "bench_batches", "ratio_rows", "time_builds"]


def bench_batches() -> dict[str, VerifyBatch]:
    """A small batch (3 requests, small geometry) and a large one (64 requests, upstream geometry)."""
    small_width, small_slots = 32, 5
    small = VerifyBatch(
        seq_lens=[5, 13, 20], req_pool_indices=[2, 1, 4], verify_lens=[3, 1, 2], num_draft_tokens=3,
        out_cache_loc=list(range(6)),
        req_to_token=[[s * small_width + c for c in range(small_width)] for s in range(small_slots)],
        full_to_swa=list(range(small_slots * small_width)) + [-1],
        geometry=Geometry(page_size=4, swa_window=8, ring_size=10, unified_swa_window=8, page_index_align=8),
        graph=GraphTier(4, 8),
    )
    bs, width, draft = 64, 2048, 4
    slots = bs + 1
    seq_lens = [100 + (37 * i) % 1900 for i in range(bs)]
    verify = [1 + (i % draft) for i in range(bs)]
    large = VerifyBatch(
        seq_lens=seq_lens, req_pool_indices=list(range(1, bs + 1)), verify_lens=verify, num_draft_tokens=draft,
        out_cache_loc=list(range(sum(verify))),
        req_to_token=[[(s * width + c) % 65536 for c in range(width)] for s in range(slots)],
        full_to_swa=[loc % 40000 for loc in range(65536)] + [-1],
        geometry=Geometry(),
        graph=GraphTier(80, 80 * draft),
    )
    return {"small (bs=3, page 4, window 8)": small, "large (bs=64, upstream geometry, ctx 2048)": large}


def time_builds(builder, batch: VerifyBatch, repeats: int, *, bare: bool = False) -> float:
    """Median CPU seconds per build over ``repeats`` rounds of every variant.

    ``bare`` times an audited builder without its audit: the same inputs, the
    inner builder, the same conversion to lists -- what the audit adds is the rest.
    """
    if bare:
        return _median_times([_bare(builder)], batch, repeats)[0]
    return _median_times([builder.build], batch, repeats, [_audit_session])[0]


def _audit_session() -> contextlib.AbstractContextManager[None]:
    """The run an audited build is part of, as ``check`` and the gate run it (one harness session)."""
    from metadata_builders.harness import harness_session

    return harness_session()


def _median_times(builds: list[Callable[[VerifyBatch, Variant], object]], batch: VerifyBatch,
                  repeats: int, runs: list[Callable[[], Any] | None] | None = None) -> list[float]:
    """Median CPU seconds per build of each of ``builds``, their rounds interleaved.

    One round builds every variant with each in turn, so a machine whose load
    drifts (a shared CI runner) slows all of them alike and their ratio holds.
    ``runs``: per build, the context each round of it runs in (an audited build's
    session: ``check`` installs the audit's direct entries once a property run, here
    once a round of every variant, inside the time measured); None: none.
    """
    variants = variants_for(batch)
    runs = runs or [None] * len(builds)
    for build in builds:
        for v in variants:
            build(batch, v)  # warm-up: first-call overheads are not the steady state
    samples: list[list[float]] = [[] for _ in builds]
    for _ in range(repeats):
        for build, run, times in zip(builds, runs, samples):
            start = time.process_time()
            with run() if run is not None else contextlib.nullcontext():
                for v in variants:
                    build(batch, v)
            times.append((time.process_time() - start) / len(variants))
    return [statistics.median(times) for times in samples]


def _bare(builder) -> Callable[[VerifyBatch, Variant], object]:
    """``builder.build`` without the audit: the same inputs, the inner builder, the same conversion to lists
    (canonical form and dtypes included: the properties need them from any builder, audited or not)."""
    return functools.partial(_bare_build, builder)


def _bare_build(builder, batch: VerifyBatch, variant: Variant) -> object:
    from metadata_builders.families.dsv4.builders import plain_fields
    from metadata_builders.families.dsv4.inputs import make_inputs

    return plain_fields(builder.inner.build(make_inputs(batch, variant, builder.device)).fields)


def _build_times(builders: list[str], device: str, repeats: int) -> list[list[object]]:
    """One row per (batch, builder): per-build time, without the audit, their ratio, builds timed."""
    rows: list[list[object]] = []
    for label, batch in bench_batches().items():
        for name in builders:
            builder = get_builder(name, device)
            rounds = repeats if "small" in label else max(3, repeats // 10)
            bare = ratio = "-"
            if hasattr(builder, "inner") and not builder.takes_batch:
                seconds, bare_seconds = _median_times([builder.build, _bare(builder)], batch, rounds,
                                                      [_audit_session, None])
                bare, ratio = f"{bare_seconds * 1e3:.3f} ms", f"{seconds / bare_seconds:.2f}x"
            else:
                seconds = time_builds(builder, batch, rounds)
            rows.append([label, name, f"{seconds * 1e3:.3f} ms", bare, ratio, rounds * len(variants_for(batch))])
    return rows


def _property_rates(builders: list[str], device: str, max_examples: int) -> list[list[object]]:
    """One row per (builder, property): examples run, time, examples per second, result."""
    from hypothesis import settings

    from metadata_builders.families.dsv4.properties import PROPERTIES
    from metadata_builders.families.dsv4.runs.runner import run_property
    from metadata_builders.runs.profiles import load_profile

    settings_ = settings(load_profile("ci"), max_examples=max_examples)
    rows: list[list[object]] = []
    for name in builders:
        builder = get_builder(name, device)
        for spec in PROPERTIES:
            run = run_property(spec, builder, settings_)
            rate = run.examples / run.seconds if run.seconds else float("inf")
            rows.append([name, spec.name, spec.title, run.examples, f"{run.seconds:.2f}s", f"{rate:.1f}",
                         "held" if run.passed else "FAILED"])
    return rows


def _cmd_bench(args: argparse.Namespace) -> int:
    import torch

    torch.set_num_threads(1)  # tiny tensors: intra-op threads only add contention
    builders = [b.strip() for b in args.builders.split(",") if b.strip()]
    for name in builders:  # every builder made once before any runs: an upstream one sets up its interpreter
        get_builder(name, args.device)  # before another's work first imports Triton (hip,sglang crashed)
    rows = _build_times(builders, args.device, args.repeats)
    print("per-build CPU time (median over rounds of every variant; one torch thread)")
    print(format_table(["batch", "builder", "per build", "without the audit", "audited/bare", "builds"], rows))
    if args.properties:
        prop_rows = _property_rates(builders, args.device, args.max_examples)
        print()
        print(f"examples per second per property (ci profile, max_examples={args.max_examples})")
        print(format_table(["builder", "property", "what", "examples", "time", "examples/s", "result"], prop_rows))
        if len(builders) > 1:
            print()
            print(f"the same properties, {builders[0]} against each other builder (examples/s; ratio = how many "
                  f"times slower, on this machine in this run)")
            print(format_table(["property", *builders, *(f"{b}/{builders[0]}" for b in builders[1:])],
                               ratio_rows(builders, prop_rows)))
    return 0


def ratio_rows(builders: list[str], prop_rows: list[list[object]]) -> list[list[object]]:
    """Per property: each builder's examples/s, then how many times slower each other builder ran than the first.

    Worked example: ``hip`` 40.0 and ``sglang`` 10.0 examples/s on P1 -> ``["P1", "40.0", "10.0", "4.00x"]``."""
    rate = {(row[0], row[1]): float(str(row[5])) for row in prop_rows}
    props = list(dict.fromkeys(str(row[1]) for row in prop_rows))
    out: list[list[object]] = []
    for prop in props:
        first = rate.get((builders[0], prop), 0.0)
        others = [rate.get((b, prop), 0.0) for b in builders[1:]]
        out.append([prop, f"{first:.1f}", *(f"{r:.1f}" for r in others),
                    *(f"{first / r:.2f}x" if r else "-" for r in others)])
    return out


def add_cli(sub) -> None:
    """Register ``bench`` on the CLI's subparsers."""
    p = sub.add_parser("bench", help="per-build time and examples/s per property (a benchmark, never a test)")
    p.add_argument("--builders", default="hip,reference", help="comma-separated builder names")
    p.add_argument("--device", default="cpu", help="where the builds run: cpu (default) | cuda | cuda:N "
                                                   "(times are CPU time per build either way)")
    p.add_argument("--repeats", type=int, default=200, help="rounds over every variant for the small batch")
    p.add_argument("--properties", action="store_true", help="also measure examples/s of every property")
    p.add_argument("--max-examples", type=int, default=100, help="examples per property for --properties")
    p.set_defaults(func=_cmd_bench)
