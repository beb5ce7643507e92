"""P10 judges upstream's own SWA ring store kernel (``store_swa_into_unified``, under the Triton interpreter).

The SGLang builder hands P10 the kernel instead of its model
(:mod:`metadata_builders.families.dsv4.sglang.consumers`): where the kernel stores each
token is read back from an id-valued pool.  On the released code the kernel stores
where the model says; a bug planted in a copy of the kernel is red on P10 while
every metadata field is equal (tests/dsv4/test_gate_sglang.py plants the same bug
through the gate).
"""

from __future__ import annotations

import importlib
import inspect
import linecache
import types

import pytest
from _examples import EXAMPLES

from metadata_builders import get_builder
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.properties.kv import check_p10_kv_state

pytestmark = pytest.mark.sglang


@pytest.fixture(scope="module")
def sglang(sglang):
    """conftest.py's builder, where the installed release has upstream's store kernel."""
    builder = sglang
    from metadata_builders.families.dsv4.sglang import consumers

    if consumers._store() is None:
        pytest.skip(f"the installed release has no store_swa_into_unified in {consumers.STORE_MODULES}: P10 models it")
    return builder


def test_the_builder_brings_upstreams_store_kernel(sglang) -> None:
    assert sglang.capabilities.store_kernels
    assert get_builder("hip").swa_store_rows([1], [0], ring_stride=6, win=4) is None


def test_the_kernel_stores_where_the_ring_formula_says_and_a_negative_position_lands_outside(sglang) -> None:
    """``slot * stride + pos % stride`` for every position of two rings; a negative position is C's remainder in
    the kernel (Triton's ``%``): position -3 of slot 0 is row -3, before the ring -- what a draft-extend pad
    token would store at if its position came from ``positions_casual`` (docs/FINDINGS.md L2)."""
    assert sglang.swa_store_rows([3] * 6, list(range(8, 14)), ring_stride=6, win=4) == [
        3 * 6 + p % 6 for p in range(8, 14)]
    # two positions one stride apart share a row: the later store wins, the earlier K is in no row
    assert sglang.swa_store_rows([3, 3], [1, 7], ring_stride=6, win=4) == [None, 19]
    assert sglang.swa_store_rows([2, 0], [7, -3], ring_stride=6, win=4) == [13, -3]


def _planted_store(find: str, replace: str):
    """Upstream's store module with one edit, compiled as a module of its own (its kernels jit under the
    interpreter as the original's do)."""
    from metadata_builders.families.dsv4.sglang import consumers

    original = importlib.import_module(consumers._store().__module__)
    source = inspect.getsource(original)
    assert source.count(find) == 1, find
    planted, filename = source.replace(find, replace), "<planted dsv4_unified_kv_store.py>"
    # Triton reads a kernel's source through inspect (linecache), so the planted text must be what it finds there.
    linecache.cache[filename] = (len(planted), None, planted.splitlines(keepends=True), filename)
    module = types.ModuleType(original.__name__ + "_planted")
    module.__file__ = filename
    exec(compile(planted, filename, "exec"), module.__dict__)  # noqa: S102
    return module.store_swa_into_unified


def _one_page(batch):
    """The batch with every context in one page: what these tests judge is the SWA ring store, and on 0.5.18/0.5.19
    a page crossed by the verify tokens is F5's (their page table misses it), which P10's page reads see first."""
    import dataclasses

    return batch.replace(geometry=dataclasses.replace(batch.geometry, page_size=16))


