"""A test's own builder module, importable here and by the child processes a gate or check starts."""

from __future__ import annotations

import os
import pathlib

import pytest


def importable_module(folder: pathlib.Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> pathlib.Path:
    """Write ``folder/<name>.py`` and put ``folder`` on this process's path and on ``PYTHONPATH``."""
    (folder / f"{name}.py").write_text(text)
    monkeypatch.setenv("PYTHONPATH", str(folder) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.syspath_prepend(str(folder))
    return folder
