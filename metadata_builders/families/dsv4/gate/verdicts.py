"""Verdicts per (property, batch): base and head outcomes compared.

``new`` (held at base, fails at head), also when both fail but head has a
difference base did not have -- every difference from the reference for P1, the
failure's place for the others --, ``changed`` (fails at both, head with fewer
differences: part fixed), ``pre-existing`` (fails the same way at both; a
finding id when :mod:`metadata_builders.families.dsv4.runs.findings` knows it), ``fixed``,
``partial`` (the property could not fully run: a blind spot the summary names),
``not judged`` (head died or hung before it evaluated the batch).  ``new`` blocks;
so does a :class:`~metadata_builders.families.dsv4.gate.model.Crash` at head.

Worked example: head drops the dspark gate.  Base holds P4 on all 100 batches;
head fails 41 of them (``decision.used_output_size``): P4 is ``NEW 41/100``.
P6's F2c batches fail at both sides the same way: ``pre-existing (F2c)``, listed,
not blocking.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Literal

from metadata_builders.families.dsv4.batch import VerifyBatch
from metadata_builders.families.dsv4.gate.model import Outcome, Side
from metadata_builders.families.dsv4.properties import PropertySpec

__all__ = ["PropertyVerdict", "Verdict", "classify", "fill_not_judged", "raise_setup_failure", "setup_failures"]

Verdict = Literal["held", "new", "changed", "pre-existing", "fixed", "partial", "not applicable", "not judged"]

_SHOWN = ("new", "changed", "pre-existing", "fixed", "partial", "not judged")


@dataclass
class PropertyVerdict:
    """One property across the corpus: how many batches fell under each verdict."""

    prop: str
    """The property (``P1``): what it judged, whichever route ran it."""
    title: str
    route: str = ""
    """The kernel route that ran it when not the builder's primary one (``torch``), else ``""``."""
    batches: int = 0
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    examples: dict[str, list[tuple[int, Outcome, Outcome]]] = field(default_factory=lambda: defaultdict(list))
    """Verdict -> (index, base outcome, head outcome), in corpus order."""
    findings: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Finding id -> pre-existing batches it explains."""
    partial_why: Counter = field(default_factory=Counter)
    """Why the property could not fully run (``partial``), -> batches."""
    seconds: float = 0.0
    """What the property took at head, over the corpus (CPU seconds of the evaluating processes)."""
    by_mode: Counter = field(default_factory=Counter)
    """Mode of the MTP step -> batches of the corpus the property judged (any verdict but ``not applicable``)."""

    @property
    def row(self) -> str:
        """The gate's row: ``P1``, or ``P1-torch`` for another route (a label made once from the data, never parsed
        back)."""
        return f"{self.prop}-{self.route}" if self.route else self.prop

    @property
    def blocking(self) -> bool:
        return self.counts["new"] > 0

    def summary(self) -> str:
        parts = []
        for verdict in _SHOWN:
            n = self.counts[verdict]
            if n:
                label = verdict.upper() if verdict == "new" else verdict
                if verdict == "pre-existing" and self.findings:
                    label += " (" + ", ".join(f"{f} x{c}" for f, c in sorted(self.findings.items())) + ")"
                parts.append(f"{label} {n}/{self.batches}")
        return "; ".join(parts) or f"held {self.batches}/{self.batches}"

    def not_judged(self) -> str | None:
        """What this property could not judge, in one line, or None: ``partial 80/80 (no capture ...)``."""
        parts = []
        if self.batches == 0:
            return "no batch of the corpus applies to it"
        if self.counts["partial"]:
            why = "; ".join(_reasons(self.partial_why)[:2]) or "no reason given"
            parts.append(f"partial on {self.counts['partial']}/{self.batches} batches ({why})")
        if self.counts["not judged"]:
            whys = sorted({h.why for _, _, h in self.examples["not judged"] if h.why.startswith("base: ")})
            what = whys[0] if whys else "head crashed or hung"
            parts.append(f"{self.counts['not judged']}/{self.batches} batches not evaluated ({what})")
        return "; ".join(parts) or None


def _reasons(whys: Counter) -> list[str]:
    """Distinct reasons, most frequent first: ``a; b`` split, and ``cannot express 6 variant(s)`` the same as ``3``."""
    weight: Counter = Counter()
    first: dict[str, str] = {}
    for why, n in whys.items():
        for reason in filter(None, (r.strip() for r in why.split("; "))):
            key = re.sub(r"\d+", "N", reason)
            first.setdefault(key, reason)
            weight[key] += n
    return [first[key] for key, _ in weight.most_common()]


def _verdict(base: Outcome, head: Outcome) -> Verdict:
    if head.status == "not judged":
        return "not judged"
    if head.status == "failed":
        if base.status != "failed":
            return "new"
        if set(head.signature) - set(base.signature):
            return "new"  # a difference base did not have: a pre-existing failure must not hide it
        return "pre-existing" if base.signature == head.signature else "changed"
    if base.status == "failed":
        return "fixed"
    if head.status == "partial" or base.status == "partial":
        return "partial"
    return "not applicable" if head.status == "not applicable" else "held"


def setup_failures(outcomes: list[Outcome]) -> list[str]:
    """Each property that failed on *every* batch it applies to by raising from one origin, in one line.

    That is no property of the metadata: the builder does not run here (a setup
    exception, an unusable device, an import that fails at call time).  Worked
    example: base's builder raises ``RuntimeError: Torch not compiled with CUDA
    enabled`` from ``torch/cuda/__init__.py:403`` on all 80 batches of P1..P9; a
    gate that compared those sides would call head's regression "pre-existing".
    Two batches at least, so a one-batch corpus is not mistaken for a setup.
    """
    by_prop: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        if o.status not in ("not applicable", "not judged"):
            by_prop[o.prop].append(o)
    lines = []
    for prop, got in by_prop.items():
        origins = {o.origin.place if o.origin is not None else None for o in got}
        if len(got) >= 2 and all(o.status == "failed" and o.check == "raised" for o in got) and len(origins) == 1:
            lines.append(f"{prop} raised on every one of its {len(got)} batches, from one place: {got[0].message}")
    return lines


def raise_setup_failure(side: Side, outcomes: list[Outcome]) -> None:
    """A :class:`GateError` (exit 2) when every judged property of ``side`` only raised: nothing was judged there."""
    from metadata_builders.errors import GateError

    lines = setup_failures(outcomes)
    props = {o.prop for o in outcomes if o.status not in ("not applicable", "not judged")}
    if lines and len(lines) == len(props):
        raise GateError(f"{side.name} side ({side.label})", "its builder raised the same exception on every batch, "
                        "so no property of the metadata was judged (a setup error, not a verdict):\n  "
                        + "\n  ".join(lines))


def fill_not_judged(outcomes: list[Outcome], props: list[str], count: int, why: str) -> list[Outcome]:
    """``outcomes`` plus a ``not judged`` outcome for every (property, batch) it lacks."""
    have = {(o.prop, o.index) for o in outcomes}
    return outcomes + [Outcome(p, i, "not judged", why=why) for i in range(count) for p in props
                       if (p, i) not in have]


def classify(corpus: list[VerifyBatch], props: list[PropertySpec], base: list[Outcome], head: list[Outcome],
             head_side_upstream: bool = True) -> list[PropertyVerdict]:
    """Per property, each batch's base and head outcomes compared (see the module docstring).

    ``head_side_upstream``: the sides run SGLang's code, so known findings may name
    what already failed at base.
    """
    from metadata_builders.families.dsv4.runs.findings import Seen, known_finding

    by_base = {(o.prop, o.index): o for o in base}
    by_head = {(o.prop, o.index): o for o in head}
    base_raised = {line.split(" ", 1)[0]: line for line in setup_failures(base)}
    verdicts = []
    for spec in props:
        pv = PropertyVerdict(spec.name, spec.title)
        for index, batch in enumerate(corpus):
            b, h = by_base[(spec.name, index)], by_head[(spec.name, index)]
            verdict = _verdict(b, h)
            if spec.name in base_raised and verdict not in ("not applicable", "new"):
                verdict = "not judged"  # base never ran this property: nothing to compare head with
                h = Outcome(h.prop, h.index, "not judged", why=f"base: {base_raised[spec.name]}")
            if verdict == "not applicable":
                continue
            pv.seconds += h.seconds
            pv.batches += 1
            pv.by_mode[batch.mode] += 1
            pv.counts[verdict] += 1
            pv.examples[verdict].append((index, b, h))
            if verdict == "partial":
                pv.partial_why[(h.why if h.status == "partial" else b.why) or ""] += 1
            if verdict in ("pre-existing", "changed") and head_side_upstream:
                finding = known_finding(Seen(b.prop, b.check, b.field, b.where, b.origin), batch)  # failed at base
                if finding is not None:
                    pv.findings[finding] += 1
        verdicts.append(pv)
    return verdicts
