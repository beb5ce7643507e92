"""Graph replay as a GPU does it, on CPU: record the in-graph work once, re-execute what was recorded.

A CUDA/HIP graph runs no Python at replay: it re-runs the kernels it recorded, on
the storages it recorded.  Upstream splits target verify into two phases, and so
does each family's builder contract (DESIGN.md section 3, P5 and P7; DSV4's below, run by its
``builders.phases``; the DSA family drives its backend's capture and replay the same way):

==================  =====================================  ==========================================
phase               upstream                               here
==================  =====================================  ==========================================
graph state         the graph runner's static buffers      ``graph_state(inputs) -> state``: allocated
                                                           once, outside the graph
out-graph work      ``init_forward_metadata_out_graph``,   ``out_graph(state, inputs) -> Decision``:
                    the runner's ``copy_`` into static     Python before the capture and before every
                    buffers, the raw verify metadata       replay; it may read back what the sync
                                                           contract allows
in-graph work       ``init_forward_metadata_in_graph``     ``in_graph(state, inputs) -> fields``:
                    (materialise from the raw metadata)    recorded at capture, re-executed at replay
==================  =====================================  ==========================================

**Recording.**  :class:`GraphRecorder` is a ``TorchFunctionMode`` pushed *above*
the audit (:class:`~metadata_builders.audit.DeviceAudit`): it sees each torch call
the builder makes, as the builder spelled it, and hands it to the audit below, so
the audit places memory and models the HIP device exactly as in a build.  A call
is device work when it makes or writes device memory; it is kept with its
arguments (the tensors themselves: their storages) and the outputs it made.  Host
work (a host factory, host arithmetic) is not kept: a graph does not capture the
CPU, so what it made stays as it was at capture.  An interpreted Triton launch
(``kernel[grid](...)``, seen through :data:`metadata_builders.audit.triton.WATCHERS`)
is kept as one call with its kernel and arguments, grid and numbers as given at
capture, as a GPU graph keeps a kernel node; the interpreter's own torch calls
inside it are not the builder's and are not kept.  Views are not kept either (no
kernel); they alias what is refreshed.  (It records above the audit, not at the
dispatch level below it: the HIP model's own bookkeeping -- the bounds check of a
device gather reads two numbers back -- runs below the audit and would read as
syncs of the builder; above, a gather is one call, modelled again at every replay.)

**Replaying** (:meth:`RecordedGraph.replay`, run under the replay's audit): each kept
call runs again on the same tensors; the outputs it makes are copied into the
tensors made at capture (``copy_``), in-place calls mutate the recorded tensors
again.  None of the builder's in-graph Python runs.  A host tensor recorded work
reads is read as it is at replay: a staging buffer filled only at capture replays
stale data.  Worked example, ``in_graph`` of a builder that stages a count::

    count = torch.tensor(n)                      host work: not kept, n frozen at capture
    dev = count.to(device, non_blocking=True)    kept: at replay it copies count again (still n)
    out = torch.arange(8, device=device) < dev   kept: re-run, copied into the captured ``out``

**Capture errors and host reads.**  A read of device memory back to the host inside
the recording (``.item()``, ``int(t)``, ``.tolist()``, a device-to-host copy,
``nonzero``, a data-dependent shape, ``repeat_interleave`` without ``output_size``:
whatever the audit records as a host sync) raises
:class:`~metadata_builders.errors.CaptureSync` naming the call, as a GPU refuses to
capture a sync.  A kept call reading a host tensor that is not graph state (reachable
from the state ``graph_state`` returned, when it returned it) is a
:class:`HostRead`: P7 reports it; the capture itself goes on, as on a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from metadata_builders.audit import DeviceAudit, is_device_resident
from metadata_builders.audit import triton as audit_triton
from metadata_builders.audit.residency import _tensors
from metadata_builders.errors import CaptureMismatch, CaptureSync, InvalidMetadata

__all__ = ["GraphRecorder", "HostRead", "RecordedGraph"]

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_HERE = os.path.abspath(__file__).removesuffix("c")
_AUDIT_DIR = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "audit") + os.sep
_bare = torch._C.DisableTorchFunction
"""The recorder's own bookkeeping (storages, write counters, residency) runs outside every torch-function
mode: under the audit's each ``untyped_storage()`` would be a call it audits, most of a capture's time."""
_ALLOCATIONS = frozenset({"torch.empty", "torch.empty_like", "Tensor.new_empty", "torch.empty_strided"})
"""Calls that only allocate: a graph records no kernel for them (what they hold is garbage either way)."""
_FROM_DATA = frozenset({"torch.tensor", "torch.as_tensor"})
"""Factories that copy Python data into device memory: host memory made at capture, read by the copy."""


@dataclass(frozen=True, slots=True)
class HostRead:
    """A kept (in-graph) call that reads host memory which is not graph state (P7).

    ``str()``: ``Tensor.copy_ in in_graph reads host tensor () int64 made by torch.tensor in in_graph
    during capture``.
    """

    op: str
    """The torch call, e.g. ``Tensor.copy_``."""
    stage: str
    """The builder function that made it."""
    tensor: str
    """The host tensor: shape and dtype."""
    origin: str
    """Where that host memory came from."""

    def __str__(self) -> str:
        return f"{self.op} in {self.stage} reads host tensor {self.tensor} {self.origin}"


@dataclass(slots=True)
class _Call:
    """One kept call: what to run again, and where its results go."""

    func: Callable[..., Any]
    args: tuple
    kwargs: dict
    outputs: tuple[torch.Tensor | None, ...]
    """Per tensor the call returned: the captured tensor to copy the new result into (None: an alias)."""
    name: str
    stage: str
    rerun: bool
    """False for an allocation: kept (its tensor is graph memory) but no kernel runs."""


@dataclass
class RecordedGraph:
    """What a capture recorded: the kept calls, the captured fields, the host reads P7 judges."""

    calls: list[_Call]
    fields: dict[str, torch.Tensor]
    """The in-graph work's result at capture: every replay writes into these tensors."""
    not_observable: tuple[str, ...] = ()
    host_reads: list[HostRead] = field(default_factory=list)

    def replay(self) -> None:
        """Re-execute the kept calls on the recorded tensors (run it under the replay's audit)."""
        for call in self.calls:
            if not call.rerun:
                continue
            out = call.func(*call.args, **call.kwargs)
            pairs = [(c, f) for c, f in zip(call.outputs, _tensors(out)) if c is not None and f is not c]
            if not pairs:
                continue
            # A device-to-device copy into the captured tensor (marked device memory since the capture):
            # nothing for the audit to judge, so run bare -- through it, the copies were most of a replay.
            with _bare():
                for captured, fresh in pairs:
                    if fresh.shape != captured.shape:
                        raise CaptureMismatch(f"{call.name} in {call.stage}", tuple(captured.shape),
                                              tuple(fresh.shape))
                    captured.copy_(fresh)


