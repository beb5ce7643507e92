"""Upstream's own DSA code (the installed SGLang, on CPU: Triton interpreted, torch fallbacks) under the family's
properties: the worked example holds in every declared mode on both routes, the fault site is intercepted."""

from __future__ import annotations

from typing import Any

import pytest

from metadata_builders.families.dsa.adapter.loading import load

try:
    load()
except ImportError as exc:  # no SGLang, or one without the DSA backend
    pytest.skip(f"needs an importable SGLang with DSA ({exc})", allow_module_level=True)

from metadata_builders.families.dsa.adapter.builder import SGLangDSABuilder
from metadata_builders.families.dsa.audited import DSASubject
from metadata_builders.families.dsa.batch import DSADivergence
from metadata_builders.families.dsa.check import run_check
from metadata_builders.families.dsa.examples import worked_example
from metadata_builders.families.dsa.properties import check_all
from metadata_builders.families.dsa.variants import DSAVariant

pytestmark = pytest.mark.sglang


@pytest.mark.parametrize("mode", SGLangDSABuilder.modes)
def test_worked_example_holds_on_upstream(mode: str) -> None:
    """Every property holds on section 6's worked example, eager and on tier 3, both routes."""
    check_all(DSASubject(SGLangDSABuilder), worked_example(mode, padded_bs=3))


def test_upstream_matches_the_worked_example() -> None:
    """Eager verify without a mirror: section 6's numbers, one read of seq_lens, extend_seq_lens_cpu written."""
    build = DSASubject(SGLangDSABuilder).build(worked_example(), DSAVariant("eager", "absent"))
    assert build.fields["dsa_cu_seqlens_k"] == [0, 6, 13, 21, 25, 30, 36]
    assert build.fields["real_page_table"] == [[8, 9]] * 3 + [[4, 5]] * 3
    assert [s.reads for s in build.syncs] == [("seq_lens",)]
    assert build.input_changes == {"extend_seq_lens_cpu": (None, [3, 3])}


def test_fault_site_is_intercepted_on_upstream() -> None:
    """Device lengths [3, 4] against a host total of 6: upstream's launch never runs, the model reports
    oob_write 1; [3, 2]: upstream's kernel runs and leaves one entry unwritten (uninitialized_tail 1)."""
    subject = DSASubject(SGLangDSABuilder)
    over = subject.build(worked_example("draft_extend", divergence=DSADivergence(extend_seq_lens=(3, 4))),
                         DSAVariant("eager"))
    under = subject.build(worked_example("draft_extend", divergence=DSADivergence(extend_seq_lens=(3, 2))),
                          DSAVariant("eager"))
    assert [(f.kind, f.count) for f in over.faults] == [("oob_write", 1)]
    assert [(f.kind, f.count) for f in under.faults] == [("uninitialized_tail", 1)]


def test_draft_decode_on_two_children_holds_on_upstream() -> None:
    """Draft decode with ``N = 4`` (the multi-step backend's children 0 and 1), judged on child 1: every property
    holds, eager and on tier 3, both routes."""
    check_all(DSASubject(SGLangDSABuilder), worked_example("draft_decode", padded_bs=3, num_draft_tokens=4,
                                                           draft_step=1))


def _mark_children(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each child of the multi-step backend leaves its ``speculative_step_id`` in its own metadata: eager in
    ``max_seq_len_k`` (``+ 1000 * step``), at replay in ``cu_seqlens_k[0]`` (otherwise 0)."""
    backend = load().backend.DeepseekSparseAttnBackend
    build, copy = backend.init_forward_metadata, backend.init_forward_metadata_replay_cuda_graph_from_precomputed

    def marked_build(self: Any, forward_batch: Any) -> None:
        build(self, forward_batch)
        metadata = self.forward_metadata
        object.__setattr__(metadata, "max_seq_len_k", metadata.max_seq_len_k + 1000 * self.speculative_step_id)

    def marked_copy(self: Any, bs: int, precomputed: Any, forward_mode: Any) -> None:
        copy(self, bs=bs, precomputed=precomputed, forward_mode=forward_mode)
        self.decode_cuda_graph_metadata[bs].cu_seqlens_k[0] = self.speculative_step_id

    monkeypatch.setattr(backend, "init_forward_metadata", marked_build)
    monkeypatch.setattr(backend, "init_forward_metadata_replay_cuda_graph_from_precomputed", marked_copy)


@pytest.mark.parametrize("step", [0, 1])
def test_draft_decode_judges_the_named_child(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """The fields judged are child ``draft_step``'s own, eager and replayed (each child marked with its step)."""
    _mark_children(monkeypatch)
    batch = worked_example("draft_decode", padded_bs=3, num_draft_tokens=4, draft_step=step)
    subject = DSASubject(SGLangDSABuilder)
    eager = subject.build(batch, DSAVariant("eager", "given"))
    assert eager.fields["max_seq_len_k"] == 5 + 1000 * step
    for route in SGLangDSABuilder.routes:
        replayed = subject.build(batch, DSAVariant("graph", "given", route))
        assert replayed.fields["cu_seqlens_k"] == [step, 5, 8, 9], route


def test_dev_profile_on_upstream_judges_every_declared_mode() -> None:
    """``run_check`` on the adapter: every mode of the family judged, draft decode included."""
    report = run_check("dev", builder=SGLangDSABuilder, max_examples=3)
    assert report.ok, report.table()
    assert report.not_run == [] and "coverage: 17/17" in report.table()
