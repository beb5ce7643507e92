"""One repository's refs as detached ``git worktree`` checkouts, and the mistakes said plainly: ``unknown ref
`nosuch``` or ``/tmp/x is not inside a git repository``, never a git command line and its exit status.

Every family's gate takes its sides from here (DSV4's ``gate.refs``, the DSA family's
``gate --family dsa``).  Worked example: ``Worktrees("/src/sglang").add("base", "main",
"/tmp/w")`` makes ``/tmp/w/worktree-base`` at main's commit and returns ``(path, commit)``; ``remove()`` drops it.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

from metadata_builders.errors import GateError

__all__ = ["Worktrees", "git"]


def git(repo: str, *args: str) -> subprocess.CompletedProcess:
    """``git -C repo args...``, its output captured as text, never raising on a non-zero exit."""
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=False)


@dataclass
class Worktrees:
    """The detached worktrees made for one repository's refs, removed afterwards (:meth:`remove`)."""

    repo: str
    made: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not os.path.isdir(self.repo):
            raise GateError("--repo", f"{self.repo} does not exist")
        if git(self.repo, "rev-parse", "--git-dir").returncode != 0:
            raise GateError("--repo", f"{self.repo} is not inside a git repository: run the gate from an SGLang "
                                      "checkout (or pass --repo PATH)")

    def commit(self, ref: str) -> str:
        """The commit ``ref`` names; an unknown ref is one line saying how to fetch it."""
        done = git(self.repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if done.returncode != 0:
            raise GateError(f"unknown ref `{ref}`", f"{self.repo} has no commit named {ref} (fetch it first, e.g. "
                                                    "`git fetch origin main`, or check the spelling)")
        return done.stdout.strip()

    def add(self, name: str, ref: str, workdir: str) -> tuple[str, str]:
        """``ref`` as a detached worktree ``workdir/worktree-<name>``: (its path, its commit)."""
        commit = self.commit(ref)
        path = os.path.join(workdir, f"worktree-{name}")
        added = git(self.repo, "worktree", "add", "--detach", "--force", path, commit)
        if added.returncode != 0:
            raise GateError(f"{name} ({ref})", f"could not make a worktree of {commit[:10]}: {added.stderr.strip()}")
        self.made.append(path)
        return path, commit

    def remove(self) -> None:
        """Every worktree :meth:`add` made."""
        for path in self.made:
            git(self.repo, "worktree", "remove", "--force", path)
