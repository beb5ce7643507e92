#!/usr/bin/env bash
# The upstream suite: every test under tests/ marked `sglang` or `triton`, selected by marker (the one
# selection .ci/run and ci/nightly.sh share; a new upstream test needs its marker, not a file list).
# Usage: PYTHON=.venv-sglang/bin/python bash ci/upstream-suite.sh [extra pytest arguments...]
# Run in an environment with SGLang installed (bash ci/install-sglang.sh); one process (no xdist).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" -m pytest -p no:xdist --strict-markers -m "sglang or triton" tests/ "$@"
