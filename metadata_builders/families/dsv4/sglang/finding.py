"""Finding upstream's pieces by what they do, not by one release's module path.

Each piece is looked for first where the backend itself imports it (``from M
import f`` in a backend method's body), then in the known module paths, then in
any module of the installed ``sglang`` whose source mentions it.  When none has
it, :class:`~metadata_builders.errors.UpstreamNotFound` names the piece, the
release and every place looked.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metadata_builders.errors import UpstreamNotFound
from metadata_builders.families.dsv4.sglang.shims import import_module

__all__ = ["class_in", "dispatch_is_device_check", "find_module", "imports_in"]


def imports_in(func: Any) -> list[str]:
    """Modules ``func`` imports from at call time (``from M import a`` in its body): ``M`` and ``M.a``."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return []
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{alias.name}" for alias in node.names]
    return out


def _defining(needle: str) -> list[str]:
    """Modules of the installed ``sglang`` whose source contains ``needle`` (the last resort)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return []
    out = []
    for root in spec.submodule_search_locations:
        base = Path(root).parent
        for path in sorted(Path(root).rglob("*.py")):
            try:
                if needle in path.read_text(encoding="utf-8", errors="replace"):
                    out.append(".".join(path.relative_to(base).with_suffix("").parts))
            except OSError:
                continue
    return out


def _module_exists(name: str) -> bool | None:
    """True: ``name`` is a module; None: it names an attribute of its parent module; False: neither."""
    try:
        if importlib.util.find_spec(name) is not None:
            return True
    except (ImportError, ValueError):
        pass
    parent, _, attr = name.rpartition(".")
    if parent and parent in sys.modules and hasattr(sys.modules[parent], attr):
        return None
    return False


def find_module(piece: str, release: str, candidates: list[str], has: Callable[[types.ModuleType], bool],
                 needle: str) -> types.ModuleType:
    """The first of ``candidates`` (then modules whose source contains ``needle``) for which ``has`` holds.

    ``candidates`` may name functions or classes a backend function imports
    (``from M import f`` gives ``M`` and ``M.f``); those are skipped silently.
    """
    looked: list[str] = []
    tried: set[str] = set()
    for batch in (candidates, None):
        names = batch if batch is not None else _defining(needle)
        for name in names:
            if name in tried:
                continue
            tried.add(name)
            exists = _module_exists(name)
            if exists is None:
                continue
            if not exists:
                looked.append(f"{name} (no such module)")
                continue
            try:
                module = import_module(name)
            except ImportError as exc:
                looked.append(f"{name} (import failed: {exc})")
                continue
            if has(module):
                return module
            looked.append(f"{name} (has no {piece.split(' ')[0]})")
        if batch is None and not names:
            looked.append(f"no module of the installed sglang mentions {needle!r}")
    raise UpstreamNotFound(piece, release, looked)


def class_in(module: types.ModuleType, *methods: str) -> type | None:
    """A class reachable from ``module``'s globals that has every one of ``methods``."""
    for value in vars(module).values():
        if isinstance(value, type) and all(callable(getattr(value, m, None)) for m in methods):
            return value
    return None


def dispatch_is_device_check(execute: Any) -> bool:
    """Whether ``Cls.execute`` only picks ``cls.triton`` or ``cls.torch`` by where its tensors live.

    Upstream's body is ``impl = cls.triton if verify_lens.is_cuda else cls.torch;
    return impl(...)``; anything more would be lost by routing to ``cls.triton``.
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(execute)))
    except (OSError, TypeError, SyntaxError):
        return False
    func = tree.body[0]
    if not isinstance(func, ast.FunctionDef) or len(func.body) > 2:
        return False
    tests = [node.test for node in ast.walk(func) if isinstance(node, ast.IfExp)]
    return len(tests) == 1 and isinstance(tests[0], ast.Attribute) and tests[0].attr == "is_cuda"
