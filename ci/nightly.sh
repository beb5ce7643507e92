#!/usr/bin/env bash
# Nightly: the upstream conformance suite and the end-to-end gate test on every supported
# SGLang release, each in its own virtual environment (CPU, Triton interpreter). One run is one
# cell of the workflow's nightly matrix per release (docs/CI.md, "The nightly matrix"):
#   bash ci/nightly.sh [--family dsv4|dsa] [--shard I/N] [--profile ci|dev|nightly] [RELEASE ...]
# --family: dsv4 (default) runs tests/ without tests/dsa; dsa runs tests/dsa. --shard I/N keeps shard I of N
# of the selected tests (crc32 of the pytest node id, metadata_builders/tools/shard.py). --profile: the
# Hypothesis profile (default: ci, derandomized; nightly and dev keep an example database in
# .metadata-builders/examples, the artifact the workflow shares). RELEASE: default every release docs/SGLANG.md
# supports. Per release it writes build/nightly/junit-<cell>.xml and verdicts-<cell>.json (the verdict file;
# merge several with: metadata-builders verdicts merge build/nightly/verdicts-*.json --markdown summary.md),
# <cell> = <release>-<family>-<I>of<N>.
set -uo pipefail
cd "$(dirname "$0")/.."
family=dsv4 shard=1/1 profile=ci releases=()
while [ $# -gt 0 ]; do
  case "$1" in
    --family) family="${2:-}"; shift 2 ;;
    --shard) shard="${2:-}"; shift 2 ;;
    --profile) profile="${2:-}"; shift 2 ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    -*) echo "ci/nightly.sh: unknown option $1" >&2; exit 2 ;;
    *) releases+=("$1"); shift ;;
  esac
done
case "$family" in
  dsv4) paths=(tests/ --ignore=tests/dsa) ;;
  dsa) paths=(tests/dsa) ;;
  *) echo "ci/nightly.sh: --family must be dsv4 or dsa, not '$family'" >&2; exit 2 ;;
esac
if ! [[ "$shard" =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] || [ "${BASH_REMATCH[1]}" -gt "${BASH_REMATCH[2]}" ]; then
  echo "ci/nightly.sh: --shard must be I/N with 1 <= I <= N, not '$shard'" >&2; exit 2
fi
if [ ${#releases[@]} -eq 0 ]; then
  releases=(0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 0.5.23)
fi
mkdir -p build/nightly
status=0
for release in "${releases[@]}"; do
  venv="build/nightly/venv-$release"
  log="build/nightly/$release.log"
  cell="$release-$family-${shard/\//of}"
  echo "== sglang $release, family $family, shard $shard"
  python3 -m venv "$venv"
  if ! (. "$venv/bin/activate" && bash ci/install-sglang.sh --version "$release") >"$log" 2>&1; then
    echo "   install FAILED (see $log)"; status=1; continue
  fi
  start=$(date +%s)
  SUITE=nightly TESTS="${paths[*]}" PYTHON="$venv/bin/python" bash ci/upstream-suite.sh \
    -p metadata_builders.tools.shard --mb-shard "$shard" --mb-profile "$profile" \
    --junit-xml "build/nightly/junit-$cell.xml" >>"$log" 2>&1
  rc=$?
  seconds=$(( $(date +%s) - start ))
  [ $rc -eq 5 ] && rc=0  # no test of the selection falls in this shard: an empty cell, not a failure
  if [ $rc -eq 0 ]; then
    echo "   conformance + gate end-to-end: ok in ${seconds}s"
  else
    echo "   conformance + gate end-to-end: FAILED in ${seconds}s (see $log)"; status=1
  fi
  if [ -f "build/nightly/junit-$cell.xml" ]; then
    "$venv/bin/python" -m metadata_builders.gate.verdict_files write --junit "build/nightly/junit-$cell.xml" \
      --release "$release" --cell-family "$family" --shard "$shard" --seconds "$seconds" \
      --out "build/nightly/verdicts-$cell.json" || status=1
  else
    echo "   no JUnit written: no verdict file for $cell"; status=1
  fi
done
exit $status
