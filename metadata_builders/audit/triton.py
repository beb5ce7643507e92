"""Interpreted Triton launches, as the audit sees them from any builder.

Under ``TRITON_INTERPRET=1`` a launch ``kernel[grid](x, out, n)`` runs on the
host: the interpreter copies every tensor argument's storage to the host,
runs the kernel there and copies the storages back.  A GPU launch does none of
that, so those copies are not reads of the code under test.  What the launch
does do is write: ``out`` now holds values computed from ``x``, so a later
read of ``out`` must be attributed to what ``x`` depends on.

Worked example (a builder of its own, not upstream's)::

    out = torch.empty_like(x)            # device memory, depends on nothing
    _double_kernel[(1,)](x, out, 3)      # the interpreter copies x and out to the host and back
    out.sum().item()                     # one read, of the input x came from

While a :class:`~metadata_builders.audit.DeviceAudit` is active, and only if the
builder itself already imported Triton's interpreter (this module never imports
triton), :func:`interpreted_launches` wraps ``InterpretedFunction.run`` -- the
entry point every interpreted launch goes through (``kernel[grid](...)``,
autotuners and heuristics included) -- so the launch runs inside the audit's
``kernel_launch``: audit suspended, then every tensor argument inherits what any
of them read.  Nested audits install it once; it is removed when the last one
exits, restoring whatever ``run`` was before (a test's counting wrapper too).

Others may watch the same launches (:data:`WATCHERS`): the graph recorder keeps each
launch inside a capture as one op, re-launched on the same arguments at every replay.

Not covered: a builder that first imports triton *inside* an audited build
(its first build's launches are seen as the interpreter's host copies, i.e. as
reads: loud, never silent); compiled launches on a GPU (no host copies there;
``ci/gpu_checks.py`` runs the sync-debug mode).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager
from typing import Any

from metadata_builders.audit import launch_memo

__all__ = ["INTERPRETER_MODULE", "WATCHERS", "interpreted_launches", "unwatch_launches", "watch_launches",
           "watched"]

INTERPRETER_MODULE = "triton.runtime.interpreter"
"""Where ``InterpretedFunction`` lives; looked up in ``sys.modules``, never imported."""

_LOCK = threading.Lock()
_DEPTH = 0
_INSTALLED: tuple[type, Any, Callable[..., Any]] | None = None
"""(class, what ``run`` was before, our wrapper) while installed."""


WATCHERS: list[Callable[[Any, tuple, dict], ContextManager[None]]] = []
"""Who else sees each interpreted launch while the audit's wrapper is installed: each entry is called
with (the kernel, its positional and keyword arguments) and the launch runs inside what it returns.
The graph recorder (:mod:`metadata_builders.harness.graph_recorder`) keeps a launch as one recorded op so."""


@contextlib.contextmanager
def watched(kernel: Any, args: tuple, kwargs: dict) -> Iterator[None]:
    """Run a launch of ``kernel`` inside every watcher's context: ``type(kernel).run(kernel, *args, **kwargs)``
    must launch it again (a kernel the adapter models on CPU enters here too, as one launch)."""
    with contextlib.ExitStack() as stack:
        for watcher in list(WATCHERS):
            stack.enter_context(watcher(kernel, args, kwargs))
        yield


def _wrap(run: Callable[..., Any], launch: Callable[[Any], ContextManager[None]]) -> Callable[..., Any]:
    def run_audited(self: Any, *args: Any, **kwargs: Any) -> Any:
        if WATCHERS and not kwargs.get("warmup"):
            with watched(self, args, kwargs), launch((args, kwargs)):
                return launch_memo.run(run, self, args, kwargs)
        with launch((args, kwargs)):
            return launch_memo.run(run, self, args, kwargs)

    run_audited.__name__ = run_audited.__qualname__ = "run"
    run_audited.__wrapped__ = run  # type: ignore[attr-defined]
    return run_audited


def _install(launch: Callable[[Any], ContextManager[None]]) -> None:
    global _INSTALLED
    interpreter = sys.modules.get(INTERPRETER_MODULE)
    cls = getattr(interpreter, "InterpretedFunction", None)
    if not isinstance(cls, type) or not callable(getattr(cls, "run", None)):
        return
    before = cls.__dict__.get("run")
    wrapper = _wrap(cls.run, launch)
    cls.run = wrapper
    _INSTALLED = (cls, before, wrapper)


def _remove() -> None:
    global _INSTALLED
    if _INSTALLED is None:
        return
    cls, before, wrapper = _INSTALLED
    _INSTALLED = None
    if cls.__dict__.get("run") is not wrapper:
        return  # someone patched run over ours since; leave theirs in place
    if before is None:
        del cls.run
    else:
        cls.run = before


@contextlib.contextmanager
def interpreted_launches(launch: Callable[[Any], ContextManager[None]]) -> Iterator[None]:
    """For the block, run every interpreted Triton launch inside ``launch((args, kwargs))``.

    ``launch`` is the audit's ``kernel_launch``; passed in, so this module
    imports nothing of the audit.  A no-op when the interpreter is not loaded.
    """
    watch_launches(launch)
    try:
        yield
    finally:
        unwatch_launches()


def watch_launches(launch: Callable[[Any], ContextManager[None]]) -> None:
    """:func:`interpreted_launches`' entry, for a caller that pairs it with :func:`unwatch_launches` itself
    (the audit, once a build: a generator's frame there costs more than the rest)."""
    global _DEPTH
    with _LOCK:
        _DEPTH += 1
        if _INSTALLED is None:
            _install(launch)


def unwatch_launches() -> None:
    """:func:`interpreted_launches`' exit: the last one out puts ``run`` back."""
    global _DEPTH
    with _LOCK:
        _DEPTH -= 1
        if _DEPTH == 0:
            _remove()
