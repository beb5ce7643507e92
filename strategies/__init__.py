"""Hypothesis strategies."""
