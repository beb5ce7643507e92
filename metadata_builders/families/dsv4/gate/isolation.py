"""A head that crashed or hung: find the smallest batch that does it alone, in a fresh process.

On a GPU the AMD memory access fault this project exists for kills the process,
and so does a segfault in an extension; a head that dies or hangs where the base
completed is a red gate, not a broken one (DESIGN.md section 5).  When the
head's run did not complete, the batches it never finished are run again by the
isolation runner (``python -m metadata_builders.families.dsv4.gate.evaluate``), **smallest
first** (``VerifyBatch.size_key``), one process at a time, each batch under the
per-batch limit:

1. run the unfinished batches in that order in a fresh process; what completes
   is judged as usual;
2. when that process dies or hangs on batch ``i``, run ``i`` alone in another
   fresh process: if it dies or hangs again, ``i`` is the smallest batch that
   reproduces it (every smaller one completed) -- a :class:`~metadata_builders.families.dsv4.gate.model.Crash`;
3. if ``i`` completes alone, the crash needed the batches before it: go on after
   ``i``; after :data:`MAX_SUSPECTS` such batches, report the last one as a crash
   that needs history (``alone=False``).

Worked example: a head killed by ``SIGKILL`` on every batch of three requests or
more, corpus of 100 batches.  The xdist run finishes 30 batches, each worker dying
on its first large batch; the isolation run takes the 70 others smallest first,
completes the 12 with one or two requests and dies on #41 (``bs=3``); #41 alone
dies again: ``Crash(41, "killed by SIGKILL", unfinished=58)``, the 57 batches after
it are not judged (the gate is red anyway), and #41 is written as
``crash-<hash>.json``.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

from metadata_builders.errors import GateError
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.gate.model import SETUP_ERROR, Crash, Outcome, Side
from metadata_builders.families.dsv4.gate.running import Ending, HangRule, read_outcomes, watch
from metadata_builders.families.dsv4.gate.sides import side_env

__all__ = ["MAX_SUSPECTS", "find_crash"]

_ERROR_LINE = re.compile(r"[\w.]*(Error|Exception)\b")
"""A traceback's last line (``ValueError: ...``), as opposed to a warning the process printed on its way out."""

MAX_SUSPECTS = 3
"""Batches that crashed in sequence but not alone, tried before the last is reported as needing history."""


def _attempt(side: Side, corpus_path: str, indices: list[int], props: list[str], directory: str, device: str,
             limit: HangRule) -> tuple[list[Outcome], set[int], Ending, int | None]:
    """Run ``indices`` in order in one fresh process: outcomes, completed batches, how it ended, the batch it was on."""
    os.makedirs(directory, exist_ok=True)
    command = [sys.executable, "-m", "metadata_builders.families.dsv4.gate.evaluate", corpus_path,
               os.path.join(directory, "outcomes.jsonl"), os.path.join(directory, "run.progress"),
               *[str(i) for i in indices]]
    ending = watch(command, side_env(side, corpus_path, directory, props, device), directory, directory,
                   label=f"{side.name} (isolation)", total=len(indices), limit=limit,
                   log_path=os.path.join(directory, "log.txt"))
    outcomes, complete = read_outcomes(directory, props)
    on = ending.hung if ending.hung is not None else next((i for i in indices if i not in complete), None)
    return outcomes, complete, ending, None if ending.completed else on


def _last_line(ending: Ending) -> str:
    lines = [line.strip() for line in ending.log.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def _what(ending: Ending) -> str:
    """What happened, with the exception it ended on when it exited on its own (a traceback's last line)."""
    what = ending.describe()
    last = _last_line(ending)
    if ending.hung is None and ending.returncode and ending.returncode > 0 and _ERROR_LINE.match(last):
        what += f" ({last})"
    return what


def find_crash(side: Side, corpus: list[VerifyBatch], corpus_path: str, complete: set[int], props: list[str],
               workdir: str, device: str, limit: HangRule) -> tuple[list[Outcome], Crash | None]:
    """Outcomes of the unfinished batches that complete in isolation, and the smallest crash (None: none reproduced).

    A batch the fresh process died or hung on *first* ran alone already: it is not
    run again (a hang costs its limit once in isolation, not twice).
    """
    queue = sorted(set(range(len(corpus))) - complete, key=lambda i: (corpus[i].size_key(), i))
    found: list[Outcome] = []
    suspects = 0
    while queue:
        base = tempfile.mkdtemp(prefix=f"{side.name}-isolation-", dir=workdir)
        outcomes, done, ending, on = _attempt(side, corpus_path, queue, props, base, device, limit)
        found += outcomes
        if on is None:
            return found, None
        if on == queue[0]:
            if ending.returncode == SETUP_ERROR:
                raise GateError(f"{side.name} side ({side.label})", f"its builder cannot be made: {_last_line(ending)}")
            return found, Crash(on, _what(ending), True, len(queue))
        alone, _, alone_ending, alone_on = _attempt(side, corpus_path, [on], props, base + "-alone",
                                                             device, limit)
        left = queue[queue.index(on):]
        if alone_ending.returncode == SETUP_ERROR:
            raise GateError(f"{side.name} side ({side.label})",
                            f"its builder cannot be made: {_last_line(alone_ending)}")
        if alone_on is not None:
            return found, Crash(on, _what(alone_ending), True, len(left))
        found += alone
        suspects += 1
        if suspects >= MAX_SUSPECTS:
            return found, Crash(on, _what(ending), False, len(left) - 1)
        queue = [i for i in left[1:] if i not in done]
    return found, None
