#!/usr/bin/env bash
# The pre-merge gate. Usage: ci/premerge.sh BASE_REF [--builder NAME] [--profile ci|nightly] [--always]
#
# Run from the root of a checkout of the repository that owns the backend (SGLang).
# If the target-verify metadata builders changed between BASE_REF and HEAD, run the
# harness against the checkout's backend and exit non-zero on any failure; otherwise
# say so and exit 0. Failing batches land in build/failures/ as replay files.
set -euo pipefail

base="${1:?usage: ci/premerge.sh BASE_REF [--builder NAME] [--profile ci|nightly] [--always]}"
shift
builder="sglang"
profile="ci"
always=0
while [ $# -gt 0 ]; do
  case "$1" in
    --builder) builder="$2"; shift 2 ;;
    --profile) profile="$2"; shift 2 ;;
    --always) always=1; shift ;;
    *) echo "premerge: unknown argument $1" >&2; exit 2 ;;
  esac
done

watched=(
  python/sglang/srt/layers/attention/deepseek_v4_backend_hip_radix.py
  python/sglang/srt/speculative/ragged_verify.py
  python/sglang/kernels/ops/speculative/ragged_verify_kernels.py
)

if ! git rev-parse --verify --quiet "$base" >/dev/null; then
  echo "premerge: base ref '$base' not found (fetch it, e.g. git fetch origin main)" >&2
  exit 2
fi

changed=$(git diff --name-only "$base"...HEAD -- "${watched[@]}")
if [ -z "$changed" ] && [ "$always" -eq 0 ]; then
  echo "premerge: no target-verify metadata builder changed since $base; nothing to gate"
  exit 0
fi
echo "premerge: changed since $base:"
printf '  %s\n' $changed

mkdir -p build
status=0
metadata-builders check --builder "$builder" --device auto --profile "$profile" \
  --junit-xml build/junit-premerge.xml --failures-dir build/failures || status=$?
if [ "$status" -ne 0 ]; then
  echo "premerge: FAILED (exit $status). Replay files: build/failures/*.json; replay one with" >&2
  echo "  metadata-builders replay build/failures/<file>.json --builder $builder" >&2
fi
exit "$status"
