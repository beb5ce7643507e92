#!/usr/bin/env bash
# The upstream suite: every test under tests/ marked `sglang` or `triton`, selected by marker (the one
# selection .ci/run and ci/nightly.sh share; a new upstream test needs its marker, not a file list).
# Usage: PYTHON=.venv-sglang/bin/python bash ci/upstream-suite.sh [extra pytest arguments...]
# Run in an environment with SGLang installed (bash ci/install-sglang.sh). Two xdist workers, whole files each
# (--dist loadfile): tests/test_gate_sglang.py's end-to-end gate runs (each a gate with two workers of its own) stay
# in one worker, one at a time, while the other files share the second core.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" -m pytest -n 2 --dist loadfile --strict-markers -m "sglang or triton" tests/ "$@"
