"""What the gate leaves behind for each blocking result: a replay file, its command, its picture.

For each property with new failures the smallest failing batch (``size_key``,
then corpus order: deterministic) is written as ``<prop>-<hash>.json``; for a
head that crashed or hung, the smallest batch that did it alone as
``crash-<hash>.json``.  Each comes with the command that replays it -- with what
that command needs in front of it to import the head's builder
(``PYTHONPATH=...``) -- and, drawn in a process with the head's code, the
picture ``check`` draws next to its replay files (PNG and HTML).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass

from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.gate.model import Crash, Outcome, Side, shorten
from metadata_builders.families.dsv4.gate.verdicts import PropertyVerdict

__all__ = ["Replay", "draw_pictures", "replay_command", "write_replays"]


@dataclass
class Replay:
    """One blocking result's replay file."""

    prop: str
    """The property, or ``crash``."""
    path: str
    new: str
    """What head does that base did not, in one line."""
    command: str
    builder: str = ""
    """The builder that failed on it (what its picture is drawn with; the reference for a crash)."""
    picture: str | None = None
    """The PNG (or HTML) drawn next to the replay file, when one could be drawn."""


def replay_command(path: str, head: Side) -> str:
    """``[PYTHONPATH=...] metadata-builders replay PATH --builder B``: runnable as printed."""
    from metadata_builders.families.dsv4.runs.report import replay_command as command

    return command(path, head.builder, head.replay_env)


def _write(directory: str, prop: str, batch: VerifyBatch, why: str, meta: dict) -> str:
    os.makedirs(directory, exist_ok=True)
    text = batch.to_json()
    path = os.path.join(directory, f"{prop}-{hashlib.sha1(text.encode()).hexdigest()[:10]}.json")
    with open(path, "w") as fh:
        fh.write(batch.to_json(why=shorten(why, 300), meta=meta))
        fh.write("\n")
    return path


def _new_differences(base: Outcome, head: Outcome) -> str:
    """What head adds: the failure itself when base held, else the differences base did not have."""
    if base.status != "failed":
        return head.message
    extra = sorted(set(head.signature) - set(base.signature))
    shown = ", ".join(extra[:4]) + (f" (+{len(extra) - 4} more)" if len(extra) > 4 else "")
    return f"{shown} (base already failed: {shorten(base.message, 120)})"


def write_replays(verdicts: list[PropertyVerdict], crash: Crash | None, corpus: list[VerifyBatch], directory: str,
                  head: Side, shrunk: dict[str, tuple[VerifyBatch, int]] | None = None) -> list[Replay]:
    """The replay files of every blocking result: the crash first, then each property with new failures (its
    smallest failing batch, or that batch shrunk where ``shrunk`` has it:
    :mod:`~metadata_builders.families.dsv4.gate.shrink`)."""
    written = []
    if crash is not None:
        batch = corpus[crash.index]
        how = "alone, in a fresh process" if crash.alone else "after other batches in the same process"
        why = f"head ({head.label}) {crash.what} on this batch ({how}); base completed it"
        path = _write(directory, "crash", batch, why, {"property": "crash", "gate": "new", "head": head.label,
                                                         "builder": head.builder,
                                                         "what": crash.what, "alone": crash.alone})
        written.append(Replay("crash", path, f"{crash.what} ({how})", replay_command(path, head), "reference"))
    for pv in verdicts:
        new = pv.examples.get("new") or []
        if not new:
            continue
        index, base_outcome, head_outcome = min(new, key=lambda e: (corpus[e[0]].size_key(), e[0]))
        what = _new_differences(base_outcome, head_outcome)
        batch, steps = (shrunk or {}).get(pv.row, (corpus[index], 0))
        meta = {"property": pv.row, "gate": "new", "head": head.label, "builder": head.builder, "new": what,
                "signature": list(head_outcome.signature), "base_status": base_outcome.status,
                "check": head_outcome.check}
        if steps:
            meta["shrunk"] = {"from_corpus_batch": index, "steps": steps, "note": "head still fails this check on "
                              "it and base holds (metadata_builders/families/dsv4/gate/shrink.py)"}
        path = _write(directory, pv.row, batch, f"{pv.row} fails at head ({head.label}) with what base "
                      f"did not have: {what}", meta)
        written.append(Replay(pv.row, path, what, replay_command(path, head), head.builder))
    return written


_DRAW = """
import json, sys
from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.errors import PropertyFailure
from metadata_builders.families.dsv4.render import render_files
device, rest = sys.argv[1], sys.argv[2:]
for path, builder in zip(rest[::2], rest[1::2]):
    try:
        text = open(path).read()
        raw = json.loads(text)
        prop = raw.get("meta", {}).get("property")
        failure = PropertyFailure(prop, raw.get("why", "")) if prop and prop != "crash" else None
        drawn = render_files(VerifyBatch.from_json(text), path, builder_name=builder, device=device, failure=failure)
    except Exception as exc:  # one picture that cannot be drawn must not cost the others
        print(path, "-", type(exc).__name__, flush=True)
        continue
    print(path, *drawn, flush=True)
"""
"""One child process draws every picture: the head's builder is imported once (SGLang: ~10 CPU s a process)."""


def draw_pictures(replays: list[Replay], env: dict[str, str], device: str, limit: float) -> None:
    """Each replay's picture (PNG, else the HTML page), drawn with the head's code in one child process."""
    if not replays:
        return
    argv = [item for replay in replays for item in (replay.path, replay.builder)]
    try:
        done = subprocess.run([sys.executable, "-c", _DRAW, device, *argv], env=env, capture_output=True, text=True,
                              timeout=limit * len(replays), check=False)
    except subprocess.TimeoutExpired as expired:
        done = subprocess.CompletedProcess([], 1, expired.stdout or "", "")
    stdout = done.stdout if isinstance(done.stdout, str) else (done.stdout or b"").decode()
    drawn = {line.split()[0]: line.split()[1:] for line in stdout.splitlines() if line.strip()}
    for replay in replays:
        outputs = [p for p in drawn.get(replay.path, []) if p != "-" and "." in os.path.basename(p)]
        replay.picture = next((p for p in outputs if p.endswith(".png")), outputs[0] if outputs else None)
