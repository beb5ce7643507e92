"""One side's evaluation: every property on every corpus batch with that side's code.

:func:`run_side` runs :mod:`metadata_builders.families.dsv4.gate.items` with pytest-xdist in a
subprocess whose ``PYTHONPATH`` starts with the side's ``python/`` tree, watched
(:mod:`~metadata_builders.families.dsv4.gate.running`): a progress line every few seconds and a
per-batch time limit.  It returns what completed and, when the run did not
complete, how it ended -- what the caller does with that depends on the side
(a base that cannot complete is a setup error; a head that crashes or hangs is
searched in isolation, :mod:`~metadata_builders.families.dsv4.gate.isolation`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass

from metadata_builders.families.dsv4.gate.model import (
    ENV_BUILDER,
    ENV_CORPUS,
    ENV_DEVICE,
    ENV_OUT,
    ENV_PROPERTIES,
    Outcome,
    Side,
)
from metadata_builders.families.dsv4.gate.running import Ending, HangRule, read_outcomes, watch
from metadata_builders.gate.trace import ENV_TRACE
from metadata_builders.families.dsv4.gate.watched import SideTrace, read_traces

__all__ = ["SideRun", "run_side", "side_env"]


@dataclass
class SideRun:
    """What one side's run produced."""

    outcomes: list[Outcome]
    """Outcomes of every batch all properties finished on."""
    complete: set[int]
    """Those batches."""
    ending: Ending
    out: str
    """The side's output directory (outcomes, progress, ``pytest.log``)."""
    seconds: float = 0.0
    trace: SideTrace | None = None
    """What its processes imported and ran of the side's tree (nothing without one), and said of upstream switches."""


def side_env(side: Side, corpus_path: str, out: str, props: list[str], device: str) -> dict[str, str]:
    """The environment of a side's child processes: what to evaluate, and the side's tree first on the path."""
    env = dict(os.environ)
    env.update({ENV_CORPUS: corpus_path, ENV_OUT: out, ENV_BUILDER: side.builder, ENV_DEVICE: device,
                ENV_PROPERTIES: ",".join(props)})
    if side.pythonpath:
        env["PYTHONPATH"] = side.pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    functions: dict[str, list[int]] = {}
    for path, first in side.traced:
        functions.setdefault(path, []).append(first)
    env[ENV_TRACE] = json.dumps({"root": side.root, "functions": functions})
    return env


def run_side(side: Side, corpus_path: str, props: list[str], workdir: str, workers: str, device: str,
             limit: HangRule | float, total: int) -> SideRun:
    """Evaluate every property on the corpus with ``side``'s code: a watched pytest-xdist run of ``gate_items``."""
    # run by pytest, never imported here
    items = importlib.util.find_spec("metadata_builders.families.dsv4.gate.items").origin
    out = tempfile.mkdtemp(prefix=f"{side.name}-", dir=workdir)  # one per run: a builder's routes run in turn
    ini = os.path.join(workdir, "pytest.ini")
    with open(ini, "w") as fh:
        fh.write("[pytest]\naddopts = -p no:cacheprovider\n")
    command = [sys.executable, "-m", "pytest", items, "-c", ini, "--rootdir", workdir, "-q",
               "-p", "no:randomly", "-n", workers, "--junit-xml", os.path.join(out, "junit.xml")]
    start = time.perf_counter()
    ending = watch(command, side_env(side, corpus_path, out, props, device), workdir, out, label=side.name,
                   total=total, limit=limit, log_path=os.path.join(out, "pytest.log"))
    outcomes, complete = read_outcomes(out, props)
    trace = read_traces(out)
    return SideRun(outcomes, complete, ending, out, time.perf_counter() - start, trace)


def log_tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
