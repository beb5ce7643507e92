#!/usr/bin/env bash
# Install SGLang into the *active* Python environment, CPU-only, for the "sglang"
# builder (metadata_builders/families/dsv4/sglang/; docs/SGLANG.md).
#
# SGLang pins a CUDA torch and ~80 serving packages. We install torch 2.13.0 (CPU)
# explicitly first, then SGLang with --no-deps, then only the packages its
# DeepSeek-V4 HIP backend needs to import (ci/sglang-requirements.txt, plus
# ci/sglang-requirements-<release>.txt where a release needs more), also with
# --no-deps, so pip never replaces torch. Module stubs (torchvision, aiter) and the
# transformers AutoConfig.register shim live in the adapter's import shim, not here.
#
# Usage (from anywhere; installs into the active venv):
#   python3 -m venv .venv-sglang && . .venv-sglang/bin/activate
#   bash ci/install-sglang.sh                      # SGLang 0.5.23 (the default)
#   bash ci/install-sglang.sh --version 0.5.20     # any supported release, 0.5.18 .. 0.5.23
#   bash ci/install-sglang.sh --from ../sglang     # a checkout: pip install --no-deps -e PATH/python
#   bash ci/install-sglang.sh --keep-torch         # ROCm/CUDA container: keep its torch
set -euo pipefail
cd "$(dirname "$0")/.."

SUPPORTED="0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 0.5.23"
SGLANG_VERSION="${SGLANG_VERSION:-0.5.23}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
PIP="python -m pip"
KEEP_TORCH=0
FROM=""

usage() { sed -n '13,18p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --version) SGLANG_VERSION="${2:?--version needs a release, e.g. 0.5.23}"; shift 2 ;;
    --from) FROM="${2:?--from needs the path of an SGLang checkout}"; shift 2 ;;
    --keep-torch) KEEP_TORCH=1; shift ;;
    -h|--help) usage ;;
    *) echo "install-sglang: unknown argument $1" >&2; usage ;;
  esac
done

if [ -n "$FROM" ]; then
  [ -f "$FROM/python/pyproject.toml" ] || {
    echo "install-sglang: --from $FROM: no python/pyproject.toml there (expected an SGLang checkout)" >&2; exit 2; }
  FROM="$(cd "$FROM" && pwd)"
elif ! printf '%s\n' $SUPPORTED | grep -qx "$SGLANG_VERSION"; then
  echo "install-sglang: SGLang $SGLANG_VERSION is not supported; supported releases: $SUPPORTED" >&2
  echo "  (0.5.17 and older have no ragged target-verify path on the HIP backend; docs/SGLANG.md)" >&2
  exit 2
fi

start=$(date +%s)
if [ "$KEEP_TORCH" -eq 0 ]; then
  $PIP install "torch==${TORCH_VERSION}"
fi
$PIP install -e ".[test]"
if [ -n "$FROM" ]; then
  $PIP install --no-deps -e "$FROM/python"
  # The checkout's own version (setuptools_scm: e.g. 0.5.23.dev12+g1234) picks the per-release file.
  SGLANG_VERSION="$(python -c 'import importlib.metadata as m; print(m.version("sglang"))')"
  echo "install-sglang: checkout $FROM is SGLang $SGLANG_VERSION"
else
  $PIP install --no-deps "sglang==${SGLANG_VERSION}"
fi
$PIP install --no-deps -r ci/sglang-requirements.txt
release_reqs="ci/sglang-requirements-$(echo "$SGLANG_VERSION" | grep -oE '^[0-9]+\.[0-9]+\.[0-9]+' || true).txt"
if [ -f "$release_reqs" ]; then
  $PIP install --no-deps -r "$release_reqs"
fi

KEEP_TORCH="$KEEP_TORCH" TORCH_VERSION="$TORCH_VERSION" python - <<'PY'
import os
import torch
if os.environ["KEEP_TORCH"] == "0":
    assert torch.__version__.startswith(os.environ["TORCH_VERSION"]), f"pip replaced torch: {torch.__version__}"
from metadata_builders.families.dsv4.sglang import SGLangBuilder, upstream_version
builder = SGLangBuilder("cpu")
print(f"sglang {upstream_version()} importable on torch {torch.__version__}: {builder.upstream.describe()}")
PY
echo "install-sglang: done in $(( $(date +%s) - start ))s"
