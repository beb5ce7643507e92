"""P10 on the SWA ring: the state model's worked example, every check shown failing, and what it finds.

Each check of :func:`check_p10_kv_state` is made to fail by a builder that breaks
exactly it (the reference with one field edited), so none of them cannot fail;
the mutant ``last_row_absorbs_the_slack`` is a mistake the reference of its own
convention shares (P1 and P5 hold) that only P10 sees.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest
from _examples import EXAMPLES, make_batch
from hypothesis import assume, given, settings

from metadata_builders import Geometry, GraphTier, get_builder
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.kv_state import Ring, layout_tokens, ring_unfit
from metadata_builders.families.dsv4.properties import check_p1_reference, check_p5_graph_vs_eager
from metadata_builders.families.dsv4.properties.kv import check_p10_kv_state
from metadata_builders.families.dsv4.reference import ReferenceBuilder
from metadata_builders.families.dsv4.runs.findings import known_finding
from strategies import verify_batches

STREAMS = Geometry(page_size=4, swa_window=4, ring_size=6, unified_swa_window=4, page_index_align=4)
"""Window 4, ring 6 (= 4 + 3 - 1, upstream's rule), the decode streams on (unified window = window)."""


def _absorbing() -> Any:
    """F16's shape: slots 1, 2, prefixes 5, 6, verifying [2, 1] on a 2-row / 7-token tier (no pad rows)."""
    return dataclasses.replace(make_batch([5, 6], [1, 2], 3, verify_lens=[2, 1], graph=GraphTier(2, 7)),
                               geometry=STREAMS)


def _p10(builder: Any, batch: Any) -> PropertyFailure:
    with pytest.raises(PropertyFailure) as info:
        check_p10_kv_state(builder, batch)
    return info.value


class _Edited(ReferenceBuilder):
    """The reference with one field of every graph (or every) build edited: a builder that breaks one check."""

    def __init__(self, edit: Callable[[dict[str, list]], None], *, graph_only: bool = True,
                 padding: str = "pad_rows_only") -> None:
        super().__init__(padding)
        self.edit, self.graph_only = edit, graph_only

    def build(self, batch, variant):
        md = super().build(batch, variant)
        if variant.path == "graph" or not self.graph_only:
            self.edit(md.fields)
        return md


def test_the_ring_of_the_worked_example() -> None:
    """kv_state's docstring: window 2, ring 3, slot 1 with prefix 4 verifying 2: rows 3..5 hold positions 3..5."""
    batch = dataclasses.replace(make_batch([4], [1], 2, num_slots=2),
                                geometry=Geometry(page_size=4, swa_window=2, ring_size=3, unified_swa_window=2))
    ring = Ring(batch)
    assert ring.history() == {3: (1, 3)}
    assert ring.live() == {3: (1, 3), 4: (1, 4), 5: (1, 5)}
    assert [(t.kind, t.position) for t in layout_tokens(batch, graph=False, padding="pad_rows_only")] == \
        [("real", 4), ("real", 5)]


def test_the_layout_names_every_padding_token_by_the_batch_alone() -> None:
    """Real tokens first, row by row; then pad rows (slot 0), absorbed slack (its row's slot), the tail."""
    batch = _absorbing()
    kinds = [(t.kind, t.slot) for t in layout_tokens(batch, graph=True, padding="full_coverage")]
    assert kinds == [("real", 1), ("real", 1), ("real", 2)] + [("absorbed", 2)] * 4
    kinds = [(t.kind, t.slot) for t in layout_tokens(batch, graph=True, padding="pad_rows_only")]
    assert kinds == [("real", 1), ("real", 1), ("real", 2)] + [("tail", 0)] * 4
    spread = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    assert [t.kind for t in layout_tokens(spread, graph=True, padding="pad_rows_only")][6:] == ["pad row"] * 5


@pytest.mark.parametrize("name", [n for n, b in EXAMPLES.items() if ring_unfit(b) is None])
def test_the_bundled_builder_and_the_reference_hold_p10_on_the_named_batches(name: str) -> None:
    hip = get_builder("hip")
    check_p10_kv_state(hip, EXAMPLES[name])
    check_p10_kv_state(ReferenceBuilder("pad_rows_only"), EXAMPLES[name])


@settings(max_examples=40, deadline=None)
@given(batch=verify_batches(graph=True, ragged=True))
def test_the_bundled_builder_holds_p10_on_ragged_tiers(batch) -> None:
    assume(ring_unfit(batch) is None)  # a ring too narrow is not judged: drawn again, never a silent pass
    check_p10_kv_state(get_builder("hip"), batch)


def test_a_ring_narrower_than_the_window_and_the_drafts_is_not_judged() -> None:
    batch = dataclasses.replace(_absorbing(), geometry=dataclasses.replace(STREAMS, ring_size=5))
    assert "ring_size 5 < swa_window + num_draft_tokens - 1 = 6" in ring_unfit(batch)


def test_absorbed_slack_is_a_shared_mistake_only_p10_sees() -> None:
    """The mutant pads and declares full_coverage: P1 and P5 hold (the reference agrees); P10 names the row."""
    mutant = get_builder("metadata_builders.families.dsv4.mutants:last_row_absorbs_the_slack")
    batch = _absorbing()
    check_p1_reference(mutant, batch)
    check_p5_graph_vs_eager(mutant, batch)
    failure = _p10(mutant, batch)
    assert (failure.check, failure.field, failure.index, failure.actual) == ("p10.pad_overwrites_live", "swa_loc", 5,
                                                                             15)
    assert "holds slot 2's position 3" in failure.message
    assert known_finding(failure, batch) == "F16"  # the rule F16 names on upstream (labels go to upstream only)


def test_the_ring_stride_taken_as_the_window_loses_live_rows() -> None:
    """ATOM #817's class: positions wrap by the window, so a draft token's store lands on a row still read."""
    failure = _p10(get_builder("metadata_builders.families.dsv4.mutants:ring_modulo_by_window"), EXAMPLES["ring_wrap"])
    assert failure.check in ("p10.real_writes_collide", "p10.live_row_lost", "p10.window_read")


def test_the_old_tail_rule_stores_into_a_live_row_f17() -> None:
    """Under absorb_then_clamp a capped tier's tail keeps the last row's slot: its position 0 is a live row."""
    batch = dataclasses.replace(make_batch([5, 6], [1, 2], 3, verify_lens=[2, 3], graph=GraphTier(2, 7, cap=3)),
                                geometry=STREAMS)
    failure = _p10(ReferenceBuilder("absorb_then_clamp"), batch)
    assert failure.check == "p10.pad_overwrites_live" and "uncovered tail" in failure.message
    check_p10_kv_state(ReferenceBuilder("pad_rows_only"), batch)


def _set(name: str, index: int, value: int) -> Callable[[dict[str, list]], None]:
    def edit(fields: dict[str, list]) -> None:
        fields[name][index] = value
    return edit


@pytest.mark.parametrize(("edit", "check"), [
    (lambda fields: fields["swa_loc"].pop(), "p10.store_rows"),
    (_set("swa_loc", 0, 10**6), "p10.oob_write"),
    (_set("swa_loc", 1, 1 * 6 + 5), "p10.real_writes_collide"),  # token 1 (position 6) onto token 0 (position 5)
    (_set("swa_loc", 4, 1 * 6 + 1), "p10.pad_writes_other_slot"),  # a tail token into a dead row of slot 1
    (_set("swa_loc", 2, 2 * 6 + 1), "p10.live_row_lost"),  # the real token of slot 2 stores a dead row
    (_set("verify_store_state_slot", 2, 0), "p10.real_writes_other_slot"),  # the fp8 store's slot wrong: slot 0's ring
])
def test_each_store_check_fails_on_the_write_it_names(edit, check) -> None:
    batch = _absorbing()
    failure = _p10(_Edited(edit), batch)
    assert failure.check == check, failure


def test_a_stream_that_reads_another_position_fails_the_window_read() -> None:
    def edit(fields: dict[str, list]) -> None:
        row = fields["swa_indices"][2]
        row[0] = row[-1]  # position 3's row replaced by position 6's: a duplicate, one of the window missing
    failure = _p10(_Edited(edit, graph_only=False), _absorbing())
    assert failure.check == "p10.window_read" and failure.field == "swa_indices" and failure.index == 2


def test_one_mistake_in_the_reference_and_the_builder_alike_only_p10_sees(monkeypatch) -> None:
    """The ring stride taken as the window (ROCm ATOM #817's class) in the specification *and* the builder: they
    agree, so P1 holds; the stores land on rows the window still reads, so P10 fails."""
    import metadata_builders.families.dsv4.reference.builder as spec  # where ReferenceBuilder looks its stages up

    def by_window(batch, slots, positions):
        win = batch.geometry.swa_window
        return {"verify_store_state_slot": list(slots),
                "swa_loc": [slot * batch.geometry.ring_size + pos % win for slot, pos in zip(slots, positions)]}

    monkeypatch.setattr(spec, "decode_streams", by_window)
    batch = dataclasses.replace(EXAMPLES["ring_wrap"], geometry=STREAMS)
    mutant = get_builder("metadata_builders.families.dsv4.mutants:ring_modulo_by_window")
    check_p1_reference(mutant, batch)
    failure = _p10(mutant, batch)
    assert failure.prop == "P10" and failure.check.startswith("p10.")


# -- the compressed pools ---------------------------------------------------------------------------------------

def _compressed_batch() -> Any:
    """Slot 1 with prefix 127 (its tokens 127..129 complete c128 group 0 at position 127) and slot 2 with prefix 5,
    on page-aligned tables (page 128, rows 256 wide): group 0 of slot 1 lives at row (256 + 127) // 128 = 2."""
    from metadata_builders import Compression

    geo = Geometry(page_size=128, swa_window=4, ring_size=6, unified_swa_window=4, page_index_align=64,
                   compression=Compression(index_topk=8, c4_ring_size=16, c128_ring_size=256, unified_swa_pages=5))
    return make_batch([127, 5], [1, 2], 3, num_slots=3, width=256, graph=GraphTier(3, 9)).replace(geometry=geo)


def test_the_compressed_pools_hold_on_the_bundled_builder_and_the_reference() -> None:
    from metadata_builders.families.dsv4.kv_state import compressed_row, paged_tables

    batch = _compressed_batch()
    assert paged_tables(batch) is None and compressed_row(batch, 1, 0, 128) == 2
    check_p10_kv_state(get_builder("hip"), batch)
    check_p10_kv_state(ReferenceBuilder("pad_rows_only"), batch)


@pytest.mark.parametrize(("edit", "check"), [
    (_set("c128_out_loc", 0, 0), "p10.compressed_store"),  # position 127 completes group 0 but stores nothing
    (_set("unified_c4_out_loc", 1, 5 + 33), "p10.compressed_store"),  # position 128 completes no c4 group
    (_set("c4_out_loc", 7, 5), "p10.pad_compressed_store"),  # a pad row's token stores a c4 entry
])
def test_each_compressed_store_check_fails_on_the_store_it_names(edit, check) -> None:
    failure = _p10(_Edited(edit), _compressed_batch())
    assert failure.check == check, failure


def _low_ratio_batch() -> Any:
    """The compressed batch with V4.1's c1 and c2 pools."""
    batch = _compressed_batch()
    low = dataclasses.replace(batch.geometry.compression, low_ratios=(1, 2))
    return batch.replace(geometry=dataclasses.replace(batch.geometry, compression=low))


def test_the_full_pool_and_the_low_ratio_pools_hold_on_the_bundled_builder_and_the_reference() -> None:
    check_p10_kv_state(get_builder("hip"), _low_ratio_batch())
    check_p10_kv_state(ReferenceBuilder("pad_rows_only"), _low_ratio_batch())


def _set_cell(name: str, row: int, column: int, value: int) -> Callable[[dict[str, list]], None]:
    def edit(fields: dict[str, list]) -> None:
        fields[name][row][column] = value
    return edit


def _copy(name: str, index: int, source: int) -> Callable[[dict[str, list]], None]:
    def edit(fields: dict[str, list]) -> None:
        fields[name][index] = fields[name][source]
    return edit


@pytest.mark.parametrize(("edit", "check", "index"), [
    (_copy("raw_out_loc", 7, 5), "p10.pad_full_store", 7),  # a pad row's K on the last real token's location
    (_copy("raw_out_loc", 1, 0), "p10.full_store_misplaced", 1),  # a real token's K on its neighbour's location
    (_set("raw_out_loc", 7, 10**9), "p10.oob_write", 7),
    (_set("c2_out_loc", 0, -1), "p10.compressed_store", 0),  # position 127 completes c2 group 63: no store
    (_copy("c1_out_loc", 2, 1), "p10.compressed_store", 2),  # position 129's c1 entry on position 128's row
    (_set("c2_out_loc", 7, 5), "p10.pad_compressed_store", 7),  # a pad row's token stores a c2 entry
    (_set("low_ratio_req_indices", 4, 1), "p10.real_writes_other_slot", 4),  # slot 2's c2 state in slot 1's ring
    (_set("low_ratio_req_indices", 7, 3), "p10.oob_write", 7),  # a pad token's ring load past the 3 slots
    (_set_cell("page_table", 1, 1, 0), "p10.page_read", 1),  # position 128 finds its own page at page 0
])
def test_each_full_and_low_ratio_pool_check_fails_on_the_store_it_names(edit, check, index) -> None:
    failure = _p10(_Edited(edit), _low_ratio_batch())
    assert (failure.check, failure.index) == (check, index), failure


def test_a_c128_read_of_another_row_fails_the_compressed_read() -> None:
    def edit(fields: dict[str, list]) -> None:
        fields["c128_page_indices"][1][0] = 7  # position 128 reads group 0 at row 7, not row 2
    failure = _p10(_Edited(edit, graph_only=False), _compressed_batch())
    assert (failure.check, failure.index, failure.expected, failure.actual) == ("p10.compressed_read", 1, [2], [7])


def test_a_table_that_is_not_paged_is_not_judged_in_the_compressed_pools() -> None:
    from metadata_builders.families.dsv4.kv_state import paged_tables

    batch = _compressed_batch()
    rows = [list(r) for r in batch.req_to_token]
    rows[1][3] = rows[1][4]  # no longer contiguous inside its first page
    assert "req_to_token[1] is not page-contiguous at column 0" in paged_tables(batch.replace(req_to_token=rows))


def test_compressed_pools_it_cannot_address_are_counted_not_judged_and_the_rest_still_is() -> None:
    """A request whose table row is not paged has no compressed row to hold its tokens to: it is counted (the
    ``P10 stores:`` line), never silently held, and the other requests and every padding token are still judged."""
    from types import SimpleNamespace

    from metadata_builders.families.dsv4.properties import collecting_tallies
    from metadata_builders.families.dsv4.runs.report import stores_line

    batch = _compressed_batch()
    rows = [list(r) for r in batch.req_to_token]
    rows[1][3] = rows[1][4]
    holey = batch.replace(req_to_token=rows)
    with collecting_tallies() as counts:
        assert check_p10_kv_state(get_builder("hip"), holey) == []
    line = stores_line(SimpleNamespace(tallies=counts, spec=SimpleNamespace(name="P10")))
    # two requests per build, one of them (slot 1) unpaged
    assert line is not None and "compressed pools: 18 request builds judged, 18 not (a table row" in line, line

    def edit(fields: dict[str, list]) -> None:  # slot 2's position 7 (token 5) completes c4 group 1: moved, red
        fields["c4_out_loc"][5] += 1
    assert _p10(_Edited(edit, graph_only=False), holey).check == "p10.compressed_store"


def test_p10_says_whether_it_judged_a_store_kernel_of_the_builders_or_the_harness_model() -> None:
    """A held P10 names what it judged the fp8 store by: ``hip`` brings no store kernel, so the model (the SGLang
    builder's kernel is counted in tests/dsv4/test_sglang_consumers.py); no collector open, nothing counted."""
    from types import SimpleNamespace

    from metadata_builders.families.dsv4.properties import collecting_tallies
    from metadata_builders.families.dsv4.runs.report import stores_line

    batch = dataclasses.replace(make_batch([5, 6], [1, 2], 3), geometry=STREAMS)
    hip = get_builder("hip")
    with collecting_tallies() as counts:
        assert check_p10_kv_state(hip, batch) == []
    assert counts[("P10 stores", "model")] > 0 and counts[("P10 stores", "kernel")] == 0, counts
    assert counts[("P10 stores", "kernel_declined")] == 0, counts
    line = stores_line(SimpleNamespace(spec=SimpleNamespace(name="P10"), tallies=counts))
    assert line == (f"P10 stores: the fp8 SWA store of {counts[('P10 stores', 'model')]} builds judged, 0 through the "
                    f"builder's own store kernel, {counts[('P10 stores', 'model')]} through the harness's model of it "
                    "(the builder brings no store kernel); page-table reads: "
                    f"{counts[('P10 page reads', 'judged')]} request builds judged, 0 not (a table row that is not "
                    "paged)"), line
    assert stores_line(SimpleNamespace(spec=SimpleNamespace(name="P10"), tallies={})) is None


# -- the compressor states the write plans store ----------------------------------------------------------------

def _state_row(ratio: int, token: int, row: int) -> Callable[[dict[str, list]], None]:
    """Token ``token``'s c``ratio`` write-plan entry moved to state row ``row``."""
    def edit(fields: dict[str, list]) -> None:
        entry = next(e for e in fields[f"c{ratio}_write_plan"] if e[0] == token)
        entry[1] = row
    return edit


def test_the_compressor_states_hold_and_their_live_rows_are_the_next_compress_window() -> None:
    """c4, ring 16: slot 1 (prefix 127, 3 drafts) keeps positions 124..129 live -- the window of the group its next
    compress completes, whatever it accepts -- and slot 2 (prefix 5) positions 0..7."""
    from metadata_builders.families.dsv4.kv_state import StateRing, state_live_from, state_unfit

    batch = _compressed_batch()
    ring = StateRing(batch, 4)
    assert (state_live_from(127, 4), state_live_from(5, 4), state_unfit(batch, 4)) == (124, 0, None)
    assert sorted(ring.live()) == [16, 17, 28, 29, 30, 31, *range(32, 40)]
    plan = get_builder("hip").build(batch, next(v for v in variants_for_graph(batch))).fields["c4_write_plan"]
    assert [list(e) for e in plan] == [[0, 31], [1, 16], [2, 17], [3, 37], [4, 38], [5, 39], [6, 1], [7, 2], [8, 3]]


def variants_for_graph(batch):
    from metadata_builders import variants_for

    return [v for v in variants_for(batch) if v.path == "graph"]


@pytest.mark.parametrize(("edit", "check"), [
    (_state_row(4, 3, 38), "p10.state_write_misplaced"),  # position 5's state on position 6's row
    (_state_row(4, 0, 40), "p10.real_writes_other_slot"),  # slot 1's state in slot 2's ring
    (_state_row(4, 1, 10**6), "p10.oob_write"),
    (_state_row(4, 6, 33), "p10.pad_overwrites_live"),  # a pad row's state on slot 2's live position 1
    (_state_row(4, 7, 20), "p10.pad_writes_other_slot"),  # a pad row's state on a dead row of slot 1
    (_state_row(128, 0, 256 + 128), "p10.state_write_misplaced"),  # c128: position 127's state one row on
])
def test_each_compressor_state_check_fails_on_the_write_it_names(edit, check) -> None:
    failure = _p10(_Edited(edit), _compressed_batch())
    assert failure.check == check and failure.field.endswith("_write_plan"), failure


def test_a_state_ring_too_small_for_a_steps_live_states_is_counted_not_judged() -> None:
    """c128 ring 128 with 3 drafts: 129 live states need more rows than the ring has (a geometry upstream's pool
    configurator refuses to start with, and the strategies never draw): counted on the ``P10 stores:`` line, not a
    red verdict, and never a silent held."""
    from types import SimpleNamespace

    from metadata_builders.families.dsv4.kv_state import state_unfit
    from metadata_builders.families.dsv4.properties import collecting_tallies
    from metadata_builders.families.dsv4.runs.report import stores_line

    batch = _compressed_batch()
    small = dataclasses.replace(batch.geometry.compression, c128_ring_size=128)
    unfit = batch.replace(geometry=dataclasses.replace(batch.geometry, compression=small))
    assert "c128_ring_size 128 < window 128 + num_draft_tokens - 2 = 129" in state_unfit(unfit, 128)
    with collecting_tallies() as counts:
        assert check_p10_kv_state(get_builder("hip"), unfit) == []
    line = stores_line(SimpleNamespace(tallies=counts, spec=SimpleNamespace(name="P10")))
    assert line is not None and "compressor states: 18 write plans judged, 18 not (a state ring too small" in line, line


def _edited_function(module: Any, name: str, old: str, new: str) -> Any:
    """``module.name`` compiled from its own source with ``old`` replaced by ``new`` (once, exactly)."""
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(getattr(module, name)))
    assert source.count(old) == 1, old
    namespace: dict = {}
    exec(compile(source.replace(old, new), inspect.getsourcefile(module), "exec"), vars(module), namespace)  # noqa: S102
    return namespace[name]


