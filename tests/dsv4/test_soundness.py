"""Verdicts do not depend on the builder's cooperation.

The harness owns the inputs, applies the divergence and audits every device
read, so a builder that knows nothing of it is judged on what it does.  Each
bug a trusting harness let through is red here with a replay file that
reproduces it; each correct builder a trusting harness failed is green.
"""

from __future__ import annotations

import glob
import json
import os
import warnings

import pytest
from _examples import EXAMPLES
from hypothesis import Phase, given, settings

from metadata_builders import VerifyBatch, get_builder
from metadata_builders.cli import main as cli_main
from metadata_builders.families.dsv4.builders import AuditedBuilder
from metadata_builders.families.dsv4.mutants import MUTANTS, MutantSpec
from metadata_builders.families.dsv4.properties import PROPERTIES, run_all
from strategies import verify_batches

HERE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "regressions", "soundness")
BUG_FILES = sorted(glob.glob(os.path.join(HERE, "*.json")))
HIP = get_builder("hip")


def _load(path: str) -> tuple[VerifyBatch, dict]:
    with open(path) as fh:
        raw = json.load(fh)
    return VerifyBatch.from_dict(raw), raw["meta"]


# -- bug rows: red, with a replay file that reproduces ---------------------------------------------------


def test_every_bug_row_has_a_replay_file() -> None:
    """Each bug of the soundness table is a catalogue mutant with a pinned counterexample."""
    from tests.regressions.soundness.generate import BUGS

    assert {os.path.basename(p)[:-5] for p in BUG_FILES} == set(BUGS)
    assert set(BUGS) <= set(MUTANTS)


@pytest.mark.parametrize("path", BUG_FILES, ids=[os.path.basename(p)[:-5] for p in BUG_FILES])
def test_each_bug_row_replays_red_on_its_property_and_green_on_hip(path: str, capsys) -> None:
    """``replay FILE --builder <mutant>`` exits 1 naming the killing property; with hip it exits 0."""
    batch, meta = _load(path)
    mutant = f"metadata_builders.families.dsv4.mutants:{meta['mutant']}"
    assert cli_main(["replay", path, "--builder", mutant, "--device", "cpu"]) == 1
    assert f"{meta['property']} FAILED" in capsys.readouterr().out
    assert cli_main(["replay", path, "--builder", "hip", "--device", "cpu"]) == 0
    failed = {n: r.failure for n, r in run_all(get_builder(mutant), batch).items() if r.failure is not None}
    assert failed[meta["property"]].field == meta["field"]


# -- correct rows: green ---------------------------------------------------------------------------------

CORRECT = (
    MutantSpec(
        "total_read_with_int", "verify_extension", "same read, another spelling",
        "The ragged total is read as int(t.sum()) instead of t.sum().item(): the same read of the same buffer.",
        "num_tokens, exact = int(extend.sum().item()), True", "num_tokens, exact = int(extend.sum()), True",
    ),
    MutantSpec(
        "mirror_read_through_cpu", "host_mirror", "same read, another spelling",
        "The pre-fix fallback copies seq_lens to the host once and converts it there.",
        "seq_lens_cpu = inputs.seq_lens.tolist()", "seq_lens_cpu = [int(x) for x in inputs.seq_lens.cpu()]",
    ),
    MutantSpec(
        "uniform_lengths_from_zeros", "verify_extension", "another sync-free construction",
        "Mirror-less uniform lengths are built as zeros_like(seq_lens) + draft: on the device, no read.",
        "extend = torch.full_like(inputs.seq_lens, draft)", "extend = torch.zeros_like(inputs.seq_lens) + draft",
    ),
)
"""Correct builders a trusting or spelling-bound harness would fail: each must pass every property."""

_QUICK = settings(max_examples=10, derandomize=True, database=None, deadline=None, phases=[Phase.generate])