def test_a_store_kernel_that_wraps_at_the_window_is_red_on_p10_with_every_field_equal(sglang, monkeypatch) -> None:
    """ROCm ATOM PR #817's bug moved into the consumer: every metadata field is what it was (P1 cannot tell), P10
    names the row the kernel's store put a token in."""
    from metadata_builders.families.dsv4.sglang import consumers

    batch = _one_page(EXAMPLES["uniform_eagle_batch_of_three"])
    assert not [n for n in check_p10_kv_state(sglang, batch) if "cannot express" not in n]
    variants = sglang.variants_supported(batch)
    before = [sglang.build(batch, v).fields for v in variants]
    planted = _planted_store("    loc = s * ring_stride + (pos % ring_stride)\n",
                             "    loc = s * ring_stride + (pos % win)\n")
    monkeypatch.setattr(consumers, "_store", lambda: planted)
    assert [sglang.build(batch, v).fields for v in variants] == before  # every metadata field equal
    with pytest.raises(PropertyFailure) as info:
        check_p10_kv_state(sglang, batch)
    assert info.value.check in ("p10.real_writes_other_slot", "p10.oob_write", "p10.live_row_lost"), str(info.value)
    assert "upstream's store_swa_into_unified" in str(info.value)


def test_p10_counts_the_builds_it_judged_through_upstreams_store_kernel(sglang, monkeypatch) -> None:
    """Every build's fp8 store judged through the kernel; where the kernel declines (a pool over its guard), the
    model, counted as such: a held P10 says which it judged."""
    from metadata_builders.families.dsv4.properties import collecting_tallies
    from metadata_builders.families.dsv4.sglang import consumers

    batch = _one_page(EXAMPLES["uniform_eagle_batch_of_three"])
    with collecting_tallies() as counts:
        check_p10_kv_state(sglang, batch)
    assert counts[("P10 stores", "kernel")] > 0 and counts[("P10 stores", "model")] == 0, counts
    monkeypatch.setattr(consumers, "MAX_POOL_ROWS", 0)
    with collecting_tallies() as counts:
        check_p10_kv_state(sglang, batch)
    assert counts[("P10 stores", "kernel")] == 0, counts
    assert counts[("P10 stores", "model")] == counts[("P10 stores", "kernel_declined")] > 0, counts


def test_the_picture_of_a_store_kernel_bug_names_the_store(sglang, monkeypatch) -> None:
    """The failure's picture judges the kernel as P10 does: red on the KV stores, never 'metadata agrees'."""
    from metadata_builders.families.dsv4.render import analyse
    from metadata_builders.families.dsv4.sglang import consumers

    if not sglang.inner.upstream.capabilities.exact_token_map:
        pytest.skip("0.5.18/0.5.19: F5 (the page table) disagrees first, so the picture leads with it")
    batch = EXAMPLES["uniform_eagle_batch_of_three"]
    planted = _planted_store("    loc = s * ring_stride + (pos % ring_stride)\n",
                             "    loc = s * ring_stride + (pos % win)\n")
    monkeypatch.setattr(consumers, "_store", lambda: planted)
    analysis = analyse(batch, builder=sglang)
    assert any(n.startswith("KV p10.") and "store_swa_into_unified" in n for n in analysis.notes), analysis.notes
    assert "KV stores or reads broken" in analysis.verdict, analysis.verdict


def test_absorbed_slack_overwrites_a_live_compressor_state_f20(sglang) -> None:
    """F20: upstream's graph path pads full_coverage; the last real row's absorbed tokens write c4 state round the
    16-row ring onto the window its next compress reads. Recognised as F20; the bundled builder (pad_rows_only)
    holds on the same batch."""
    import json
    from pathlib import Path

    from metadata_builders import VerifyBatch
    from metadata_builders.families.dsv4.runs.findings import known_finding

    d = json.loads((Path(__file__).parents[1] / "regressions" / "sglang" /
                    "f20_absorbed_slack_overwrites_live_c4_state.json").read_text())
    batch = VerifyBatch.from_dict({k: v for k, v in d.items() if k not in ("why", "meta")})
    if sglang.inner.upstream.release not in d["meta"]["fails_on"]:
        pytest.skip(f"F20 is judged on {d['meta']['fails_on']} ({d['meta']['note']})")
    with pytest.raises(PropertyFailure) as info:
        check_p10_kv_state(sglang, batch)
    assert (info.value.check, info.value.field, info.value.actual) == ("p10.pad_overwrites_live", "c4_write_plan", 36)
    assert known_finding(info.value, batch) == "F20"
    assert not [n for n in check_p10_kv_state(get_builder("hip"), batch) if "state" in n]
