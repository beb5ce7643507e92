"""What the DSA family's properties share: check ids, failing with data, building under a property, comparing
fields up to each row's read length, the batches a property derives from the one it judges."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from metadata_builders.errors import CaptureSync, Origin, PropertyFailure
from metadata_builders.families.dsa.batch import DSADivergence
from metadata_builders.families.dsa.fields import FIELDS
from metadata_builders.families.dsa.reference import read_lengths

if TYPE_CHECKING:
    from metadata_builders.families.dsa.batch import DSABatch
    from metadata_builders.families.dsa.variants import DSAVariant

__all__ = ["CHECK_IDS", "DSACheckId", "building", "clean", "fail", "first_difference", "truthful", "with_seq_lens"]

DSACheckId = Literal[
    "dsa.p1.vs_reference", "dsa.p1.shape", "dsa.p1.dtype", "dsa.p1.missing", "dsa.p1.raised",
    "dsa.p2.mirror_vs_absent", "dsa.p2.given_synced", "dsa.p2.absent_no_sync", "dsa.p2.graph_reads_mirror",
    "dsa.p2.raised",
    "dsa.p3.host_total_vs_device", "dsa.p3.unwritten", "dsa.p3.raised",
    "dsa.p5.graph_vs_eager", "dsa.p5.pad_negative", "dsa.p5.pad_window", "dsa.p5.pad_slot",
    "dsa.p5.runner_replay", "dsa.p5.capture_sync", "dsa.p5.raised",
    "dsa.p6.faults_vs_model", "dsa.p6.fault_on_clean", "dsa.p6.raised",
    "dsa.p7.sync_contract", "dsa.p7.capture_sync_contract", "dsa.p7.capture_sync", "dsa.p7.replay_synced",
    "dsa.p7.capture_host_read", "dsa.p7.copy_contract", "dsa.p7.replay_pageable_copy", "dsa.p7.raised",
    "dsa.p8.input_written", "dsa.p8.caller_write_undeclared", "dsa.p8.caller_write_value", "dsa.p8.raised",
    "dsa.p9.vs_fresh_builder", "dsa.p9.raised",
    "dsa.p10.negative_length", "dsa.p10.window_read", "dsa.p10.topk_over_budget", "dsa.p10.read_past_table",
    "dsa.p10.read_not_owned", "dsa.p10.indptr", "dsa.p10.prelude_oob", "dsa.p10.prelude_segment",
    "dsa.p10.raised",
]
"""Every check of the DSA family's properties, namespaced ``dsa.`` (the core's ids are DSV4's)."""

CHECK_IDS: tuple[str, ...] = get_args(DSACheckId)


def fail(prop: str, check: DSACheckId, message: str, variant: DSAVariant | None = None, *, field: str | None = None,
         index: Any = None, expected: Any = None, actual: Any = None) -> PropertyFailure:
    """A :class:`~metadata_builders.errors.PropertyFailure` of this family (raise it)."""
    assert check in CHECK_IDS, check
    return PropertyFailure(prop, message, variant=None if variant is None else variant.label, field=field,
                           index=index, expected=expected, actual=actual, check=check)


@contextlib.contextmanager
def building(prop: str, variant: DSAVariant | None = None) -> Iterator[None]:
    """A builder that raises fails the property with ``dsa.pN.raised`` and the exception's origin (a read inside
    a recording: ``dsa.p5.capture_sync`` / ``dsa.p7.capture_sync``)."""
    try:
        yield
    except PropertyFailure:
        raise
    except CaptureSync as exc:
        check = f"dsa.{prop.lower()}.capture_sync"
        if check not in CHECK_IDS:
            check = f"dsa.{prop.lower()}.raised"
        raise PropertyFailure(prop, f"the builder read the device inside a recording: {exc}", check=check,
                              variant=None if variant is None else variant.label, origin=Origin.of(exc)) from exc
    except Exception as exc:  # the builder's own error, whatever it is: reported with its origin, never swallowed
        origin = Origin.of(exc)
        raise PropertyFailure(prop, f"the builder raised {type(exc).__name__}: {exc} ({origin.where()})",
                              check=f"dsa.{prop.lower()}.raised", variant=None if variant is None else variant.label,
                              origin=origin) from exc


