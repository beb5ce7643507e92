"""What the harness hands a DSA builder: upstream's ``forward_batch`` fields and the backend's constants.

A builder never sees a :class:`~metadata_builders.families.dsa.batch.DSABatch`.  The harness -- like
SGLang's model runner calling ``init_forward_metadata`` -- turns the batch into device tensors, the host
mirror (or None, per the variant's ``mirror``) and the constants, marks the device tensors for the audit
(:meth:`DSAInputs.mark`), applies the batch's divergence to them, and snapshots them for P8.  The record is
mutable, as upstream's ``forward_batch`` is: upstream stores some of the caller's host fields
(``extend_seq_lens_cpu``, :data:`~metadata_builders.families.dsa.fields.CALLER_WRITES`).

Worked example (the family's batch, eager draft extend, mirror absent, ``N = 3``)::

    seq_lens                tensor([8, 6])            the caller's: the prefix plus the N drafts written
    req_pool_indices        tensor([2, 1])
    extend_seq_lens         tensor([3, 3], int32)     device; the divergence's lengths when injected
    extend_prefix_lens      tensor([5, 3], int32)     device
    seq_lens_cpu            None                      mirror given: tensor([8, 6]) on the host
    extend_seq_lens_cpu     [3, 3]                    always given in draft extend (upstream asserts it)
    extend_prefix_lens_cpu  None                      mirror given: [5, 3]

On the graph path the graph runner (:mod:`.runner`) makes the inputs: views of its max-size buffers,
pad rows ``seq_len`` 1 on slot 0, refilled in place before each replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from metadata_builders.families.dsa.variants import check_variant

if TYPE_CHECKING:
    import torch

    from metadata_builders.families.dsa.batch import DSABatch
    from metadata_builders.families.dsa.runner import DSARunner
    from metadata_builders.families.dsa.variants import DSAVariant

__all__ = ["DEVICE_INPUTS", "HOST_INPUTS", "DSAInputs", "host_values", "make_inputs"]

DEVICE_INPUTS = ("seq_lens", "req_pool_indices", "out_cache_loc", "req_to_token", "extend_seq_lens",
                 "extend_prefix_lens")
"""The device tensors of :class:`DSAInputs`, each marked for the audit under its name."""

HOST_INPUTS = ("seq_lens_cpu", "seq_lens_sum", "extend_seq_lens_cpu", "extend_prefix_lens_cpu")
"""The caller's host values a build may read (and, per :data:`~.fields.CALLER_WRITES`, write)."""