@pytest.mark.parametrize("spec", CORRECT, ids=[s.name for s in CORRECT])
def test_correct_variants_of_hip_pass_every_property(spec: MutantSpec) -> None:
    """Same reads spelled otherwise, or built otherwise without a read, hold on every property."""
    from metadata_builders.families.dsv4.mutants import MutantBuilder

    builder = AuditedBuilder(MutantBuilder(spec), "cpu", spec.name)
    for name in ("single_request", "uniform_eagle_batch_of_three", "ragged_tier_slack_spread_over_pad_rows",
                 "capped_tier_uncovered_tail"):
        results = run_all(builder, EXAMPLES[name])
        assert {n: r.failure for n, r in results.items() if r.failure is not None} == {}, name

    @_QUICK
    @given(batch=verify_batches(divergence=None))
    def holds(batch: VerifyBatch) -> None:
        assert {n: r.failure for n, r in run_all(builder, batch).items() if r.failure is not None} == {}

    holds()


def test_the_bundled_builder_faults_as_modelled_without_reading_the_divergence() -> None:
    """hip never sees the batch: the harness delivers the divergence to its async copy, and it faults as modelled."""
    import inspect

    from metadata_builders.families.dsv4.hip import builder, pipeline

    assert all(".divergence" not in inspect.getsource(module) for module in (builder, pipeline))
    assert "batch" not in inspect.getsource(builder.target_verify)
    with open(os.path.join(os.path.dirname(HERE), "eagle_host_mirror_run_ahead.json")) as fh:
        batch = VerifyBatch.from_json(fh.read())
    results = run_all(HIP, batch)
    assert results["P6"].status == "held"
    faults = {v.label: [(f.kind, f.count) for f in HIP.build(batch, v).audit.faults]
              for v in __import__("metadata_builders").variants_for(batch) if v.gate == "ungated"}
    assert faults["eager/mirror=host/layout_total=host/gate=ungated"] == [("oob_write", 1)]
    assert faults["eager/mirror=device/layout_total=host/gate=ungated"] == []


# -- what could not run says so --------------------------------------------------------------------------


class _NoReplay:
    """hip without capture/replay."""

    name = "no-replay"

    def __init__(self, device: str = "cpu") -> None:
        from metadata_builders.families.dsv4.hip import HipBuilder

        self._hip = HipBuilder(device)

    def build(self, inputs):
        return self._hip.build(inputs)


def test_a_property_that_could_not_fully_run_is_partial_not_held() -> None:
    """P5 on a builder without capture/replay is partial, and says why; so is P2's stale-mirror check."""
    from metadata_builders.families.dsv4.batch import Divergence

    builder = AuditedBuilder(_NoReplay(), "cpu", "no-replay")
    results = run_all(builder, EXAMPLES["uniform_eagle_batch_of_three"])
    assert results["P5"].status == "partial" and "capture()/replay()" in results["P5"].why
    assert results["P1"].status == "held"
    stale = EXAMPLES["uniform_eagle_batch_of_three"].replace(divergence=Divergence(None, (3, 5, 7)))
    results = run_all(builder, stale)
    assert results["P2"].status == "partial" and "stale mirror not checked" in results["P2"].why


def test_a_batch_built_builder_is_deprecated_but_still_audited() -> None:
    """build(batch, variant) still runs, with a DeprecationWarning, the divergence removed and P8 partial."""

    class Legacy:
        def build(self, batch, variant):
            assert batch.divergence is None
            return get_builder("reference").build(batch, variant)

    with pytest.warns(DeprecationWarning, match="build\\(inputs: VerifyInputs\\)"):
        builder = AuditedBuilder(Legacy(), "cpu", "legacy")
    batch = EXAMPLES["single_request"]
    results = run_all(builder, batch.replace(divergence=__import__("metadata_builders").Divergence((3,))))
    assert results["P1"].status == "held" and results["P8"].status == "partial"


def test_a_subclass_of_the_reference_is_audited(tmp_path, monkeypatch) -> None:
    """Subclassing the reference does not escape the audit: only the reference itself is trusted."""
    (tmp_path / "soundness_subclass.py").write_text(
        "import torch\n"
        "from metadata_builders import ReferenceBuilder\n"
        "class Sneaky(ReferenceBuilder):\n"
        "    def build(self, batch, variant):\n"
        "        torch.tensor([1], device='cpu').item()\n"
        "        return super().build(batch, variant)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        builder = get_builder("soundness_subclass:Sneaky")
    assert isinstance(builder, AuditedBuilder)
    results = run_all(builder, EXAMPLES["single_request"], [p for p in PROPERTIES if p.name == "P7"])
    assert results["P7"].status == "failed"
