"""Regenerate the soundness replay files: ``python tests/regressions/soundness/generate.py [MUTANT ...]``.

Each file is the shrunk counterexample ``metadata-builders check --profile ci``
finds for one bug a builder that knows nothing of the harness can hide from a
harness that trusts it (the soundness issue's table): a read spelled so no
``.item()`` appears, a read of graph state, a replay that refreshes too little,
an in-place update of the caller's ``seq_lens``, a ``.to("cpu")``, a mirror check by
sum, a reused scratch buffer, an int64 field, host staging on ``mirror=device``.
Each failure is replayed on a fresh builder first; one that needs the batches
built before it carries them (``meta.history``).  ``meta`` names the mutant and
the property that killed it; ``tests/dsv4/test_soundness.py`` replays each file
against the mutant (red, that property) and the bundled builder (green).
"""

from __future__ import annotations

import os
import sys

from metadata_builders.families.dsv4.mutants import MUTANTS, mutant_builder
from metadata_builders.families.dsv4.properties import PROPERTIES
from metadata_builders.families.dsv4.runs.reproduce import reproduce
from metadata_builders.families.dsv4.runs.runner import run_property
from metadata_builders.runs.profiles import load_profile

HERE = os.path.dirname(os.path.abspath(__file__))

BUGS = {
    "uniform_total_host_loop": "int(e) in a loop over a device tensor",
    "zero_length_row_check": "`if 0 in extend_seq_lens:` on a path that claims to be sync-free",
    "device_total_as_slice_bound": "a 'sync-free' total kept on the device, then used as a slice bound",
    "debug_log_formats_device_tensor": "a debug log f-string that formats a device tensor",
    "replay_asserts_on_graph_state": "int(buf[:n].max()) on a buffer allocated before the build (graph state)",
    "replay_refreshes_captured_rows_only": "a replay that refreshes only the captured batch's rows",
    "seq_lens_updated_in_place": "seq_lens += extend on the caller's tensor",
    # Soundness, part 2 (issue 16): what still passed.
    "seq_lens_to_cpu_async_copy": "seq_lens.to(\"cpu\", non_blocking=True) on a path that claims to be sync-free",
    "mirror_validation_by_sum": "an opt-in mirror validation that compares only the sums",
    "stateful_scratch_tail": "a lazily allocated scratch that keeps the previous batch's tail",
    "seq_lens_casual_int64": "an int64 field where upstream's kernels take int32",
    "async_staging_on_device_mirror": "asynchronous host staging of the extend lengths on mirror=device",
}
"""Mutant -> the bug row of the soundness table it is."""


def main(names: list[str]) -> None:
    """Regenerate the files of ``names`` (every bug row when empty), each verified on a fresh builder."""
    settings_ = load_profile("ci")
    for name in names or BUGS:
        builder = mutant_builder(name)
        for spec in PROPERTIES:
            run = run_property(spec, builder, settings_)
            if run.failure is None:
                continue
            found = reproduce(builder, spec, run.batch, run.history)
            if not found.reproduces:  # not a witness a replay can show: the next property may have one
                print(f"{name}: {spec.name}'s failure does not reproduce on a fresh builder; trying the next")
                continue
            meta = {"mutant": name, "property": run.failure.prop, "field": run.failure.field}
            if found.history:
                meta["history"] = [b.to_dict() for b in found.history]
            path = os.path.join(HERE, f"{name}.json")
            with open(path, "w") as fh:
                fh.write(run.batch.to_json(why=f"{BUGS[name]}: {run.failure.prop} fails ({run.failure.message})"[:300],
                                           meta=meta))
                fh.write("\n")
            print(f"{path}: {spec.name} after {run.examples_to_failure} examples"
                  + (f", history of {len(found.history)}" if found.history else ""))
            break
        else:
            raise SystemExit(f"{name} ({MUTANTS[name].bug_class}) survived the ci profile")


if __name__ == "__main__":
    main(sys.argv[1:])
