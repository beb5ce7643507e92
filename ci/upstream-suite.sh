#!/usr/bin/env bash
# The upstream suite: every test under tests/ marked `sglang` or `triton`, selected by marker (the one
# selection .ci/run and ci/nightly.sh share; a new upstream test needs its marker, not a file list).
# Usage: [SUITE=premerge|nightly] [TESTS="tests/ ..."] PYTHON=.venv-sglang/bin/python bash ci/upstream-suite.sh [extra pytest arguments...]
# TESTS: the paths (and --ignore options) to collect, default tests/ (ci/nightly.sh --family dsa: tests/dsa).
# SUITE=premerge (the default, .ci/run) leaves out the tests marked `slow` (the gate plants whose verdict kind
# another plant already covers, tests/dsv4/test_gate_sglang.py); SUITE=nightly (ci/nightly.sh) runs them all.
# Run in an environment with SGLang installed (bash ci/install-sglang.sh). Two xdist workers, whole files each
# (--dist loadfile): tests/dsv4/test_gate_sglang.py's end-to-end gate runs (each a gate with two workers of its own) stay
# in one worker, one at a time, while the other files share the second core.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${SUITE:-premerge}" in
  premerge) selection="(sglang or triton) and not slow" ;;
  nightly) selection="sglang or triton" ;;
  *) echo "ci/upstream-suite.sh: SUITE must be premerge or nightly, not '${SUITE}'" >&2; exit 2 ;;
esac
exec "${PYTHON:-python}" -m pytest -n 2 --dist loadfile --strict-markers -m "$selection" ${TESTS:-tests/} "$@"  # TESTS unquoted: one word per path
