"""Upstream's environment switches: the one the gate runs both ways (``SGLANG_DSV4_GROUPED_ASM``, route ``gasm``),
and the catalogue every report names, checked against the installed release.

Skipped unless SGLang is importable; every supported release runs the same tests (the grouped streams are 0.5.21+).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from _examples import make_batch

from metadata_builders import Geometry, get_builder
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.properties import PROPERTIES, check_p1_reference
from metadata_builders.families.dsv4.properties.spec import verdict
from metadata_builders.families.dsv4.runs.findings import known_finding

pytestmark = pytest.mark.sglang

# The adapter's package imports SGLang: without it the module is skipped at collection, as its marker says.
_switches = pytest.importorskip("metadata_builders.families.dsv4.sglang.switches", reason="SGLang is not importable",
                               exc_type=ImportError)
GROUPED_ASM, SWITCHES, not_judged = _switches.GROUPED_ASM, _switches.SWITCHES, _switches.not_judged
report_lines, variants = _switches.report_lines, _switches.variants

REGRESSIONS = Path(__file__).parents[1] / "regressions" / "sglang"
GASM = "metadata_builders.families.dsv4.sglang:gasm_route"
P1 = next(p for p in PROPERTIES if p.name == "P1")


@pytest.fixture(scope="module")
def gasm():
    return get_builder(GASM, "cpu")


@pytest.fixture(scope="module")
def release(gasm) -> str:
    return gasm.inner.upstream.release


def _has_grouped_streams(release: str) -> bool:
    return any(s.name == GROUPED_ASM for s in variants(release))


def _replay(name: str) -> VerifyBatch:
    return VerifyBatch.from_dict(json.loads((REGRESSIONS / name).read_text()))


def test_the_grouped_streams_mix_two_requests_on_a_compact_tier_f25(gasm, release) -> None:
    """F25: with the switch on, a group of the grouped verify streams holds request 0's token and request 1's first
    three, so P1 on the gasm route fails on the gasm_* fields (known F25); the default route, switch off, holds."""
    batch = _replay("f25_grouped_verify_streams_cross_requests.json")
    if not _has_grouped_streams(release):
        assert "no grouped verify streams" in verdict(P1, gasm, batch).why
        return
    with pytest.raises(PropertyFailure) as info:
        check_p1_reference(gasm, batch)
    assert info.value.field.startswith("gasm_") and info.value.check == "p1.vs_reference"
    assert known_finding(info.value, batch) == "F25"
    check_p1_reference(get_builder("sglang", "cpu"), batch)


def test_the_grouped_streams_of_uniform_verify_equal_the_reference(gasm, release) -> None:
    """Sixteen requests verifying four drafts each (64 tokens: 16 groups of one request each): upstream's grouped
    streams are the reference's, value for value, on every variant."""
    if not _has_grouped_streams(release):
        pytest.skip(f"SGLang {release} has no grouped verify streams")
    geometry = Geometry(page_size=4, swa_window=8, ring_size=11, unified_swa_window=8, page_index_align=8)
    batch = dataclasses.replace(make_batch([10 + 3 * r for r in range(16)], list(range(1, 17)), 4, num_slots=17,
                                           width=80), geometry=geometry)
    result = verdict(P1, gasm, batch)
    assert result.failure is None and result.status in ("held", "partial"), result
    built = gasm.build(batch, next(v for v in gasm.variants_supported(batch) if v.path == "eager"))
    assert built.fields["gasm_qo_indptr"] == list(range(0, 65, 4))
    assert len(built.fields["gasm_indices"]) == 16


def test_a_batch_that_does_not_reach_the_switch_is_not_applicable_on_its_route(gasm, release) -> None:
    """Two requests (8 tokens of 4 drafts: 2 groups, below 16): the gasm route says why it does not judge it."""
    geometry = Geometry(page_size=4, swa_window=8, ring_size=11, unified_swa_window=8, page_index_align=8)
    batch = dataclasses.replace(make_batch([10, 12], [1, 2], 4, width=40), geometry=geometry)
    result = verdict(P1, gasm, batch)
    assert result.status == "not applicable" and GROUPED_ASM in result.why


def test_zero_length_pad_rows_of_a_compact_tier_hold_on_the_plan_path_the_harness_runs_f26() -> None:
    """F26 (#35848): [5, 5] on a 10-token tier of 8 slots pads to six rows of 0; the non-online c128 plans (what
    every release runs with SGLANG_OPT_USE_ONLINE_COMPRESS off) take them: no property fails but for an older
    release's known finding."""
    batch = _replay("f26_dspark_zero_length_pad_rows_online_c128.json")
    builder = get_builder("sglang", "cpu")
    assert batch.graph.padded_bs == 8 and sum(batch.verify_lens) == batch.graph.graph_num_tokens == 10
    for spec in PROPERTIES:
        result = verdict(spec, builder, batch)
        # an older release's own finding may show on it (F5 on 0.5.18/0.5.19's page table); never F26 itself
        assert result.failure is None or known_finding(result.failure, batch) not in (None, "F26"), \
            (spec.name, str(result.failure))


def test_every_switch_of_the_catalogue_is_read_by_the_installed_release(release) -> None:
    """Each switch the catalogue says the release reads is in its source; the ones it says come later are not."""
    import sglang

    root = os.path.dirname(sglang.__file__)
    text = []
    for folder, _, files in os.walk(root):
        text += [open(os.path.join(folder, f), errors="replace").read() for f in files if f.endswith(".py")]
    source = "\n".join(text)
    read = {s.name for s in (*variants(release), *not_judged(release))}
    for switch in SWITCHES:
        assert (switch.name in source) == (switch.name in read), (switch.name, release)


def test_every_report_names_each_switch_not_judged_with_why(gasm, release) -> None:
    """The lines check, replay and the gate print: one header naming every switch, one line each with why."""
    lines = gasm.unjudged_switches()
    assert lines == report_lines(release)
    for switch in not_judged(release):
        assert switch.name in lines[0] and any(line.strip().startswith(f"not judged: {switch.name} (runs ")
                                               and switch.why in line for line in lines[1:])
    assert (GROUPED_ASM in lines[0].split("not judged the other way")[0]) == _has_grouped_streams(release)
