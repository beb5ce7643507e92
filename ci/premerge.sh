#!/usr/bin/env bash
# The pre-merge gate, locally or in any CI. Usage, from the root of an SGLang checkout:
#   ci/premerge.sh BASE_REF [--always] [extra `metadata-builders gate` arguments...]
#
# If the target-verify metadata builders changed between BASE_REF and the checkout,
# run the differential gate (base vs the checkout, same derandomized examples) and exit
# with its code: 0 green, 1 a new failure or a head that crashed or hung (replay files
# and pictures in build/metadata-builders/failures/, a Markdown summary in
# build/metadata-builders/summary.md; build/ is in SGLang's .gitignore), 2 setup error.
# Without a change, say so and exit 0 (--always runs the gate anyway).
set -euo pipefail

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  "") usage >&2; exit 2 ;;
  -*) echo "premerge: the first argument is the base ref, not an option ($1); see --help" >&2; exit 2 ;;
esac
base="$1"
shift
always=0
if [ "${1:-}" = "--always" ]; then
  always=1
  shift
fi

# Every upstream file the harness runs or models on the target-verify path (the backend, the ragged layout, the
# metadata kernels and glue, the compressor and its plan kernel), and the runners and speculative workers that hand
# the backend its inputs, which the harness plays instead of running: a change to one of those is gated and then
# named as not judged (the gate measures what it ran). The one list is metadata_builders/families/dsv4/gate/watched.py's WATCHED
# (tests/dsv4/test_gate_watched.py holds this array and the workflow's paths: filter to it).
watched=(
  python/sglang/srt/layers/attention/deepseek_v4_backend_hip_radix.py
  python/sglang/srt/layers/attention/deepseek_v4_backend.py
  python/sglang/srt/speculative/ragged_verify.py
  python/sglang/kernels/ops/speculative/ragged_verify_kernels.py
  python/sglang/kernels/ops/attention/dsv4
  python/sglang/kernels/ops/kvcache
  python/sglang/kernels/jit/csrc/deepseek_v4
  python/sglang/srt/layers/attention/dsv4
  python/sglang/srt/model_executor/runner/decode_cuda_graph_runner.py
  python/sglang/srt/model_executor/runner/eager_runner.py
  python/sglang/srt/model_executor/cuda_graph_buffer_registry.py
  python/sglang/srt/speculative/eagle_draft_cuda_graph_runner.py
  python/sglang/srt/speculative/eagle_draft_extend_cuda_graph_runner.py
  python/sglang/srt/speculative/eagle_worker_v2.py
  python/sglang/srt/speculative/eagle_worker_common.py
  python/sglang/srt/speculative/eagle_info.py
  python/sglang/srt/speculative/eagle_utils.py
  python/sglang/srt/speculative/dflash_info.py
  python/sglang/srt/speculative/dspark_components
  python/sglang/kernels/ops/speculative/dspark
  python/sglang/srt/layers/attention/dsa_backend.py
  python/sglang/kernels/ops/attention/pad.py
  python/sglang/kernels/ops/attention/dsa
  python/sglang/kernels/ops/attention/dsa_metadata.py
)
# The DSA family's files (the last four above, watched.py's DSA_WATCHED): a change to one also runs its own gate,
# `gate --family dsa` (docs/DSA.md, "The gate"); the gate above leaves them to it.
dsa_watched=(
  python/sglang/srt/layers/attention/dsa_backend.py
  python/sglang/kernels/ops/attention/pad.py
  python/sglang/kernels/ops/attention/dsa
  python/sglang/kernels/ops/attention/dsa_metadata.py
)

if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  echo "premerge: base ref '$base' not found (fetch it, e.g. git fetch origin main)" >&2
  exit 2
fi

changed=$(git diff --name-only "$base"...HEAD -- "${watched[@]}"; git diff --name-only -- "${watched[@]}")
if [ -z "$changed" ] && [ "$always" -eq 0 ]; then
  echo "premerge: no target-verify metadata builder changed since $base; nothing to gate"
  exit 0
fi
echo "premerge: changed since $base:"
printf '  %s\n' $changed

mkdir -p build/metadata-builders
dsa_changed=$(git diff --name-only "$base"...HEAD -- "${dsa_watched[@]}"; git diff --name-only -- "${dsa_watched[@]}")
if [ -n "$dsa_changed" ] || [ "$always" -eq 1 ]; then
  metadata-builders gate --family dsa --base "$base" --failures-dir build/metadata-builders/failures || exit $?
fi
exec metadata-builders gate --base "$base" --junit-xml build/metadata-builders/junit-gate.xml \
  --failures-dir build/metadata-builders/failures --summary-md build/metadata-builders/summary.md "$@"
