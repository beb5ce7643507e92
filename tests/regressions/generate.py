"""Regenerate the pinned regression batches: ``python tests/regressions/generate.py``.

Each file is a replay file (schema ``metadata-builders/verify-batch@1``) with a
one-line ``why`` and, under ``meta.expect``, what the harness must observe on the
matching variants: the device-model faults and whether ``output_size`` was used.
``tests/dsv4/test_regressions.py`` checks every expectation; ``metadata-builders
replay FILE`` prints the same faults.
"""

from __future__ import annotations

import os

from metadata_builders import Divergence, Geometry, GraphTier, VerifyBatch

HERE = os.path.dirname(os.path.abspath(__file__))
GEOMETRY = Geometry(page_size=4, swa_window=4, ring_size=6, unified_swa_window=4, page_index_align=4)
WIDTH, SLOTS = 16, 5


def _batch(seq_lens, slots, draft, *, verify_lens=None, graph=None, is_dspark=False, divergence=None) -> VerifyBatch:
    table = [[s * WIDTH + c for c in range(WIDTH)] for s in range(SLOTS)]
    full_to_swa = [200 + loc for loc in range(SLOTS * WIDTH)] + [-1]
    extend = verify_lens or [draft] * len(seq_lens)
    out = [slot * WIDTH + s + j for s, slot, e in zip(seq_lens, slots, extend) for j in range(e)]
    return VerifyBatch(seq_lens, slots, verify_lens, draft, out, table, full_to_swa, is_dspark, GEOMETRY, graph,
                       divergence)


def _expect(faults, used_output_size=None, **variant) -> dict:
    out = {"variant": variant, "faults": faults}
    if used_output_size is not None:
        out["used_output_size"] = used_output_size
    return out


RUN_AHEAD = Divergence(extend_seq_lens=[4, 3, 3])
"""Device lengths one token ahead of the host's count on request 0 (sum 10 vs 9)."""

CASES = {
    "eagle_host_mirror_run_ahead": (
        "EAGLE + host mirror + run-ahead device lengths: ungated output_size writes 1 element out of bounds "
        "(the AMD memory access fault); the dspark gate and always_sync sync and do not fault",
        _batch([5, 3, 7], [2, 1, 3], 3, graph=GraphTier(4, 12), divergence=RUN_AHEAD),
        [
            _expect([["oob_write", 1]], True, mirror="host", gate="ungated"),
            _expect([], False, mirror="host", gate="dspark"),
            _expect([], False, mirror="host", gate="always_sync"),
            _expect([["oob_write", 1]], True, mirror="tolist", gate="ungated"),
            _expect([], True, mirror="device", gate="ungated"),
        ],
    ),
    "dspark_host_mirror_run_ahead": (
        "DSpark with the same run-ahead divergence still faults under the dspark gate: the risk the fix admits",
        _batch([5, 3, 7], [2, 1, 3], 3, graph=GraphTier(4, 12), is_dspark=True, divergence=RUN_AHEAD),
        [
            _expect([["oob_write", 1]], True, mirror="host", gate="dspark"),
            _expect([["oob_write", 1]], True, mirror="host", gate="ungated"),
            _expect([], False, mirror="host", gate="always_sync"),
        ],
    ),
    "dspark_host_mirror_fall_behind": (
        "DSpark, device lengths one short of the host's count: output_size leaves 1 token-map element uninitialised",
        _batch([5, 3, 7], [2, 1, 3], 3, is_dspark=True, divergence=Divergence(extend_seq_lens=[3, 2, 3])),
        [
            _expect([["uninitialized_tail", 1]], True, mirror="host", gate="dspark"),
            _expect([], False, gate="always_sync"),
        ],
    ),
    "uncapped_tier_never_output_size": (
        "A ragged DSpark batch on an uncapped padded tier: the tier is a host total (exact=False), so no gate "
        "passes output_size on the graph path",
        _batch([5, 3, 7], [2, 1, 3], 3, verify_lens=[3, 1, 2], graph=GraphTier(5, 10), is_dspark=True),
        [
            _expect([], False, path="graph", gate="dspark"),
            _expect([], False, path="graph", gate="ungated"),
            _expect([], False, path="graph", gate="always_sync"),
        ],
    ),
    "capped_tier_uncovered_tail": (
        "A capped tier leaves 2 tokens uncovered: num_tokens is 12 (pad_rows_only: the real 6 plus two capped pad "
        "rows of 3, known on the host, so never output_size), not the tier (14); a builder that passed "
        "output_size=tier would leave 2 map elements uninitialised",
        _batch([5, 3, 7], [2, 1, 3], 3, verify_lens=[3, 1, 2], graph=GraphTier(5, 14, cap=3), is_dspark=True),
        [
            _expect([], False, path="graph", gate="dspark"),
            _expect([], False, path="graph", gate="always_sync"),
        ],
    ),
    "ungated_equals_dspark_without_divergence": (
        "Without divergence the crashing ungated rule gives exactly the dspark gate's metadata: why the crash "
        "passed review",
        _batch([5, 3, 7], [2, 1, 3], 3, graph=GraphTier(4, 12)),
        [
            _expect([], True, gate="ungated"),
            _expect([], False, gate="dspark"),
        ],
    ),
    "stale_host_mirror": (
        "A stale host mirror (seq_lens_cpu[2]=4, device holds 7): opt-in mirror validation raises StaleMirror; "
        "without it the eager page_table is built one page too narrow",
        _batch([5, 3, 7], [2, 1, 3], 3, divergence=Divergence(seq_lens_cpu=[5, 3, 4])),
        [_expect([], None, mirror="host")],
    ),
}


def main() -> None:
    for name, (why, batch, expect) in CASES.items():
        path = os.path.join(HERE, f"{name}.json")
        with open(path, "w") as fh:
            fh.write(batch.to_json(why=why, meta={"expect": expect}))
            fh.write("\n")
        print(path)


if __name__ == "__main__":
    main()
