"""The palette and the cell-kind words both pictures use, so the PNG and the page agree.

``assets/page.css`` repeats the colours for the page's cells; keep the two in step.
"""

from __future__ import annotations

COLOURS = {
    "prefix": "#d9d9d9",
    "verify": "#4c78a8",
    "slack": "#f58518",
    "pad": "#54a24b",
    "uncovered": "#b279a2",
    "bad": "#d62728",
    "oob": "#ffffff",
    "ok": "#2a7f2a",
}
"""Fill per cell kind, ``bad`` for disagreements and faults, ``ok`` for a clean verdict."""

KIND_LABELS = {
    "verify": "verify token",
    "slack": "tier slack absorbed by the last real row",
    "pad": "pad row token (tier slack, slot 0)",
    "uncovered": "uncovered tail of the tier (past num_tokens: no row covers it)",
}
"""Legend and tooltip words per cell kind, in legend order."""
