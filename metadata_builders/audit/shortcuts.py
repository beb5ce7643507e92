"""The function level's direct entries: the hottest torch calls reach the audit without torch's mode machinery.

A ``TorchFunctionMode`` costs about 2.5 µs a call before the audit does anything:
torch's C++ looks up the mode, builds the call's types, calls into Python, and
stashes the mode around the handler's own call.  A small build makes about 170
calls, so that floor alone was most of the audit's cost on the small ``bench``
batch.

While an audit is active, the callables named in :data:`SHORTCUTS` are replaced
by thin wrappers.  A wrapper called while the audit's function layer is the
innermost torch-function mode does by hand what torch would have done: it takes
the layer off the mode stack, hands the call (with the *original* callable) to
the layer's ``__torch_function__``, and puts the layer back.  The handler, the
records and the marks are the very same; only torch's own lookup is skipped.
In any other state (no audit, another mode on top, torch functions disabled,
inside a handler, where the mode stack is empty) the wrapper calls the original.

Nothing is lost by what is not here: a callable bound before the audit
(``from torch import arange``), an operator (``a + b``: torch hands the mode
``Tensor.add`` by name, which is the wrapper, mapped back by :func:`original`)
and everything else still reach the layer through the mode, as before.
``tests/core/test_audit.py`` runs every audit test with and without the shortcuts.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F

__all__ = ["SHORTCUTS", "enter", "installed", "leave", "original", "session"]

SHORTCUTS: dict[Any, tuple[str, ...]] = {
    torch.Tensor: (
        "to", "__add__", "__sub__", "reshape", "view", "unsqueeze", "contiguous", "masked_fill", "clamp", "sum",
        "cumsum", "clone", "minimum", "scatter_", "add_", "item", "index_select", "gather",
        "repeat_interleave", "__mul__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__",
    ),
    torch: (
        "arange", "zeros", "full", "empty", "tensor", "zeros_like", "ones_like", "full_like", "where", "cumsum",
        "clamp", "remainder", "div", "minimum", "searchsorted", "repeat_interleave", "cat", "stack", "gather",
        "index_select",
    ),
    F: ("pad",),
}
"""Where (a class or module) and which names get a direct entry: the calls builders make most
(counted over the bundled builder's builds of 30 generated batches and both ``bench`` batches).

Each name costs about 0.3 µs to install and remove (once a :func:`session`), saves about
1.5 µs a call inside an audit, and costs about 0.4 µs a call outside one while a session
keeps it installed: ``tolist`` is left out for that (the harness calls it 22 times a
small build to read the fields, builders almost never).  Left out on purpose: the methods torch hands the mode for an
operator (``add`` for ``x + 1``, ``sub``, ``mul``, ``lt``, ``ge``...: the mode
would receive the wrapper and pay twice).  The operators' own dunders are here
where builders use them (``x + 1``, ``a < b``, ``m & n``): setting a dunder on
``Tensor`` rebuilds its slots, about 4 µs a name, so they pay off once a session
spans a few builds (``bench`` installs them once a round of nine).  Never ``__getitem__``: a Python
``__getitem__`` makes every tensor a sequence to C code, and
``torch.tensor([t[0], t[1]])`` then asks a 0-d tensor for its ``len()``."""
GETTERS: tuple[str, ...] = ("shape", "device")
"""``Tensor`` attributes that get a direct entry too (a property over the original getter)."""

_C = torch._C
_stack_len = _C._len_torch_function_stack
_pop = _C._pop_torch_function_stack
_push = _C._push_on_torch_function_stack
_modes_enabled = _C._is_torch_function_mode_enabled

_NO_KWARGS: dict[str, Any] = {}
_ORIGINALS: dict[Callable, Callable] = {}
"""Each wrapper's original callable."""
_WRAPPERS: dict[tuple[Any, str], Callable] = {}
_OWN: set[tuple[Any, str]] = set()
"""Names their owner holds itself (a module's function); the others a class inherits (``TensorBase.to``)."""
_active: list[tuple[int, Any, Any, dict]] = []
"""The installed layers, innermost last: the mode stack's depth while the layer is the innermost mode,
the layer, its audit and its entries."""
_innermost: tuple[int, Any, Any, dict] | None = None
"""``_active[-1]``, or None: what every wrapper reads first."""


def original(func: Callable) -> Callable:
    """The callable torch would have handed the mode for ``func`` (a wrapper's original; else ``func``)."""
    return _ORIGINALS.get(func, func)


def _wrapper(func: Callable) -> Callable:
    @functools.wraps(func)
    def direct(*args: Any, **kwargs: Any) -> Any:
        if _innermost is not None:
            depth, layer, audit, entries = _innermost
            if _stack_len() == depth and _modes_enabled():  # the layer is the innermost mode
                if audit._suspended:
                    return func(*args, **kwargs)
                entry = entries.get(func) or layer.entry(func)
                handler = entry[0]
                _pop()  # as torch does around a mode's handler: the calls inside are the handler's own
                try:
                    if handler is None:
                        return func(*args, **kwargs)
                    return handler(audit, func, entry[1], args, kwargs or _NO_KWARGS)
                finally:
                    _push(layer)
        return func(*args, **kwargs)

    _ORIGINALS[direct] = func
    return direct


def _prepare() -> None:
    if _WRAPPERS:
        return
    for owner, names in SHORTCUTS.items():
        for name in names:
            _WRAPPERS[owner, name] = _wrapper(getattr(owner, name))
            if name in vars(owner):
                _OWN.add((owner, name))
    for name in GETTERS:  # torch hands the mode the getter's __get__, with the tensor alone
        getter = _wrapper(getattr(torch.Tensor, name).__get__)
        _WRAPPERS[torch.Tensor, name] = property(getter, doc=getattr(torch.Tensor, name).__doc__)
        _ORIGINALS[_WRAPPERS[torch.Tensor, name]] = getattr(torch.Tensor, name)


_installed = False
_sessions = 0
"""Open :func:`session` blocks: while any is open the entries stay installed between audits."""


def _install() -> None:
    global _installed
    if not _installed:
        _prepare()
        for (owner, name), wrapper in _WRAPPERS.items():
            setattr(owner, name, wrapper)
        _installed = True


def _remove() -> None:
    """Put every original back, once no audit and no session needs the entries."""
    global _installed
    if _installed and not _active and not _sessions:
        for (owner, name), wrapper in _WRAPPERS.items():
            if (owner, name) in _OWN:
                setattr(owner, name, _ORIGINALS[wrapper])
            else:
                delattr(owner, name)
        _installed = False


@contextlib.contextmanager
def installed(layer: Any) -> Iterator[None]:
    """The direct entries in place while ``layer`` (just pushed) is a mode; nested audits install them once.

    Only this module ever takes the layer off the mode stack, so the layer is
    the innermost mode exactly while the stack is as deep as when it was pushed.
    """
    enter(layer)
    try:
        yield
    finally:
        leave()


def enter(layer: Any) -> None:
    """:func:`installed`' entry, for a caller that pairs it with :func:`leave` itself (the audit)."""
    global _innermost
    _install()
    _active.append((_stack_len(), layer, layer.audit, layer.entries))
    _innermost = _active[-1]


def leave() -> None:
    """:func:`installed`' exit: the innermost layer's entries gone; torch as found once none is left."""
    global _innermost
    _active.pop()
    _innermost = _active[-1] if _active else None
    _remove()


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Keep the direct entries installed from one audit to the next, for the block; torch as found after it.

    Installing them and taking them off costs more than the calls: every ``setattr`` on
    ``Tensor`` invalidates the method cache of ``Tensor`` and its subclasses, and each
    lookup after it misses (measured: 63 µs an audit around a build that makes no torch
    call, 2.5 µs of ``TorchFunctionMode`` saved a call).  A run of many audited builds
    (a property's examples, a gate batch) installs them once.  Between the audits every
    wrapper calls its original at once (no audit is active), so a call means what it
    means without them.
    """
    global _sessions
    _install()
    _sessions += 1
    try:
        yield
    finally:
        _sessions -= 1
        _remove()
