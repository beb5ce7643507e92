"""Each mode replayed and remembered as upstream runs it (issue 41 item 7, shared design section 3): replay
sequences grow and shrink in the mode's own units, a decode tier is an idle rank's too (and the draft runner's
idle replay is its multi-step backend's), P9's histories and the reproduction of a failure play the other modes
first, as one worker builds every mode of the step on one backend."""

from __future__ import annotations

import pytest
from _examples import EXAMPLES, make_batch

from metadata_builders.errors import InvalidBatch
from metadata_builders.families.dsv4.batch import GraphTier
from metadata_builders.families.dsv4.mutants import mutant_builder
from metadata_builders.families.dsv4.properties import PROPERTIES
from metadata_builders.families.dsv4.properties.runner import runner_sequence
from metadata_builders.families.dsv4.properties.sequences import (
    busy_on_tier,
    fewer_requests_batch,
    filled_tier_batch,
    idle_on_tier,
    other_modes_batches,
    replay_sequence,
)
from metadata_builders.families.dsv4.runs.reproduce import _candidates, reproduce

DRAFT_DECODE = make_batch([7, 3], [1, 2], 4, num_slots=4).replace(
    mode="draft_decode", draft_step=1, out_cache_loc=[19, 20, 21, 27, 28, 29], graph=GraphTier(3, 3))
"""Two requests of three steps each on a tier of three rows, slot 3 spare: the shared buffer is request-major."""
DECODE = make_batch([7, 3], [1, 2], 4, num_slots=4).replace(mode="decode", out_cache_loc=[19, 27],
                                                            graph=GraphTier(3, 3))


def test_a_draft_decode_replay_loses_and_gains_requests_in_its_own_units() -> None:
    """One request fewer keeps its three steps' locations; a request in the spare slot adds three (not n)."""
    fewer = fewer_requests_batch(DRAFT_DECODE)
    assert fewer is not None and fewer.req_pool_indices == (1,) and fewer.out_cache_loc == (19, 20, 21)
    filled = filled_tier_batch(DRAFT_DECODE)
    assert filled is not None and filled.req_pool_indices == (1, 2, 3) and len(filled.out_cache_loc) == 9
    assert filled.out_cache_loc[6:] == (37, 38, 39)  # slot 3, positions 1..3
    assert {b.bs for b in replay_sequence(DRAFT_DECODE)} == {0, 1, 2, 3}


def test_a_decode_tier_is_an_idle_ranks_too() -> None:
    """After the shrunk batch the decode tier replays an idle rank, then the batch again; an idle batch is replayed
    on the tier a busy batch captured."""
    sequence = replay_sequence(DECODE)
    assert [b.mode for b in sequence[-2:]] == ["idle", "decode"] and sequence[-2].graph == DECODE.graph
    idle = idle_on_tier(DECODE)
    assert idle is not None and idle.bs == 0 and idle.draft_step is None
    busy = busy_on_tier(idle)
    assert busy is not None and busy.mode == "decode" and busy.bs == 1 and busy.graph == DECODE.graph
    assert [b.mode for b in replay_sequence(idle)] == ["decode", "idle", "decode", "idle"]


def test_the_draft_runners_idle_replay_is_its_childs() -> None:
    """An idle rank on the draft runner replays the multi-step backend's graph: the idle batch keeps the child's
    step, and a batch of another mode cannot take one."""
    idle = idle_on_tier(DRAFT_DECODE)
    assert idle is not None and idle.draft_step == 1 and idle.draft_runner
    assert busy_on_tier(idle).mode == "draft_decode"
    with pytest.raises(InvalidBatch):
        DECODE.replace(draft_step=0)


@pytest.mark.parametrize("batch", [DECODE, DRAFT_DECODE, idle_on_tier(DECODE), idle_on_tier(DRAFT_DECODE)],
                         ids=["decode", "draft_decode", "idle", "draft_runner_idle"])
def test_the_runner_half_runs_on_every_decode_mode_with_one_token_tiers(batch) -> None:
    """The runner captures one-token-a-row tiers for the decode modes (it ran on none of the draft-decode or idle
    batches before), and an idle rank is among its replays."""
    spec, sequence = runner_sequence(batch)
    assert sequence and spec.width == 1 and all(t.graph_num_tokens == t.padded_bs for t in spec.tiers())
    assert any(b.mode == "idle" for b in sequence)


def test_p5_holds_on_hip_across_decode_and_idle_replays() -> None:
    """The bundled builder shares the DECODE_OR_IDLE bucket (and the draft runner's) as upstream does."""
    from metadata_builders import get_builder
    from metadata_builders.families.dsv4.properties import verdict

    p5 = next(spec for spec in PROPERTIES if spec.name == "P5")
    for batch in (DECODE, DRAFT_DECODE, idle_on_tier(DECODE), idle_on_tier(DRAFT_DECODE)):
            assert verdict(p5, get_builder("hip"), batch).status == "held"


def test_p9_history_plays_the_other_modes_first() -> None:
    """A worker builds every mode of the step on one backend: a draft-decode batch's history starts with target
    verify, draft extend and decode batches of the same requests."""
    modes = [b.mode for b in other_modes_batches(DRAFT_DECODE)]
    assert modes == ["target_verify", "draft_extend", "decode"]
    assert [b.mode for b in other_modes_batches(EXAMPLES["uniform_eagle_batch_of_three"])] == [
        "draft_extend", "decode"]  # 2 drafts: no draft decode (it needs three)


