"""What the gate's pieces pass each other: an outcome, a side, a crash, and the environment contract.

Everything here is plain data, importable without torch or pytest, so the
side's pytest items (:mod:`metadata_builders.families.dsv4.gate.items`), the isolation runner
and the parent process share one vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from metadata_builders.errors import Origin

__all__ = ["CHUNKS", "ENV_BUILDER", "ENV_CORPUS", "ENV_DEVICE", "ENV_OUT", "ENV_PROPERTIES", "SETUP_ERROR", "Crash",
           "Outcome", "Side", "shorten"]

CHUNKS = 16
"""Test items per side: enough for xdist to balance two to eight workers."""

ENV_CORPUS, ENV_OUT, ENV_BUILDER, ENV_DEVICE, ENV_PROPERTIES = (
    "MB_GATE_CORPUS", "MB_GATE_OUT", "MB_GATE_BUILDER", "MB_GATE_DEVICE", "MB_GATE_PROPERTIES")
"""How ``metadata-builders gate`` tells each side's pytest run (and its xdist workers) what to run."""

SETUP_ERROR = 86
"""The isolation runner's exit status when the side's builder cannot be made at all (a setup error, not a crash)."""

Status = Literal["held", "failed", "partial", "not applicable", "not judged"]


@dataclass(frozen=True)
class Outcome:
    """One property on one corpus batch, at one side."""

    prop: str
    index: int
    """Position of the batch in the corpus."""
    status: Status
    """``not judged``: the side's process died or hung before it evaluated the batch (see :class:`Crash`)."""
    signature: tuple[str, ...] = ()
    """What failed, stable across runs and sides, as ``variant|field`` entries (values left out): every
    difference from the reference for P1, the failure's place for the others."""
    message: str = ""
    why: str = ""
    """For ``partial`` and ``not judged``: the reason."""
    field: str = ""
    """The field of the (first) failure, as ``PropertyFailure.field`` names it."""
    check: str = ""
    """The failure's check id (``PropertyFailure.check``: ``"raised"`` when the builder raised), or ``""``."""
    origin: Origin | None = None
    """For a raised failure: where it came from (exception type, file, line, function); None otherwise."""
    where: str = ""
    """The failure's pipeline stage (``PropertyFailure.where``), or ``""``."""
    seconds: float = 0.0
    """How long this property took on this batch at this side (a batch's sum is what a hang is measured against)."""

    def to_dict(self) -> dict[str, Any]:
        return {"prop": self.prop, "index": self.index, "status": self.status, "signature": list(self.signature),
                "message": self.message, "why": self.why, "field": self.field, "check": self.check,
                "origin": self.origin.to_list() if self.origin is not None else [], "where": self.where,
                "seconds": round(self.seconds, 3)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        return cls(d["prop"], d["index"], d["status"], tuple(d["signature"]), d["message"], d["why"], d["field"],
                   d.get("check", ""), Origin.from_list(d.get("origin")), d.get("where", ""),
                   float(d.get("seconds", 0.0)))


@dataclass(frozen=True)
class Side:
    """One side of the comparison: a builder, imported with ``pythonpath`` first on ``sys.path``."""

    name: str
    """``base`` or ``head``."""
    builder: str
    """A ``get_builder`` name: ``sglang`` for a gate on SGLang's code."""
    pythonpath: str | None = None
    """The side's ``python/`` tree (SGLang imported from there), or None for the environment's."""
    label: str = ""
    """What the side is, for people: a ref and commit, or a builder name."""
    identity: str | None = None
    """What its results depend on besides the harness (a commit, a builder's source hash); None: not cacheable."""
    replay_env: str = ""
    """What a replay command needs in front of it to import the builder (``PYTHONPATH=...``), or ``""``."""
    root: str | None = None
    """The side's checkout (a worktree of its ref, or the checkout itself): what it imports and runs of it is
    recorded (:mod:`~metadata_builders.gate.trace`); None: nothing is."""
    traced: tuple[tuple[str, int], ...] = ()
    """(file under ``root``, first line) of each function the side's processes watch for a run (head: the
    functions the change touches in watched Python files)."""


@dataclass(frozen=True)
class Crash:
    """A batch on which a side's process died or hung, confirmed by running it alone in a fresh process."""

    index: int
    """Position of the batch in the corpus: the smallest batch that reproduced it."""
    what: str
    """What happened, for people: ``killed by SIGKILL``, ``exited with status 3``, ``hung: no result in 5s``."""
    alone: bool = True
    """Reproduced alone in a fresh process (False: only after other batches in the same process)."""
    unfinished: int = 0
    """Batches the side never finished (this one included), left not judged."""


_PAIRS = {"[": "]", "(": ")", "{": "}"}


def _separators(text: str) -> list[tuple[int, tuple[str, ...]]]:
    """Each entry separator (``, `` or ``; ``) with the brackets open there, where it separates entries.

    A separator inside parentheses or quotes belongs to an entry (``'item@stage (reads
    seq_lens, verify_lens)'``), so only those at top level or directly in a list count.
    """
    stack: list[str] = []
    found = []
    for i, ch in enumerate(text):
        if stack and stack[-1] in "'\"":
            if ch == stack[-1]:
                stack.pop()
        elif ch in "'\"" and any(s in "[{" for s in stack) or ch in _PAIRS:
            stack.append(ch)
        elif ch in _PAIRS.values():
            if stack:
                stack.pop()
        elif text.startswith((", ", "; "), i) and (not stack or stack[-1] in "[{"):
            found.append((i, tuple(stack)))
    return found


def shorten(text: str, limit: int = 400) -> str:
    """``text``'s first line cut to about ``limit`` characters between two entries, never inside one.

    Worked example: ``"actual=['a (reads x, y)', 'b', 'c']"`` cut at 26 keeps the first
    entry whole -- its inner ``, `` is inside parentheses, not between entries -- and
    says what it left out: ``"actual=['a (reads x, y)', … (+2 more)]"``; the brackets
    open at the cut are closed again, so the line still reads as a list.
    """
    text = text.splitlines()[0] if text else ""
    if len(text) <= limit:
        return text
    separators = _separators(text)
    before = [(i, stack) for i, stack in separators if i < limit]
    if not before:
        cut = text.rfind(" ", 0, limit)
        return text[: cut if cut > 0 else limit] + " …"
    cut, stack = before[-1]
    more = sum(1 for i, s in separators if i >= cut and s == stack and _same_list(separators, cut, i, stack))
    closing = "".join(_PAIRS[b] for b in reversed(stack) if b in _PAIRS)
    return f"{text[:cut]}, … (+{more} more){closing}"


def _same_list(separators: list[tuple[int, tuple[str, ...]]], cut: int, at: int, stack: tuple[str, ...]) -> bool:
    """Whether the separator at ``at`` is in the same list as the one at ``cut`` (no shallower one between)."""
    return not any(cut < i < at and len(s) < len(stack) for i, s in separators)
