"""Where each side's code comes from: a git ref of the backend's checkout, the checkout itself, or a builder.

A ref becomes a detached ``git worktree`` (removed afterwards) whose ``python/``
tree goes first on the side's ``PYTHONPATH``.  Mistakes are said plainly:
``unknown ref `nosuch``` or ``/tmp/x is not inside a git repository``, never a
git command line and its exit status.  Each side also gets what its results
depend on (a commit, a builder module's source hash: the cache key's side part)
and what a replay command needs in front of it to import its builder.
"""

from __future__ import annotations

import hashlib
import os

from metadata_builders.builders.loading import module_root, replay_env
from metadata_builders.errors import GateError
from metadata_builders.families.dsv4.builders import registration
from metadata_builders.families.dsv4.gate.model import Side
from metadata_builders.worktrees import Worktrees as BaseWorktrees
from metadata_builders.worktrees import git

__all__ = ["Worktrees", "builder_side"]


def _sglang_tree(root: str, what: str, builder: str) -> str:
    """The folder the side imports from: SGLang's ``python/`` for the sglang builder; for a ``module:attr``
    builder of the user's own repository, ``python/`` or ``src/`` when there is one, else the root."""
    python = os.path.join(root, "python")
    if registration(builder).needs_sglang_tree:
        if not os.path.isdir(os.path.join(python, "sglang")):
            raise GateError(what, f"{root} has no python/sglang: run the gate from an SGLang checkout (or pass "
                                  "--repo), or name your own builder with --builder module:attr")
        return python
    for folder in (python, os.path.join(root, "src")):
        if os.path.isdir(folder):
            return folder
    return root


class Worktrees(BaseWorktrees):
    """The sides of a gate on a git repository: detached worktrees made for refs, removed afterwards."""

    def side(self, name: str, ref: str | None, workdir: str, builder: str) -> Side:
        if ref is None:
            commit = self.commit("HEAD")
            python = _sglang_tree(self.repo, f"{name} (the checkout)", builder)
            dirty = git(self.repo, "status", "--porcelain", "--", python).stdout.strip()
            label = f"checkout at {commit[:10]}" + (" + uncommitted changes" if dirty else "")
            return Side(name, builder, python, label, None if dirty else f"commit:{commit}",
                        f"PYTHONPATH={python}", root=os.path.abspath(self.repo))
        path, commit = self.add(name, ref, workdir)
        python = _sglang_tree(path, f"{name} ({ref})", builder)
        inside = os.path.relpath(python, path)
        return Side(name, builder, python, f"{ref} at {commit[:10]}", f"commit:{commit}",
                    f"PYTHONPATH=<a checkout of {commit[:10]}>" + ("" if inside == "." else f"/{inside}"),
                    root=os.path.abspath(path))


def builder_side(name: str, builder: str) -> Side:
    """A side that is a builder of this environment (``--base-builder``/``--head-builder``)."""
    module = builder.partition(":")[0] if ":" in builder else None
    if module is None:
        # The installed SGLang has no identity of its own here; the harness's builders are covered by its hash.
        identity = None if registration(builder).upstream else f"builder:{builder}"
        return Side(name, builder, None, builder, identity, "")
    root, origin = module_root(module)
    if module.split(".")[0] == "metadata_builders":
        identity = f"builder:{builder}"
    elif origin is not None:
        with open(origin, "rb") as fh:
            identity = f"builder:{builder}@{hashlib.sha256(fh.read()).hexdigest()[:16]}"
    else:
        identity = None
    env = replay_env(builder)
    # The side's processes run in the gate's workdir: a module ``check`` imports from the current directory (or
    # from a root a fresh interpreter does not see) goes on their path as on the replay command's.
    return Side(name, builder, root if env else None, builder, identity, env)