class GraphRecorder(TorchFunctionMode):
    """Records the in-graph work: push it inside ``audit`` (above it), run the work, then :meth:`graph`.

    ``graph_state``: what the builder allocated for the graph; a host tensor reachable
    from it (or from the static inputs) may be read by recorded work.
    """

    def __init__(self, audit: DeviceAudit, graph_state: Iterable[Any] = ()) -> None:
        super().__init__()
        self.audit = audit
        self.calls: list[_Call] = []
        self.host_reads: list[HostRead] = []
        self._graph_state = {_storage(t) for t in _reachable(list(graph_state))}
        self._made: dict[int, str] = {}
        """Host storage -> how it was made or filled during the recording."""
        self._launching = 0
        """Inside an interpreted Triton launch: its own torch calls (host copies) are not the builder's."""

    def __enter__(self) -> GraphRecorder:
        audit_triton.WATCHERS.append(self._launch)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        audit_triton.WATCHERS.remove(self._launch)

    @contextlib.contextmanager
    def _launch(self, kernel: Any, args: tuple, kwargs: dict) -> Iterator[None]:
        """An interpreted Triton launch while recording: kept as one call, re-launched on the same arguments.

        A GPU graph records the kernel with its arguments (pointers and the numbers
        given at capture) and re-runs it on whatever those storages hold at replay.
        Every tensor argument may be read, so one that is host memory and not graph
        state is a :class:`HostRead`.
        """
        self._launching += 1
        try:
            yield
        finally:
            self._launching -= 1
        if self._launching:
            return
        stage = _stage(_launch_frames())
        name = f"launch {_kernel_name(kernel)}" if getattr(kernel, "launch_name", None) else \
            f"triton {_kernel_name(kernel)}"
        again = functools.partial(_launch_again, kernel, _interpreter_options())
        self.calls.append(_Call(again, args, dict(kwargs), (), name, stage, True))
        with _bare():
            for t in _tensors((args, kwargs)):
                self._host_read(name, stage, t)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if self._launching:
            return func(*args, **kwargs)
        with _bare():
            tensors = list(_tensors((args, kwargs)))
            versions = [_version(t) for t in tensors]
        syncs = len(self.audit.host_syncs)
        out = func(*args, **kwargs)
        if len(self.audit.host_syncs) > syncs:
            read = self.audit.host_syncs[syncs]
            raise CaptureSync(_name(func), _stage(), read.kind, read.reads)
        with _bare():
            written = [t for t, v in zip(tensors, versions) if _version(t) != v]
            outputs = list(_tensors(out))
            if outputs or written:
                self._keep(func, args, kwargs, tensors, outputs, written)
        return out

    def _keep(self, func: Callable, args: tuple, kwargs: dict, tensors: list[torch.Tensor],
              outputs: list[torch.Tensor], written: list[torch.Tensor]) -> None:
        name = _name(func)
        if not any(is_device_resident(t) for t in (*outputs, *written)):
            where = _stage()
            for t in (*outputs, *written):  # host work: not kept; remember where the memory came from
                how = "filled" if any(t is w for w in written) else "made"
                self._made.setdefault(_storage(t), f"{how} by {name} in {where}")
            return
        arguments = {_storage(t) for t in tensors}
        copies = tuple(None if t.numel() == 0 or _storage(t) in arguments else t for t in outputs)
        if not written and all(c is None for c in copies):
            return  # a view of device memory: no kernel, it aliases what is refreshed
        stage = _stage()
        self.calls.append(_Call(func, args, kwargs, copies, name, stage, name not in _ALLOCATIONS))
        for t in tensors:
            self._host_read(name, stage, t)
        if name in _FROM_DATA and not isinstance(args[0] if args else None, torch.Tensor):
            self.host_reads.append(HostRead(name, stage, "of Python data", "made during capture"))

    def _host_read(self, name: str, stage: str, t: torch.Tensor) -> None:
        """Note ``t`` if it is host memory that is not graph state, read by the kept call ``name``."""
        if not is_device_resident(t) and _storage(t) not in self._graph_state:
            origin = self._made.get(_storage(t))
            origin = f"{origin} during capture" if origin else "that is not graph state"
            self.host_reads.append(HostRead(name, stage, _describe(t), origin))

    def graph(self, fields: Mapping[str, Any], not_observable: Iterable[str] = ()) -> RecordedGraph:
        """The recording, with the in-graph work's ``fields`` (name -> the tensor it made) and the fields it cannot
        observe."""
        for name, value in fields.items():
            if not isinstance(value, torch.Tensor):
                raise InvalidMetadata(f"fields[{name!r}]", "a tensor (in-graph work makes device memory)",
                                      type(value).__name__)
        return RecordedGraph(list(self.calls), dict(fields), tuple(not_observable), list(self.host_reads))



