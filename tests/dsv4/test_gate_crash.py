"""A head that crashes or hangs is a red gate, not a broken one; only a base that cannot complete is exit 2.

On a GPU the AMD memory access fault kills the process; a head that dies (a
signal, ``os._exit``) or hangs on batches where the base completed blocks: the
gate names what happened, finds the smallest batch that does it alone in a fresh
process, and writes its replay file.  The builders below misbehave on batches
of three requests or more, as a fault that needs a few rows would.
"""

from __future__ import annotations

import json
import os

import pytest
from _modules import importable_module

from metadata_builders.cli import main
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.gate import build_corpus
from metadata_builders.families.dsv4.properties import PROPERTIES

MISBEHAVING = '''
import os, signal, time
from metadata_builders.families.dsv4.hip import HipBuilder


class KilledOnThree(HipBuilder):
    """Killed by SIGKILL on every batch of three requests or more (what a GPU memory access fault does)."""

    def build(self, inputs):
        if inputs.bs >= 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().build(inputs)


class ExitsOnThree(HipBuilder):
    """Leaves the process with status 3 on batches of three requests or more."""

    def build(self, inputs):
        if inputs.bs >= 3:
            os._exit(3)
        return super().build(inputs)


class HangsOnThree(HipBuilder):
    """Never returns on batches of three requests or more."""

    def build(self, inputs):
        if inputs.bs >= 3:
            time.sleep(3600)
        return super().build(inputs)
'''

EXAMPLES = 12
FAST = ["--properties", "P4", "--examples", str(EXAMPLES), "--workers", "0", "--batch-timeout", "4", "--no-cache",
        "--no-pictures"]


@pytest.fixture
def misbehaving(tmp_path, monkeypatch):
    """The module ``gate_misbehaving`` importable by the gate's child processes."""
    return importable_module(tmp_path, monkeypatch, "gate_misbehaving", MISBEHAVING)


def _smallest_with_three_requests() -> int:
    """The corpus position of the smallest batch (``size_key``) with three requests or more."""
    corpus = build_corpus([p for p in PROPERTIES if p.name == "P4"], EXAMPLES)
    large = [i for i, batch in enumerate(corpus) if batch.bs >= 3]
    assert large and len(large) < len(corpus), "the corpus must hold batches on both sides of the threshold"
    return min(large, key=lambda i: (corpus[i].size_key(), i))


def _crash_file(failures) -> tuple[dict, VerifyBatch]:
    """The one crash replay file: its JSON, and the batch it holds."""
    files = [name for name in os.listdir(failures) if name.startswith("crash-") and name.endswith(".json")]
    assert len(files) == 1, files
    text = (failures / files[0]).read_text()
    return json.loads(text), VerifyBatch.from_json(text)


@pytest.mark.parametrize(("builder", "what"), [("KilledOnThree", "killed by SIGKILL"),
                                               ("ExitsOnThree", "exited with status 3")])
def test_a_head_that_dies_is_red_with_the_smallest_batch_that_kills_it(misbehaving, builder, what, capsys) -> None:
    """Head dies on large batches: exit 1, what happened named, the smallest such batch written as crash-*.json."""
    failures = misbehaving / "failures"
    code = main(["gate", "--base-builder", "hip", "--head-builder", f"gate_misbehaving:{builder}", *FAST,
                 "--failures-dir", str(failures)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "gate: RED (crash" in out and what in out and "BLOCKS" in out
    replay, batch = _crash_file(failures)
    assert replay["meta"]["what"] == what and replay["meta"]["alone"] is True
    index = _smallest_with_three_requests()
    assert batch == build_corpus([p for p in PROPERTIES if p.name == "P4"], EXAMPLES)[index]
    assert f"on batch {index} (alone)" in out


def test_a_head_that_hangs_is_red_within_the_per_batch_limit(misbehaving, capsys) -> None:
    """Head never returns on large batches: the per-batch limit ends it, exit 1, the hang named and written."""
    failures = misbehaving / "failures"
    code = main(["gate", "--base-builder", "hip", "--head-builder", "gate_misbehaving:HangsOnThree", *FAST,
                 "--failures-dir", str(failures)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "hung" in out and "per-batch limit of 4s" in out and "gate: RED (crash" in out
    replay, batch = _crash_file(failures)
    assert replay["meta"]["what"].startswith("hung") and batch.bs >= 3


def test_a_base_that_cannot_complete_is_a_setup_error(misbehaving, capsys) -> None:
    """Base dies: no verdict is possible, exit 2, saying which side and what happened."""
    code = main(["gate", "--base-builder", "gate_misbehaving:KilledOnThree", "--head-builder", "hip", *FAST,
                 "--failures-dir", str(misbehaving / "failures")])
    captured = capsys.readouterr()
    assert code == 2
    assert "base side" in captured.err and "killed by SIGKILL" in captured.err
    assert not (misbehaving / "failures").exists()


def test_a_head_builder_that_cannot_be_made_is_a_setup_error(misbehaving, capsys) -> None:
    """A head whose builder does not exist is a mistake in the command, not a crash: exit 2, naming it."""
    code = main(["gate", "--base-builder", "hip", "--head-builder", "gate_misbehaving:NoSuchBuilder", *FAST,
                 "--failures-dir", str(misbehaving / "failures")])
    err = capsys.readouterr().err
    assert code == 2
    assert "head side" in err and "cannot be made" in err and "NoSuchBuilder" in err


def test_a_hang_is_recognised_by_what_the_batch_took_at_base(misbehaving, capsys) -> None:
    """With a ceiling of ten minutes, a head batch that runs far longer than at base is hung after the floor."""
    import time

    failures = misbehaving / "failures"
    start = time.monotonic()
    code = main(["gate", "--base-builder", "hip", "--head-builder", "gate_misbehaving:HangsOnThree", "--properties",
                 "P4", "--examples", str(EXAMPLES), "--workers", "0", "--batch-timeout", "600", "--hang-floor", "3",
                 "--no-cache", "--no-pictures", "--failures-dir", str(failures)])
    elapsed = time.monotonic() - start
    out = capsys.readouterr().out
    assert code == 1, out
    assert "it took at base" in out and "gate: RED (crash" in out
    assert elapsed < 120, f"a hang must not wait out the 600 s ceiling (took {elapsed:.0f}s)"
    replay, batch = _crash_file(failures)
    assert replay["meta"]["what"].startswith("hung") and batch.bs >= 3
