"""Interpreted Triton launches remembered by what they read: a launch seen before is not run again.

On CPU, upstream's kernels run in Triton's interpreter, about 14 ms a launch
(measured: 175 launches a gate batch on SGLang 0.5.23, nine tenths of the gate's
time).  Most of them repeat exactly: P1 builds every variant of a batch, P5 and P7
capture and replay it, and the variants differ in a knob the kernel never sees.

A kernel is a function of the memory its arguments point to, their layout, the
numbers it is given and the globals it reads.  The key here is all of that:

* every tensor argument's dtype, shape, strides, storage offset and the bytes of
  its *whole storage* (a kernel may read past its view within the storage), and
  which arguments share a storage;
* every other argument (the grid included) when it is a plain value (``int``,
  ``float``, ``bool``, ``str``, ``None``, a ``torch.dtype``, tuples of them);
* the scalar globals the kernel's function and the ``@triton.jit`` functions it calls
  read (a module constant the adapter sets per build); a function with a closure is not kept;
* the interpreter's options (a recorded replay relaunches with the capture's).

A launch whose key was seen gets the storages the first launch left behind,
written into its own arguments, and does not run.  Anything the key cannot hold
runs as before, uncached: a callable grid or argument, an object, a kernel with
pre-run hooks, a launch that raised.  Only storages a launch changed are kept,
and the whole memo holds at most :data:`BUDGET` bytes (the oldest entries go).

Uninitialised memory would make most keys unique (``torch.empty`` output
buffers hold whatever was there), so :func:`enable` also makes torch fill it
(``torch.utils.deterministic.fill_uninitialized_memory``: NaN, or an integer
dtype's largest value).  A builder that reads memory it never wrote then reads
the same loud value every time, instead of whatever an earlier build left.

The audit is unaffected: it judges a launch by its arguments, around the call
(:func:`metadata_builders.audit.core.kernel_launch`), and the graph recorder keeps
a launch before it runs (:mod:`metadata_builders.audit.triton`'s watchers).
``METADATA_BUILDERS_LAUNCH_MEMO=0`` turns it off; ``tests/core/test_launch_memo.py``
pins what it must not remember.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import types
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, Callable

from metadata_builders import session

__all__ = ["BUDGET", "STATS", "activate_if_wanted", "deactivate", "enable", "enabled", "forget", "run", "want"]

BUDGET = 512 * 2**20
"""Bytes of kept storages at most; the oldest entries are dropped beyond it."""

STATS = {"launches": 0, "hits": 0, "uncacheable": 0}

_ENTRIES: OrderedDict[tuple, tuple[list[bytes | None], Any]] = OrderedDict()
_SIZE = 0
_ENABLED = False
_GLOBALS: dict[int, tuple[tuple[dict, str], ...] | None] = {}
"""Per kernel function (kept alive by its kernel, which the process holds): (its globals, a name) for every scalar
global it or a jit function it calls reads; None when it reads one the key cannot hold."""

_PLAIN = (int, float, bool, str, type(None))


class _Uncacheable(Exception):
    """An argument or a global the key cannot hold: the launch runs, uncached."""


_WANTED = False


def want() -> None:
    """Ask for the memo (a builder whose kernels run interpreted): active inside every harness session from now on.

    It never changes torch outside a session: the session turns torch's flags on
    (deterministic algorithms, uninitialised memory filled) and restores them when it ends
    (:mod:`metadata_builders.session`).  ``METADATA_BUILDERS_LAUNCH_MEMO=0`` turns it off.
    """
    global _WANTED
    if os.environ.get("METADATA_BUILDERS_LAUNCH_MEMO", "1") == "0":
        return
    _WANTED = True
    if session.active():
        activate_if_wanted()


enable = want  # 0.2's name


def activate_if_wanted() -> None:
    """Inside a harness session: the memo on, with torch filling uninitialised memory (restored by the session)."""
    global _ENABLED
    if not _WANTED or _ENABLED:
        return
    now = session.torch_flags()
    session.apply_torch_flags(session.TorchFlags(True, now.warn_only if now.deterministic else True, True))
    _ENABLED = True


def deactivate() -> None:
    """The session ends: launches run as they are (the remembered ones are kept for the next session)."""
    global _ENABLED
    _ENABLED = False


def enabled() -> bool:
    return _ENABLED


@contextlib.contextmanager
def _in_session() -> Iterator[None]:
    activate_if_wanted()
    try:
        yield
    finally:
        deactivate()


session.on_session(_in_session)


def forget() -> None:
    """Drop every remembered launch."""
    global _SIZE
    _ENTRIES.clear()
    _SIZE = 0


def run(launch: Callable[..., Any], kernel: Any, args: tuple, kwargs: dict) -> Any:
    """``launch(kernel, *args, **kwargs)``, or what it did the last time it read exactly this."""
    if not _ENABLED or kwargs.get("warmup"):
        return launch(kernel, *args, **kwargs)
    import torch

    STATS["launches"] += 1
    with torch._C.DisableTorchFunction():
        try:
            key, tensors, before = _key(kernel, args, kwargs)
        except _Uncacheable:
            STATS["uncacheable"] += 1
            return launch(kernel, *args, **kwargs)
        found = _ENTRIES.get(key)
        if found is not None:
            _ENTRIES.move_to_end(key)
            STATS["hits"] += 1
            for t, after in zip(tensors, found[0]):
                if after is not None:
                    _storage_view(t).copy_(torch.frombuffer(bytearray(after), dtype=torch.uint8))
            return found[1]
    out = launch(kernel, *args, **kwargs)
    if isinstance(out, _PLAIN):
        with torch._C.DisableTorchFunction():
            _keep(key, [None if now == was else now for now, was in ((_bytes(t), b) for t, b in zip(tensors, before))],
                  out)
    return out


def _keep(key: tuple, changed: list[bytes | None], out: Any) -> None:
    global _SIZE
    _ENTRIES[key] = (changed, out)
    _SIZE += sum(len(c) for c in changed if c is not None)
    while _SIZE > BUDGET and _ENTRIES:
        _, (dropped, _) = _ENTRIES.popitem(last=False)
        _SIZE -= sum(len(c) for c in dropped if c is not None)


def _key(kernel: Any, args: tuple, kwargs: dict) -> tuple[tuple, list[Any], list[bytes]]:
    """(the launch's key, its tensor arguments in key order, their storages' bytes); raises :class:`_Uncacheable`."""
    if getattr(kernel, "pre_run_hooks", None):
        raise _Uncacheable
    fn = getattr(kernel, "fn", None)
    if not isinstance(fn, types.FunctionType):
        raise _Uncacheable
    tensors: list[tuple[Any, bytes]] = []
    storages: dict[int, int] = {}
    parts: list[Any] = [id(kernel), id(fn.__code__), _options(), _globals_of(fn)]
    for name, value in [(None, a) for a in args] + sorted(kwargs.items()):
        parts.append((name, _part(value, tensors, storages)))
    return tuple(parts), [t for t, _ in tensors], [b for _, b in tensors]


def _part(value: Any, tensors: list[tuple[Any, bytes]], storages: dict[int, int]) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_meta or value.layout != torch.strided:
            raise _Uncacheable
        storage = value.untyped_storage()
        shared = storages.setdefault(storage.data_ptr(), len(tensors))
        data = _bytes(value)
        tensors.append((value, data))
        digest = hashlib.blake2b(data, digest_size=20).digest()
        return ("tensor", str(value.dtype), tuple(value.shape), value.stride(), value.storage_offset(),
                storage.nbytes(), shared, digest)
    if isinstance(value, _PLAIN) or isinstance(value, torch.dtype):
        return (type(value).__name__, value if not isinstance(value, torch.dtype) else str(value))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_part(v, tensors, storages) for v in value))
    plain = getattr(value, "value", _Uncacheable)  # triton's constexpr wraps a plain value
    if type(value).__name__ == "constexpr" and isinstance(plain, _PLAIN):
        return ("constexpr", plain)
    raise _Uncacheable


def _options() -> str:
    import sys

    interpreter = sys.modules.get("triton.runtime.interpreter")
    builder = getattr(interpreter, "interpreter_builder", None)
    return repr(getattr(builder, "options", None))


def _globals_of(fn: types.FunctionType) -> tuple:
    """The values of the scalar globals ``fn`` and the jit functions it calls read, now."""
    if id(fn) not in _GLOBALS:
        _GLOBALS[id(fn)] = _scalar_globals(fn, set())
    reads = _GLOBALS[id(fn)]
    if reads is None:
        raise _Uncacheable
    return tuple((name, repr(space.get(name))) for space, name in reads)


def _scalar_globals(fn: types.FunctionType, seen: set[int]) -> tuple[tuple[dict, str], ...] | None:
    if id(fn) in seen:
        return ()
    seen.add(id(fn))
    reads: list[tuple[dict, str]] = []
    if fn.__closure__:
        return None  # a closure's cells are not in the key
    for name in fn.__code__.co_names:
        if name not in fn.__globals__:
            continue
        value = fn.__globals__[name]
        inner = getattr(value, "fn", None)
        if isinstance(inner, types.FunctionType):  # a @triton.jit function it calls
            nested = _scalar_globals(inner, seen)
            if nested is None:
                return None
            reads += nested
        elif isinstance(value, _PLAIN) or type(value).__name__ == "constexpr":
            reads.append((fn.__globals__, name))
    return tuple(reads)


def _storage_view(t: Any) -> Any:
    import torch

    return torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage())


def _bytes(t: Any) -> bytes:
    storage = t.untyped_storage()
    return _storage_view(t).numpy().tobytes() if storage.nbytes() else b""
