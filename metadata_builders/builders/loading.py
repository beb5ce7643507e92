"""A builder named ``module:attr``, found and made, for every family: the import (the current directory counted as
``python -m`` counts it), the factory, the construction under the audit, and one line for whatever goes wrong.

A family's registry (DSV4's ``builders.registry``, the DSA family's ``__main__``)
maps its short names to its builders and hands ``module:attr`` to these.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from metadata_builders.errors import BuilderNotFound

__all__ = ["construct", "construct_named", "findable", "importable_anywhere", "importable_hint", "load_factory",
           "module_root", "replay_env"]


def construct(factory: Callable[..., Any], device: str) -> Any:
    """Call a builder factory under the audit, so buffers it allocates on the device are known as such."""
    from metadata_builders.audit import DeviceAudit, device_handle

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    with DeviceAudit():
        return factory(device=device_handle(device)) if "device" in params else factory()


def construct_named(name: str, factory: Callable[..., Any], device: str) -> Any:
    """``factory`` called as :func:`construct` calls it; a builder that cannot
    be made is a setup error said in one line (:class:`BuilderNotFound` naming ``name``, the exception and where it
    was raised), never a traceback."""
    try:
        return construct(factory, device)
    except Exception as exc:  # noqa: BLE001 - whatever the factory raises, the user's one line names it
        raise BuilderNotFound(name, f"constructing it raised {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    """``ValueError: no such file (at mypkg/builders.py:12 in __init__)``: the exception and where it was raised."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    text = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"{type(exc).__name__}: {text}{where}"


def findable(module: str) -> bool:
    """Whether ``module`` imports here, the current directory counted as ``python -m`` counts it.

    A console script does not put the working directory on ``sys.path``; a user who runs
    ``metadata-builders check --builder mypkg.builders:B`` from the folder holding ``mypkg/``
    means that ``mypkg``.  So when it is there (and only then), the directory goes on the
    path; printed commands then carry ``PYTHONPATH=<it>`` (:func:`replay_env`).
    """
    import importlib.util

    def found() -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            return False

    if found():
        return True
    here, top = os.getcwd(), module.split(".")[0]
    if here in sys.path or not (os.path.isdir(os.path.join(here, top))
                                or os.path.isfile(os.path.join(here, top + ".py"))):
        return False
    sys.path.insert(0, here)
    importlib.invalidate_caches()
    return found()


def importable_hint(module: str) -> str:
    """How to make ``module`` importable by ``metadata-builders`` (a console script: the current directory is
    not on its path)."""
    top = module.split(".")[0]
    return (f"install the project that holds it (python -m pip install -e <project>) or put the folder that holds "
            f"{top}/ (or {top}.py) on PYTHONPATH: PYTHONPATH=<that folder> metadata-builders ...")


def module_root(module: str) -> tuple[str | None, str | None]:
    """(the ``sys.path`` entry ``module`` imports from, its source file), as far as this process can tell."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None, None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None, None
    root = os.path.dirname(spec.origin)
    depth = module.count(".") + (1 if os.path.basename(spec.origin) == "__init__.py" else 0)
    for _ in range(depth):
        root = os.path.dirname(root)
    return root, spec.origin


def importable_anywhere(module: str) -> bool:
    """Whether a fresh interpreter, without ``PYTHONPATH`` and outside this directory, imports ``module``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=os.path.expanduser("~"), capture_output=True,
                          check=False)
    return done.returncode == 0


def replay_env(builder: str) -> str:
    """What a command naming ``builder`` needs in front of it to run in a fresh shell: ``PYTHONPATH=<root>``
    when its module imports here but not from a fresh interpreter elsewhere, else ``""``."""
    if ":" not in builder:
        return ""
    module = builder.partition(":")[0]
    root, _ = module_root(module)
    return f"PYTHONPATH={root}" if root is not None and not importable_anywhere(module) else ""


def load_factory(name: str) -> Any:
    """The callable ``"module:attr"`` names (a factory or a class), imported as ``check`` imports it; an import, a
    missing attribute or a non-callable is one :class:`BuilderNotFound` line naming the module and the attribute."""
    module_name, _, attr = name.partition(":")
    try:
        findable(module_name)
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BuilderNotFound(name, f"cannot import module {module_name!r}: {exc}; "
                                    f"{importable_hint(module_name)}") from exc
    try:
        factory = getattr(module, attr)
    except AttributeError as exc:
        raise BuilderNotFound(name, f"module {module_name!r} has no attribute {attr!r}") from exc
    if not callable(factory):
        raise BuilderNotFound(name, f"{attr!r} is not callable (need a zero-argument factory or a class)")
    return factory