def test_reproduction_tries_the_last_batch_of_each_other_mode_first() -> None:
    """Candidates: none, the other modes' last batches, then those and ever longer tails (the tails alone, all of
    one mode after shrinking, would never carry the draft decode that left its step on the builder)."""
    extend = make_batch([7, 3], [1, 2], 4, num_slots=4).replace(mode="draft_extend")
    history = [DRAFT_DECODE.replace(graph=None), *(extend.replace(seq_lens=[7 - k, 3]) for k in range(1, 5))]
    candidates = _candidates(history, "draft_extend")
    assert candidates[0] == () and candidates[1] == (history[0],)
    assert all(c[0] == history[0] for c in candidates[1:])


def test_a_step_kept_on_the_builder_reproduces_from_its_replay_history() -> None:
    """The mutant that applies the last draft step to the next draft extend: red on a fresh builder only after a
    draft decode, and the reproduction finds that history among its candidates."""
    builder = mutant_builder("draft_step_kept_on_the_builder")
    extend = make_batch([7, 3], [1, 2], 4, num_slots=4).replace(mode="draft_extend")
    others = [extend.replace(seq_lens=[7, 3 - k % 3]) for k in range(1, 9)]
    for earlier in [DRAFT_DECODE.replace(graph=None), *others]:
        from metadata_builders.families.dsv4.properties.state import play_history

        play_history(builder, [earlier])
    p1 = next(spec for spec in PROPERTIES if spec.name == "P1")
    found = reproduce(builder, p1, extend, builder.recent())
    assert found.reproduces and found.history[0].mode == "draft_decode"


# -- the graph runner's seq-len fill value is asked of the builder (issue 41 item 9) -----------------------------


def test_the_runners_fill_value_is_the_builders_and_a_change_to_it_is_red(tmp_path, monkeypatch) -> None:
    """A runner that fills pad rows with 0 instead of upstream's 1 (the backend's answer to
    ``get_cuda_graph_seq_len_fill_value()``): the inputs' pad rows hold 0, and P1 is red on a graph batch."""
    from metadata_builders import get_builder
    from metadata_builders.families.dsv4.inputs import make_inputs
    from metadata_builders.families.dsv4.properties import verdict
    from metadata_builders.families.dsv4.variants import variants_for

    (tmp_path / "fillzero.py").write_text(
        "from metadata_builders.families.dsv4.hip import HipBuilder\n\n\n"
        "class FillZero(HipBuilder):\n    seq_len_fill_value = 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    builder = get_builder("fillzero:FillZero")
    assert builder.capabilities.seq_len_fill_value == 0 and get_builder("hip").capabilities.seq_len_fill_value == 1
    batch = EXAMPLES["uniform_eagle_batch_of_three"]  # 3 requests on a tier of 4 rows: one pad row
    graph = next(v for v in variants_for(batch) if v.path == "graph")
    assert make_inputs(batch, graph, "cpu", fill=0).seq_lens.tolist()[-1] == 0
    p1 = next(spec for spec in PROPERTIES if spec.name == "P1")
    failure = verdict(p1, builder, batch).failure
    assert failure is not None and failure.variant.startswith("graph")


@pytest.mark.sglang
def test_the_adapter_asks_upstream_for_the_fill_value(monkeypatch) -> None:
    """The ``sglang`` builder's fill value is the installed backend's own answer: patched to 0 upstream, the
    capability follows (a change to it reaches the gate)."""
    from metadata_builders import get_builder
    from metadata_builders.families.dsv4.sglang import SGLangBuilder
    from metadata_builders.families.dsv4.sglang.releases import load_upstream

    assert get_builder("sglang").capabilities.seq_len_fill_value == 1
    cls = load_upstream("cpu").backend_module.DeepseekV4HipRadixBackend
    monkeypatch.setattr(cls, "get_cuda_graph_seq_len_fill_value", lambda self: 0)
    assert SGLangBuilder("cpu").seq_len_fill_value == 0


def test_a_dspark_draft_workers_history_is_its_own_backends() -> None:
    """A DSpark draft worker's backend builds its block verify alone, gamma every step: P9's history plays no other
    mode and no other draft count; the gate's shrinker keeps configured = gamma + 1 as it lowers gamma."""
    from metadata_builders.families.dsv4.properties import history_for
    from metadata_builders.families.dsv4.properties.sequences import other_draft_count_batch, with_draft_count

    draft = make_batch([5, 3, 7], [2, 1, 3], 3, is_dspark=True, graph=GraphTier(4, 12)).replace(
        speculative_num_draft_tokens=4)
    assert other_modes_batches(draft) == [] and other_draft_count_batch(draft) is None
    assert other_modes_batches(draft.replace(speculative_num_draft_tokens=None))
    assert history_for(draft) and all(b.speculative_num_draft_tokens == 4 for b in history_for(draft))
    fewer = with_draft_count(draft, 2)
    assert fewer is not None and (fewer.num_draft_tokens, fewer.speculative_num_draft_tokens) == (2, 3)