def test_one_state_ring_mistake_in_the_reference_and_the_builder_alike_only_p10_sees(monkeypatch) -> None:
    """The compressor-state ring wrapped at half its size (the window, ATOM #817's class) in the specification's
    plans *and* the builder's: they agree, so P1 holds; the states land on rows of other positions, so P10 fails."""
    import metadata_builders.families.dsv4.hip.compression as hip_compression
    import metadata_builders.families.dsv4.reference.plans as plans

    monkeypatch.setattr(plans, "plan_for_ratio", _edited_function(
        plans, "plan_for_ratio", "return slot * ring + p % ring", "return slot * ring + p % (ring // 2)"))
    monkeypatch.setattr(hip_compression, "_ring_loc", _edited_function(
        hip_compression, "_ring_loc", "torch.remainder(position, ring)", "torch.remainder(position, ring // 2)"))
    batch = _compressed_batch()
    hip = get_builder("hip")
    check_p1_reference(hip, batch)
    failure = _p10(hip, batch)
    assert (failure.check, failure.field) == ("p10.state_write_misplaced", "c4_write_plan"), failure


def test_the_page_read_skip_is_counted_on_an_uncompressed_geometry_too() -> None:
    """A request whose table row is not paged (a ``-1`` hole in its positions) has its page-table reads counted, not
    judged, on the ``P10 stores:`` line -- on an uncompressed geometry as on a compressed one (before, only the
    compressed pools' skip was counted, and an uncompressed skip was silent)."""
    from types import SimpleNamespace

    from metadata_builders.families.dsv4.kv_state import unpaged_slots
    from metadata_builders.families.dsv4.properties import collecting_tallies
    from metadata_builders.families.dsv4.runs.report import stores_line

    batch = dataclasses.replace(make_batch([5, 6], [1, 2], 3), geometry=STREAMS)
    table = [list(row) for row in batch.req_to_token]
    table[2][1] = -1  # slot 2's position 1: not page-contiguous
    holed = batch.replace(req_to_token=table)
    assert holed.geometry.compression is None and set(unpaged_slots(holed)) == {2}
    with collecting_tallies() as counts:
        assert check_p10_kv_state(get_builder("hip"), holed) == []
    assert counts[("P10 page reads", "unpaged")] > 0 and counts[("P10 page reads", "judged")] > 0, counts
    line = stores_line(SimpleNamespace(tallies=counts, spec=SimpleNamespace(name="P10")))
    n, skipped = counts[("P10 page reads", "judged")], counts[("P10 page reads", "unpaged")]
    assert f"page-table reads: {n} request builds judged, {skipped} not (a table row that is not paged)" in line, line


