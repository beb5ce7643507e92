"""One harness session: every process-wide switch the harness turns, installed once and restored on exit.

The harness changes process-wide state for speed and determinism: the audit's
direct entries on ``torch.Tensor`` (:mod:`metadata_builders.audit.shortcuts`), the
launch memo's torch flags (deterministic algorithms, uninitialised memory filled:
:mod:`metadata_builders.audit.launch_memo`), Hypothesis' home directory for ``check``
(its caches go in ``.metadata-builders/``).  Inside someone else's pytest session
none of that may leak: after a ``check``, a plugin test, a gate batch or a single
``build``, torch and Hypothesis are as they were.

So every entry point runs inside :func:`harness_session`, and sessions nest: the
outermost installs, the innermost does nothing, the outermost restores.  Worked
example: ``check --builder sglang`` opens one session per property run; the
SGLang builder asks for the launch memo (``launch_memo.want()``) when it is made,
so the session turns torch's deterministic algorithms on; a ``build()`` inside is
a nested session (nothing to do); when the run ends the flags are back to what
the user had, ``tests/core/test_session.py`` checks.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["active", "apply_torch_flags", "harness_session", "on_session", "torch_flags"]

_LOCK = threading.RLock()
_DEPTH = 0
_HOOKS: list[Callable[[], contextlib.AbstractContextManager[Any]]] = []


def on_session(part: Callable[[], contextlib.AbstractContextManager[Any]]) -> None:
    """Enter ``part()`` whenever an outermost session opens, exit it when the session closes.

    How a room with a switch of its own joins the session without the session knowing it:
    the audit registers its direct entries, the launch memo its torch flags, each on import.
    """
    if part not in _HOOKS:
        _HOOKS.append(part)


@dataclass(frozen=True, slots=True)
class TorchFlags:
    """The torch switches the harness may turn: deterministic algorithms (and warn-only), uninitialised fill."""

    deterministic: bool
    warn_only: bool
    fill_uninitialized_memory: bool


def torch_flags() -> TorchFlags:
    """torch's switches as they are now."""
    import torch

    return TorchFlags(torch.are_deterministic_algorithms_enabled(),
                      torch.is_deterministic_algorithms_warn_only_enabled(),
                      bool(torch.utils.deterministic.fill_uninitialized_memory))


def _set_torch_flags(flags: TorchFlags) -> None:
    import torch

    torch.use_deterministic_algorithms(flags.deterministic, warn_only=flags.warn_only)
    torch.utils.deterministic.fill_uninitialized_memory = flags.fill_uninitialized_memory


def active() -> bool:
    """A harness session is open in this process."""
    return _DEPTH > 0


def apply_torch_flags(flags: TorchFlags) -> None:
    """Set torch's switches for the rest of the open session (restored when it ends); a no-op outside one."""
    if _DEPTH:
        _set_torch_flags(flags)


@contextlib.contextmanager
def harness_session(*, hypothesis_home: str | None = None) -> Iterator[None]:
    """Install the harness's process-wide switches for the block; restore every one when the outermost ends.

    ``hypothesis_home``: Hypothesis' storage directory for the block (``check`` keeps its
    caches in ``.metadata-builders/``); reset when the session ends.
    """
    global _DEPTH
    with _LOCK:
        outermost = _DEPTH == 0
        _DEPTH += 1
    if not outermost:
        try:
            yield
        finally:
            with _LOCK:
                _DEPTH -= 1
        return
    before = torch_flags()
    stack = contextlib.ExitStack()
    try:
        if hypothesis_home is not None:
            from hypothesis.configuration import set_hypothesis_home_dir

            set_hypothesis_home_dir(hypothesis_home)
            stack.callback(set_hypothesis_home_dir, None)
        stack.callback(_set_torch_flags, before)
        for part in list(_HOOKS):
            stack.enter_context(part())
        yield
    finally:
        try:
            stack.close()
        finally:
            with _LOCK:
                _DEPTH -= 1
