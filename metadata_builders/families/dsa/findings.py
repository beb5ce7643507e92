"""The DSA family's known upstream findings (docs/FINDINGS.md), keyed by check id and release.

``check --family dsa --builder sglang`` labels a failure whose check id and the installed SGLang release are listed
here with the finding's id (``known F27``), and the run is green apart from labelled findings.  Only a builder that
names its ``release`` (the adapter, upstream's own code) is matched: the bundled builder and the mutant catalogue
never are.  A finding the harness judges as holding (a verdict, not a failure: the stale fused columns, the
intercepted out-of-bounds write) is not listed here; its replay file pins it (tests/regressions/dsa/).

Worked example: ``known_finding("dsa.p5.pad_negative", "0.5.18")`` is the id of the finding listed for that check on
that release, or None.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KNOWN", "KnownFinding", "known_finding"]


@dataclass(frozen=True)
class KnownFinding:
    """A finding of docs/FINDINGS.md as ``check --family dsa`` reports it."""

    id: str
    check: str
    """The failing check id (``dsa.p1.field``)."""
    releases: tuple[str, ...]
    """The SGLang releases it fails on (``"0.5.18"``)."""
    summary: str
    """One line, as docs/FINDINGS.md states it."""


KNOWN: tuple[KnownFinding, ...] = ()
"""Every known finding of the family that a property reports as a failure (docs/FINDINGS.md)."""


def known_finding(check: str | None, release: str | None, known: tuple[KnownFinding, ...] | None = None) -> str | None:
    """The id of the known finding a failure of ``check`` on SGLang ``release`` is, or None (``release`` None: not
    upstream's code, never a known finding)."""
    if check is None or release is None:
        return None
    for finding in KNOWN if known is None else known:
        if finding.check == check and release in finding.releases:
            return finding.id
    return None