# -- helpers ------------------------------------------------------------------------------------------


def _reachable(obj: Any, depth: int = 4) -> Iterator[torch.Tensor]:
    """Tensors held by ``obj``: in lists, tuples, dicts, dataclass fields and attributes, ``depth`` levels down."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth == 0 or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for x in obj:
            yield from _reachable(x, depth - 1)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _reachable(x, depth - 1)
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            yield from _reachable(getattr(obj, f.name, None), depth - 1)
    elif hasattr(obj, "__dict__"):
        for x in vars(obj).values():
            yield from _reachable(x, depth - 1)


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _version(t: torch.Tensor) -> int:
    """The tensor's write counter (bumped by every in-place write, through any view): how a write is seen."""
    try:
        return t._version
    except RuntimeError:  # an inference tensor keeps none
        return -1


def _describe(t: torch.Tensor) -> str:
    return f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"


def _name(func: Callable) -> str:
    name = getattr(func, "__name__", repr(func))
    qual = getattr(func, "__qualname__", "")
    if qual.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", None) or "torch"
    return f"{'F' if module == 'torch.nn.functional' else 'torch'}.{name}"


def _stage(skip: tuple[str, ...] = ()) -> str:
    """The innermost builder function on the stack (outside torch, the audit, this module and ``skip``)."""
    frame = sys._getframe(1)
    prefixes = (_TORCH_DIR, _AUDIT_DIR, *skip)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith(prefixes) or filename == _HERE):
            return frame.f_code.co_name
        frame = frame.f_back
    return "<unknown>"


def _launch_frames() -> tuple[str, ...]:
    """Files between a Triton launch and the builder line that made it: triton's, contextlib, the audit's wrapper."""
    triton = sys.modules.get("triton")
    triton_dir = os.path.dirname(os.path.abspath(triton.__file__)) if triton is not None else _HERE
    return (triton_dir, contextlib.__file__.removesuffix("c"), audit_triton.__file__.removesuffix("c"))


def _interpreter_options() -> tuple[Any, Any] | None:
    """The interpreter's builder and its options now (None: no interpreter loaded)."""
    interpreter = sys.modules.get(audit_triton.INTERPRETER_MODULE)
    builder = getattr(interpreter, "interpreter_builder", None)
    return None if builder is None else (builder, builder.options)


def _launch_again(kernel: Any, options: tuple[Any, Any] | None, *args: Any, **kwargs: Any) -> Any:
    """Re-launch an interpreted Triton kernel through its class's ``run`` as installed now (the replay's audit).

    With the compile options it was launched with at capture (``options``): a GPU
    graph keeps the compiled kernel, so a replay outside the builder's own
    settings (the adapter turns the interpreter's overflow asserts off, as a GPU
    build compiles them out) runs it as it was recorded.
    """
    if options is None:
        return type(kernel).run(kernel, *args, **kwargs)
    builder, recorded = options
    now = builder.options
    builder.options = recorded
    try:
        return type(kernel).run(kernel, *args, **kwargs)
    finally:
        builder.options = now


def _kernel_name(kernel: Any) -> str:
    if getattr(kernel, "launch_name", None):
        return kernel.launch_name
    fn = getattr(kernel, "fn", kernel)
    return getattr(fn, "__name__", None) or type(kernel).__name__
