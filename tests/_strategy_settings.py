"""The Hypothesis settings the strategies' tests share (tests/dsv4/test_strategies*.py)."""

from __future__ import annotations

from hypothesis import settings

FAST = settings(deadline=None, max_examples=60, database=None)
"""A property of drawn batches: 60 examples, no deadline, no example database."""
FIND = settings(deadline=None, database=None, max_examples=2000)
"""``find``/a rate over many draws: up to 2000 examples, no deadline, no example database."""