def test_p10s_draft_extend_focus_draws_the_geometries_it_judges() -> None:
    """P10 judges draft extend only where ``swa_window == unified_swa_window`` (its prefill store keeps the unified
    window, its reads take ``swa_window``); its draft-extend focus draws exactly those, so what is ``not applicable``
    there is a ring too small for a step, never the windows (before, about half the focus was)."""
    from metadata_builders.families.dsv4.properties import focuses_for
    from metadata_builders.families.dsv4.properties.kv import p10_applies

    focus = next(f for f in focuses_for("P10") if f.mode == "draft_extend")
    seen: list[str | None] = []

    @settings(max_examples=60, database=None, derandomize=True)
    @given(batch=focus.batches)
    def drawn(batch) -> None:
        assert batch.graph is not None and batch.geometry.swa_window == batch.geometry.unified_swa_window
        seen.append(p10_applies(batch))

    drawn()
    assert seen.count(None) > len(seen) // 2, seen
    assert not [why for why in seen if why and "unified_swa_window" in why]


# -- the paged SWA pool (swa_out_cache_loc, swa_page_indices) and the V4.1 positions -----------------------------


def test_the_paged_swa_pool_of_the_worked_example() -> None:
    """kv_state.PagedSwa's docstring: window 2, full_to_swa[x] = 100 + x, slot 1 at locations 10 + p, prefix 4
    verifying 2: location 113 holds (1, 3) before the step; the tokens store at 114, 115; padding at 100."""
    from metadata_builders.families.dsv4.kv_state import PagedSwa

    batch = dataclasses.replace(make_batch([4], [1], 2, num_slots=2, width=10),
                                geometry=Geometry(page_size=4, swa_window=2, ring_size=3, unified_swa_window=2))
    pool = PagedSwa(batch)
    assert batch.out_cache_loc == (14, 15) and pool.history() == {113: (1, 3)}
    assert (pool.target(14), pool.target(15), pool.dummy) == (114, 115, 100)
    assert pool.target(0) is None and pool.location(1, 4) == 114  # the padding location is nobody's


