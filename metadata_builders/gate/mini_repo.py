"""A miniature SGLang repository made from the installed release: the gate's SGLang route without a clone.

``python -m metadata_builders.gate.mini_repo DIR`` (or ``ci/mini-sglang.sh DIR``)
makes a git repository shaped like SGLang's whose ``python/sglang`` is the
installed release: the files a backend engineer edits (:data:`EDITABLE`) as
real files, everything else as symlinks into the installed package (git stores
them as links), committed on ``main``.  Edit a real file, commit it on a branch,
and gate it as a pull request::

    python -m metadata_builders.gate.mini_repo /tmp/sglang-mini
    cd /tmp/sglang-mini && git checkout -b my-change
    $EDITOR python/sglang/srt/layers/attention/deepseek_v4_backend_hip_radix.py
    git commit -qam "my change"
    metadata-builders gate --base main --head my-change     # --builder sglang, both routes

A worktree of any commit imports the whole release with that commit's files,
so the gate's sides differ exactly by the edit.  ``tests/dsv4/test_gate_sglang.py``
plants its regressions in such a repository.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterable

__all__ = ["EDITABLE", "main", "make_mini_repo"]

EDITABLE: tuple[tuple[str, ...], ...] = (
    ("srt", "layers", "attention", "deepseek_v4_backend_hip_radix.py"),
    ("srt", "speculative", "ragged_verify.py"),
    ("kernels", "ops", "speculative", "ragged_verify_kernels.py"),
    ("srt", "layers", "attention", "dsv4", "compressor_v2.py"),
    ("kernels", "ops", "kvcache", "dsv4_unified_kv_store.py"),
    ("srt", "model_executor", "runner", "decode_cuda_graph_runner.py"),
)
"""Files under ``python/sglang`` copied as real files (when the release has them): the builders, the
ragged layout and its kernels, the compressor, the SWA ring store P10 runs, and the decode graph runner the
adapter plays (an edit of it is named NOT JUDGED: gate/watched.py).  Pass more with ``--real``."""


def _installed() -> str:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.origin:
        from metadata_builders.errors import UsageError

        raise UsageError("sglang", "an installed SGLang release (bash ci/install-sglang.sh)", "not importable")
    return os.path.dirname(spec.origin)


def _mirror(installed: str, repo: str, real: Iterable[tuple[str, ...]]) -> list[str]:
    """``repo/python/sglang``: real directories along each real file's path, symlinks for everything else."""
    files = {path for path in real if os.path.isfile(os.path.join(installed, *path))}
    real_dirs = {path[:i] for path in files for i in range(len(path))}

    def fill(rel: tuple[str, ...]) -> None:
        here, there = os.path.join(installed, *rel), os.path.join(repo, "python", "sglang", *rel)
        os.makedirs(there, exist_ok=True)
        for entry in sorted(os.listdir(here)):
            child = (*rel, entry)
            if entry == "__pycache__":
                continue
            if child in real_dirs:
                fill(child)
            elif child in files:
                with open(os.path.join(here, entry)) as src, open(os.path.join(there, entry), "w") as dst:
                    dst.write(src.read())
            else:
                os.symlink(os.path.join(here, entry), os.path.join(there, entry))

    fill(())
    return [os.path.join(repo, "python", "sglang", *path) for path in sorted(files)]


def make_mini_repo(repo: str, real: Iterable[tuple[str, ...]] = EDITABLE) -> list[str]:
    """Make the repository at ``repo`` (an empty or new folder), commit it on ``main``; the real files' paths."""
    os.makedirs(repo, exist_ok=True)
    if os.listdir(repo):
        from metadata_builders.errors import UsageError

        raise UsageError("DIR", "an empty or new folder", f"{repo} is not empty")
    made = _mirror(_installed(), repo, list(real))
    with open(os.path.join(repo, ".gitignore"), "w") as fh:
        fh.write("__pycache__/\nbuild/\n.metadata-builders/\n")  # as SGLang's .gitignore has build/

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", repo, "-c", "user.email=gate@mini", "-c", "user.name=gate", *args],
                       check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "SGLang as installed")
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metadata_builders.gate.mini_repo",
                                     description="Make a miniature SGLang repository from the installed release.")
    parser.add_argument("dir", help="where to make it (an empty or new folder)")
    parser.add_argument("--real", action="append", default=[], metavar="PATH",
                        help="another file under python/sglang to copy as a real file (repeatable), e.g. "
                             "kernels/ops/attention/dsv4/attn_metadata_kernels.py")
    args = parser.parse_args(argv)
    from metadata_builders.errors import MetadataBuildersError

    extra = [tuple(p.strip("/").split("/")) for p in args.real]
    try:
        made = make_mini_repo(os.path.abspath(args.dir), (*EDITABLE, *extra))
    except MetadataBuildersError as exc:
        print(f"mini_repo: error: {exc}", file=sys.stderr)
        return 2
    print(f"made {args.dir}: SGLang as installed on branch main; edit any of these, commit on a branch, and run "
          "`metadata-builders gate --base main --head <branch>` there:")
    for path in made:
        print(f"  {os.path.relpath(path, args.dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
