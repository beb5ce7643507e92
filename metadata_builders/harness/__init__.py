"""The harness that runs a builder, for every family: how it replays a graph, its session.

==================  ===============================================================================
module              what it holds
==================  ===============================================================================
``graph_recorder``  replay as a GPU does it: in-graph work recorded once, re-executed at every replay
``session``         :func:`harness_session` (owned by the audit: :mod:`metadata_builders.session`)
==================  ===============================================================================

This face re-exports only the session (torch-free); import the recorder by its module.  What a builder is handed
is its family's (DSV4's ``VerifyInputs``, the facade's name; the DSA family's ``DSAInputs``).
"""

from __future__ import annotations

from metadata_builders.session import active, harness_session, torch_flags

__all__ = ["active", "harness_session", "torch_flags"]
