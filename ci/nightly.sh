#!/usr/bin/env bash
# Nightly: the upstream conformance suite and the end-to-end gate test on every supported
# SGLang release, each in its own virtual environment (CPU, Triton interpreter).
# Usage: bash ci/nightly.sh [RELEASE ...]   (default: every release docs/SGLANG.md supports)
set -uo pipefail
cd "$(dirname "$0")/.."
releases=("$@")
if [ ${#releases[@]} -eq 0 ]; then
  releases=(0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 0.5.23)
fi
mkdir -p build/nightly
status=0
for release in "${releases[@]}"; do
  venv="build/nightly/venv-$release"
  log="build/nightly/$release.log"
  echo "== sglang $release"
  python3 -m venv "$venv"
  if ! (. "$venv/bin/activate" && bash ci/install-sglang.sh --version "$release") >"$log" 2>&1; then
    echo "   install FAILED (see $log)"; status=1; continue
  fi
  start=$(date +%s)
  if SUITE=nightly PYTHON="$venv/bin/python" bash ci/upstream-suite.sh --junit-xml "build/nightly/junit-$release.xml" >>"$log" 2>&1; then
    echo "   conformance + gate end-to-end: ok in $(( $(date +%s) - start ))s"
  else
    echo "   conformance + gate end-to-end: FAILED in $(( $(date +%s) - start ))s (see $log)"; status=1
  fi
done
exit $status
