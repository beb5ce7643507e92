"""Hypothesis profiles: ``dev`` (quick, local database), ``ci`` (derandomized, no
database writes, sized so ``check`` takes about a minute on 2 cores), ``nightly``
(many more examples).  Deadlines are off everywhere: torch builds have
first-call overheads that make timing noise, and speed is measured by
``metadata-builders bench``, never asserted.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    GitHubArtifactDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

__all__ = ["PROFILE_EXAMPLES", "example_database", "load_profile", "register_profiles"]

PROFILE_EXAMPLES = {"dev": 30, "ci": 100, "nightly": 1500}
"""Examples per focused run of a property (P1 and P5 have three focuses, P7 two) in each profile."""

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
_LOCAL_DB = os.path.join(".hypothesis", "examples")


def example_database(github_artifacts: str | None = None, *, local: bool = True) -> ExampleDatabase | None:
    """The local database, plus CI's database read-only when ``owner/repo`` is given.

    ``GitHubArtifactDatabase`` downloads the ``hypothesis-example-db`` artifact the
    ROCm workflow uploads, so a developer replays exactly what CI found.
    """
    parts: list[ExampleDatabase] = []
    if local:
        parts.append(DirectoryBasedExampleDatabase(_LOCAL_DB))
    if github_artifacts:
        owner, _, repo = github_artifacts.partition("/")
        parts.append(ReadOnlyDatabase(GitHubArtifactDatabase(owner, repo)))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else MultiplexedDatabase(*parts)


def register_profiles() -> None:
    """Register ``dev``, ``ci`` and ``nightly`` with Hypothesis (idempotent)."""
    common = dict(deadline=None, suppress_health_check=_SUPPRESS, print_blob=True)
    settings.register_profile("dev", max_examples=PROFILE_EXAMPLES["dev"], database=example_database(), **common)
    settings.register_profile(
        "ci", max_examples=PROFILE_EXAMPLES["ci"], derandomize=True, database=None, **common
    )
    settings.register_profile(
        "nightly", max_examples=PROFILE_EXAMPLES["nightly"], database=example_database(), **common
    )


def load_profile(name: str) -> settings:
    """Register the profiles and return the named one's settings."""
    register_profiles()
    if name not in PROFILE_EXAMPLES:
        from metadata_builders.errors import UsageError

        raise UsageError("profile", f"one of {sorted(PROFILE_EXAMPLES)}", name)
    return settings.get_profile(name)
