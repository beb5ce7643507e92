"""Pictures of a batch: the analysis behind them, and what a picture drawn for a failure says.

The PNG, the self-contained HTML page, the files and an install without matplotlib: ``test_render_files.py``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from _examples import EXAMPLES, make_batch
from _render_batches import FALLEN_BEHIND, RUN_AHEAD, OffByOneFinalPos, _load

from metadata_builders import (
    Divergence,
    GraphTier,
    ReferenceBuilder,
    VerifyBatch,
    VerifyMetadata,
    get_builder,
    variants_for,
)
from metadata_builders.families.dsv4 import render
from metadata_builders.families.dsv4.metadata import first_difference
from metadata_builders.families.dsv4.render import MAX_ROWS, MAX_TOKENS_PER_ROW, analyse
from metadata_builders.families.dsv4.render.analysis import every_difference

matplotlib = pytest.importorskip("matplotlib")
np = pytest.importorskip("numpy")


# -- the analysis ----------------------------------------------------------------------------------


def test_cell_kinds_show_tier_slack_spread_over_pad_rows() -> None:
    """Real rows hold verify tokens; the tier slack spread over pad rows is drawn as pad-row tokens of slot 0."""
    a = analyse(EXAMPLES["ragged_tier_slack_spread_over_pad_rows"], "reference")
    kinds = [c.kind for c in a.cells]
    assert kinds == ["verify"] * 6 + ["pad"] * 5
    assert [r.kind for r in a.rows] == ["real"] * 3 + ["pad"] * 2
    assert [r.prefix for r in a.rows] == [5, 3, 7, 1, 1]
    assert all(c.slot == 0 for c in a.cells if c.kind == "pad")
    assert [c.position for c in a.cells[:3]] == [5, 6, 7]
    assert a.graph_num_tokens == 11 and a.num_tokens == 11 and a.num_real_tokens == 6


def test_cell_kinds_show_slack_absorbed_by_the_last_real_row() -> None:
    """With no pad rows and no cap, an absorbing convention's last real row has cells past its verify tokens:
    slack; under pad_rows_only (the reference builder's) they are an uncovered tail instead."""
    batch = EXAMPLES["tier_slack_absorbed_by_last_real_row"]
    a = analyse(batch, builder=ReferenceBuilder("absorb_then_clamp"))
    assert [(c.row, c.kind) for c in a.cells] == [(0, "verify"), (0, "verify"), (1, "verify"), (1, "slack"),
                                                   (1, "slack"), (1, "slack")]
    a = analyse(batch, "reference")
    assert [(c.row, c.kind) for c in a.cells] == [(0, "verify"), (0, "verify"), (1, "verify"), (2, "uncovered"),
                                                   (2, "uncovered"), (2, "uncovered")]


@pytest.mark.parametrize(("padding", "covered"), [("absorb_then_clamp", 4), ("pad_rows_only", 3)])
def test_cell_kinds_show_the_uncovered_tail_of_a_capped_tier(padding: str, covered: int) -> None:
    """Tokens past num_tokens of a capped tier form an uncovered row with seq_lens_casual 1 (position 0)."""
    a = analyse(EXAMPLES["capped_tier_uncovered_tail"], builder=ReferenceBuilder(padding))
    tail = [c for c in a.cells if c.kind == "uncovered"]
    assert a.num_tokens == covered and len(tail) == 6 - covered
    assert [c.token for c in tail] == list(range(covered, 6))
    assert all(c.position == 0 for c in tail)
    assert a.rows[-1].kind == "uncovered" and a.rows[-1].prefix is None


def test_a_correct_builder_has_no_disagreements() -> None:
    """The bundled hip builder agrees with the reference on every variant: nothing flagged."""
    a = analyse(EXAMPLES["ragged_tier_slack_spread_over_pad_rows"], "hip", "cpu")
    assert a.disagreements == () and a.flagged_tokens == frozenset() and a.faults == () and a.notes == ()
    assert "agrees with the reference" in a.verdict


def test_a_corrupted_field_is_a_disagreement_on_its_token() -> None:
    """pf_final_pos[0] off by one is reported at that field and index, with both values, in every variant."""
    batch = EXAMPLES["ragged_tier_slack_spread_over_pad_rows"]
    a = analyse(batch, builder=OffByOneFinalPos())
    assert len(a.disagreements) == 1
    d = a.disagreements[0]
    assert (d.field, d.index, d.expected, d.actual, d.token) == ("pf_final_pos", (0,), 7, 8, 0)
    assert len(d.variants) == len(a.variants) == 9 and d.against == "reference"
    assert a.flagged_tokens == frozenset({0}) and a.by_token[0] == (d,)
    assert "pf_final_pos[0]: expected 7, actual 8" in str(d)


class UngatedSwaLocOffByOne(ReferenceBuilder):
    """A reference that is inconsistent across variants: ``swa_loc[0]`` is off by one under gate=ungated."""

    def build(self, batch: VerifyBatch, variant) -> VerifyMetadata:
        md = super().build(batch, variant)
        if variant.gate != "ungated":
            return md
        fields = dict(md.fields)
        fields["swa_loc"] = [fields["swa_loc"][0] + 1, *fields["swa_loc"][1:]]
        return VerifyMetadata(fields, md.decision, md.audit)


def test_variants_are_also_compared_with_each_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the reference itself varies by variant, a variant is flagged against the first variant of its path."""
    batch = EXAMPLES["uniform_eagle_batch_of_three"]
    assert analyse(batch, "reference").disagreements == ()
    monkeypatch.setattr(render.analysis, "ReferenceBuilder", UngatedSwaLocOffByOne)
    a = analyse(batch, builder=UngatedSwaLocOffByOne())
    assert {(d.field, d.index, d.against) for d in a.disagreements} == {
        ("swa_loc", (0,), "eager mirror=host gate=dspark"),
        ("swa_loc", (0,), "graph mirror=host gate=dspark"),
    }
    assert all("gate=ungated" in v for d in a.disagreements for v in d.variants)
    assert a.flagged_tokens == frozenset({0})


def test_eagle_ungated_host_mirror_reports_an_oob_write() -> None:
    """Device lengths running ahead: EAGLE host-staged lengths under gate=ungated write 1 element out of bounds."""
    a = analyse(RUN_AHEAD, "hip", "cpu")
    oob = [f for f in a.faults if f.kind == "oob_write"]
    faulting = {v for f in oob for v in f.variants}
    # mirror=tolist stages the lengths on the host too (after reading the mirror back): same exposure.
    assert faulting == {f"{path} mirror={mirror} gate=ungated"
                        for path in ("eager", "graph") for mirror in ("host", "tolist")}
    assert all(f.count == 1 and f.device_sum == f.output_size + 1 for f in oob)
    assert not any("gate=dspark" in v for f in a.faults for v in f.variants)
    assert a.disagreements == ()  # metadata is compared without the divergence
    assert a.notes == ()  # the builder's faults match the fault model


class HidesItsFaults:
    """hip with every device fault dropped from its audit: a builder the fault model disagrees with."""

    name = "hides-its-faults"

    def __init__(self) -> None:
        self.inner = get_builder("hip", "cpu")

    def build(self, batch: VerifyBatch, variant) -> VerifyMetadata:
        import dataclasses

        md = self.inner.build(batch, variant)
        return VerifyMetadata(md.fields, md.decision, dataclasses.replace(md.audit, faults=[]))


def test_faults_that_leave_the_fault_model_are_noted_and_the_picture_is_not_clean() -> None:
    """A builder that shows no fault where the model predicts one: a note per variant saying both, never clean."""
    a = analyse(RUN_AHEAD, builder=HidesItsFaults())
    assert a.faults == () and not a.is_clean
    assert any("builder saw no fault" in n and "the fault model expects oob_write x1" in n for n in a.notes)


def test_device_lengths_falling_behind_leave_an_uninitialised_tail() -> None:
    """A trusted output_size above the device sum leaves the map's last element uninitialised; that cell is marked."""
    a = analyse(FALLEN_BEHIND, "hip", "cpu")
    kinds = {(f.kind, f.count, f.output_size) for f in a.faults}
    assert kinds == {("uninitialized_tail", 1, 6), ("uninitialized_tail", 1, 8)}
    assert set(a.uninitialised) == {5, 7}


def test_big_batches_are_capped_per_row_and_in_rows() -> None:
    """At most MAX_ROWS rows and MAX_TOKENS_PER_ROW cells per row are drawn; flagged rows are always kept."""
    bs, draft = 40, 70
    batch = make_batch([1] * bs, list(range(1, bs + 1)), draft, num_slots=bs + 1, width=80)
    a = analyse(batch, "reference")
    flagged = dataclasses.replace(a, flagged_tokens=frozenset({draft * 37 + 69}))
    lines = flagged.drawn_rows()
    rows = [line for line in lines if line.row is not None]
    assert len(rows) <= MAX_ROWS
    assert all(len(line.cells) <= MAX_TOKENS_PER_ROW for line in lines)
    assert 37 in {line.row.index for line in rows}
    assert any(line.row is None and line.hidden_rows > 0 for line in lines)
    assert all(line.hidden_cells == draft - (MAX_TOKENS_PER_ROW - 1) for line in rows)


def test_the_fault_models_out_of_bounds_read_is_not_expected_of_the_builder() -> None:
    """The fault model's oob_read (a literal gather past the table, F2c) is no fault a correct builder must show."""
    f2c = os.path.join(os.path.dirname(os.path.dirname(__file__)), "regressions", "sglang",
                       "f2c_capped_absorb_past_table_width.json")
    batch = _load(f2c)
    batch = batch.replace(divergence=Divergence(list(batch.extend_lens)))
    reference = ReferenceBuilder("absorb_then_clamp")  # an absorbing convention: the last real row reads past the table
    assert any(f.kind == "oob_read" for v in variants_for(batch) for f in reference.build(batch, v).audit.faults)
    a = analyse(batch, "hip", "cpu")
    assert a.faults == () and a.notes == ()


@pytest.mark.parametrize(
    ("expected", "actual", "found"),
    [
        pytest.param([1, 2, 3], [1, 5, 6], [((1,), 2, 5), ((2,), 3, 6)], id="every_token"),
        pytest.param([[0, 1], [2, 3], [4, 5]], [[0, 1], [2, 9], [7, 5]], [((1, 1), 3, 9), ((2, 0), 4, 7)],
                     id="first_column_of_each_2d_row"),
        pytest.param([[0, 1], [2, 3]], [[0, 1], [2]], [((1,), "length 2", "length 1")], id="short_2d_row"),
        pytest.param([1, 2], [1, 2, 3], [(None, "length 2", "length 3")], id="lengths_differ"),
        pytest.param([1, 2], [1, 2], [], id="equal"),
    ],
)
def test_every_difference_extends_first_difference_to_every_token(expected, actual, found) -> None:
    """every_difference gives each differing token's first element; its first entry is metadata's first_difference."""
    diffs = every_difference({"swa_loc": expected}, {"swa_loc": actual})
    assert [(d.index, d.expected, d.actual) for d in diffs] == found
    assert (diffs[0] if diffs else None) == first_difference({"swa_loc": expected}, {"swa_loc": actual})


def test_a_sync_failure_is_what_the_picture_says() -> None:
    """A hidden ``.item()`` (a P7 failure, fields all equal): the verdict names the broken sync contract, not good
    news."""
    from metadata_builders.families.dsv4.mutants import mutant_builder

    a = analyse(EXAMPLES["uniform_eagle_batch_of_three"], builder=mutant_builder("uniform_total_item_sync"))
    assert a.disagreements == () and not a.is_clean
    assert "sync contract broken" in a.verdict and "agrees with the reference" not in a.verdict
    syncs = [n for n in a.notes if n.startswith("SYNC ")]
    assert syncs and "outside the contract" in syncs[0] and "read of" in syncs[0]


def test_a_kv_store_failure_is_what_the_picture_says() -> None:
    """A P10 failure whose fields all equal the reference of their convention (absorbed slack overwriting a live
    ring row): the verdict names the broken stores, and a note the store, the row and its holder."""
    import json

    from metadata_builders import VerifyBatch
    from metadata_builders.families.dsv4.mutants import mutant_builder

    path = Path(__file__).parents[1] / "regressions" / "sglang" / "f16_absorbed_slack_overwrites_live_swa_ring_row.json"
    batch = VerifyBatch.from_dict(json.loads(path.read_text()))
    a = analyse(batch, builder=mutant_builder("last_row_absorbs_the_slack"))
    assert a.disagreements == () and not a.is_clean
    assert "KV stores or reads broken" in a.verdict and "agrees with the reference" not in a.verdict
    kv = [n for n in a.notes if n.startswith("KV ")]
    assert kv and "p10.pad_overwrites_live" in kv[0] and "ring row 15" in kv[0] and "position 3" in kv[0]
    # the ring drawn near the row: slot 2's rows 12..17, row 15 (position 3, live) marked with its writer
    # (13, 14: the slack's own positions 7, 8 are nobody's live state, so the rows hold nothing that must stay)
    assert "ring of slot 2 (rows 12..17): 12 pos 6 live | 13 empty | 14 empty | " \
           "[15 pos 3 live <- token 5] | 16 pos 4 live | 17 pos 5 live" in kv[0], kv[0]
    assert not [n for n in analyse(batch, "hip").notes if n.startswith("KV ")]


# -- a picture drawn for a failure never says "fine" (issue 40 item 4) ---------------------------------------


def _sync_failure():
    from metadata_builders.errors import PropertyFailure

    return PropertyFailure("P7", "a path that claims to be sync-free synced", variant="eager/mirror=host/"
                           "layout_total=host/gate=ungated", field="audit.host_syncs", expected=[],
                           actual=["Tensor.item@verify_extension:scalar"], check="p7.sync_free_synced",
                           where="verify_extension")


def test_a_picture_drawn_for_a_failure_names_it_first_and_is_never_good_news(tmp_path: Path) -> None:
    """A P7 failure whose picture's own builds agree with the reference: the header names P7 and its check id,
    the side panel shows the sync (op and stage) first, and neither page nor PNG reads as clean."""
    batch = EXAMPLES["single_request"]
    analysis = analyse(batch, "hip", failure=_sync_failure())
    assert not analysis.is_clean and analysis.verdict.startswith("P7 FAILED (p7.sync_free_synced, mode target_verify)")
    assert any("Tensor.item@verify_extension" in line for line in analysis.failure)
    page = render.html_page(analysis)
    assert 'class="verdict bad"' in page and "P7 FAILED" in page and "not in these builds" in page
    from metadata_builders.families.dsv4.render.png import _side_text

    assert _side_text(analysis).startswith("P7 FAILED")


def test_a_hidden_state_picture_builds_the_history_first(tmp_path: Path) -> None:
    """A failure that needs earlier batches: the picture's builds come after them, so the disagreement shows."""
    from metadata_builders.families.dsv4.mutants import mutant_builder
    from metadata_builders.families.dsv4.properties import history_for

    batch = make_batch([5, 3], [2, 1], 3, verify_lens=[2, 1], num_slots=4, graph=GraphTier(3, 8, cap=2))
    largest = history_for(batch)[-1]
    fresh = analyse(batch, builder=mutant_builder("stateful_scratch_tail"))
    after = analyse(batch, builder=mutant_builder("stateful_scratch_tail"), history=[largest],
                    failure=_sync_failure())
    assert not fresh.disagreements and after.disagreements
    assert any("after 1 earlier batch" in line for line in after.failure)


def test_the_uncovered_tail_is_not_called_a_capped_tiers() -> None:
    """Under pad_rows_only an uncapped tier without pad rows has an uncovered tail too: the legend says so."""
    from metadata_builders.families.dsv4.render._style import KIND_LABELS

    assert "capped" not in KIND_LABELS["uncovered"]
