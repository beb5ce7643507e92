"""Base results cached by what they depend on, so a re-run or a sweep over several heads does not redo them.

A side's outcomes depend on its code (a commit of the backend's tree, or a
builder's own source), the harness (its version and the hash of its own
source, so an editable checkout with local edits never reuses stale results),
the corpus (its sha256: examples, kinds and seeds), the properties, the device
and torch.  All of it is the cache key; a side whose code has no stable identity
(a checkout with uncommitted changes) is never cached.  Only a run that
completed is stored.

Where: ``--cache-dir DIR``, else ``$METADATA_BUILDERS_CACHE``, else
``$XDG_CACHE_HOME/metadata-builders/gate`` (``~/.cache/metadata-builders/gate``);
one JSON file per key.  ``--no-cache`` neither reads nor writes it; clearing it
is deleting that directory.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from importlib import metadata as importlib_metadata

from metadata_builders.families.dsv4.gate.model import Outcome, Side

__all__ = ["ENV_CACHE", "cache_dir", "cache_key", "harness_version", "load", "load_trace", "store"]

ENV_CACHE = "METADATA_BUILDERS_CACHE"


def cache_dir(option: str | None) -> str:
    """The cache directory: the option, the environment variable, or the user's cache directory."""
    if option:
        return option
    if os.environ.get(ENV_CACHE):
        return os.environ[ENV_CACHE]
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "metadata-builders", "gate")


@cache
def harness_version() -> str:
    """The harness's version plus a hash of its own source (``metadata_builders`` and ``strategies``)."""
    import metadata_builders
    from metadata_builders.runs.profiles import harness_files

    digest = hashlib.sha256()
    for root, path in harness_files():
        digest.update(os.path.relpath(path, root).encode())
        with open(path, "rb") as fh:
            digest.update(fh.read())
    return f"{getattr(metadata_builders, '__version__', '0')}+{digest.hexdigest()[:16]}"


def _version(dist: str) -> str:
    try:
        return importlib_metadata.version(dist)
    except importlib_metadata.PackageNotFoundError:
        return "-"


def cache_key(side: Side, corpus_sha: str, props: list[str], device: str) -> dict[str, str] | None:
    """Everything the side's outcomes depend on, or None when the side cannot be cached."""
    if side.identity is None:
        return None
    return {"side": side.identity, "builder": side.builder, "harness": harness_version(), "corpus": corpus_sha,
            "properties": ",".join(props), "device": device, "torch": _version("torch"),
            "triton": _version("triton")}


def _path(directory: str, key: dict[str, str]) -> str:
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return os.path.join(directory, f"{name}.json")


def _entry(directory: str, key: dict[str, str] | None) -> dict | None:
    """The cache entry for ``key``, or None (no key, no entry, or an entry for another key)."""
    if key is None:
        return None
    try:
        with open(_path(directory, key)) as fh:
            entry = json.load(fh)
    except (OSError, ValueError):
        return None
    return entry if entry.get("key") == key else None


def load(directory: str, key: dict[str, str] | None) -> list[Outcome] | None:
    """The cached outcomes for ``key``, or None (no key, no entry, or an entry for another key)."""
    entry = _entry(directory, key)
    return None if entry is None else [Outcome.from_dict(d) for d in entry["outcomes"]]


def load_trace(directory: str, key: dict[str, str] | None) -> dict | None:
    """What the cached side imported and ran of its tree (``trace``), or None (no entry, or none recorded)."""
    entry = _entry(directory, key)
    return None if entry is None else entry.get("trace")


def store(directory: str, key: dict[str, str] | None, outcomes: list[Outcome], trace: dict | None = None) -> str | None:
    """Write ``outcomes`` (and the side's ``trace``) under ``key`` (atomically); returns the file, or None when not
    cacheable or not writable."""
    if key is None:
        return None
    path = _path(directory, key)
    try:
        os.makedirs(directory, exist_ok=True)
        with open(path + ".tmp", "w") as fh:
            json.dump({"key": key, "outcomes": [o.to_dict() for o in outcomes], "trace": trace}, fh)
        os.replace(path + ".tmp", path)
    except OSError:
        return None
    return path
