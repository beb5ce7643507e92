#!/usr/bin/env bash
# A miniature SGLang repository from the installed release, to gate a change without cloning SGLang.
# Usage (in the venv where SGLang is installed: bash ci/install-sglang.sh):
#   ci/mini-sglang.sh DIR [--real PATH ...]
# Makes DIR a git repository whose python/sglang is the installed release (the backend, the ragged
# layout and its kernels and the compressor as real files, the rest as symlinks), committed on main.
# Then: cd DIR; git checkout -b my-change; edit a real file; git commit -qam x;
#       metadata-builders gate --base main --head my-change
set -euo pipefail
case "${1:-}" in
  -h|--help|"") sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; [ -n "${1:-}" ]; exit $? ;;
esac
exec python -m metadata_builders.gate.mini_repo "$@"
