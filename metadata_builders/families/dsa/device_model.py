"""The family's device model: ``seqlens_expand_kernel``'s stores as a GPU performs them, modelled before any
store is made, so an out-of-bounds write never happens in the harness's process.

Upstream's ``seqlens_expand_triton`` (P:359-390) allocates ``torch.empty(total_len)`` from the **host** total
and its kernel stores each row at the **device** offset ``cumsum(extend_seq_lens)[b]`` with only the mask
``offs < qo_len``: no bound against the output.  Device lengths summing above the total write past the buffer
(on a GPU a memory fault, or silent corruption of a neighbour; on CPU through the Triton interpreter the
research prototype corrupted its own heap); summing below leave the tail uninitialised.

A kernel hands its stores to :func:`launch`'s ``store`` instead of writing them itself.  Inside the launch the
core audit is suspended (:func:`~metadata_builders.audit.kernel_launch`: the model's reads of device values are
the harness's bookkeeping, not the builder's syncs); ``store`` writes what lands inside the output, counts what
would land past it (never written), and when the launch ends the model reports each fault to every active
audit (:func:`~metadata_builders.audit.kernel_fault`) with its count, and records the launch
(:class:`ExpandLaunch`) for P3 and P6.  Worked example (the prototype's, ``N = 3``, ``seq_lens [8, 6]``)::

    device lengths [3, 4], host total 6:  stores [6, 7, 8, 3, 4, 5]; 1 store past the buffer -> oob_write 1
    device lengths [3, 2], host total 6:  stores [6, 7, 8, 5, 6, .] -> uninitialized_tail 1

**Core hook.**  Upstream's kernel is a Triton launch; the core audit's launch watch
(:mod:`metadata_builders.audit.triton`) can wrap a launch but not replace it.  An adapter running upstream's
``seqlens_expand_triton`` must not run the real launch on diverged lengths: the adapter binds
:func:`~metadata_builders.families.dsa.adapter.loading.guarded_seqlens_expand` in its place, which runs the
bundled kernel (this model) when a store would land past the output, upstream's own otherwise, and
:func:`report` s every launch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from metadata_builders.errors import MetadataBuildersError

if TYPE_CHECKING:
    import torch

__all__ = ["EXPAND_OP", "ExpandLaunch", "launch", "recording", "report"]

EXPAND_OP = "seqlens_expand_kernel"
"""The kernel the family's fault records name (upstream's Triton kernel, P:327)."""


@dataclass(frozen=True, slots=True)
class ExpandLaunch:
    """One launch of a store-unbounded kernel, as the model saw it."""

    op: str
    """The kernel (``seqlens_expand_kernel``)."""
    stage: str
    """The builder function that launched it (the innermost frame outside this module and torch)."""
    output_size: int
    """The output's elements: what the host total allocated."""
    device_sum: int
    """What the device offsets say the rows need (``offsets[n]``): the size a device-synced allocation takes."""
    stored: int
    """Stores that landed inside the output."""
    oob_writes: int
    """Stores that would have landed past the output: modelled and counted, never written."""
    uninitialized: int
    """Entries of the output no store reached (a fresh ``torch.empty``: garbage a consumer reads)."""


_RECORDERS: list[list[ExpandLaunch]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[ExpandLaunch]]:
    """Collect every modelled launch made while the block runs (the family's audited wrapper, per build)."""
    launches: list[ExpandLaunch] = []
    _RECORDERS.append(launches)
    try:
        yield launches
    finally:
        _RECORDERS.remove(launches)


class UnrecordedFault(MetadataBuildersError, RuntimeError):
    """A modelled out-of-bounds store with no audit active to record it: never passes silently."""

    def __init__(self, op: str, count: int) -> None:
        self._data(op, None, "an active audit to record the fault", count)
        super().__init__(f"{op}: {count} stores past its output with no audit to record them")


@contextlib.contextmanager
def launch(op: str, output: torch.Tensor, arguments: Any, *, device_sum: Callable[[], int],
           fresh_output: bool = True) -> Iterator[Callable[[torch.Tensor, torch.Tensor], None]]:
    """Run a kernel body that stores into ``output`` only through the yielded ``store(index, values)``.

    ``device_sum``: how many elements the device lengths need (read inside the launch); ``fresh_output``: the
    output was just allocated (``torch.empty``), so unreached entries are uninitialised.
    """
    from metadata_builders.audit import kernel_launch
    from metadata_builders.families.dsa import transfers

    stage = _stage()
    reached: list[torch.Tensor] = []
    counts = {"stored": 0, "oob": 0}
    flat = output.view(-1)

    def store(index: torch.Tensor, values: torch.Tensor) -> None:
        index = index.reshape(-1).to(flat.device)
        inside = index < flat.numel()
        counts["oob"] += int((~inside).sum())
        flat[index[inside]] = values.reshape(-1)[inside].to(flat.dtype)
        counts["stored"] += int(inside.sum())
        reached.append(index[inside])

    with kernel_launch((output, arguments)), transfers.paused():
        yield store
        needed = int(device_sum())
        covered = _distinct(reached, flat)
    report(ExpandLaunch(op, stage, flat.numel(), needed, counts["stored"], counts["oob"],
                         flat.numel() - covered if fresh_output else 0))


def _distinct(reached: list[torch.Tensor], flat: torch.Tensor) -> int:
    import torch

    if not reached:
        return 0
    return int(torch.unique(torch.cat(reached)).numel())


def report(record: ExpandLaunch) -> None:
    """Record one launch for every active recorder, and its faults for every active audit (an adapter running
    upstream's own kernel reports what the model says it did)."""
    from metadata_builders.audit import kernel_fault

    for launches in _RECORDERS:
        launches.append(record)
    for kind, count in (("oob_write", record.oob_writes), ("uninitialized_tail", record.uninitialized)):
        recorded = not count or kernel_fault(kind, count, record.op, output_size=record.output_size,
                                             device_sum=record.device_sum)
        if not recorded and kind == "oob_write":
            raise UnrecordedFault(record.op, count)


def _stage() -> str:
    """The innermost function outside this module, the kernels' module, contextlib and torch."""
    import os
    import sys

    skip = (os.path.abspath(__file__).removesuffix("c"), contextlib.__file__.removesuffix("c"))
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        inside = name in skip or f"{os.sep}torch{os.sep}" in name or frame.f_code.co_name == "seqlens_expand_kernel"
        if not inside:
            return frame.f_code.co_name
        frame = frame.f_back
    return "<unknown>"
