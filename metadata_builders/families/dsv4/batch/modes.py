"""The modes of the MTP step a batch can be of (docs/DESIGN.md section 3, "Beyond target verify")."""

from __future__ import annotations

__all__ = ["DECODE_MODES", "MODES", "Mode"]

Mode = str
"""One of :data:`MODES`."""

MODES: tuple[str, ...] = ("target_verify", "draft_extend", "draft_decode", "decode", "idle")
"""The metadata builds of one MTP step (docs/DESIGN.md section 3, "Beyond target verify").

``target_verify``: the target model verifies each request's draft tokens at positions
``seq_lens[i] + j`` (uniform or ragged).  ``draft_extend``: the draft model extends every
request by ``num_draft_tokens`` tokens at the same positions (upstream's
``init_forward_metadata_draft_extend``, ``num_tokens_per_req``; uniform).  ``draft_decode``:
one step (``draft_step``) of EAGLE's multi-step draft decode, one token per request at
position ``seq_lens[i] + draft_step``; ``out_cache_loc`` is the whole shared buffer of the
``num_draft_tokens - 1`` steps, request-major (upstream's ``per_step_draft_out_cache_loc``).
``decode``: one token per request at position ``seq_lens[i]``.  ``idle``: a DP rank with no
request -- no real row, every row of the graph tier a pad row on slot 0.  ``seq_lens`` is
always the prefix *before* the step's tokens (upstream passes ``seq_lens + n`` to draft
extend and decode, whose lengths include them).
"""

DECODE_MODES: tuple[str, ...] = ("decode", "draft_decode", "idle")
"""The modes with one token per row, built by upstream's raw decode metadata (``init_forward_metadata_decode``):
``idle`` is the target's decode graph replayed on a rank with no request."""
