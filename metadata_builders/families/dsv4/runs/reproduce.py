"""Before a replay file is written: does the failure reproduce on a freshly constructed builder?

Every example of a Hypothesis run shares one builder, so a builder with hidden
state (a scratch buffer grown lazily and never cleared, a cache keyed by batch
size) can fail on a batch only because of the batches it built before.  A replay
file of that batch alone would then report every property held.  So before
``check`` writes one, the failure is replayed on a fresh builder: first alone,
then after the last one, two, four, ... batches the builder had built before it
(its :attr:`~metadata_builders.families.dsv4.builders.AuditedBuilder.history`).  The shortest
history that reproduces it goes into the file (``meta.history``), and
``metadata-builders replay`` builds those batches first.

Worked example: a builder keeps its per-token slots in a scratch buffer sized for
the largest batch it has seen and fills only the real tokens.  Hypothesis draws a
tier of 8 tokens with 6 real ones, then shrinks to one with 2 real tokens: on the
fresh builder the 2-token batch holds (the scratch starts zeroed, as a pad slot
should be), after the 6-token batch its pad tokens show slot 3.  The file carries
the 6-token batch as its history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.properties.spec import PropertySpec, verdict
from metadata_builders.families.dsv4.properties.state import can_be_made_afresh, play_history

__all__ = ["Reproduction", "reproduce"]


@dataclass(frozen=True)
class Reproduction:
    """What replaying a failure on a fresh builder showed."""

    verified: bool
    """The failure was replayed on a freshly constructed builder (False: the builder has no factory)."""
    history: tuple[VerifyBatch, ...] | None
    """The batches to build first for it to fail (empty: none needed); None when it did not fail again."""
    failure: PropertyFailure | None = None
    """The failure the fresh builder showed."""

    @property
    def reproduces(self) -> bool:
        return self.history is not None


def _candidates(history: Sequence[VerifyBatch], mode: str) -> list[tuple[VerifyBatch, ...]]:
    """No history; then the last batch of each other mode (a worker builds every mode of the step on one backend,
    so what a draft-decode build left can show in a decode build); then those followed by the last 1, 2, 4, ...
    batches; then all of them."""
    others: dict[str, VerifyBatch] = {}
    for b in history:
        if b.mode != mode:
            others.pop(b.mode, None)
            others[b.mode] = b
    first = tuple(b for b in history if b in others.values() and others[b.mode] is b)
    out: list[tuple[VerifyBatch, ...]] = [()]
    if first:
        out.append(first)
    n = 1
    while n < len(history):
        tail = tuple(b for b in history[-n:] if b not in first)
        out.append(first + tail)
        n *= 2
    if history:
        out.append(tuple(history))
    return list(dict.fromkeys(out))


def reproduce(builder: Any, spec: PropertySpec, batch: VerifyBatch, history: Sequence[VerifyBatch]) -> Reproduction:
    """Replay ``spec`` on ``batch`` on fresh builders, after ever longer histories (:func:`_candidates`)."""
    if not can_be_made_afresh(builder):
        return Reproduction(False, ())
    for earlier in _candidates([b for b in history if b != batch], batch.mode):
        fresh = builder.fresh()
        play_history(fresh, list(earlier))
        result = verdict(spec, fresh, batch)
        if result.failure is not None:
            return Reproduction(True, earlier, result.failure)
    return Reproduction(True, None)