@dataclass(slots=True, eq=False)
class DSAInputs:
    """One ``init_forward_metadata`` (or out-graph) call's arguments, made by the harness."""

    seq_lens: torch.Tensor
    """(rows,) int64, device: ``forward_batch.seq_lens`` in the caller's units; graph pad rows hold 1."""
    req_pool_indices: torch.Tensor
    """(rows,) int64, device: request slots; graph pad rows hold slot 0."""
    out_cache_loc: torch.Tensor
    """(rows * step_tokens,) int64, device: where the caller allocated the step's tokens (zero for pads)."""
    req_to_token: torch.Tensor
    """(num_slots, width) int32, device: the backend's ``req_to_token_pool.req_to_token``."""
    extend_seq_lens: torch.Tensor | None
    """(rows,) int32, device: draft extend's extend lengths (the divergence's when injected); else None."""
    extend_prefix_lens: torch.Tensor | None
    """(rows,) int32, device: draft extend's prefixes; else None."""
    seq_lens_cpu: torch.Tensor | None
    """(rows,) int64, host: the caller's mirror of ``seq_lens`` (stale when injected); None without one."""
    seq_lens_sum: int | None
    """The caller's ``forward_batch.seq_lens_sum``: the mirror's sum, None without a mirror."""
    extend_seq_lens_cpu: list[int] | None
    """(rows,): draft extend's host extend lengths ``[N] * rows``; None elsewhere (target verify stores it)."""
    extend_prefix_lens_cpu: list[int] | None
    """(rows,): draft extend's host prefixes with the mirror; None without."""
    batch_size: int
    """``forward_batch.batch_size``: rows (the padded ``bs`` on the graph path)."""
    num_draft_tokens: int
    """The backend's ``speculative_num_draft_tokens``."""
    page_size: int
    """The backend's ``physical_page_size``."""
    index_topk: int
    """The backend's ``dsa_index_topk``."""
    mode: str
    """``forward_batch.forward_mode`` as a family mode (idle replays decode's bucket)."""
    variant: DSAVariant
    """The recipe: path, mirror, route (the builder reads the route; upstream reads ``_is_hip``)."""
    draft_step: int | None = None
    """Draft decode: the child of the multi-step backend whose metadata the harness judges."""
    runner: DSARunner | None = None
    """On the graph path: the runner whose backend state (``runner.shared``) the builder keeps; None eager."""
    in_capture: bool = False
    """Graph path: this out-graph call is the capture's (upstream's ``in_capture`` argument)."""

    @property
    def device(self) -> torch.device:
        """Where device memory goes (the inputs' device; ``cpu:0`` under the CPU audit)."""
        return self.seq_lens.device

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every device input by name (those present)."""
        out = {name: getattr(self, name) for name in DEVICE_INPUTS}
        return {name: t for name, t in out.items() if t is not None}

    def mark(self) -> None:
        """Mark every device input device-resident for the audit, under its name (as the core's builder wrapper
        does before each audited call)."""
        from metadata_builders.audit import DeviceAudit

        for name, t in self.tensors().items():
            DeviceAudit.mark_input(t, name)

    def snapshot(self) -> dict[str, Any]:
        """Copies of every input (P8): clones of the tensors, copies of the host values."""
        snap: dict[str, Any] = {name: t.clone() for name, t in self.tensors().items()}
        for name in HOST_INPUTS:
            value = getattr(self, name)
            snap[name] = value.clone() if hasattr(value, "clone") else (list(value) if isinstance(value, list)
                                                                           else value)
        return snap

    def changes_since(self, snapshot: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
        """Inputs that differ from ``snapshot``: name -> (before, after), as plain values."""
        import torch

        changed: dict[str, tuple[Any, Any]] = {}
        for name, before in snapshot.items():
            after = getattr(self, name)
            if isinstance(before, torch.Tensor) or isinstance(after, torch.Tensor):
                same = (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor)
                        and before.shape == after.shape and before.dtype == after.dtype and torch.equal(before, after))
            else:
                same = before == after
            if not same:
                changed[name] = (_plain(before), _plain(after))
        return changed


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def host_values(batch: DSABatch, variant: DSAVariant, rows: int) -> dict[str, Any]:
    """The caller's host side for ``rows`` rows (pads hold 1): the mirror (or None), its sum, draft extend's lists."""
    import torch

    pads = rows - batch.bs
    mirror = list(batch.host_mirror) + [1] * pads if variant.mirror == "given" else None
    draft_extend = batch.mode == "draft_extend"
    return {
        "seq_lens_cpu": None if mirror is None else torch.tensor(mirror, dtype=torch.int64),
        "seq_lens_sum": None if mirror is None else sum(mirror),
        "extend_seq_lens_cpu": [batch.num_draft_tokens] * rows if draft_extend else None,
        "extend_prefix_lens_cpu": list(batch.seq_lens) + [1] * pads if draft_extend and mirror is not None
        else None,
    }


def make_inputs(batch: DSABatch, variant: DSAVariant, device: str | torch.device) -> DSAInputs:
    """The eager call's arguments for ``batch`` on ``device``, marked for the audit (the graph path's come from
    :class:`~metadata_builders.families.dsa.runner.DSARunner`)."""
    import torch

    check_variant(batch, variant)
    if variant.path != "eager":
        raise ValueError("make_inputs makes an eager call's inputs; a graph runner makes the graph path's")
    draft_extend = batch.mode == "draft_extend"

    def dev(values: Any, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=device)

    inputs = DSAInputs(
        seq_lens=dev(list(batch.caller_seq_lens), torch.int64),
        req_pool_indices=dev(list(batch.req_pool_indices), torch.int64),
        out_cache_loc=dev(list(batch.out_cache_loc), torch.int64),
        req_to_token=dev([list(r) for r in batch.req_to_token], torch.int32),
        extend_seq_lens=dev(list(batch.device_extend_seq_lens), torch.int32) if draft_extend else None,
        extend_prefix_lens=dev(list(batch.seq_lens), torch.int32) if draft_extend else None,
        batch_size=batch.bs, num_draft_tokens=batch.num_draft_tokens, page_size=batch.page_size,
        index_topk=batch.index_topk, mode=batch.mode, variant=variant, draft_step=batch.draft_step,
        **host_values(batch, variant, batch.bs),
    )
    inputs.mark()
    return inputs

