"""A batch as JSON: the replay file's schema ``metadata-builders/verify-batch@1``.

A :class:`~metadata_builders.families.dsv4.batch.VerifyBatch` is ints and lists only, so it
round-trips through JSON and a failing batch can be written to a replay file
and rebuilt bit for bit.  A file may carry ``why`` (a one-line note) and
``meta`` (free-form, e.g. the failing property) beside the batch::

    {"schema": "metadata-builders/verify-batch@1", "why": "run-ahead device lengths",
     "seq_lens": [5, 3], "req_pool_indices": [2, 1], "verify_lens": null, "num_draft_tokens": 2, ...}

An unknown key, a missing one or another schema tag raises
:class:`~metadata_builders.errors.InvalidBatch` naming it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from metadata_builders.values import reject_unknown
from metadata_builders.families.dsv4.batch.parts import Divergence, Geometry, GraphTier
from metadata_builders.errors import InvalidBatch

if TYPE_CHECKING:
    from metadata_builders.families.dsv4.batch import VerifyBatch

__all__ = ["SCHEMA", "batch_from_dict", "batch_from_json", "batch_to_dict", "batch_to_json"]

SCHEMA = "metadata-builders/verify-batch@1"

_REQUIRED = ("seq_lens", "req_pool_indices", "num_draft_tokens", "out_cache_loc", "req_to_token", "full_to_swa")


def batch_to_dict(batch: VerifyBatch) -> dict[str, Any]:
    """Plain JSON-ready data with the schema tag."""
    return {
        "schema": SCHEMA,
        "seq_lens": list(batch.seq_lens),
        "req_pool_indices": list(batch.req_pool_indices),
        "verify_lens": None if batch.verify_lens is None else list(batch.verify_lens),
        "num_draft_tokens": batch.num_draft_tokens,
        "out_cache_loc": list(batch.out_cache_loc),
        "req_to_token": [list(r) for r in batch.req_to_token],
        "full_to_swa": list(batch.full_to_swa),
        "is_dspark": batch.is_dspark,
        "geometry": batch.geometry.to_dict(),
        "graph": None if batch.graph is None else batch.graph.to_dict(),
        "divergence": None if batch.divergence is None else batch.divergence.to_dict(),
        # A target-verify batch's file stays byte-identical to the ones written before modes existed.
        **({} if batch.mode == "target_verify" else {"mode": batch.mode}),
        **({} if batch.draft_step is None else {"draft_step": batch.draft_step}),
        # Only a DSpark draft worker's verify keeps two counts: every other file stays byte-identical.
        **({} if batch.speculative_num_draft_tokens is None
           else {"speculative_num_draft_tokens": batch.speculative_num_draft_tokens}),
        # Only an eager step the worker DP-padded has pad rows of its own (issue 45).
        **({"dp_pad_rows": batch.dp_pad_rows} if batch.dp_pad_rows else {}),
    }


def batch_from_dict(cls: type[VerifyBatch], d: Mapping[str, Any]) -> VerifyBatch:
    """Rebuild a ``cls`` (validated as any new batch is); ``schema`` is optional but must match when present."""
    reject_unknown("batch", d, {f.name for f in fields(cls)} | {"schema", "why", "meta"})
    if "schema" in d and d["schema"] != SCHEMA:
        raise InvalidBatch("schema", None, repr(SCHEMA), d["schema"])
    for key in _REQUIRED:
        if key not in d:
            raise InvalidBatch(key, None, "present", None)
    geometry = d.get("geometry")
    graph = d.get("graph")
    divergence = d.get("divergence")
    return cls(
        seq_lens=d["seq_lens"],
        req_pool_indices=d["req_pool_indices"],
        verify_lens=d.get("verify_lens"),
        num_draft_tokens=d["num_draft_tokens"],
        out_cache_loc=d["out_cache_loc"],
        req_to_token=d["req_to_token"],
        full_to_swa=d["full_to_swa"],
        is_dspark=d.get("is_dspark", False),
        geometry=Geometry() if geometry is None else Geometry.from_dict(geometry),
        graph=None if graph is None else GraphTier.from_dict(graph),
        divergence=None if divergence is None else Divergence.from_dict(divergence),
        mode=d.get("mode", "target_verify"),
        draft_step=d.get("draft_step"),
        speculative_num_draft_tokens=d.get("speculative_num_draft_tokens"),
        dp_pad_rows=d.get("dp_pad_rows", 0),
    )


def batch_to_json(batch: VerifyBatch, **extra: Any) -> str:
    """JSON text; ``extra`` keys (``why``, ``meta``) are written after the schema."""
    d = batch_to_dict(batch)
    d.update(extra)
    return json.dumps(d, indent=1)


def batch_from_json(cls: type[VerifyBatch], text: str | bytes) -> VerifyBatch:
    """Rebuild a ``cls`` from JSON text; text that is not UTF-8 JSON raises ``InvalidBatch`` field ``json``."""
    try:
        d = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidBatch("json", None, "valid UTF-8 JSON", str(exc)) from exc
    return cls.from_dict(d)