def first_difference(expected: Any, actual: Any) -> tuple[Any, Any, Any] | None:
    """(index, expected, actual) of the first difference of two plain values (lists compared item by item)."""
    if isinstance(expected, list) and isinstance(actual, list):
        for i, (e, a) in enumerate(zip(expected, actual)):
            inner = first_difference(e, a)
            if inner is not None:
                index = (i,) if inner[0] is None else (i, *inner[0])
                return index, inner[1], inner[2]
        if len(expected) != len(actual):
            return ("len",), len(expected), len(actual)
        return None
    return None if expected == actual else (None, expected, actual)


def read_columns(batch: DSABatch, path: str, name: str) -> list[int]:
    """Per row of ``page_table_1`` / ``real_page_table``: the columns a consumer reads."""
    reads = read_lengths(batch, path)
    if name == "real_page_table":
        return [-(-n // batch.page_size) for n in reads]
    return reads


def compare_field(batch: DSABatch, path: str, name: str, expected: Any,
                  actual: Any) -> tuple[str, Any, Any, Any] | None:
    """(what, index, expected, actual) of the first difference of one field, the page tables up to each row's
    read length (their shape exactly); None when equal."""
    if FIELDS[name].dims == 2 and isinstance(expected, list) and isinstance(actual, list):
        shape_e = [len(expected), len(expected[0]) if expected else 0]
        shape_a = [len(actual), len(actual[0]) if actual else 0]
        if shape_e != shape_a:
            return "shape", None, shape_e, shape_a
        cut = read_columns(batch, path, name)
        diff = first_difference([r[:n] for r, n in zip(expected, cut)], [r[:n] for r, n in zip(actual, cut)])
    else:
        diff = first_difference(expected, actual)
    return None if diff is None else ("value", *diff)


def clean(batch: DSABatch) -> DSABatch:
    """``batch`` without the device divergence (a stale host mirror stays: the reference models what the caller
    passes)."""
    div = batch.divergence
    if div is None or div.extend_seq_lens is None:
        return batch
    return batch.replace(divergence=None if div.seq_lens_cpu is None else DSADivergence(None, div.seq_lens_cpu))


def truthful(batch: DSABatch) -> DSABatch:
    """``batch`` with nothing injected: the host believes what the device holds."""
    return batch.without_divergence()


def with_seq_lens(batch: DSABatch, seq_lens: Sequence[int], count: int | None = None,
                  mode: str | None = None) -> DSABatch:
    """The same step for the first ``count`` requests with other prefixes (``out_cache_loc`` from the table),
    nothing injected, its tier kept; ``mode``: the same requests in another mode (draft decode at step 0).
    Raises ``InvalidBatch`` where the rows do not fit that mode."""
    count = len(seq_lens) if count is None else count
    mode = mode or batch.mode
    seq, slots = list(seq_lens)[:count], list(batch.req_pool_indices)[:count]
    n = batch.num_draft_tokens
    per = {"target_verify": n, "draft_extend": n, "decode": 1, "draft_decode": n - 1, "idle": 0}[mode]
    if any(s + per > batch.width for s in seq):
        from metadata_builders.errors import InvalidBatch

        raise InvalidBatch("seq_lens", None, f"rows that fit the table in {mode}", seq)
    loc = [batch.req_to_token[slot][s + j] for slot, s in zip(slots, seq) for j in range(per)]
    step = batch.draft_step if mode == batch.mode else (0 if mode == "draft_decode" else None)
    graph = batch.graph
    if graph is not None and graph.capture_bs:  # the runner replays on the smallest captured size that holds them
        graph = type(graph)(next(t for t in graph.capture_bs if t >= max(count, 1)), graph.capture_bs)
    return batch.replace(seq_lens=seq, req_pool_indices=slots, out_cache_loc=loc, divergence=None, mode=mode,
                         draft_step=step, graph=graph)
