"""The batch model and the reference builder work where ``import torch`` fails.

Each test runs a fresh interpreter whose ``sys.meta_path`` starts with a finder
that refuses ``torch`` and every ``torch.*`` module, so a stray import anywhere
in the import chain fails the script instead of silently succeeding.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from _examples import EXAMPLES

from metadata_builders import variants_for

BLOCK_TORCH = textwrap.dedent(
    """
    import sys

    class _NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError(f"torch is blocked in this test ({name})")
            return None

    sys.meta_path.insert(0, _NoTorch())
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("the torch blocker did not work")
    """
)


def _run(script: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH + textwrap.dedent(script)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_reference_builds_every_variant_without_torch() -> None:
    """With torch unimportable, every named example builds on every variant with the reference."""
    script = """
        import json
        from metadata_builders.families.dsv4.batch import VerifyBatch
        from metadata_builders.families.dsv4.reference import ReferenceBuilder
        from metadata_builders.families.dsv4.variants import variants_for

        builder = ReferenceBuilder()
        built = 0
        for text in json.loads(sys.stdin.read()):
            batch = VerifyBatch.from_json(text)
            for variant in variants_for(batch):
                result = builder.build(batch, variant)
                assert len(result.fields["raw_out_loc"]) >= batch.num_real_tokens
                built += 1
        assert "torch" not in sys.modules
        print("OK", built)
    """
    payload = json.dumps([b.to_json() for b in EXAMPLES.values()])
    proc = _run(script, payload)
    assert proc.returncode == 0, proc.stderr
    expected = sum(len(variants_for(b)) for b in EXAMPLES.values())
    assert proc.stdout.split() == ["OK", str(expected)]


def test_package_import_and_get_builder_reference_without_torch() -> None:
    """``import metadata_builders`` does not import torch, and get_builder("reference") works without it."""
    script = """
        import metadata_builders
        from metadata_builders import Variant, VerifyBatch, get_builder
        from metadata_builders.devices import resolve_device

        assert "torch" not in sys.modules, "metadata_builders imported torch at import time"
        assert resolve_device("auto") == "cpu"
        batch = VerifyBatch(
            seq_lens=[2], req_pool_indices=[1], verify_lens=None, num_draft_tokens=1,
            out_cache_loc=[6], req_to_token=[[0, 1, 2, 3], [4, 5, 6, 7]], full_to_swa=list(range(8)) + [-1],
        )
        for device in ("cpu", "auto"):
            result = get_builder("reference", device=device).build(batch, Variant())
            assert result.fields["swa_loc"] == [1 * 129 + 2], result.fields["swa_loc"]
        assert "torch" not in sys.modules
        print("OK")
    """
    proc = _run(script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK"
