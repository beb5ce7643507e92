"""Running a side's evaluation in child processes, watched: progress, a per-batch time limit, what killed it.

A side runs as a pytest-xdist run of :mod:`metadata_builders.families.dsv4.gate.items` (one
chunk of the corpus per item), the isolation runner as
``python -m metadata_builders.families.dsv4.gate.evaluate``; both write the progress files
:mod:`~metadata_builders.families.dsv4.gate.evaluate` describes.  :func:`watch` polls them: it
prints a progress line every :data:`PROGRESS_EVERY` seconds, and when one batch
has been running longer than the per-batch limit it ends the whole process group
(the xdist workers too) and says which batch hung.  What happened is returned as
an :class:`Ending`, in words a gate user reads: ``killed by SIGKILL``, ``exited
with status 3``, ``hung: batch 12 gave no result in 5s``.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from metadata_builders.families.dsv4.gate.model import Outcome

__all__ = ["HANG_FACTOR", "HANG_FLOOR", "PROGRESS_EVERY", "Ending", "HangRule", "progress_state", "read_outcomes",
           "watch"]

PROGRESS_EVERY = 10.0
"""Seconds between progress lines of a running side (a CI log must show the gate is alive)."""

POLL = 0.2

HANG_FACTOR = 5.0
"""A head batch running this many times longer than the same batch at base is hung."""

HANG_FLOOR = 60.0
"""...but never before this many seconds: a loaded machine is slower than the base's timing."""


@dataclass(frozen=True)
class HangRule:
    """How long a batch may run before it is a hang: relative to its base timing, within floor and ceiling."""

    ceiling: float
    """The per-batch limit (``--batch-timeout``): the only limit for a batch with no base timing."""
    floor: float = HANG_FLOOR
    factor: float = HANG_FACTOR
    base_seconds: dict[int, float] = field(default_factory=dict)
    """Corpus index -> seconds the batch took at base (every property)."""

    def limit(self, index: int) -> float:
        seconds = self.base_seconds.get(index)
        if not seconds:
            return self.ceiling
        return min(self.ceiling, max(self.floor, self.factor * seconds))

    def why(self, index: int) -> str:
        """Where batch ``index``'s limit comes from, for people."""
        seconds = self.base_seconds.get(index)
        if not seconds or self.limit(index) == self.ceiling:
            return f"the per-batch limit of {self.ceiling:g}s"
        return (f"{self.limit(index):.0f}s ({self.factor:g}x the {seconds:.1f}s it took at base, at least "
                f"{self.floor:g}s)")

    @classmethod
    def from_base(cls, ceiling: float, floor: float, outcomes: list[Outcome]) -> HangRule:
        """The rule for a head side, from its base's outcomes (their ``seconds``; 0 when not recorded)."""
        total: dict[int, float] = {}
        for o in outcomes:
            total[o.index] = total.get(o.index, 0.0) + o.seconds
        return cls(ceiling, floor, HANG_FACTOR, {i: t for i, t in total.items() if t > 0})


@dataclass(frozen=True)
class Ending:
    """How a watched child process ended."""

    returncode: int | None
    """Its exit status (negative: the signal that killed it); None when the watch ended it."""
    hung: int | None = None
    """The batch that exceeded its limit, when the watch ended it for that."""
    limit: float = 0.0
    log: str = ""
    """Its stdout and stderr."""
    limit_why: str = ""
    """Where the hung batch's limit came from (:meth:`HangRule.why`)."""

    @property
    def completed(self) -> bool:
        return self.hung is None and self.returncode == 0

    def describe(self) -> str:
        """What happened, in words: ``killed by SIGKILL``, ``exited with status 3``, ``hung: ...``."""
        if self.hung is not None:
            return f"hung: batch {self.hung} gave no result within {self.limit_why or f'{self.limit:g}s'}"
        if self.returncode is not None and self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"killed by {name}"
        return f"exited with status {self.returncode}"


def progress_state(directory: str) -> tuple[set[int], dict[int, float]]:
    """From the progress files under ``directory``: batches done, and batches started but not done (-> start time)."""
    done: set[int] = set()
    running: dict[int, float] = {}
    for path in glob.glob(os.path.join(directory, "*.progress")):
        with open(path) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) == 3 and parts[0] == "start":
                    running[int(parts[1])] = float(parts[2])
                elif len(parts) == 2 and parts[0] == "done":
                    done.add(int(parts[1]))
                    running.pop(int(parts[1]), None)
    return done, running


def read_outcomes(directory: str, props: list[str]) -> tuple[list[Outcome], set[int]]:
    """Outcomes of the batches every property finished on, and those batches; a half-done batch is dropped."""
    outcomes: dict[int, list[Outcome]] = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.jsonl"))):
        with open(path) as fh:
            for line in fh:
                if line.endswith("\n"):
                    outcome = Outcome.from_dict(json.loads(line))
                    outcomes.setdefault(outcome.index, []).append(outcome)
    complete = {i for i, got in outcomes.items() if {o.prop for o in got} >= set(props)}
    return [o for i in sorted(complete) for o in outcomes[i]], complete


def watch(command: list[str], env: dict[str, str], cwd: str, directory: str, *, label: str, total: int,
          limit: float | HangRule, log_path: str) -> Ending:
    """Run ``command`` in its own process group; progress lines, and the group ended when a batch exceeds its limit."""
    rule = limit if isinstance(limit, HangRule) else HangRule(limit)
    with open(log_path, "w") as log:
        child = subprocess.Popen(command, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        try:
            hung = _wait(child, directory, label, total, rule)
        finally:
            if child.poll() is None:  # the gate itself is stopping (Ctrl-C, SIGTERM): take the group along
                _end_group(child)
    with open(log_path) as fh:
        text = fh.read()
    if hung is None:
        return Ending(child.returncode, None, rule.ceiling, text)
    return Ending(None, hung, rule.limit(hung), text, rule.why(hung))


def _wait(child: subprocess.Popen, directory: str, label: str, total: int, rule: HangRule) -> int | None:
    """Wait for ``child``, a progress line every :data:`PROGRESS_EVERY` s; the batch that hung, if one did."""
    start = last = time.monotonic()
    while child.poll() is None:
        time.sleep(POLL)
        now = time.monotonic()
        done, running = progress_state(directory)
        late = [i for i, t in running.items() if time.time() - t > rule.limit(i)]
        if late:
            _end_group(child)
            return min(late)
        if now - last >= PROGRESS_EVERY:
            last = now
            _say(f"  {label}: {len(done)}/{total} batches done, {now - start:.0f}s" + _waiting(running, rule))
    return None


def _waiting(running: dict[int, float], rule: HangRule) -> str:
    """``; waiting on batch 12 for 42s (hung at 60s: ...)`` when the oldest running batch runs long."""
    if not running:
        return ""
    index, started = min(running.items(), key=lambda item: item[1])
    waited = time.time() - started
    if waited < PROGRESS_EVERY:
        return ""
    return f"; waiting on batch {index} for {waited:.0f}s (a hang after {rule.why(index)})"


def _end_group(child: subprocess.Popen) -> None:
    """End ``child`` and every process it started (xdist workers): TERM, then KILL after a grace period."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
