"""Regenerate the soundness replay files: ``python tests/regressions/soundness/generate.py``.

Each file is the shrunk counterexample ``metadata-builders check --profile ci``
finds for one bug a builder that knows nothing of the harness can hide from a
harness that trusts it (the soundness issue's table): a read spelled so no
``.item()`` appears, a read of graph state, a replay that refreshes too little,
an in-place update of the caller's ``seq_lens``.  ``meta`` names the mutant and
the property that killed it; ``tests/test_soundness.py`` replays each file
against the mutant (red, that property) and the bundled builder (green).
"""

from __future__ import annotations

import os

from metadata_builders.profiles import load_profile
from metadata_builders.properties import PROPERTIES
from metadata_builders.runner import run_property
from metadata_builders.tools.mutants import MUTANTS, mutant_builder

HERE = os.path.dirname(os.path.abspath(__file__))

BUGS = {
    "uniform_total_host_loop": "int(e) in a loop over a device tensor",
    "zero_length_row_check": "`if 0 in extend_seq_lens:` on a path that claims to be sync-free",
    "device_total_as_slice_bound": "a 'sync-free' total kept on the device, then used as a slice bound",
    "debug_log_formats_device_tensor": "a debug log f-string that formats a device tensor",
    "replay_asserts_on_graph_state": "int(buf[:n].max()) on a buffer allocated before the build (graph state)",
    "replay_refreshes_captured_rows_only": "a replay that refreshes only the captured batch's rows",
    "seq_lens_updated_in_place": "seq_lens += extend on the caller's tensor",
}
"""Mutant -> the bug row of the soundness table it is."""


def main() -> None:
    settings_ = load_profile("ci")
    for name, what in BUGS.items():
        builder = mutant_builder(name)
        for spec in PROPERTIES:
            run = run_property(spec, builder, settings_)
            if run.failure is None:
                continue
            path = os.path.join(HERE, f"{name}.json")
            with open(path, "w") as fh:
                fh.write(run.batch.to_json(
                    why=f"{what}: {run.failure.prop} fails ({run.failure.message})"[:300],
                    meta={"mutant": name, "property": run.failure.prop, "field": run.failure.field},
                ))
                fh.write("\n")
            print(f"{path}: {spec.name} after {run.examples_to_failure} examples")
            break
        else:
            raise SystemExit(f"{name} ({MUTANTS[name].bug_class}) survived the ci profile")


if __name__ == "__main__":
    main()
