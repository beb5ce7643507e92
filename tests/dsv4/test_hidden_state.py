"""P9 and replay files that reproduce: a builder's verdict never depends on what it built before, unseen.

A builder that keeps state between calls (a scratch buffer reused and refreshed
only in part, a cache keyed by batch size) can fail on a batch only after others.
P9 builds the batch's own history first; ``check`` replays each failure on a
fresh builder before writing its file, and a file that needs earlier batches
carries them (``meta.history``), which ``replay`` builds first.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from _examples import EXAMPLES, make_batch

from metadata_builders import Geometry, GraphTier, VerifyBatch, get_builder
from metadata_builders.cli import main as cli_main
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.builders import AuditedBuilder
from metadata_builders.families.dsv4.hip import HipBuilder
from metadata_builders.families.dsv4.mutants import mutant_builder
from metadata_builders.families.dsv4.properties import PROPERTIES, check_p9_no_hidden_state, history_for
from metadata_builders.families.dsv4.runs.report import write_replay_file
from metadata_builders.families.dsv4.runs.reproduce import reproduce

P1 = next(spec for spec in PROPERTIES if spec.name == "P1")
P9 = next(spec for spec in PROPERTIES if spec.name == "P9")
CAPPED_WITH_A_SPARE_SLOT = make_batch([5, 3], [2, 1], 3, verify_lens=[2, 1], num_slots=4, graph=GraphTier(3, 8, cap=2))
"""Pad row 2 takes 2 tokens (cap 2), tokens 5..7 are an uncovered tail in slot 0; slot 3 is spare."""


def test_p9_catches_a_scratch_buffer_reused_across_calls() -> None:
    """After the batch's largest form, a scratch refreshed only up to the covered tokens keeps its slots in the tail.

    The largest form fills the tier with real rows ``[3, 3, 2]`` (slots 2, 1, 3): token 5 is slot 1's; the
    batch itself leaves tokens 5..7 uncovered, in slot 0 (its last row is the pad row).
    """
    with pytest.raises(PropertyFailure) as info:
        check_p9_no_hidden_state(mutant_builder("stateful_scratch_tail"), CAPPED_WITH_A_SPARE_SLOT)
    failure = info.value
    assert (failure.prop, failure.field, failure.index, failure.expected, failure.actual) == (
        "P9", "verify_store_state_slot", (5,), 0, 1)


@pytest.mark.parametrize("name", ["single_request", "uniform_eagle_batch_of_three", "capped_tier_uncovered_tail"])
def test_p9_holds_for_the_bundled_builder(name: str) -> None:
    """The bundled builder keeps no state: every batch builds the same after its history."""
    assert check_p9_no_hidden_state(get_builder("hip"), EXAMPLES[name]) in ([], [
        "no other batch of this shape to build first; nothing to check"])


def test_p9_history_grows_the_batch_and_changes_its_values() -> None:
    """The history is the same requests in the other modes of the step, the batch with other values, then its
    largest form: the pad row filled, no cap, the widest rows covering the tier, long prefixes.  DSpark's (whose
    active draft count changes step to step) also has the same rows and tier with another draft count, first and
    last."""
    *modes, other, largest = history_for(CAPPED_WITH_A_SPARE_SLOT)
    assert [b.mode for b in modes] == ["draft_decode", "draft_extend", "decode"]  # not its own mode
    assert all(b.req_pool_indices == (2, 1) and b.seq_lens == (5, 3) and b.graph.padded_bs == 3 for b in modes)
    assert other.graph == CAPPED_WITH_A_SPARE_SLOT.graph and other != CAPPED_WITH_A_SPARE_SLOT
    assert largest.bs == 3 and largest.req_pool_indices[-1] == 3 and largest.graph.cap is None
    assert largest.num_real_tokens == largest.graph.graph_num_tokens
    assert all(s + e == largest.max_context for s, e in zip(largest.seq_lens[:2], largest.extend_lens))
    dspark = history_for(CAPPED_WITH_A_SPARE_SLOT.replace(is_dspark=True))
    draft = dspark[3]
    assert (draft.bs, draft.graph, draft.num_draft_tokens, draft.verify_lens) == (
        2, CAPPED_WITH_A_SPARE_SLOT.graph, 2, (2, 1))
    assert dspark[-1] == draft and len(dspark) == len(modes) + 4


def test_p9_is_partial_for_a_builder_that_cannot_be_made_afresh() -> None:
    """Without a factory there is no fresh builder to compare with: partial, saying why."""
    notes = check_p9_no_hidden_state(AuditedBuilder(HipBuilder(), "cpu", "no-factory"), CAPPED_WITH_A_SPARE_SLOT)
    assert notes and "cannot be constructed afresh" in notes[0]


def test_reproduce_finds_the_shortest_history_that_fails() -> None:
    """Fresh, the mutant holds P1 on the batch; after its largest form it fails: a history of one batch."""
    builder = mutant_builder("stateful_scratch_tail")
    *_, other, largest = history_for(CAPPED_WITH_A_SPARE_SLOT)
    found = reproduce(builder, P1, CAPPED_WITH_A_SPARE_SLOT, [largest, other, largest])
    assert found.verified and found.history == (largest,)
    assert found.failure.field == "verify_store_state_slot"
    assert reproduce(get_builder("hip"), P1, CAPPED_WITH_A_SPARE_SLOT, [largest]).history is None


def test_a_replay_file_carries_its_history_and_replays_red(tmp_path) -> None:
    """The file with meta.history fails P1 on replay; the same batch without it holds P1."""
    largest = history_for(CAPPED_WITH_A_SPARE_SLOT)[-1]
    name = "metadata_builders.families.dsv4.mutants:stateful_scratch_tail"
    with_history = write_replay_file(str(tmp_path / "h"), "P1", CAPPED_WITH_A_SPARE_SLOT, None, name,
                                     {"history": [largest.to_dict()]})
    alone = write_replay_file(str(tmp_path / "a"), "P1", CAPPED_WITH_A_SPARE_SLOT, None, name)
    assert cli_main(["replay", with_history, "--builder", name, "--properties", "P1"]) == 1
    assert cli_main(["replay", alone, "--builder", name, "--properties", "P1"]) == 0


FORGETFUL = '''
from metadata_builders.families.dsv4.hip import HipBuilder


class Forgetful(HipBuilder):
    """Correct on the first batch it sees; from the second distinct batch on, seq_lens run one ahead."""

    def build(self, inputs):
        seen = self.__dict__.setdefault("seen", set())
        seen.add((inputs.bs, inputs.num_draft_tokens, inputs.is_dspark, inputs.geometry))  # host values only
        md = super().build(inputs)
        if len(seen) > 1:
            md.fields["seq_lens"] = md.fields["seq_lens"] + 1
        return md
'''


def test_check_writes_a_replay_file_that_reproduces_on_a_fresh_builder(tmp_path, monkeypatch, capsys) -> None:
    """check replays the failure on a fresh builder first; the file it writes, replayed, is red again."""
    (tmp_path / "tests_support_forgetful.py").write_text(textwrap.dedent(FORGETFUL))
    monkeypatch.syspath_prepend(str(tmp_path))
    failures = tmp_path / "failures"
    name = "tests_support_forgetful:Forgetful"
    code = cli_main(["check", "--builder", name, "--properties", "P1", "--max-examples", "20",
                     "--failures-dir", str(failures)])
    assert code == 1
    out = capsys.readouterr().out
    # a file per build the hidden state shows in; the target worker's verify (no mode key, one draft count) is
    # judged here
    [path] = [str(failures / f) for f in os.listdir(failures)
              if f.endswith(".json") and not {"mode", "speculative_num_draft_tokens"} & set(
                  json.loads(open(failures / f).read()))]
    meta = json.loads(open(path).read())["meta"]
    assert meta["reproduces_on_fresh_builder"] is True
    assert meta.get("history"), out  # one batch alone never fails: the file carries what came before
    assert "hidden state" in out
    assert cli_main(["replay", path, "--builder", name, "--properties", "P1"]) == 1


def test_largest_form_skips_spare_slots_the_table_cannot_hold() -> None:
    """A table two columns wide cannot take a new request verifying two tokens: no largest form, no IndexError
    (found by `check --profile ci` on a fresh clone: P9 raised in requests_in_spare_slots)."""
    from metadata_builders.families.dsv4.properties.sequences import requests_in_spare_slots

    batch = VerifyBatch(seq_lens=[1], req_pool_indices=[1], verify_lens=[1], num_draft_tokens=2, out_cache_loc=[1],
                        req_to_token=[[0, 1], [0, 1], [2, 3]], full_to_swa=[0, 1, 2, 3, -1],
                        geometry=Geometry(1, 1, 1, 1, 1))
    assert requests_in_spare_slots(batch, None, 2) is None


def test_the_gate_judges_a_batch_on_one_seasoned_builder_and_p1_on_a_fresh_one() -> None:
    """The gate shares one builder per batch, seasoned with P9's history, so P9's builds are P1's; a P1 failure
    only that history causes is judged again on a fresh builder (held), and P9 reports it."""
    from metadata_builders.families.dsv4.gate.evaluate import _outcomes, seasoned

    builder = mutant_builder("stateful_scratch_tail")
    memo = seasoned(builder, CAPPED_WITH_A_SPARE_SLOT)
    assert memo.played_history == tuple(history_for(CAPPED_WITH_A_SPARE_SLOT))
    assert memo.fresh() is memo.fresh() and memo.fresh().inner is not memo.inner  # one twin, P9's and P1's
    assert memo.fresh().played_history is None
    outcomes = {o.prop: o for o in _outcomes([P1, P9], builder, CAPPED_WITH_A_SPARE_SLOT, 0)}
    assert outcomes["P1"].status == "held"
    assert outcomes["P9"].status == "failed" and outcomes["P9"].field == "verify_store_state_slot"


def test_p9_on_a_seasoned_memo_reuses_its_builds(monkeypatch) -> None:
    """On the gate's seasoned memo, P9 builds nothing P1 has not built (no second twin, no second history)."""
    from metadata_builders.families.dsv4.builders import MemoBuilder
    from metadata_builders.families.dsv4.gate.evaluate import seasoned

    memo = seasoned(get_builder("hip"), CAPPED_WITH_A_SPARE_SLOT)
    P1.check(memo, CAPPED_WITH_A_SPARE_SLOT)
    built = []
    inner_build = memo.inner.build
    monkeypatch.setattr(memo.inner, "build",
                        lambda batch, variant: built.append(variant) or inner_build(batch, variant))
    monkeypatch.setattr(MemoBuilder, "fresh", lambda self: pytest.fail("P9 made a twin of a seasoned memo"),
                        raising=False)
    assert check_p9_no_hidden_state(memo, CAPPED_WITH_A_SPARE_SLOT) == []
    assert built == []
