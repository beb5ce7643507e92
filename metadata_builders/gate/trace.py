"""What of the side's tree a side's processes imported and ran: the measurement behind "not judged" files.

Inside a side's evaluation (the pytest items, the isolation runner) the gate sets
:data:`ENV_TRACE` to ``{"root": <the side's checkout>, "functions": {<file>: [<first lines>]}}``.
Each process then records, per file under ``root``:

* **imported**: every module of ``sys.modules`` whose file lies under ``root`` (read
  once, when the process writes its record: free);
* **ran**: for each watched function (the functions a pull request changes in its
  Python files on the watched paths, head side only, by the line their code starts
  at), whether it ran -- during the evaluation or while its file was imported.  A
  Triton kernel a GPU compiles never runs as Python: a watched ``@triton.jit``
  kernel that was launched counts as run too (its compiled-kernel cache is not empty).

The function trace is ``sys.settrace`` (3.11 has no ``sys.monitoring``), and a trace
makes every Python call slower (measured: twice the evaluation time), so it is on
only while needed: armed when a watched file is first imported (a ``sys.meta_path``
notice costs nothing until then), disarmed as soon as every watched function of
the imported files has been seen to run.  A pull request that changes a builder
function pays for the builds until it runs; one that changes a file nobody imports
pays nothing; one that changes a function that never runs (the runner's
``load_batch``) pays for the whole head evaluation -- docs/GATE.md has the figures.

Worked example: head changes ``DecodeCudaGraphRunner.load_batch`` (its code starts at
line 1521) and ``init_forward_metadata_out_graph`` of the backend (line 1921).  The
backend's import arms the trace; its first graph build runs ``init_forward_metadata_out_graph``
(seen); the runner module is imported but ``load_batch`` never runs, so the trace stays
on; the record says ``ran: {backend: [1921]}``, ``imported: [backend, runner, ...]``.
The gate then names ``load_batch`` in the runner as not judged.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import sys
import threading
from typing import Any

__all__ = ["ENV_TRACE", "dump", "start"]

ENV_TRACE = "MB_GATE_TRACE"
"""JSON ``{"root": ..., "functions": {file: [first lines]}}``: what a side's processes record (unset: nothing;
``root`` null: only what the builder says of upstream switches)."""

_CO_NEWLOCALS = 0x0002
"""A function's frame (module and class bodies have none)."""

_TRACER: _Tracer | None = None


class _Notice(importlib.abc.MetaPathFinder):
    """Arms the trace when a watched module is about to be imported; finds nothing itself."""

    def __init__(self, tracer: _Tracer) -> None:
        self.tracer = tracer

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name in self.tracer.modules:
            self.tracer.arm(importing=True)
        return None


class _Tracer:
    """The record of one process: watched files seen to run, armed only while one imported is not yet seen."""

    def __init__(self, root: str | None, functions: dict[str, list[int]]) -> None:
        self.root = os.path.abspath(root) if root else None
        self.files = {os.path.join(self.root, f): f for f in functions} if self.root else {}
        self.files.update({os.path.realpath(p): f for p, f in list(self.files.items())})
        self.watched = {(f, line) for f, lines in functions.items() for line in lines} if self.root else set()
        """(file, the line a watched function's code starts at)."""
        self.modules = _module_names(list(self.files))
        self.seen: set[tuple[str, int]] = set()
        self.armed = False
        self.previous: Any = None

    def arm(self, *, importing: bool = False) -> None:
        """Trace calls from now on, if a watched file is imported and unseen (``importing``: one is about to be)."""
        if self.armed or not (importing or self._pending()):
            return
        self.armed, self.previous = True, sys.gettrace()
        sys.settrace(self._call)
        threading.settrace(self._call)

    def disarm(self) -> None:
        if self.armed:
            self.armed = False
            sys.settrace(self.previous)
            threading.settrace(self.previous)  # type: ignore[arg-type]

    def _pending(self) -> set[tuple[str, int]]:
        """Watched functions of imported files not yet seen to run (the trace has work while there is one)."""
        imported = {self.files[p] for p in _loaded_files() if p in self.files}
        return {w for w in self.watched if w[0] in imported} - self.seen

    def _call(self, frame: Any, event: str, arg: Any) -> Any:
        code = frame.f_code
        rel = self.files.get(code.co_filename)
        if rel is not None and code.co_flags & _CO_NEWLOCALS and (rel, code.co_firstlineno) in self.watched \
                and (rel, code.co_firstlineno) not in self.seen:
            self.seen.add((rel, code.co_firstlineno))
            if not self._pending():
                self.disarm()
        return self.previous(frame, event, arg) if self.previous is not None else None

    def launched(self) -> set[tuple[str, int]]:
        """Watched ``@triton.jit`` kernels compiled in this process (a GPU runs no Python of a kernel)."""
        found = set()
        for module in list(sys.modules.values()):
            if self.files.get(getattr(module, "__file__", None) or "") is None:
                continue
            for value in list(vars(module).values()):
                code = getattr(getattr(value, "fn", None), "__code__", None)
                rel = self.files.get(code.co_filename) if code is not None else None
                if rel is not None and (rel, code.co_firstlineno) in self.watched and _compiled(value):
                    found.add((rel, code.co_firstlineno))
        return found


def _compiled(kernel: Any) -> bool:
    """A Triton ``JITFunction`` that compiled at least once (3.x: ``device_caches``; older: ``cache``)."""
    caches = getattr(kernel, "device_caches", None) or getattr(kernel, "cache", None)
    if not isinstance(caches, dict):
        return False
    return any(bool(entry[0] if isinstance(entry, tuple) else entry) for entry in caches.values())


def _module_names(paths: list[str]) -> set[str]:
    """Dotted names ``paths`` import as, from every ``sys.path`` entry they lie under."""
    names = set()
    for path in paths:
        for entry in sys.path:
            entry = os.path.abspath(entry or ".")
            if path.startswith(entry + os.sep):
                dotted = os.path.relpath(path, entry)[: -len(".py")].replace(os.sep, ".")
                names.add(dotted.removesuffix(".__init__"))
    return names


def _loaded_files() -> list[str]:
    return [f for m in list(sys.modules.values()) if (f := getattr(m, "__file__", None))]


def start() -> None:
    """Start recording, as :data:`ENV_TRACE` asks (nothing when it is unset; once a process)."""
    global _TRACER
    spec = os.environ.get(ENV_TRACE)
    if _TRACER is not None or not spec:
        return
    wanted = json.loads(spec)
    _TRACER = _Tracer(wanted.get("root"), {f: list(lines) for f, lines in wanted.get("functions", {}).items()})
    if _TRACER.watched:
        sys.meta_path.insert(0, _Notice(_TRACER))
        _TRACER.arm()  # a watched module imported already (the trace then sees its later calls only)


def dump(directory: str, builder: Any = None) -> None:
    """Write this process's record to ``directory/trace-<pid>.json`` (the parent unions them); also what the
    builder says of upstream switches it does not run the other way (``unjudged_switches``)."""
    if _TRACER is None:
        return
    root = _TRACER.root
    imported = [] if root is None else sorted({os.path.relpath(f, root) for f in _loaded_files()
                                               if os.path.abspath(f).startswith(root + os.sep)})
    lines = getattr(builder, "unjudged_switches", None)
    record = {"root": root, "traced": sorted(_TRACER.watched), "imported": imported,
              "ran": sorted(_TRACER.seen | _TRACER.launched()), "switches": lines() if callable(lines) else []}
    with open(os.path.join(directory, f"trace-{os.getpid()}.json"), "w") as fh:
        json.dump(record, fh)
