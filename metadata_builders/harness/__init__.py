"""The harness that runs a builder: what it hands the builder, how it replays a graph, its session.

==================  ===============================================================================
module              what it holds
==================  ===============================================================================
``inputs``          :class:`VerifyInputs`: what upstream's caller hands the backend, made by the harness
``graph_recorder``  replay as a GPU does it: in-graph work recorded once, re-executed at every replay
``session``         :func:`harness_session` (owned by the audit: :mod:`metadata_builders.session`)
==================  ===============================================================================

This face re-exports only the session (torch-free); import the others by their module.
"""

from __future__ import annotations

from metadata_builders.session import active, harness_session, torch_flags

__all__ = ["active", "harness_session", "torch_flags"]