@pytest.mark.parametrize(("edit", "check", "index"), [
    (_set("swa_out_cache_loc", 0, 100 + 256 + 128), "p10.paged_store_misplaced", 0),  # position 127 at 128's slot
    (_copy("swa_out_cache_loc", 7, 5), "p10.pad_overwrites_live", 7),  # a pad row's K over slot 2's position 7
    (_set("swa_out_cache_loc", 7, -1), "p10.pad_paged_store", 7),  # a pad marked -1: not the dummy slot
    (_set_cell("swa_page_indices", 1, 0, 100 + 256 + 127), "p10.paged_window_read", 1),  # 128 reads 127 twice
    (_set("low_ratio_pos_i64", 0, 128), "p10.low_ratio_position", 0),  # position 127's state row one ahead
    (_set("low_ratio_pos_i64", 7, -1), "p10.low_ratio_position", 7),  # a pad's row before slot 0's ring
])
def test_each_paged_swa_and_low_ratio_position_check_fails_on_the_write_it_names(edit, check, index) -> None:
    """The paged SWA store and reads and the V4.1 positions: each check red on the one edit it names (the reference
    itself holds: test_the_full_pool_and_the_low_ratio_pools_hold_on_the_bundled_builder_and_the_reference)."""
    failure = _p10(_Edited(edit), _low_ratio_batch())
    assert (failure.check, failure.index) == (check, index), failure


def test_a_pads_paged_store_off_the_dummy_slot_fails_p5() -> None:
    """P5's inertness rule: every pad token (a pad row's, the tail's) stores at full_to_swa[0], as upstream's
    in-graph block translates the runner's zero-padded out_cache_loc."""
    with pytest.raises(PropertyFailure) as info:
        check_p5_graph_vs_eager(_Edited(_set("swa_out_cache_loc", 7, 100 + 1)), _low_ratio_batch())
    assert (info.value.check, info.value.index, info.value.expected) == ("p5.pad_paged_store", (7,), 100)
