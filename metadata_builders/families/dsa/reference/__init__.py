"""The DSA family's reference: the specification every build is judged against, in pure Python (no torch).

============  =================================================================================
module        what it holds
============  =================================================================================
``stages``    one function per upstream stage (``compute_cu_seqlens``, ``seqlens_expand`` and its
              fault model, ``compute_dsa_seqlens``, ``transform_table_1_to_real`` ...), each with
              DESIGN.md section 6's worked example
``modes``     :func:`reference_metadata`: every judged field of a batch along a variant, per mode,
              eager and graph
``contract``  what a build does besides its fields: the sync contract per variant and phase, the
              pageable copies, the caller's fields it writes, the faults its kernel commits, the
              query rows a consumer reads (windows, read lengths)
============  =================================================================================

``tests/families/dsa/test_reference.py`` checks that importing it never imports torch.
"""

from __future__ import annotations

from metadata_builders.families.dsa.reference.contract import (
    EXPAND_OP,
    SyncSpec,
    TokenRow,
    caller_writes,
    expected_faults,
    expected_h2d_copies,
    expected_syncs,
    read_lengths,
    token_rows,
)
from metadata_builders.families.dsa.reference.modes import (
    PAD_SEQ_LEN,
    eager_metadata,
    expand_of,
    graph_metadata,
    padded_inputs,
    reference_metadata,
)
from metadata_builders.families.dsa.reference.stages import ExpandResult, seqlens_expand

__all__ = [
    "EXPAND_OP",
    "PAD_SEQ_LEN",
    "ExpandResult",
    "SyncSpec",
    "TokenRow",
    "caller_writes",
    "eager_metadata",
    "expand_of",
    "expected_faults",
    "expected_h2d_copies",
    "expected_syncs",
    "graph_metadata",
    "padded_inputs",
    "read_lengths",
    "reference_metadata",
    "seqlens_expand",
    "token_rows",
]
