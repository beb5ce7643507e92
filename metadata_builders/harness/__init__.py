"""The harness that runs a builder: its process-wide session (more rooms join it: inputs, the graph recorder).

=============  ===================================================================================
module         what it holds
=============  ===================================================================================
``session``    :func:`harness_session`: every process-wide switch installed once, restored on exit
=============  ===================================================================================
"""

from __future__ import annotations

from metadata_builders.harness.session import active, harness_session, torch_flags

__all__ = ["active", "harness_session", "torch_flags"]
