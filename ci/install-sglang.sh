#!/usr/bin/env bash
# Install SGLang 0.5.23 into the *active* Python environment, CPU-only, for the
# "sglang" builder (metadata_builders/sglang_adapter.py; docs/SGLANG.md).
#
# SGLang pins a CUDA torch (2.14.1) and ~80 serving packages. We install torch
# 2.13.0 (CPU) explicitly first, then SGLang with --no-deps, then only the
# packages its DeepSeek-V4 HIP backend module needs to import
# (ci/sglang-requirements.txt), also with --no-deps, so pip never replaces torch.
#
# Usage (from the repo root):
#   python3 -m venv .venv-sglang && . .venv-sglang/bin/activate
#   bash ci/install-sglang.sh               # CPU: installs torch==2.13.0 first
#   bash ci/install-sglang.sh --keep-torch  # ROCm/CUDA container: keep its torch
set -euo pipefail
cd "$(dirname "$0")/.."

SGLANG_VERSION="${SGLANG_VERSION:-0.5.23}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
PIP="python -m pip"

KEEP_TORCH=0
[ "${1:-}" = "--keep-torch" ] && KEEP_TORCH=1

start=$(date +%s)
if [ "$KEEP_TORCH" -eq 0 ]; then
  $PIP install "torch==${TORCH_VERSION}"
fi
$PIP install -e ".[test]"
$PIP install --no-deps "sglang==${SGLANG_VERSION}"
$PIP install --no-deps -r ci/sglang-requirements.txt

KEEP_TORCH="$KEEP_TORCH" TORCH_VERSION="$TORCH_VERSION" python - <<'PY'
import os
import torch
if os.environ["KEEP_TORCH"] == "0":
    assert torch.__version__.startswith(os.environ["TORCH_VERSION"]), f"pip replaced torch: {torch.__version__}"
from metadata_builders.sglang_adapter import SGLangBuilder, upstream_version
SGLangBuilder("cpu")
print(f"sglang {upstream_version()} importable on torch {torch.__version__}")
PY
echo "install-sglang: done in $(( $(date +%s) - start ))s"
