"""How low ``bench``'s audited/bare can go by cheaper handlers alone: the audit's floor on the small batch.

Usage (issue 44, docs/MEASURED.md "Speed")::

    python ci/audit_floor.py              # 150 rounds of every variant per arm
    python ci/audit_floor.py --rounds 300

One process, the arms' rounds interleaved (a machine whose load drifts slows them alike), each round a
harness session of every variant of ``bench``'s small batch on ``hip``, as ``bench`` times it:

* ``audit (as is)``: what ``bench`` reports;
* ``handlers pass through``: every handler of :mod:`metadata_builders.audit.function_level` replaced by a
  call of the function itself -- each call is still intercepted (direct entry or torch's mode), the inputs
  marked and snapshotted (P8), the audit entered and left, but nothing is judged or marked;
* ``pass through, one mark``: the same plus one ``setattr`` of a fixed provenance on each tensor result,
  the least any audit that marks results does;
* ``no direct entries``: the audit as is with ``DeviceAudit.DIRECT = False`` (every call through the mode).

The ratio of the second arm is the floor of the mechanism (interception plus the harness's per-build work):
no change to the handlers' bookkeeping takes ``bench`` below it.  A measurement, never a test: it swaps the
audit's handler table in place and puts it back.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

_PROVENANCE = "_metadata_builders_provenance"


def main() -> int:
    import torch

    from metadata_builders.audit import DeviceAudit
    from metadata_builders.audit import function_level as fl
    from metadata_builders.families.dsv4.builders import get_builder
    from metadata_builders.families.dsv4.variants import variants_for
    from metadata_builders.families.dsv4.tools.bench import _audit_session, _bare, bench_batches

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=150)
    rounds = parser.parse_args().rounds
    torch.set_num_threads(1)
    builder = get_builder("hip", "cpu")
    batch = next(iter(bench_batches().values()))
    variants = variants_for(batch)
    bare = _bare(builder)
    real = dict(fl._HANDLERS)
    marked = (True, frozenset({"seq_lens"}))

    def through(audit: Any, func: Callable, kind: Any, args: tuple, kwargs: dict) -> Any:
        return func(*args, **kwargs)

    def one_mark(audit: Any, func: Callable, kind: Any, args: tuple, kwargs: dict) -> Any:
        out = func(*args, **kwargs)
        if type(out) is torch.Tensor:
            setattr(out, _PROVENANCE, marked)
        return out

    def audited() -> None:
        with _audit_session():
            for v in variants:
                builder.build(batch, v)

    def unaudited() -> None:
        for v in variants:
            bare(batch, v)

    arms = {"audit (as is)": (None, True), "handlers pass through": (through, True),
            "pass through, one mark": (one_mark, True), "no direct entries": (None, False)}
    times: dict[str, list[float]] = {name: [] for name in (*arms, "bare")}
    try:
        for i in range(rounds + 20):  # the first 20: warm-up
            for name, (handler, direct) in (*arms.items(), ("bare", (None, True))):
                fl._HANDLERS.update({k: h if handler is None or h is None else handler for k, h in real.items()})
                fl._ENTRIES.clear()
                DeviceAudit.DIRECT = direct
                start = time.process_time()
                (unaudited if name == "bare" else audited)()
                if i >= 20:
                    times[name].append((time.process_time() - start) / len(variants))
    finally:
        fl._HANDLERS.update(real)
        fl._ENTRIES.clear()
        DeviceAudit.DIRECT = True
    base = statistics.median(times["bare"])
    print(f"small batch, {rounds} rounds of {len(variants)} variants, median CPU time per build (hip)")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:24s} {median * 1e6:7.0f} us  {median / base:.2f}x bare")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
