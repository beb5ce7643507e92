"""Sync audit and HIP device model, applied *around* any builder.

:class:`DeviceAudit` watches a build at two levels of torch, so it sees every
read of device data whatever the Python spelling and whoever wrote the builder
(ours, an installed SGLang, a user's, a subclass of anything):

* the **function** level (a ``TorchFunctionMode``) sees every call: the reads that
  never reach the dispatcher on CPU (``tolist``, ``cpu``, ``numpy``,
  ``np.asarray(t)``, ``str(t)``, ``f"{t}"``, ``torch.tensor([t[0], t[1]])``), and
  every call it can vouch for from its arguments alone -- elementwise ops, views,
  reductions, ``.to``, factories, ``x[i]``, gathers, token maps, ``item()`` --
  handled as the dispatch level would have (:mod:`.calls`, :mod:`.function_level`);
* the **dispatch** level (a ``TorchDispatchMode``), pushed around every other call,
  sees its aten ops: ``aten._local_scalar_dense`` (``int()``, ``bool()``, ``0 in t``,
  a slice bound ``x[:t.sum()]``, ``torch.arange(t.sum())``, ``torch.empty(t.sum())``,
  ``t.new_zeros(t.sum())``, ``t.expand(t.sum())``), device-to-host ``copy_``, and ops
  whose output shape depends on device data (``nonzero`` -- also behind
  ``torch.where(mask)`` --, ``unique``, ``masked_select``, boolean-mask indexing,
  ``bincount``, and ``repeat_interleave`` without ``output_size``).  Watching every op
  from it would cost about 10 µs an op, more than a small build's ops themselves.

Each read becomes one :class:`~metadata_builders.records.SyncRecord`: the
Python-level op, its kind (``scalar``, ``copy`` or ``shape``), the builder
function that did it, and which harness inputs the value depends on.

**The device is not the host, also on CPU.**  On a GPU a tensor's device says
where it lives.  On CPU the audit marks residency on the tensor object, and the
device has a name of its own: :data:`DEVICE`, ``cpu:0``.  The harness's inputs
are device-resident, and so is anything computed from one; each reports
``.device == DEVICE`` while the audit runs.  A builder's factory gets
:data:`DEVICE_NAME` (``"cpu:0"``) as its ``device``, which survives
``torch.device(...)`` and ``str(...)``.  So the spelling says where memory
goes, as on a GPU: ``x.to(inputs.seq_lens.device)``, ``x.to(self.device)`` and
``torch.empty(n, device=self.device)`` are the device; ``x.to("cpu")``,
``x.to(torch.device("cpu"), non_blocking=True)``, ``x.to(device="cpu",
dtype=...)``, ``host.copy_(x)``, ``.cpu()``, ``.tolist()``, ``.numpy()``,
``.item()`` and ``int(x)`` of a device tensor are reads, and a factory without
``device=``, with ``device="cpu"`` or with ``pin_memory`` is host memory.

**The HIP device model.**  ``repeat_interleave(..., output_size=n)`` gets HIP
semantics: no check.  Repeats summing to ``S > n`` write ``S - n`` elements out
of bounds (``oob_write``; the kernel keeps the first ``n``), ``S < n`` leave
``n - S`` uninitialised (``uninitialized_tail``; modelled as zeros).  A gather
(``index``, ``index_select``, ``gather``) from device memory past the end of a
dimension reads out of bounds (``oob_read``; modelled as ``-1``, where CPU torch
would raise ``IndexError``).  A **divergence** is delivered to every asynchronous
(``non_blocking``) host-to-device copy of the extend lengths the harness names:
the device receives what the divergence says, exactly as a stale or in-flight
copy would deliver it, so a builder is judged on what it does with device memory.

The rooms: :mod:`.residency` (where memory lives, what it was computed from),
:mod:`.core` (:class:`DeviceAudit`, the dispatch level, the records),
:mod:`.function_level` (every call, handled or sent to the dispatch level),
:mod:`.shortcuts` (the hottest calls' direct entry into the function level, past torch's mode machinery),
:mod:`.calls` (what a call is, whether its arguments can be vouched for),
:mod:`.gathers` (the HIP model's gathers and token maps, at the function level),
:mod:`.placement` (reads down, copies up, device factories),
:mod:`.device_model` (the HIP model's kernels; ``sync_debug_mode``),
:mod:`.streams` (asynchronous copies as a stream orders them: a pinned source rewritten before a sync).
"""

from __future__ import annotations

from metadata_builders.audit.core import DeviceAudit, auditing, kernel_fault, kernel_launch
from metadata_builders.audit.device_model import OOB_READ_VALUE, sync_debug_mode
from metadata_builders.audit.residency import DEVICE, DEVICE_NAME, device_handle, is_device_resident

__all__ = [
    "DEVICE",
    "DEVICE_NAME",
    "OOB_READ_VALUE",
    "DeviceAudit",
    "auditing",
    "device_handle",
    "is_device_resident",
    "kernel_fault",
    "kernel_launch",
    "sync_debug_mode",
]
