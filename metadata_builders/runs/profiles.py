"""Hypothesis profiles: ``dev`` (quick, local database), ``ci`` (derandomized, no
database writes, sized so ``check`` takes about a minute on 2 cores), ``nightly``
(many more examples).  Deadlines are off everywhere: torch builds have
first-call overheads that make timing noise, and speed is measured by
``metadata-builders bench``, never asserted.

They are registered with Hypothesis under prefixed names
(``metadata-builders-ci``, :func:`hypothesis_name`), so they never replace a
profile of the same short name in the project that loads the plugin.  The local
example database lives under ``.hypothesis/`` of the current directory only
when a profile that uses it is loaded (``dev``, ``nightly``); ``ci`` writes none.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator

from hypothesis import HealthCheck, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    GitHubArtifactDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

__all__ = ["PROFILES", "PROFILE_EXAMPLES", "WORK_DIR", "example_database", "harness_files", "hypothesis_name",
           "load_profile", "register_profiles", "seed_alone", "work_dir"]

PROFILE_EXAMPLES = {"dev": 30, "ci": 100, "nightly": 1500}
"""Examples per focused run of a property (P1 and P5 have three focuses, P7 two) in each profile."""

PROFILES = tuple(PROFILE_EXAMPLES)
"""The profile names every ``--profile``/``--mb-profile`` option accepts."""


def hypothesis_name(profile: str) -> str:
    """The name Hypothesis knows ``profile`` by: ``metadata-builders-ci``."""
    return f"metadata-builders-{profile}"

WORK_DIR = ".metadata-builders"
"""Everything the harness leaves in the current directory: the example database, ``check``'s replay
files (``failures/``).  One hidden folder that ignores itself (:func:`work_dir`)."""


def work_dir(*parts: str) -> str:
    """``.metadata-builders/<parts>``, made with a ``.gitignore`` of ``*`` so git never shows it."""
    ignored_dir(WORK_DIR)
    return os.path.join(WORK_DIR, *parts)


def ignored_dir(directory: str) -> str:
    """``directory``, made if missing, with a ``.gitignore`` of ``*`` in it: what the harness writes into a
    user's repository (``.metadata-builders/``, the gate's ``build/metadata-builders/``) never shows in git."""
    os.makedirs(directory, exist_ok=True)
    ignore = os.path.join(directory, ".gitignore")
    if not os.path.exists(ignore):
        with open(ignore, "w") as fh:
            fh.write("# made by metadata-builders: example database, replay files, pictures\n*\n")
    return directory


_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
_LOCAL_DB = os.path.join(WORK_DIR, "examples")


class _LocalDatabase(DirectoryBasedExampleDatabase):
    """The local example database: its folder made, ignoring itself, on the first example saved."""

    def save(self, key: bytes, value: bytes) -> None:
        work_dir()
        super().save(key, value)


def example_database(github_artifacts: str | None = None, *, local: bool = True) -> ExampleDatabase | None:
    """The local database, plus CI's database read-only when ``owner/repo`` is given.

    ``GitHubArtifactDatabase`` downloads the ``hypothesis-example-db`` artifact the
    ROCm workflow uploads, so a developer replays exactly what CI found.
    """
    parts: list[ExampleDatabase] = []
    if local:
        parts.append(_LocalDatabase(_LOCAL_DB))
    if github_artifacts:
        owner, _, repo = github_artifacts.partition("/")
        parts.append(ReadOnlyDatabase(GitHubArtifactDatabase(owner, repo)))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else MultiplexedDatabase(*parts)


def register_profiles() -> None:
    """Register ``dev``, ``ci`` and ``nightly`` with Hypothesis (idempotent)."""
    common = dict(deadline=None, suppress_health_check=_SUPPRESS, print_blob=True)
    for name, examples in PROFILE_EXAMPLES.items():
        if name == "ci":
            settings.register_profile(hypothesis_name(name), max_examples=examples, derandomize=True, database=None,
                                      **common)
        else:
            settings.register_profile(hypothesis_name(name), max_examples=examples, database=example_database(),
                                      **common)


def load_profile(name: str) -> settings:
    """Register the profiles and return the named one's settings (``dev``, ``ci`` or ``nightly``)."""
    register_profiles()
    if name not in PROFILE_EXAMPLES:
        from metadata_builders.errors import UsageError

        raise UsageError("--profile", f"one of {sorted(PROFILE_EXAMPLES)}", name)
    return settings.get_profile(hypothesis_name(name))


def harness_files() -> Iterator[tuple[str, str]]:
    """(package root, file) for every Python file of the harness's own packages (``metadata_builders``,
    ``strategies``), found on disk, not imported, in one fixed order: what the gate's cache key hashes and what
    :func:`seed_alone` mines."""
    import importlib.util

    for package in ("metadata_builders", "strategies"):
        root = os.path.dirname(importlib.util.find_spec(package).origin)
        for folder, dirs, files in sorted(os.walk(root)):
            dirs.sort()
            for name in sorted(f for f in files if f.endswith(".py")):
                yield root, os.path.join(folder, name)


@functools.cache
def _harness_constants() -> object:
    """The literals of every module of the harness's own packages, read from their files once per process (imported
    or not): the pool of local constants a seeded run draws from under :func:`seed_alone`."""
    from hypothesis.internal.constants_ast import Constants, _constants_from_source

    pool = Constants()
    for _, path in harness_files():
        try:
            with open(path, "rb") as fh:
                pool |= _constants_from_source(fh.read(), limit=True)
        except Exception:  # noqa: BLE001 - as Hypothesis does: a file it cannot mine adds nothing
            continue
    return pool


@contextlib.contextmanager
def seed_alone() -> Iterator[None]:
    """While the block runs, a seeded Hypothesis run draws from its seed, its strategies and the harness's own source.

    Hypothesis (6.131 on) draws about one choice in twenty from the literals of every *local* module in
    ``sys.modules`` -- any module outside site-packages and the standard library: the harness when it is installed
    editable, and an SGLang imported from a checkout's ``python/``, as a gate's side does.  So the same seed drew other
    batches whenever the code under test changed a literal or another module had been imported first: a gate's base
    and head, each importing its own tree, could be judged on different batches.  Here the local pool is fixed: the
    literals of every module of the harness's own packages (:func:`_harness_constants`: the geometry numbers, page
    sizes and bounds the strategies aim at, which help them reach the boundaries), whatever was imported; Hypothesis'
    cache of constant pools is emptied on entry and on exit, so nothing of the block leaks into a user's later draws
    or theirs into it.  With a Hypothesis that has no such mining, it does nothing;
    ``tests/core/test_profiles.py`` fails if the installed one moved it.

    Worked example: two runs of one seed, with a local module of 20 new integers imported between them, drew
    different lists; inside ``seed_alone()`` they draw the same.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # a Hypothesis before the mining: draws depend on the seed alone already
        yield
        return
    mined = getattr(providers, "_get_local_constants", None)
    if mined is None:
        yield
        return
    providers.CONSTANTS_CACHE.cache.clear()
    providers._get_local_constants = _harness_constants
    try:
        yield
    finally:
        providers._get_local_constants = mined
        providers.CONSTANTS_CACHE.cache.clear()
