"""The DSA family's bundled torch builder: upstream's HIP metadata path, stage by stage, on any torch device.

=============  ===============================================================================
module         what it holds
=============  ===============================================================================
``builder``    :class:`DSABuilder`: ``build`` (eager) and the graph phases ``graph_state`` /
               ``out_graph`` / ``in_graph``
``eager``      ``init_forward_metadata`` split into its stages (prologue, one branch per mode,
               epilogue) and the multi-step backend's eager build
``graph``      capture (``_build_forward_metadata_cuda_graph``), replay on both routes
               (``_apply_cuda_graph_metadata``), draft decode's precompute and copies
``kernels``    ``seqlens_expand_triton`` (stores through the family's device model), the fused
               ``fused_dsa_*_metadata`` kernels' semantics (page rows up to the KV length), helpers
``consumers``  the HIP consumers' prelude (``get_valid_kv_indices``), which P10 runs on every build
=============  ===============================================================================

Each module's docstring maps its stages to upstream's functions and lines; stages are called through
their module's globals, so the family's mutant catalogue replaces one by name.
"""

from __future__ import annotations

from metadata_builders.families.dsa.builder.builder import (
    HOST_FIELDS,
    DSABuilder,
    tensor_fields,
)

__all__ = ["HOST_FIELDS", "DSABuilder", "tensor_fields"]
