"""What a property's check returns besides a failure, for every family: :class:`Partial` notes (what it could not
judge, and why) and tallies (what it exercised, counted into the run that collects them)."""

from __future__ import annotations

import contextlib
import contextvars
from collections import Counter
from typing import Iterator, Literal

PartialAbout = Literal["variants", "observability", "token_map", "replay", "recorded_replay", "mirror_validation",
                       "own_inputs", "fresh_builder"]
"""What a property could not judge: the kind of a :class:`Partial` note (tests and summaries match on it)."""


class Partial(str):
    """A note saying the property could not fully run for this builder, and why; ``about`` says what of it.

    ``Partial("P5 replay not checked: ...", about="replay")`` reads as its text and is
    matched on ``about``: a builder that loses graph replay makes a ``replay`` note,
    whatever its wording.
    """

    about: PartialAbout

    def __new__(cls, text: str, about: PartialAbout) -> Partial:
        self = super().__new__(cls, text)
        self.about = about
        return self

    def __reduce__(self) -> tuple:
        return (Partial, (str(self), self.about))


_TALLIES: contextvars.ContextVar[Counter | None] = contextvars.ContextVar("metadata_builders_tallies", default=None)


@contextlib.contextmanager
def collecting_tallies() -> Iterator[Counter]:
    """Collect what the checks exercise while the block runs: ``(what, name) -> sum`` (see :func:`tally`), and what
    the audit's stream model saw meanwhile (``("stream model", "pinned_copies" | "faults")``: audit/streams.py)."""
    counts: Counter = Counter()
    token = _TALLIES.set(counts)
    before = _stream_model_counts()
    try:
        yield counts
    finally:
        _TALLIES.reset(token)
        counts.update({("stream model", name): n for name, n in (_stream_model_counts() - before).items()})


def _stream_model_counts() -> Counter:
    """What the stream model has seen in this process; nothing where it was never imported (no build ran)."""
    import sys

    streams = sys.modules.get("metadata_builders.audit.streams")
    return Counter() if streams is None else streams.counts()


def tally(what: str, **counts: int) -> None:
    """Count what a check exercised (e.g. P5's runner: tiers and keys captured) into the collector a run opened;
    nothing when none is open -- a check's own result (its notes) never carries it."""
    collected = _TALLIES.get()
    if collected is not None:
        collected.update({(what, name): n for name, n in counts.items()})
